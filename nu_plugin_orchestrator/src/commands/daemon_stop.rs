//! `orch daemon stop`: stop the daemon gracefully.

use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value, record};
use orch_protocol::{ClientError, Request, Response};

use super::daemon_status::is_running;
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
            Ok(Response::ShuttingDown) | Err(ClientError::Frame(_)) => {}
            Ok(_) => {}
            Err(e) => return Err(labeled(e, head, &[])),
        }
        // Wait for the process itself to end, not only the socket: until then it still
        // holds its database, and a new daemon could not open it.
        let deadline = Instant::now() + STOP_TIMEOUT;
        while is_running(engine) || process_exists(pid) {
            if Instant::now() >= deadline || engine.signals().interrupted() {
                return Err(LabeledError::new("daemon still running").with_label(
                    format!("pid {pid} did not stop within {}s", STOP_TIMEOUT.as_secs()),
                    head,
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
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

/// True while process `pid` exists (and is not a zombie).
fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rfind(')')
            .is_some_and(|end| stat[end + 1..].trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&DaemonStop);
}
