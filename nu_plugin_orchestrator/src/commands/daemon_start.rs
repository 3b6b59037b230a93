//! `orch daemon start`: start the daemon in the background and wait until it answers.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, FromValue as _, LabeledError, Signature, Span, SyntaxShape, Type, Value,
};
use orch_protocol::paths;

use super::daemon_status::{is_running, status};
use crate::OrchestratorPlugin;
use crate::connection::socket_path;

/// The daemon's binary name.
const DAEMON_BINARY: &str = "provisioning-orchestrator";

/// `orch daemon start`
pub struct DaemonStart;

impl SimplePluginCommand for DaemonStart {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon start"
    }

    fn description(&self) -> &str {
        "Start the orchestrator daemon in the background and wait until it answers. Does nothing when it already runs."
    }

    fn extra_description(&self) -> &str {
        "The daemon binary is looked up next to the plugin, then on PATH. It inherits the shell's environment (so tasks see your PATH) and logs to orchestrator.log in its data directory."
    }

    fn signature(&self) -> Signature {
        daemon_flags(Signature::build(self.name()))
            .input_output_type(Type::Nothing, Type::record())
            .named(
                "wait",
                SyntaxShape::Duration,
                "How long to wait for it to answer (default 10sec).",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch daemon start",
                description: "Start the daemon with the default data directory",
                result: None,
            },
            Example {
                example: "orch daemon start --data-dir ./data --parallel 16",
                description: "Start it on a project's own data directory, 16 tasks at a time",
                result: None,
            },
            Example {
                example: "orch daemon start --retain-finished 30d --retain-label [servers=90d ci=1d]",
                description: "Keep finished tasks 30 days, those labelled servers 90 and ci one",
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
        if is_running(engine) {
            return status(plugin, engine, head);
        }
        let launch = DaemonLaunch::of_call(call, engine)?;
        create_data_dir(&launch.data_dir, head)?;
        let mut command = Command::new(&launch.binary);
        command.args(&launch.args);
        let wait = match optional_flag::<Value>(call, "wait")? {
            Some(v) => Duration::from_nanos(v.as_duration()?.max(0) as u64),
            None => Duration::from_secs(10),
        };
        let stderr_path = launch.data_dir.join("daemon.stderr");
        let child = spawn_detached(command, engine, &stderr_path, &launch.binary, head)?;
        wait_until_ready(child, engine, &stderr_path, wait, head)?;
        status(plugin, engine, head)
    }
}

/// The flags `orch daemon start` and `orch daemon install` share: what the daemon is
/// started with.
pub(super) fn daemon_flags(signature: Signature) -> Signature {
    signature
        .named(
            "data-dir",
            SyntaxShape::Directory,
            "Where the daemon keeps its database and logs.",
            Some('d'),
        )
        .named(
            "parallel",
            SyntaxShape::Int,
            "How many tasks may run at once (default 8).",
            Some('j'),
        )
        .named(
            "binary",
            SyntaxShape::Filepath,
            "The provisioning-orchestrator binary to run.",
            None,
        )
        .named(
            "retain-finished",
            SyntaxShape::String,
            "Remove finished tasks and workflows (with their logs) this long after they finished, such as 30d, or never (the default).",
            None,
        )
        .named(
            "retain-label",
            SyntaxShape::Any,
            "A retention for one label, LABEL=RETENTION such as servers=90d (or a list of them).",
            None,
        )
        .named(
            "retain-events",
            SyntaxShape::String,
            "Remove events this long after they were logged, such as 7d, or never (the default).",
            None,
        )
}

/// How the daemon is started: its binary, data directory and command line.
pub(super) struct DaemonLaunch {
    /// The binary (as given, or found next to the plugin; else the bare name).
    pub binary: PathBuf,
    /// Its data directory, absolute.
    pub data_dir: PathBuf,
    /// Its arguments (paths as they are: not every path is UTF-8).
    pub args: Vec<OsString>,
}

impl DaemonLaunch {
    /// The launch the call's [`daemon_flags`] ask for, on the shell's socket.
    pub(super) fn of_call(
        call: &EvaluatedCall,
        engine: &EngineInterface,
    ) -> Result<DaemonLaunch, LabeledError> {
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let data_dir = match optional_flag::<String>(call, "data-dir")? {
            Some(dir) => cwd.join(dir),
            None => paths::default_data_dir(),
        };
        let binary = match optional_flag::<String>(call, "binary")? {
            Some(path) => cwd.join(path),
            None => default_binary(),
        };
        let mut args: Vec<OsString> = vec![
            "--quiet".into(),
            "--data-dir".into(),
            data_dir.clone().into(),
            "--socket".into(),
            socket_path(engine).into(),
        ];
        if let Some(n) = optional_flag::<i64>(call, "parallel")? {
            args.extend(["--parallel".into(), n.to_string().into()]);
        }
        retention_args(call, &mut args)?;
        Ok(DaemonLaunch {
            binary,
            data_dir,
            args,
        })
    }
}

