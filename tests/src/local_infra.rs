//! An infra of `local` servers on the container engine for a test: a daemon, a settings
//! file under a unique infra name, and a guard that removes the infra's containers and
//! network whatever happens.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::Daemon;
use crate::containers::{Cleanup, candidate_sockets, engine_socket};

/// `<prefix>-<5 hex digits>`, different for each test process and moment, so parallel
/// tests and reruns never share containers.
pub fn unique_infra(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}-{:05x}", (nanos ^ std::process::id()) & 0xfffff)
}

/// A daemon with one infra of local servers. Dropping it stops the daemon, then removes
/// the infra's containers and network.
pub struct LocalInfra {
    /// The daemon (its workspace is its directory).
    pub daemon: Daemon,
    /// The infra's name.
    pub name: String,
    /// The container engine's socket.
    pub socket: PathBuf,
    cleanup: Cleanup,
}

impl LocalInfra {
    /// A daemon and `<workspace>/infra/<prefix>-XXXXX/<file>` holding `settings`; None
    /// (said on stderr: the test is skipped) when no container engine answers.
    pub fn start(prefix: &str, file: &str, settings: &str) -> Option<LocalInfra> {
        let Some(socket) = engine_socket() else {
            eprintln!(
                "skipped: no container engine (DOCKER_HOST is unset and none of {:?} answers)",
                candidate_sockets()
            );
            return None;
        };
        let name = unique_infra(prefix);
        let cleanup = Cleanup {
            socket: socket.clone(),
            infra: name.clone(),
        };
        let daemon = Daemon::start(&[]);
        let dir = daemon.dir().join("infra").join(&name);
        std::fs::create_dir_all(&dir).expect("the infra directory");
        std::fs::write(dir.join(file), settings).expect("the settings file");
        Some(LocalInfra {
            daemon,
            name,
            socket,
            cleanup,
        })
    }

    /// The infra's containers (names), and whether its network exists.
    pub fn leftovers(&self) -> (Vec<String>, bool) {
        self.cleanup.leftovers()
    }

    /// Fails unless the infra has no container and no network left.
    pub fn assert_nothing_left(&self) {
        let (containers, network) = self.leftovers();
        assert!(
            containers.is_empty() && !network,
            "left: {containers:?}, network {network}"
        );
    }
}
