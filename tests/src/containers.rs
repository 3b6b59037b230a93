//! The container engine for the tests that need one: finding its socket (as the daemon
//! does), requests through curl (independent of both the daemon's client and the `local`
//! provider's), and a guard that removes an infra's containers and network whatever
//! happens.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Docker-compatible API version the daemon uses.
pub const API: &str = "http://d/v1.41";

/// The engine's socket: DOCKER_HOST (unix:// only), else the first default socket that
/// answers. None only when DOCKER_HOST is unset and nothing answers.
pub fn engine_socket() -> Option<PathBuf> {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if !host.is_empty() => {
            let path = host.strip_prefix("unix://").unwrap_or_else(|| {
                panic!("DOCKER_HOST={host}: these tests support only unix:// sockets")
            });
            Some(PathBuf::from(path))
        }
        _ => candidate_sockets().into_iter().find(|s| answers(s)),
    }
}

/// Where the daemon looks for an engine when DOCKER_HOST is unset (same order).
pub fn candidate_sockets() -> Vec<PathBuf> {
    let mut sockets = vec![
        PathBuf::from("/run/podman/podman.sock"),
        PathBuf::from("/var/run/docker.sock"),
    ];
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        sockets.push(Path::new(&dir).join("podman/podman.sock"));
    }
    sockets
}

pub fn answers(socket: &Path) -> bool {
    socket.exists() && curl(socket, &["http://d/_ping"]).1 == "OK"
}

/// One request with curl: (HTTP status, body).
pub fn curl(socket: &Path, args: &[&str]) -> (u16, String) {
    let output = Command::new("curl")
        .args(["-s", "--max-time", "60", "--unix-socket"])
        .arg(socket)
        .args(["-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout);
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

/// Removes an infra's containers (by the provisioning.infra label) and network when
/// dropped, whether the test passed or not.
pub struct Cleanup {
    /// The engine's socket.
    pub socket: PathBuf,
    /// The infra whose servers are removed.
    pub infra: String,
}

impl Cleanup {
    fn network(&self) -> String {
        format!("{}-net", self.infra)
    }

    /// The infra's containers (names), and whether its network exists.
    pub fn leftovers(&self) -> (Vec<String>, bool) {
        let (containers, _) = labelled(&self.socket, "provisioning.infra", &self.infra);
        let (status, _) = curl(
            &self.socket,
            &[&format!("{API}/networks/{}", self.network())],
        );
        (containers, status == 200)
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (containers, network) = self.leftovers();
        for name in containers {
            curl(
                &self.socket,
                &[
                    "-X",
                    "DELETE",
                    &format!("{API}/containers/{name}?force=true&v=true"),
                ],
            );
        }
        if network {
            curl(
                &self.socket,
                &[
                    "-X",
                    "DELETE",
                    &format!("{API}/networks/{}", self.network()),
                ],
            );
        }
    }
}

/// Containers and networks carrying `label=value`: (container names, network names).
pub fn labelled(socket: &Path, label: &str, value: &str) -> (Vec<String>, Vec<String>) {
    let filters = format!(r#"{{"label":["{label}={value}"]}}"#);
    let list = |what: &str, name_of: fn(&serde_json::Value) -> Option<String>| -> Vec<String> {
        let (_, body) = curl(
            socket,
            &[
                "-G",
                "--data-urlencode",
                "all=true",
                "--data-urlencode",
                &format!("filters={filters}"),
                &format!("{API}/{what}"),
            ],
        );
        serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(name_of)
            .collect()
    };
    let containers = list("containers/json", |c| {
        c["Names"][0]
            .as_str()
            .map(|n| n.trim_start_matches('/').to_string())
    });
    let networks = list("networks", |n| n["Name"].as_str().map(str::to_string));
    (containers, networks)
}

/// Removes, when dropped, every container and network a daemon's test environments
/// created (they carry its instance id), so a failing test leaves nothing behind.
pub struct TestEnvSweeper {
    /// The engine's socket.
    pub socket: PathBuf,
    /// The daemon's data directory (its `instance-id` file names the label value).
    pub data_dir: PathBuf,
}

impl TestEnvSweeper {
    /// The daemon instance's containers and networks now.
    pub fn leftovers(&self) -> (Vec<String>, Vec<String>) {
        match std::fs::read_to_string(self.data_dir.join("instance-id")) {
            Ok(id) => labelled(&self.socket, "provisioning.daemon", id.trim()),
            Err(_) => (Vec::new(), Vec::new()),
        }
    }
}

impl Drop for TestEnvSweeper {
    fn drop(&mut self) {
        let (containers, networks) = self.leftovers();
        for name in containers {
            curl(
                &self.socket,
                &[
                    "-X",
                    "DELETE",
                    &format!("{API}/containers/{name}?force=true&v=true"),
                ],
            );
        }
        for name in networks {
            curl(
                &self.socket,
                &["-X", "DELETE", &format!("{API}/networks/{name}")],
            );
        }
    }
}

/// The engine's socket for a test that needs one; `None` (the caller skips the test, and
/// a line says so) only when DOCKER_HOST is unset and no default socket answers.
pub fn engine_or_skip() -> Option<PathBuf> {
    let socket = engine_socket();
    if socket.is_none() {
        eprintln!(
            "skipped: no container engine (DOCKER_HOST is unset and none of {:?} answers)",
            candidate_sockets()
        );
    }
    socket
}

/// The guard that removes the containers and networks of `daemon`'s test environments
/// whatever happens; `None` only when there is no engine (the test is skipped).
pub fn sweeper_of(daemon: &crate::Daemon) -> Option<TestEnvSweeper> {
    Some(TestEnvSweeper {
        socket: engine_or_skip()?,
        data_dir: daemon.data_dir(),
    })
}

/// A daemon started with `args`, a `nu` for it, and a guard that removes the containers
/// of its test environments whatever happens; `None` only when there is no engine.
pub fn env_daemon(args: &[&str]) -> Option<(crate::Daemon, crate::Nu, TestEnvSweeper)> {
    let socket = engine_or_skip()?;
    let daemon = crate::Daemon::start(args);
    let sweeper = TestEnvSweeper {
        socket,
        data_dir: daemon.data_dir(),
    };
    let nu = daemon.nu();
    Some((daemon, nu, sweeper))
}