/// Creates the data directory, owner-only: the store holds every task's parameters.
pub(super) fn create_data_dir(data_dir: &Path, head: Span) -> Result<(), LabeledError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(|e| {
            LabeledError::new("cannot create the data directory")
                .with_label(format!("{}: {e}", data_dir.display()), head)
        })
}

/// Passes the retention flags on (the daemon checks their values and names the flag of a
/// bad one).
fn retention_args(call: &EvaluatedCall, args: &mut Vec<OsString>) -> Result<(), LabeledError> {
    for flag in ["retain-finished", "retain-events"] {
        if let Some(value) = optional_flag::<String>(call, flag)? {
            args.extend([format!("--{flag}").into(), value.into()]);
        }
    }
    let labels = match call.get_flag_value("retain-label") {
        Some(Value::List { vals, .. }) => vals.to_vec(),
        Some(value) if !value.is_nothing() => vec![value],
        _ => Vec::new(),
    };
    for label in labels {
        args.extend(["--retain-label".into(), String::from_value(label)?.into()]);
    }
    Ok(())
}

/// A flag's value; `null` (as wrappers forward optional flags) counts as not given.
fn optional_flag<T: nu_protocol::FromValue>(
    call: &EvaluatedCall,
    name: &str,
) -> Result<Option<T>, LabeledError> {
    match call.get_flag_value(name) {
        Some(value) if !value.is_nothing() => Ok(Some(T::from_value(value)?)),
        _ => Ok(None),
    }
}

/// The daemon next to this plugin's binary, else the name for a PATH lookup.
fn default_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(DAEMON_BINARY)))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from(DAEMON_BINARY))
}

/// The shell's environment as strings (lists such as PATH joined with `:`).
pub(super) fn shell_env(engine: &EngineInterface) -> Result<Vec<(String, String)>, LabeledError> {
    let mut out = Vec::new();
    for (name, value) in engine.get_env_vars()? {
        let text = match value {
            Value::String { val, .. } => val,
            Value::List { vals, .. } => vals
                .iter()
                .filter_map(|v| v.as_str().ok())
                .collect::<Vec<_>>()
                .join(":"),
            Value::Int { val, .. } => val.to_string(),
            _ => continue,
        };
        out.push((name, text));
    }
    Ok(out)
}

/// Starts `command` (the daemon) detached from the shell's session, with the shell's
/// environment, its standard error going to `stderr_path`.
pub(super) fn spawn_detached(
    mut command: Command,
    engine: &EngineInterface,
    stderr_path: &Path,
    binary: &Path,
    head: Span,
) -> Result<Child, LabeledError> {
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(stderr_path)
        .map_err(|e| {
            LabeledError::new("cannot start the daemon")
                .with_label(format!("{}: {e}", stderr_path.display()), head)
        })?;
    command
        .env_clear()
        .envs(shell_env(engine)?)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: setsid(2) is async-signal-safe; it detaches the daemon from the shell's
    // session and terminal so that closing the terminal does not stop it.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    command.spawn().map_err(|e| {
        LabeledError::new("cannot start the daemon")
            .with_label(format!("{}: {e}", binary.display()), head)
            .with_help("build it with `cargo build --release` or pass --binary PATH")
    })
}

/// Waits until the started daemon answers (or exits, or `wait` passes).
pub(super) fn wait_until_ready(
    mut child: Child,
    engine: &EngineInterface,
    stderr_path: &Path,
    wait: Duration,
    head: Span,
) -> Result<(), LabeledError> {
    let deadline = Instant::now() + wait;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let output = std::fs::read_to_string(stderr_path).unwrap_or_default();
            let reason = output.lines().last().unwrap_or("no output").to_string();
            return Err(LabeledError::new("the daemon exited at start")
                .with_label(format!("{status}: {reason}"), head));
        }
        if is_running(engine) {
            // Reap the daemon whenever it exits, so it never lingers as a zombie.
            std::thread::spawn(move || child.wait());
            return Ok(());
        }
        if Instant::now() >= deadline || engine.signals().interrupted() {
            return Err(LabeledError::new("the daemon did not answer").with_label(
                format!("no answer within {:?}; see {}", wait, stderr_path.display()),
                head,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&DaemonStart);
}
