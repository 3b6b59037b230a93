//! `orch daemon restart` and `orch daemon upgrade --binary NEW`: stop the daemon leaving
//! its running tasks to the supervisor, and start it again (the same binary, or NEW)
//! with the same arguments and working directory; the new daemon takes the running tasks
//! over, so none is interrupted.
//!
//! The running daemon's binary, arguments and working directory are read from `/proc`,
//! so both need a daemon on this machine in the same pid namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Span, SyntaxShape, Type, Value};
use orch_protocol::Request;

use super::daemon_start::{spawn_detached, wait_until_ready};
use super::daemon_status::status;
use super::daemon_stop::stop;
use crate::OrchestratorPlugin;
use crate::connection::labeled;

/// How long the new daemon may take to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `orch daemon restart`
pub struct DaemonRestart;

/// `orch daemon upgrade`
pub struct DaemonUpgrade;

impl SimplePluginCommand for DaemonRestart {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon restart"
    }

    fn description(&self) -> &str {
        "Restart the daemon without interrupting running tasks: the new daemon takes them over from the supervisor."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch daemon restart",
            description: "Restart the daemon with the same binary and arguments",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        hand_over(plugin, engine, None, call.head)
    }
}

impl SimplePluginCommand for DaemonUpgrade {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon upgrade"
    }

    fn description(&self) -> &str {
        "Replace the running daemon by another binary without interrupting running tasks. The binary must exist, be executable and answer --version."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required_named(
                "binary",
                SyntaxShape::Filepath,
                "The new provisioning-orchestrator binary.",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch daemon upgrade --binary ./target/release/provisioning-orchestrator",
            description: "Run a freshly built daemon, keeping the running tasks",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let head = call.head;
        let given: String = call.get_flag("binary")?.unwrap_or_default();
        let binary = PathBuf::from(engine.get_current_dir()?).join(given);
        let span = call
            .get_flag_value("binary")
            .map_or(head, |value| value.span());
        check_binary(&binary, span)?;
        hand_over(plugin, engine, Some(binary), head)
    }
}

/// The running daemon: its binary, arguments and working directory.
struct Running {
    binary: PathBuf,
    args: Vec<String>,
    cwd: PathBuf,
}

/// Reads what the daemon with `pid` was started as.
fn running(pid: u32, head: Span) -> Result<Running, LabeledError> {
    let unreadable = |what: &str, e: std::io::Error| {
        LabeledError::new("cannot read the running daemon's command line")
            .with_label(format!("/proc/{pid}/{what}: {e}"), head)
    };
    let cmdline =
        std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| unreadable("cmdline", e))?;
    let binary =
        std::fs::read_link(format!("/proc/{pid}/exe")).map_err(|e| unreadable("exe", e))?;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|e| unreadable("cwd", e))?;
    let args = cmdline
        .split(|b| *b == 0)
        .skip(1)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Ok(Running { binary, args, cwd })
}

/// Checks that `binary` is an executable file that answers `--version`.
fn check_binary(binary: &Path, span: Span) -> Result<(), LabeledError> {
    use std::os::unix::fs::PermissionsExt as _;
    let bad = |why: String| {
        LabeledError::new("not a daemon binary")
            .with_label(format!("{}: {why}", binary.display()), span)
    };
    let meta = std::fs::metadata(binary).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(bad("not an executable file".into()));
    }
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| bad(e.to_string()))?;
    let version = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !version.starts_with("provisioning-orchestrator") {
        return Err(bad(format!(
            "`--version` answered {}: {}",
            out.status,
            version.trim()
        )));
    }
    Ok(())
}

/// Stops the daemon leaving its running tasks, then starts `binary` (or the same one)
/// with its arguments; the new daemon's status.
fn hand_over(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    binary: Option<PathBuf>,
    head: Span,
) -> Result<Value, LabeledError> {
    let pid = plugin
        .connect(engine)
        .map_err(|e| labeled(e, head, &[]))?
        .welcome()
        .pid;
    let old = running(pid, head)?;
    let binary = binary.unwrap_or(old.binary);
    if !binary.is_file() {
        return Err(LabeledError::new("the daemon's binary is gone").with_label(
            format!(
                "{}; use `orch daemon upgrade --binary NEW`",
                binary.display()
            ),
            head,
        ));
    }
    stop(plugin, engine, &Request::Handover, head)?;
    let mut command = Command::new(&binary);
    command.args(&old.args).current_dir(&old.cwd);
    let stderr_path = data_dir_of(&old.args)
        .unwrap_or_else(|| old.cwd.clone())
        .join("daemon.stderr");
    let child = spawn_detached(command, engine, &stderr_path, &binary, head)?;
    wait_until_ready(child, engine, &stderr_path, READY_TIMEOUT, head)?;
    status(plugin, engine, head)
}

/// The `--data-dir` among a daemon's arguments.
fn data_dir_of(args: &[String]) -> Option<PathBuf> {
    let at = args.iter().position(|a| a == "--data-dir")?;
    args.get(at + 1).map(PathBuf::from).or_else(|| {
        args.iter()
            .find_map(|a| a.strip_prefix("--data-dir=").map(PathBuf::from))
    })
}

#[test]
fn test_examples() {
    super::examples::test_examples(&DaemonRestart);
    super::examples::test_examples(&DaemonUpgrade);
}
