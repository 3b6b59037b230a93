//! Harness for the end-to-end tests: the real daemon binary, the real plugin, the real
//! `nu`, each test in its own temporary directory.
//!
//! - [`Daemon`] starts `provisioning-orchestrator` on a private socket and data dir, and
//!   kills it (and removes everything) when dropped, even when the test fails.
//! - [`Nu`] runs `nu` with the plugin added to a temporary plugin registry (never the
//!   user's), pointed at the daemon through `PROVISIONING_ORCHESTRATOR_SOCKET`.
//! - [`http::Shim`]: a daemon serving HTTP, its tokens, requests through curl;
//!   [`peer::socket_as`]: the socket as another uid; [`local_infra::LocalInfra`]: an infra
//!   of local servers on the container engine, removed whatever happens; [`raw`]: raw
//!   frames on the socket and the daemon's memory; [`postgres::TestDatabase`]: a database
//!   of the test's own on the PostgreSQL server the test command started.
//!
//! The binaries are taken from the same target directory as the test executable; the
//! README's test command builds them first (`cargo build --workspace --bins`).

pub mod containers;
pub mod http;
pub mod local_infra;
pub mod peer;
pub mod postgres;
pub mod raw;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use orch_protocol::Client;
use tempfile::TempDir;

/// The directory holding the workspace's binaries (`target/debug` or `target/release`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    // target/<profile>/deps/<test> → target/<profile>
    exe.parent()
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps")
        .to_path_buf()
}

/// Path of a workspace binary, with a clear panic when it was not built.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` before the tests (the README's test command does)",
        path.display()
    );
    path
}

/// The `nu` to test with: `$NU` or `nu` on PATH.
pub fn nu_binary() -> PathBuf {
    std::env::var_os("NU").map_or_else(|| PathBuf::from("nu"), PathBuf::from)
}

/// A running daemon in a temporary directory.
pub struct Daemon {
    dir: TempDir,
    child: Option<Child>,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Daemon {
    /// Starts a daemon with extra flags (such as `--parallel 2`) and waits until it answers.
    pub fn start(args: &[&str]) -> Daemon {
        Daemon::start_with_env(args, &[])
    }

    /// Starts a daemon with extra flags and environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("orch-e2e-")
            .tempdir()
            .expect("a temp dir");
        let mut daemon = Daemon {
            dir,
            child: None,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        daemon.restart();
        daemon
    }

    /// The test's temporary directory (tasks may write files here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("orch.sock")
    }

    /// The daemon's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The daemon's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Replaces the extra flags of the next (re)starts.
    pub fn set_args(&mut self, args: &[&str]) {
        self.args = args.iter().map(|s| s.to_string()).collect();
    }

    /// (Re)starts the daemon on the same data dir and socket; waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the daemon is already running");
        let child = self.spawn(&self.args.clone());
        self.child = Some(child);
        self.wait_until_ready();
    }

    /// Spawns the daemon binary with this test's socket and data dir plus `args`, without
    /// waiting (for tests of start-up failures).
    pub fn spawn(&self, args: &[String]) -> Child {
        self.command(args).spawn().expect("the daemon starts")
    }

    /// The command [`Daemon::spawn`] runs, for a test that changes how the process starts
    /// (its limits, say); the process it spawns is not this handle's to stop, but it is
    /// killed with the rest when the handle is dropped.
    pub fn command(&self, args: &[String]) -> Command {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("daemon.stderr"))
            .expect("a stderr file");
        // Started in the test's directory, which is so its default workspace.
        let mut command = Command::new(binary("provisioning-orchestrator"));
        command
            .current_dir(self.dir.path())
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .env("ORCH_NU_BINARY", nu_binary())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        command
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if Client::connect(&self.socket(), "e2e").is_ok() {
                return;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("the daemon exited at start ({status}): {}", self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not answer: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.stderr")).unwrap_or_default()
    }

    /// Kills the daemon with SIGKILL, as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits for a clean exit; returns its status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("the daemon runs");
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        child.wait().expect("the daemon exits")
    }

    /// A protocol client connected to this daemon.
    pub fn client(&self) -> Client {
        Client::connect(&self.socket(), "e2e").expect("the daemon answers")
    }

    /// A `nu` with the plugin registered, talking to this daemon.
    pub fn nu(&self) -> Nu {
        Nu::new(self.dir.path(), &self.socket())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
        kill_processes_mentioning(self.dir.path());
    }
}

