//! `orch daemon stop`: stop the daemon gracefully.

use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value, record};
use orch_protocol::{ClientError, Request};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, socket_path};

/// How long a stopping daemon may take (it gives running tasks a grace period).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// `orch daemon stop`
pub struct DaemonStop;

impl SimplePluginCommand for DaemonStop {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon stop"
    }

    fn description(&self) -> &str {
        "Stop the daemon. Running tasks are stopped and requeued without using a retry; queued tasks stay queued."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch daemon stop",
            description: "Stop the daemon (nothing happens when it is not running)",
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
        let head = call.head;
        let socket = socket_path(engine).display().to_string();
        let mut client = match plugin.connect(engine) {
            Ok(client) => client,
            Err(ClientError::NotRunning { .. }) => {
                return Ok(Value::record(
                    record! {
                        "stopped" => Value::bool(false, head),
                        "message" => Value::string("the daemon was not running", head),
                        "socket" => Value::string(socket, head),
                    },
                    head,
                ));
            }
            Err(e) => return Err(labeled(e, head, &[])),
        };
        let pid = client.welcome().pid;
        match client.call(&Request::Shutdown) {
            Ok(_) | Err(ClientError::Frame(_)) => {}
            Err(e) => return Err(labeled(e, head, &[])),
        }
        // The daemon holds this connection open until its process exits: the end of the
        // stream is the exit (until then it still holds its database, and a new daemon
        // could not open it). Unlike its pid, this holds across pid namespaces.
        let deadline = Instant::now() + STOP_TIMEOUT;
        let waited = client.next(&|| Instant::now() >= deadline || engine.signals().interrupted());
        if matches!(waited, Err(ref e) if e.is_interrupted()) {
            return Err(LabeledError::new("daemon still running").with_label(
                format!("pid {pid} did not stop within {}s", STOP_TIMEOUT.as_secs()),
                head,
            ));
        }
        Ok(Value::record(
            record! {
                "stopped" => Value::bool(true, head),
                "pid" => Value::int(i64::from(pid), head),
                "socket" => Value::string(socket, head),
            },
            head,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&DaemonStop);
}
