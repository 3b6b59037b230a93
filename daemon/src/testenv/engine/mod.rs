//! The container engine through the Docker API (bollard): Docker, or Podman's
//! Docker-compatible service. The daemon's one client of the engine: test environments'
//! containers and networks are created, started, probed, inspected and removed here
//! (their names and labels come from [`super::contract`]); [`connect`] finds the engine.

mod connect;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HostConfig, NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    ListNetworksOptionsBuilder, LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use orch_protocol::Resources;

pub use connect::{target, usual_socket};

/// A connected engine.
#[derive(Clone)]
pub struct ContainerEngine {
    docker: Docker,
    /// The socket it answers on.
    pub socket: PathBuf,
}

/// Containers and networks as (name, labels).
pub type Labelled = Vec<(String, HashMap<String, String>)>;

impl ContainerEngine {
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

    /// Containers and networks carrying `label=value`: (containers, networks).
    pub async fn labelled(&self, label: &str, value: &str) -> Result<(Labelled, Labelled), String> {
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
