//! `orch daemon install` and `orch daemon uninstall`: the daemon as a systemd user
//! service, started with the flags `orch daemon start` takes. Where systemd's user
//! manager does not answer (a container, a machine without a login session), the unit is
//! written (or, with `--print`, only shown) and the answer says how to enable it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, IntoValue, LabeledError, Signature, Span, Type, Value, record,
};

use super::daemon_start::{DaemonLaunch, create_data_dir, daemon_flags, shell_env};
use super::daemon_status::is_running;
use crate::OrchestratorPlugin;

/// The unit's file name.
const UNIT_NAME: &str = "provisioning-orchestrator.service";

/// `orch daemon install`
pub struct DaemonInstall;

/// `orch daemon uninstall`
pub struct DaemonUninstall;

impl SimplePluginCommand for DaemonInstall {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon install"
    }

    fn description(&self) -> &str {
        "Install the daemon as a systemd user service (provisioning-orchestrator.service), started with these flags at login and again when it fails."
    }

    fn extra_description(&self) -> &str {
        "Writes the unit into $XDG_CONFIG_HOME/systemd/user (else ~/.config/systemd/user), then enables and starts it with `systemctl --user`. Where systemd's user manager does not answer, the unit is written and the answer says how to enable it; --print only shows it. The service runs with the shell's PATH. Stopping the service stops the daemon as `orch daemon stop` does (running tasks are requeued and run at the next start); its KillMode is `process`, so that the daemon stops its tasks itself. A daemon already answering on the socket is refused (the service's could not start beside it); once enabled, the service's daemon must answer within 10 seconds."
    }

    fn signature(&self) -> Signature {
        daemon_flags(Signature::build(self.name()))
            .input_output_type(Type::Nothing, Type::record())
            .switch("print", "Show the unit; write and enable nothing.", None)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            (
                "orch daemon install --parallel 16 --retain-finished 30d",
                "Run the daemon as a user service, 16 tasks at a time",
            ),
            (
                "orch daemon install --print | get text | save provisioning-orchestrator.service",
                "Write the unit elsewhere (a system service, say)",
            ),
        ])
    }

    fn run(
        &self,
        _plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let head = call.head;
        let launch = DaemonLaunch::of_call(call, engine)?;
        let binary = absolute_binary(&launch.binary, engine, head)?;
        let print = call.has_flag("print")?;
        if !print && is_running(engine) {
            return Err(LabeledError::new("a daemon already runs on this socket")
                .with_label(
                    "the service's daemon could not start beside it: stop it first (`orch daemon stop`)",
                    head,
                ));
        }
        let path = shell_env(engine)?
            .into_iter()
            .find_map(|(name, value)| (name == "PATH").then_some(value));
        let text = unit_text(&binary, &launch.args, path.as_deref())
            .map_err(|problem| LabeledError::new(problem).with_label("in this install", head))?;
        let unit = unit_dir(engine, head)?.join(UNIT_NAME);
        if print {
            return Ok(answer(
                None,
                &text,
                false,
                "printed only: nothing written".into(),
                head,
            ));
        }
        create_data_dir(&launch.data_dir, head)?;
        write_unit(&unit, &text, head)?;
        let (enabled, note) = match systemctl(engine, &["daemon-reload"]) {
            Err(why) => (false, absent_note(&why)),
            Ok(()) => match systemctl(engine, &["enable", "--now", UNIT_NAME]) {
                Ok(()) => {
                    answers_within(engine, Duration::from_secs(10), head)?;
                    (true, "enabled and started".to_string())
                }
                Err(why) => {
                    return Err(LabeledError::new("systemd did not enable the service")
                        .with_label(why, head)
                        .with_help(format!("the unit is at {}", unit.display())));
                }
            },
        };
        Ok(answer(Some(&unit), &text, enabled, note, head))
    }
}

