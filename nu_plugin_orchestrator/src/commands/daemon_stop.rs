//! `orch daemon stop`: stop the daemon gracefully (stopping and requeueing its running
//! tasks, or with `--leave-running` leaving them to the supervisor).

use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Span, Type, Value, record};
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
        "Stop the daemon. Running tasks are stopped and requeued without using a retry (unless --leave-running); queued tasks stay queued."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .switch(
                "leave-running",
                "Leave running tasks running under the supervisor; the next daemon started on the same data directory takes them over.",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch daemon stop",
                description: "Stop the daemon (nothing happens when it is not running)",
                result: None,
            },
            Example {
                example: "orch daemon stop --leave-running",
                description: "Stop the daemon, leaving its running tasks for the next one",
                result: None,
            },
        ]
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
        let request = if call.has_flag("leave-running")? {
            Request::Handover
        } else {
            Request::Shutdown
        };
        let Some(pid) = stop(plugin, engine, &request, head)? else {
            return Ok(Value::record(
                record! {
                    "stopped" => Value::bool(false, head),
                    "message" => Value::string("the daemon was not running", head),
                    "socket" => Value::string(socket, head),
                },
                head,
            ));
        };
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

/// Sends `request` (a shutdown or a handover) and waits until the daemon has exited;
/// its pid, or `None` when it was not running.
pub(super) fn stop(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    request: &Request,
    head: Span,
) -> Result<Option<u32>, LabeledError> {
    let mut client = match plugin.connect(engine) {
        Ok(client) => client,
        Err(ClientError::NotRunning { .. }) => return Ok(None),
        Err(e) => return Err(labeled(e, head, &[])),
    };
    let pid = client.welcome().pid;
    match client.call(request) {
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
    Ok(Some(pid))
}

#[test]
fn test_examples() {
    super::examples::test_examples(&DaemonStop);
}
