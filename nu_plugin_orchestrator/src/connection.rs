//! Talking to the daemon from a command.

use std::path::PathBuf;

use nu_plugin::EngineInterface;
use nu_protocol::{LabeledError, Span, Value};
use orch_protocol::{Client, ClientError, ErrorKind, Request, Response, paths};

use crate::OrchestratorPlugin;

/// How this client names itself in the daemon's log.
const CLIENT_NAME: &str = concat!("nu_plugin_orchestrator ", env!("CARGO_PKG_VERSION"));

/// The socket to use: `$env.PROVISIONING_ORCHESTRATOR_SOCKET` as the shell sees it now,
/// else the default.
pub fn socket_path(engine: &EngineInterface) -> PathBuf {
    match engine.get_env_var(paths::SOCKET_ENV) {
        Ok(Some(Value::String { val, .. })) if !val.is_empty() => PathBuf::from(val),
        _ => paths::default_socket_path(),
    }
}

/// Requests that may be sent again on a fresh connection if the cached one broke.
fn is_idempotent(request: &Request) -> bool {
    matches!(
        request,
        Request::Health | Request::List { .. } | Request::Get { .. } | Request::Wait { .. }
    )
}

impl OrchestratorPlugin {
    /// Sends one request over the cached connection (reconnecting when the socket changed
    /// or the daemon restarted) and waits for the answer; Ctrl-C stops the wait. A
    /// standby node of a cluster that refuses it, naming its leader's socket on this
    /// host, has it sent there (once).
    pub fn call(
        &self,
        engine: &EngineInterface,
        request: &Request,
    ) -> Result<Response, ClientError> {
        let socket = socket_path(engine);
        match self.call_on(engine, &socket, request) {
            Err(ClientError::Daemon(reply)) => match reply.leader_socket {
                Some(leader) if leader != socket && leader.exists() => {
                    self.call_on(engine, &leader, request)
                }
                _ => Err(ClientError::Daemon(reply)),
            },
            answer => answer,
        }
    }

    /// [`Self::call`] on `socket`, without following a standby to its leader.
    fn call_on(
        &self,
        engine: &EngineInterface,
        socket: &std::path::Path,
        request: &Request,
    ) -> Result<Response, ClientError> {
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let reusable = cached.as_ref().is_some_and(|c| c.socket() == socket);
        let interrupted = || engine.signals().interrupted();
        if reusable {
            let client = cached.as_mut().expect("checked above");
            // A failed send never reached the daemon (it restarted since): any request
            // may go again on a fresh connection. A lost answer may only be asked again
            // when asking twice changes nothing.
            if client.send(request).is_ok() {
                match client
                    .next(&interrupted)
                    .and_then(|r| whole(client, r, &interrupted))
                {
                    Err(e) if e.is_connection_lost() && is_idempotent(request) => {}
                    Err(e) if e.is_connection_lost() || e.is_interrupted() => {
                        *cached = None;
                        return Err(e);
                    }
                    other => return other,
                }
            }
        }
        *cached = None;
        let mut client = Client::connect(socket, CLIENT_NAME)?;
        let answer = client
            .call_interruptible(request, &interrupted)
            .and_then(|r| whole(&mut client, r, &interrupted));
        if answer.is_ok() || matches!(answer, Err(ClientError::Daemon(_))) {
            *cached = Some(client);
        }
        answer
    }

    /// A fresh connection, for streams that keep it busy.
    pub fn connect(&self, engine: &EngineInterface) -> Result<Client, ClientError> {
        Client::connect(&socket_path(engine), CLIENT_NAME)
    }

    /// A fresh connection to the daemon at `socket`.
    pub fn connect_to(&self, socket: &std::path::Path) -> Result<Client, ClientError> {
        Client::connect(socket, CLIENT_NAME)
    }
}

/// The whole answer: a task or workflow list sent in parts is read to its end.
pub fn whole(
    client: &mut Client,
    answer: Response,
    interrupted: &dyn Fn() -> bool,
) -> Result<Response, ClientError> {
    match answer {
        Response::Tasks { more: true, .. } => Ok(Response::Tasks {
            tasks: client.collect_tasks(answer, interrupted)?,
            more: false,
        }),
        Response::Workflows {
            mut workflows,
            more: true,
        } => {
            loop {
                match client.next(interrupted)? {
                    Response::Workflows {
                        workflows: part,
                        more,
                    } => {
                        workflows.extend(part);
                        if !more {
                            break;
                        }
                    }
                    other => return Err(ClientError::Unexpected(format!("{other:?}"))),
                }
            }
            Ok(Response::Workflows {
                workflows,
                more: false,
            })
        }
        other => Ok(other),
    }
}

/// Turns a client error into a `LabeledError`. When the daemon names the request field at
/// fault, the label points at the argument that supplied it (`fields` maps request fields
/// to argument spans); otherwise at the command.
pub fn labeled(error: ClientError, head: Span, fields: &[(&str, Span)]) -> LabeledError {
    match error {
        ClientError::Daemon(reply) => {
            let span = reply
                .field
                .as_deref()
                .and_then(|f| fields.iter().find(|(name, _)| *name == f))
                .map_or(head, |(_, span)| *span);
            let title = match reply.kind {
                ErrorKind::NotFound => "not found",
                ErrorKind::Conflict => "not possible in the current state",
                ErrorKind::BadRequest => "invalid request",
                ErrorKind::VersionMismatch => "version mismatch",
                ErrorKind::PermissionDenied => "permission denied",
                ErrorKind::TooLarge => "request too large",
                ErrorKind::Unavailable => "daemon unavailable",
                ErrorKind::Internal => "daemon error",
            };
            LabeledError::new(title).with_label(reply.message, span)
        }
        ClientError::NotRunning { .. } => LabeledError::new("orchestrator daemon not running")
            .with_label(error.to_string(), head)
            .with_help("start it with `orch daemon start`"),
        ClientError::Frame(ref frame) if error.is_interrupted() => {
            let _ = frame;
            LabeledError::new("interrupted").with_label("stopped waiting (Ctrl-C)", head)
        }
        other => {
            LabeledError::new("orchestrator connection failed").with_label(other.to_string(), head)
        }
    }
}

/// The answer of a request expected to return one task.
pub fn expect_task(response: Response, head: Span) -> Result<orch_protocol::Task, LabeledError> {
    match response {
        Response::Task { task } => Ok(*task),
        other => Err(unexpected(other, head)),
    }
}

/// The answer of a request expected to return tasks.
pub fn expect_tasks(
    response: Response,
    head: Span,
) -> Result<Vec<orch_protocol::Task>, LabeledError> {
    match response {
        Response::Tasks { tasks, .. } => Ok(tasks),
        other => Err(unexpected(other, head)),
    }
}

/// An answer of the wrong kind.
pub fn unexpected(response: Response, head: Span) -> LabeledError {
    LabeledError::new("unexpected answer from the daemon").with_label(format!("{response:?}"), head)
}
