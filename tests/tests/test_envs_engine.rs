//! Test environments when the container engine is sick, on the real daemon and the real
//! `nu` with the plugin: an engine that hangs or says nothing (a small fake engine in
//! Python on a Unix socket) does not delay serving, and a stale engine socket is named.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use orch_e2e::containers::{TestEnvSweeper, engine_or_skip};
use orch_e2e::{Daemon, Nu, eventually};
use orch_protocol::{Request, Response};
use serde_json::{Value, json};

/// A fake container engine on a Unix socket (Python): `hang` answers `/_ping` and never
/// answers anything else; `silent` accepts connections and says nothing. Killed when
/// dropped.
struct FakeEngine(Child);

const FAKE_ENGINE: &str = r#"
import socket, sys, threading
path, mode = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX)
server.bind(path)
server.listen(128)
held = []
def serve(conn):
    held.append(conn)
    if mode == "silent":
        return
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, data = data.split(b"\r\n\r\n", 1)
        target = head.split(b" ")[1].split(b"?")[0]
        if not target.endswith(b"/_ping"):
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nApi-Version: 1.41\r\nContent-Length: 2\r\n\r\nOK")
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"#;

impl FakeEngine {
    fn start(socket: &Path, mode: &str) -> FakeEngine {
        let child = Command::new("python3")
            .arg("-c")
            .arg(FAKE_ENGINE)
            .arg(socket)
            .arg(mode)
            .spawn()
            .expect("python3 runs");
        eventually(Duration::from_secs(10), "the fake engine's socket", || {
            socket.exists().then_some(())
        });
        FakeEngine(child)
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a daemon on a fake engine in `mode`: it answers `orch health` within a few
/// seconds of its start (generous bound; it took 120 s before), and a request that needs
/// the engine fails fast, naming the socket.
fn serving_despite(mode: &str) -> (Daemon, Nu, PathBuf, FakeEngine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("engine.sock");
    let fake = FakeEngine::start(&socket, mode);
    let host = format!("unix://{}", socket.display());
    let started = Instant::now();
    let daemon = Daemon::start_with_env(&[], &[("DOCKER_HOST", &host)]);
    let answer = daemon.client().call(&Request::Health).unwrap();
    assert!(matches!(answer, Response::Health(_)), "{answer:?}");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "health answered {waited:?} after start"
    );
    let nu = daemon.nu();
    assert_eq!(nu.json("orch test env list | length"), 0);
    let asked = Instant::now();
    let error = nu
        .try_run("orch test env create single redis --auto-start")
        .unwrap_err();
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "refused after {:?}",
        asked.elapsed()
    );
    assert!(
        error.contains(&format!(
            "container engine not answering ({}",
            socket.display()
        )),
        "{error}"
    );
    (daemon, nu, socket, fake, dir)
}

#[test]
fn a_hung_engine_does_not_delay_serving_and_env_requests_work_once_it_answers() {
    let Some(real) = engine_or_skip() else {
        return;
    };
    let (daemon, nu, socket, fake, _dir) = serving_despite("hang");
    let sweeper = TestEnvSweeper {
        socket: real.clone(),
        data_dir: daemon.data_dir(),
    };
    // The engine answers now: the same socket path leads to the real one.
    drop(fake);
    std::fs::remove_file(&socket).unwrap();
    std::os::unix::fs::symlink(&real, &socket).unwrap();
    let env = eventually(Duration::from_secs(120), "an environment", || {
        nu.try_run(
            "orch test env create single redis --auto-start --auto-cleanup | select status tests | to json -r",
        )
        .ok()
    });
    let env: Value = serde_json::from_str(env.trim()).unwrap();
    assert_eq!(
        env,
        json!({"status": "deleted", "tests": {"passed": 1, "failed": 0, "total": 1}})
    );
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn an_engine_that_accepts_and_says_nothing_does_not_delay_serving() {
    let _ = serving_despite("silent");
}

#[test]
fn a_stale_engine_socket_says_nothing_listens_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stale.sock");
    // The socket file stays when its listener is gone.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let host = format!("unix://{}", socket.display());
    let daemon = Daemon::start_with_env(&[], &[("DOCKER_HOST", &host)]);
    let error = daemon
        .nu()
        .try_run("orch test env create single redis --auto-start")
        .unwrap_err();
    assert!(
        error.contains(&format!("nothing listens on {}", socket.display())),
        "{error}"
    );
    assert!(!error.contains("hyper"), "{error}");
}