/// The pids of the processes whose command line matches `pattern` (`pgrep -f`).
pub fn pids_matching(pattern: &str) -> Vec<i32> {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Runs `provisioning-orchestrator checkpoint DIR` (folds a stopped daemon's journal into
/// its store file): its report as JSON, or what it wrote to stderr when it refused.
pub fn checkpoint_tool(dir: &Path) -> Result<serde_json::Value, String> {
    let out = Command::new(binary("provisioning-orchestrator"))
        .arg("checkpoint")
        .arg(dir)
        .output()
        .expect("the checkpoint tool runs");
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let report = String::from_utf8_lossy(&out.stdout);
    Ok(serde_json::from_str(&report).unwrap_or_else(|e| panic!("not JSON ({e}): {report}")))
}

/// The pids of the supervisor processes serving the data directory `data_dir`.
pub fn supervisor_pids(data_dir: &Path) -> Vec<i32> {
    pids_matching(&format!("supervise {}$", data_dir.display()))
}

/// Kills every process a test started under `dir`: those whose command line mentions it
/// (daemons) and those whose environment does (task processes carry their daemon's
/// `ORCH_DATA_DIR`, which is inside the test's directory).
pub fn kill_processes_mentioning(dir: &Path) {
    let _ = Command::new("pkill")
        .arg("-KILL")
        .arg("-f")
        .arg(dir.to_string_lossy().as_ref())
        .status();
    let marker = format!("ORCH_DATA_DIR={}/", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let ours = environ
            .split(|b| *b == 0)
            .any(|entry| entry.starts_with(marker.as_bytes()));
        if ours {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Kills the processes that mention a directory when dropped, so a failing test leaves
/// nothing running.
pub struct Sweeper<'a>(pub &'a Path);

impl Drop for Sweeper<'_> {
    fn drop(&mut self) {
        kill_processes_mentioning(self.0);
    }
}

/// The repository's `provisioning` Nushell module.
pub const PROVISIONING_MODULE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../nushell-modules/provisioning"
);

/// `nu` with the plugin added to a private plugin registry.
pub struct Nu {
    registry: PathBuf,
    socket: PathBuf,
    cwd: PathBuf,
}

impl Nu {
    /// Registers the plugin in `dir/plugins.msgpackz` (once) and returns a runner.
    pub fn new(dir: &Path, socket: &Path) -> Nu {
        let registry = dir.join("plugins.msgpackz");
        let nu = Nu {
            registry,
            socket: socket.to_path_buf(),
            cwd: dir.to_path_buf(),
        };
        if !nu.registry.exists() {
            let plugin = binary("nu_plugin_orchestrator");
            let out = nu.command(&format!(
                "plugin add --plugin-config '{}' '{}'",
                nu.registry.display(),
                plugin.display()
            ));
            assert!(
                out.status.success(),
                "plugin add failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        nu
    }

    /// `nu` with the private registry, the daemon's socket and `script`.
    fn base_command(&self, script: &str) -> Command {
        let mut command = Command::new(nu_binary());
        command
            .arg("--no-config-file")
            .arg("--plugin-config")
            .arg(&self.registry)
            .arg("-c")
            .arg(script)
            .current_dir(&self.cwd)
            .env("PROVISIONING_ORCHESTRATOR_SOCKET", &self.socket)
            .stdin(Stdio::null());
        command
    }

    fn command(&self, script: &str) -> Output {
        self.base_command(script).output().expect("nu runs")
    }

    /// What nu would complete at the end of `line` (typed after the plugin is loaded):
    /// `nu --ide-complete`'s suggestions.
    pub fn complete(&self, line: &str) -> Vec<String> {
        self.complete_in(line, &self.cwd, &[])
    }

    /// [`Nu::complete`] with nu started in `cwd`, with `env` added.
    pub fn complete_in(&self, line: &str, cwd: &Path, env: &[(&str, &Path)]) -> Vec<String> {
        let source = self.cwd.join("complete.nu");
        let text = self.with_plugin(line);
        std::fs::write(&source, &text).expect("the script to complete is written");
        let out = Command::new(nu_binary())
            .arg("--no-config-file")
            .arg("--plugin-config")
            .arg(&self.registry)
            .arg("--ide-complete")
            .arg(text.len().to_string())
            .arg(&source)
            .current_dir(cwd)
            .envs(env.iter().copied())
            .env("PROVISIONING_ORCHESTRATOR_SOCKET", &self.socket)
            .stdin(Stdio::null())
            .output()
            .expect("nu runs");
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("nu --ide-complete answered {out:?}: {e}"));
        serde_json::from_value(answer["completions"].clone()).expect("a list of completions")
    }

    /// The script with the plugin loaded first.
    fn with_plugin(&self, script: &str) -> String {
        format!(
            "plugin use --plugin-config '{}' orchestrator\n{script}",
            self.registry.display()
        )
    }

    /// Starts a script that loads the plugin without waiting for it (stdout and stderr
    /// piped).
    pub fn spawn(&self, script: &str) -> Child {
        self.base_command(&self.with_plugin(script))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nu runs")
    }

    /// Runs a script that loads the plugin; panics with its stderr if it fails.
    pub fn run(&self, script: &str) -> String {
        let out = self.try_run(script);
        match out {
            Ok(stdout) => stdout,
            Err(stderr) => panic!("nu failed:\n{script}\n---\n{stderr}"),
        }
    }

    /// Runs a script; `Err(stderr)` when it fails.
    pub fn try_run(&self, script: &str) -> Result<String, String> {
        let out = self.command(&self.with_plugin(script));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Runs a script in `cwd` with `env` added; `Err(stderr)` when it fails.
    pub fn try_run_in(
        &self,
        script: &str,
        cwd: &Path,
        env: &[(&str, &Path)],
    ) -> Result<String, String> {
        let mut command = self.base_command(&self.with_plugin(script));
        command.current_dir(cwd).envs(env.iter().copied());
        let out = command.output().expect("nu runs");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Every task's status and log, to explain a failed assertion.
    pub fn task_logs(&self) -> String {
        self.try_run(
            "orch tasks | each {|t| $'--- task ($t.id) ($t.status)\n(orch logs $t.id)' } | str join",
        )
        .unwrap_or_else(|e| e)
    }

    /// Rolls workflow `id` back, waits until it has settled, and returns it as
    /// `orch workflow show` does.
    pub fn roll_back(&self, id: &serde_json::Value) -> serde_json::Value {
        self.json(&format!(
            "orch workflow rollback {id} | ignore; orch watch --workflow {id} --all | last | ignore; orch workflow show {id}"
        ))
    }

    /// Runs a script whose last value is converted to JSON, and parses it.
    pub fn json(&self, script: &str) -> serde_json::Value {
        let stdout = self.run(&format!("{script} | to json --raw"));
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }

    /// [`Nu::json`] with the repository's `provisioning` module loaded first.
    pub fn provisioning_json(&self, script: &str) -> serde_json::Value {
        self.json(&format!("use {PROVISIONING_MODULE}; {script}"))
    }
}

/// Polls `check` every 20 ms until it returns `Some`, failing after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_every(timeout, Duration::from_millis(20), what, check)
}

/// Like [`eventually`], checking every `every` (for a long wait whose check is costly,
/// such as starting `nu`, so that the checks do not slow down what they wait for).
pub fn eventually_every<T>(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(every);
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on now (for a daemon's `--port`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free local port")
        .port()
}
