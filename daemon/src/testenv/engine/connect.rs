//! Finding and connecting to the engine, decided here for the whole daemon: `DOCKER_HOST`
//! (a unix:// socket), else the first of the usual sockets that answers; when none does,
//! the error lists what was tried. The Nushell processes the daemon starts are handed the
//! same engine ([`ContainerEngine::docker_host`], [`usual_socket`]), so the `local`
//! provider does no search of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::{ClientVersion, Docker};

use super::ContainerEngine;

/// The API version both Docker and Podman 4 serve.
const API_VERSION: ClientVersion = ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// How long one API call may wait for the engine's answer (its headers; streams such as
/// logs and exec output are bounded by their callers).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the engine has to accept a connection and answer `/_ping`.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Where an engine is looked for when `DOCKER_HOST` is unset, in order.
fn candidate_sockets() -> Vec<PathBuf> {
    let mut sockets = vec![
        PathBuf::from("/run/podman/podman.sock"),
        PathBuf::from("/var/run/docker.sock"),
    ];
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        sockets.push(Path::new(&dir).join("podman/podman.sock"));
    }
    sockets
}

impl ContainerEngine {
    /// Connects to `DOCKER_HOST` (a unix:// socket) or the first usual socket that answers;
    /// the error says what was tried.
    pub async fn connect() -> Result<ContainerEngine, String> {
        let mut tried = Vec::new();
        for socket in sockets()? {
            match Self::try_socket(&socket).await {
                Ok(engine) => return Ok(engine),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "no container engine answers (tried {}); start Docker or Podman's service (scripts/ensure-podman.sh) or set DOCKER_HOST",
            tried.join("; ")
        ))
    }

    /// The engine on `socket`, once it accepts a connection and answers `/_ping`; the
    /// error names the socket.
    async fn try_socket(socket: &Path) -> Result<ContainerEngine, String> {
        let shown = socket.display();
        if !socket.exists() {
            return Err(format!("{shown}: no such socket"));
        }
        match tokio::time::timeout(PING_TIMEOUT, tokio::net::UnixStream::connect(socket)).await {
            Err(_) => return Err(not_answering(socket, "accepts no connection")),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(format!("nothing listens on {shown} (a stale socket file)"));
            }
            Ok(Err(e)) => return Err(format!("cannot connect to {shown}: {e}")),
            Ok(Ok(_)) => {}
        }
        let docker = Docker::connect_with_unix(
            &socket.to_string_lossy(),
            CALL_TIMEOUT.as_secs(),
            &API_VERSION,
        )
        .map_err(|e| format!("{shown}: {e}"))?;
        let engine = ContainerEngine {
            docker,
            socket: socket.to_path_buf(),
        };
        tokio::time::timeout(PING_TIMEOUT, engine.docker.ping())
            .await
            .map_err(|_| {
                not_answering(
                    socket,
                    &format!("no answer to /_ping within {}s", PING_TIMEOUT.as_secs()),
                )
            })?
            .map_err(|e| engine.failed("/_ping", e))?;
        Ok(engine)
    }

    /// A failed call as a message: a timeout or a refused connection says the engine does
    /// not answer, with its socket.
    pub(super) fn failed(&self, what: &str, error: bollard::errors::Error) -> String {
        match error {
            bollard::errors::Error::RequestTimeoutError => not_answering(
                &self.socket,
                &format!("{what}: no answer within {}s", CALL_TIMEOUT.as_secs()),
            ),
            bollard::errors::Error::HyperLegacyError { err } if err.is_connect() => format!(
                "{what}: nothing listens on {} any more",
                self.socket.display()
            ),
            error => format!("{what}: {error}"),
        }
    }

    /// The engine as a `DOCKER_HOST` value, for the processes that use its CLI.
    pub fn docker_host(&self) -> String {
        docker_host(&self.socket)
    }
}

/// The sockets an engine is looked for on: `DOCKER_HOST`'s (unix:// only), else the usual
/// ones in order.
fn sockets() -> Result<Vec<PathBuf>, String> {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => match host.strip_prefix("unix://") {
            Some(path) => Ok(vec![PathBuf::from(path)]),
            None => Err(format!(
                "DOCKER_HOST={host}: only unix:// sockets are supported (a local Docker or Podman service)"
            )),
        },
        _ => Ok(candidate_sockets()),
    }
}

/// Where the engine is looked for, for messages given before any answer.
pub fn target() -> String {
    match sockets() {
        Ok(sockets) => sockets
            .iter()
            .map(|s| s.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => e,
    }
}

/// "container engine not answering (<socket>): <what>".
fn not_answering(socket: &Path, what: &str) -> String {
    format!(
        "container engine not answering ({}): {what}",
        socket.display()
    )
}

/// When `DOCKER_HOST` is unset: the first of the usual sockets that exists, as a
/// `DOCKER_HOST` value for the Nushell steps of workflows (which otherwise inherit the
/// daemon's `DOCKER_HOST`); `None` when it is set or no socket exists.
pub fn usual_socket() -> Option<String> {
    if std::env::var_os("DOCKER_HOST").is_some_and(|h| !h.is_empty()) {
        return None;
    }
    candidate_sockets()
        .into_iter()
        .find(|s| s.exists())
        .map(|s| docker_host(&s))
}

/// `socket` as a `DOCKER_HOST` value.
fn docker_host(socket: &Path) -> String {
    format!("unix://{}", socket.display())
}
