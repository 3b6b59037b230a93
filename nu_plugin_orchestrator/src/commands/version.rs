//! `orch version`: the plugin's version and protocol, and the daemon's when one runs.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Record, Signature, Type, Value};
use orch_protocol::{ClientError, PROTOCOL_VERSION, Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};

/// `orch version`
pub struct Version;

impl SimplePluginCommand for Version {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch version"
    }

    fn description(&self) -> &str {
        "The plugin's version and wire protocol, and the daemon's (null when no daemon answers on the socket)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "(orch version).plugin",
            description: "The plugin's version",
            result: Some(Value::test_string(env!("CARGO_PKG_VERSION"))),
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let span = call.head;
        let daemon = match plugin.call(engine, &Request::Health) {
            Ok(Response::Health(report)) => {
                let mut daemon = Record::new();
                daemon.push("version", Value::string(report.version, span));
                daemon.push("protocol", Value::int(i64::from(report.protocol), span));
                daemon.push("pid", Value::int(i64::from(report.pid), span));
                Value::record(daemon, span)
            }
            Ok(other) => return Err(unexpected(other, span)),
            Err(ClientError::NotRunning { .. }) => Value::nothing(span),
            Err(e) => return Err(labeled(e, span, &[])),
        };
        let mut record = Record::new();
        record.push("plugin", Value::string(env!("CARGO_PKG_VERSION"), span));
        record.push("protocol", Value::int(i64::from(PROTOCOL_VERSION), span));
        record.push("daemon", daemon);
        Ok(Value::record(record, span))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Version);
}