impl SimplePluginCommand for DaemonUninstall {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon uninstall"
    }

    fn description(&self) -> &str {
        "Stop, disable and remove the daemon's systemd user service (what `orch daemon install` wrote). Its data directory is kept."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[("orch daemon uninstall", "Remove the user service")])
    }

    fn run(
        &self,
        _plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let head = call.head;
        let unit = unit_dir(engine, head)?.join(UNIT_NAME);
        let note = match systemctl(engine, &["disable", "--now", UNIT_NAME]) {
            Ok(()) => "stopped and disabled".to_string(),
            Err(why) => absent_note(&why),
        };
        let removed = match std::fs::remove_file(&unit) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                return Err(LabeledError::new("cannot remove the unit")
                    .with_label(format!("{}: {e}", unit.display()), head));
            }
        };
        if removed {
            let _ = systemctl(engine, &["daemon-reload"]);
        }
        Ok(record! {
            "unit" => Value::string(unit.display().to_string(), head),
            "removed" => Value::bool(removed, head),
            "systemd" => Value::string(note, head),
        }
        .into_value(head))
    }
}

/// Waits until the service's daemon answers on the shell's socket (systemd says a
/// `Type=simple` service started once its process did, whatever became of it).
fn answers_within(
    engine: &EngineInterface,
    wait: Duration,
    head: Span,
) -> Result<(), LabeledError> {
    let deadline = Instant::now() + wait;
    while !is_running(engine) {
        if Instant::now() >= deadline {
            return Err(LabeledError::new("the service's daemon did not answer")
                .with_label(
                    format!("no answer within {wait:?} of `systemctl --user enable --now`"),
                    head,
                )
                .with_help(format!(
                    "`journalctl --user -u {UNIT_NAME}` says why; `orch daemon uninstall` removes the service"
                )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The answer of an install.
fn answer(unit: Option<&Path>, text: &str, enabled: bool, note: String, head: Span) -> Value {
    record! {
        "unit" => unit.map_or(Value::nothing(head), |u| Value::string(u.display().to_string(), head)),
        "enabled" => Value::bool(enabled, head),
        "systemd" => Value::string(note, head),
        "text" => Value::string(text, head),
    }
    .into_value(head)
}

/// What to say when `systemctl --user` failed with `why`.
fn absent_note(why: &str) -> String {
    format!(
        "systemd's user manager did not answer ({why}): enable it where it runs with `systemctl --user daemon-reload; systemctl --user enable --now {UNIT_NAME}`, or start the daemon with `orch daemon start`"
    )
}

/// The unit for `binary` started with `args`, tasks seeing `path` as PATH; an argument
/// systemd cannot carry (a line break, text that is not UTF-8) is refused.
pub fn unit_text(binary: &Path, args: &[OsString], path: Option<&str>) -> Result<String, String> {
    let mut words = vec![quoted(utf8(binary.as_os_str())?, Expands::Variables)?];
    for arg in args {
        words.push(quoted(utf8(arg)?, Expands::Variables)?);
    }
    let environment = match path {
        Some(path) => {
            let setting = quoted(&format!("PATH={path}"), Expands::SpecifiersOnly)?;
            format!("Environment={setting}\n")
        }
        None => String::new(),
    };
    Ok(format!(
        "# Written by `orch daemon install`; `orch daemon uninstall` removes it.
[Unit]
Description=provisioning-orchestrator: queued tasks, workflows and test environments

[Service]
Type=simple
ExecStart={exec}
{environment}Restart=on-failure
RestartSec=2
# The stop goes to the daemon alone, which stops its tasks through their supervisor
# (requeued, as with `orch daemon stop`) rather than systemd killing them under it.
KillMode=process
TimeoutStopSec=30

[Install]
WantedBy=default.target
",
        exec = words.join(" ")
    ))
}

/// What systemd expands in a setting's words.
#[derive(Clone, Copy, PartialEq)]
enum Expands {
    /// Specifiers (`%h`) and variables (`$HOME`): a command line.
    Variables,
    /// Specifiers only: `Environment=`.
    SpecifiersOnly,
}

/// `text` as UTF-8, which a unit file is.
fn utf8(text: &std::ffi::OsStr) -> Result<&str, String> {
    text.to_str()
        .ok_or_else(|| format!("{text:?} is not UTF-8, which a systemd unit cannot carry"))
}

/// `word` as one quoted word of a unit's setting: `\` and `"` escaped, `%` (specifiers)
/// doubled, and `$` (variables) where `expands` says so. A control character is refused.
fn quoted(word: &str, expands: Expands) -> Result<String, String> {
    if let Some(c) = word.chars().find(|c| c.is_control()) {
        return Err(format!(
            "{word:?} holds the control character {c:?}, which a systemd unit cannot carry"
        ));
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    for c in word.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if expands == Expands::Variables => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// `binary` as an absolute path (a bare name looked up on the shell's PATH), which must
/// be a file: systemd runs only absolute paths, and would fail only once started.
fn absolute_binary(
    binary: &Path,
    engine: &EngineInterface,
    head: Span,
) -> Result<PathBuf, LabeledError> {
    if binary.is_absolute() {
        if binary.is_file() {
            return Ok(binary.to_path_buf());
        }
        return Err(LabeledError::new("the daemon's binary was not found")
            .with_label(format!("no file at {}", binary.display()), head)
            .with_help("build it with `cargo build --release` or pass --binary PATH"));
    }
    let path = shell_env(engine)?
        .into_iter()
        .find_map(|(name, value)| (name == "PATH").then_some(value))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            LabeledError::new("the daemon's binary was not found")
                .with_label(format!("{} is not on PATH", binary.display()), head)
                .with_help("build it with `cargo build --release` or pass --binary PATH")
        })
}

/// The directory of the user's systemd units, from the shell's environment.
fn unit_dir(engine: &EngineInterface, head: Span) -> Result<PathBuf, LabeledError> {
    let var = |name: &str| {
        engine
            .get_env_var(name)
            .ok()
            .flatten()
            .and_then(|v| v.as_str().ok().map(str::to_string))
            .filter(|v| !v.is_empty())
    };
    if let Some(config) = var("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(config).join("systemd/user"));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".config/systemd/user")),
        None => Err(LabeledError::new("no home directory")
            .with_label("neither XDG_CONFIG_HOME nor HOME is set", head)),
    }
}

/// Writes the unit (replacing an earlier one).
fn write_unit(unit: &Path, text: &str, head: Span) -> Result<(), LabeledError> {
    let failed = |e: std::io::Error| {
        LabeledError::new("cannot write the unit")
            .with_label(format!("{}: {e}", unit.display()), head)
    };
    if let Some(dir) = unit.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    std::fs::write(unit, text).map_err(failed)
}

/// Runs `systemctl --user ARGS` with the shell's environment; its error output when it
/// fails (or cannot be run).
fn systemctl(engine: &EngineInterface, args: &[&str]) -> Result<(), String> {
    let output = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .env_clear()
        .envs(shell_env(engine).map_err(|e| e.to_string())?)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("systemctl: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(stderr.trim().lines().last().unwrap_or("failed").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_examples() {
        crate::commands::examples::test_examples(&DaemonInstall);
        crate::commands::examples::test_examples(&DaemonUninstall);
    }

    #[test]
    fn every_argument_is_one_quoted_word_with_specifiers_and_variables_kept_literal() {
        let args = ["--data-dir".into(), r#"/srv/a "b" 100% $HOME\x"#.into()];
        let text = unit_text(Path::new("/opt/orch bin/po"), &args, Some("/usr/bin:/$x%")).unwrap();
        assert!(
            text.contains(
                r#"ExecStart="/opt/orch bin/po" "--data-dir" "/srv/a \"b\" 100%% $$HOME\\x""#
            ),
            "{text}"
        );
        // Environment= expands specifiers, not variables.
        assert!(
            text.contains("Environment=\"PATH=/usr/bin:/$x%%\"\n"),
            "{text}"
        );
        assert!(text.contains("KillMode=process"));
    }

    #[test]
    fn a_line_break_or_text_that_is_not_utf8_is_refused_naming_it() {
        let args = ["--data-dir".into(), "/srv/a\nExecStartPre=/bin/evil".into()];
        let error = unit_text(Path::new("/bin/po"), &args, None).unwrap_err();
        assert!(error.contains("control character '\\n'"), "{error}");
        use std::os::unix::ffi::OsStringExt as _;
        let args = [OsString::from_vec(b"/srv/\xff".to_vec())];
        let error = unit_text(Path::new("/bin/po"), &args, None).unwrap_err();
        assert!(error.contains("is not UTF-8"), "{error}");
    }
}
