//! `orch daemon status`: whether the daemon runs, without failing when it does not.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Span, Type, Value, record};
use orch_protocol::{ClientError, Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, socket_path, unexpected};
use crate::convert;

/// `orch daemon status`
pub struct DaemonStatus;

impl SimplePluginCommand for DaemonStatus {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon status"
    }

    fn description(&self) -> &str {
        "Report whether the daemon is running, and if so its health."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "if not (orch daemon status).running { orch daemon start }",
            description: "Start the daemon unless it runs",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        status(plugin, engine, call.head)
    }
}

/// The status record: `running` plus the health report's fields when it runs.
pub fn status(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    head: Span,
) -> Result<Value, LabeledError> {
    match plugin.call(engine, &Request::Health) {
        Ok(Response::Health(report)) => {
            let Value::Record { val, .. } = convert::health(&report, head) else {
                unreachable!("health is a record")
            };
            let mut rec = record! { "running" => Value::bool(true, head) };
            rec.extend(val.into_owned());
            Ok(Value::record(rec, head))
        }
        Ok(other) => Err(unexpected(other, head)),
        Err(ClientError::NotRunning { socket }) => Ok(Value::record(
            record! {
                "running" => Value::bool(false, head),
                "socket" => Value::string(socket.display().to_string(), head),
            },
            head,
        )),
        Err(e) => Err(labeled(e, head, &[])),
    }
}

/// True when something answers on the socket.
pub fn is_running(engine: &EngineInterface) -> bool {
    orch_protocol::Client::connect(&socket_path(engine), "nu_plugin_orchestrator").is_ok()
}

#[test]
fn test_examples() {
    super::examples::test_examples(&DaemonStatus);
}
