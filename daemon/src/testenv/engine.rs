//! The container engine through the Docker API (bollard): Docker, or Podman's
//! Docker-compatible service. Every container and network the daemon creates carries the
//! labels [`ENV_LABEL`] (its environment) and [`DAEMON_LABEL`] (this daemon's instance).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use bollard::{ClientVersion, Docker};
use futures_util::StreamExt;
use orch_protocol::Resources;

/// The label naming a container's or network's test environment.
pub const ENV_LABEL: &str = "provisioning.testenv";
/// The label naming the daemon instance that created it.
pub const DAEMON_LABEL: &str = "provisioning.daemon";
/// The label naming a container's node role.
pub const ROLE_LABEL: &str = "provisioning.role";

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

/// A connected engine.
#[derive(Clone)]
pub struct ContainerEngine {
    docker: Docker,
    /// The socket it answers on.
    pub socket: PathBuf,
}

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
    fn failed(&self, what: &str, error: bollard::errors::Error) -> String {
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

    /// Makes sure `image` is present: pulled when it is not (which needs a registry).
    pub async fn ensure_image(&self, image: &str) -> Result<(), String> {
        match self.docker.inspect_image(image).await {
            Ok(_) => return Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => return Err(self.failed(&format!("cannot inspect the image {image}"), e)),
        }
        let options = CreateImageOptionsBuilder::default()
            .from_image(image)
            .build();
        let mut pull = self.docker.create_image(Some(options), None, None);
        while let Some(progress) = pull.next().await {
            if let Err(e) = progress {
                return Err(format!(
                    "the image {image} is not present and could not be pulled ({e}); build the base image with `provisioning test image build` (scripts/build-base-image.sh), or configure an image that exists"
                ));
            }
        }
        Ok(())
    }

    /// Creates a network with labels.
    pub async fn create_network(
        &self,
        name: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), String> {
        let request = NetworkCreateRequest {
            name: name.to_string(),
            labels: Some(labels),
            ..Default::default()
        };
        self.docker
            .create_network(request)
            .await
            .map(|_| ())
            .map_err(|e| self.failed(&format!("cannot create network {name}"), e))
    }

    /// Creates a container that idles (`sleep infinity` under an init) on `network`,
    /// reachable there by `hostname`.
    pub async fn create_container(&self, spec: &ContainerSpec<'_>) -> Result<(), String> {
        let endpoint = EndpointSettings {
            aliases: Some(vec![spec.hostname.to_string()]),
            ..Default::default()
        };
        let host_config = HostConfig {
            init: Some(true),
            nano_cpus: spec
                .resources
                .and_then(|r| r.cpus)
                .map(|c| (c * 1e9) as i64),
            memory: spec
                .resources
                .and_then(|r| r.memory_mb)
                .map(|mb| (mb * 1024 * 1024) as i64),
            network_mode: Some(spec.network.to_string()),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.to_string()),
            hostname: Some(spec.hostname.to_string()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            labels: Some(spec.labels.clone()),
            host_config: Some(host_config),
            networking_config: Some(NetworkingConfig {
                endpoints_config: Some(HashMap::from([(spec.network.to_string(), endpoint)])),
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default()
            .name(spec.name)
            .build();
        self.docker
            .create_container(Some(options), body)
            .await
            .map(|_| ())
            .map_err(|e| self.failed(&format!("cannot create container {}", spec.name), e))
    }

    /// Starts a container.
    pub async fn start(&self, name: &str) -> Result<(), String> {
        self.docker
            .start_container(name, None)
            .await
            .map_err(|e| self.failed(&format!("cannot start container {name}"), e))
    }

    /// Removes a container (running or not); a missing one is not an error.
    pub async fn remove_container(&self, name: &str) -> Result<(), String> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(self.failed(&format!("cannot remove container {name}"), e)),
        }
    }

    /// Removes a network; a missing one is not an error.
    pub async fn remove_network(&self, name: &str) -> Result<(), String> {
        match self.docker.remove_network(name).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(self.failed(&format!("cannot remove network {name}"), e)),
        }
    }

    /// Runs `sh -c command` in a container; returns its exit code and combined output.
    /// Stops waiting (and reports exit code -1) after `timeout`.
    pub async fn exec(
        &self,
        container: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<(i64, String), String> {
        let options = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(vec!["sh", "-c", command]),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(container, options)
            .await
            .map_err(|e| self.failed(&format!("cannot exec in {container}"), e))?;
        let started = self
            .docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| self.failed(&format!("cannot exec in {container}"), e))?;
        let mut output = String::new();
        if let StartExecResults::Attached {
            output: mut stream, ..
        } = started
        {
            let read = async {
                while let Some(Ok(chunk)) = stream.next().await {
                    output.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
                }
            };
            if tokio::time::timeout(timeout, read).await.is_err() {
                return Ok((
                    -1,
                    format!("{output}\n(timed out after {}s)", timeout.as_secs()),
                ));
            }
        }
        // Podman may still report the exec as running right after its output ended.
        for _ in 0..50 {
            let inspect = self
                .docker
                .inspect_exec(&exec.id)
                .await
                .map_err(|e| self.failed(&format!("cannot inspect exec in {container}"), e))?;
            if let (Some(false), Some(code)) = (inspect.running, inspect.exit_code) {
                return Ok((code, output));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok((-1, format!("{output}\n(the exit code was not reported)")))
    }

    /// A container's inspect output, as JSON.
    pub async fn inspect(&self, name: &str) -> serde_json::Value {
        match self.docker.inspect_container(name, None).await {
            Ok(inspect) => serde_json::to_value(inspect).unwrap_or_default(),
            Err(e) => serde_json::json!({"error": e.to_string()}),
        }
    }

    /// A container's log (standard output and error), as text.
    pub async fn logs(&self, name: &str) -> String {
        let options = LogsOptionsBuilder::default()
            .stdout(true)
            .stderr(true)
            .build();
        let mut stream = self.docker.logs(name, Some(options));
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => text.push_str(&String::from_utf8_lossy(&chunk.into_bytes())),
                Err(e) => {
                    text.push_str(&format!("(cannot read the log: {e})"));
                    break;
                }
            }
        }
        text
    }

    /// Containers and networks carrying `label=value`: (containers as (name, labels),
    /// network names).
    pub async fn labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<
        (
            Vec<(String, HashMap<String, String>)>,
            Vec<(String, HashMap<String, String>)>,
        ),
        String,
    > {
        let filters = HashMap::from([("label".to_string(), vec![format!("{label}={value}")])]);
        let options = ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| self.failed("cannot list containers", e))?
            .into_iter()
            .filter_map(|c| {
                let name = c.names?.first()?.trim_start_matches('/').to_string();
                Some((name, c.labels.unwrap_or_default()))
            })
            .collect();
        let options = ListNetworksOptionsBuilder::default()
            .filters(&filters)
            .build();
        let networks = self
            .docker
            .list_networks(Some(options))
            .await
            .map_err(|e| self.failed("cannot list networks", e))?
            .into_iter()
            .filter_map(|n| Some((n.name?, n.labels.unwrap_or_default())))
            .collect();
        Ok((containers, networks))
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

/// What a container is created from.
pub struct ContainerSpec<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its hostname (and alias on the network).
    pub hostname: &'a str,
    /// Its image.
    pub image: &'a str,
    /// Its network.
    pub network: &'a str,
    /// Its labels.
    pub labels: HashMap<String, String>,
    /// Its limits.
    pub resources: Option<&'a Resources>,
}
