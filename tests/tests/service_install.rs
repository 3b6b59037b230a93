//! `orch daemon install` / `uninstall` through the real plugin: the unit printed and
//! written (systemd's user manager does not answer in the test: the answer says so),
//! checked by the real `systemd-analyze verify`, and its ExecStart run for real: the
//! daemon it starts answers and runs a task on the data directory the flags named. A
//! line break in a flag, or a binary that is not there, is refused with nothing written;
//! uninstall removes the unit.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use orch_e2e::{Nu, Sweeper, eventually};

/// The words of a unit's `ExecStart=` line, unquoted as systemd does for the quoting
/// `orch daemon install` writes (every word in double quotes; `\\`, `\"`, `%%`, `$$`).
fn exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            assert_eq!(
                c, ' ',
                "words are quoted and separated by one space: {line}"
            );
            continue;
        }
        let mut word = String::new();
        loop {
            match chars.next().expect("a closing quote") {
                '"' => break,
                '\\' => word.push(chars.next().expect("an escaped character")),
                c @ ('%' | '$') => {
                    assert_eq!(chars.next(), Some(c), "{c} is doubled: {line}");
                    word.push(c);
                }
                c => word.push(c),
            }
        }
        words.push(word);
    }
    words
}

/// The shell's settings for the test: its own config dir, and a user manager that does
/// not answer (so that no test ever enables a real service).
fn shell(config: &Path) -> String {
    format!(
        "$env.XDG_CONFIG_HOME = '{}'; $env.DBUS_SESSION_BUS_ADDRESS = 'unix:path=/nonexistent'; $env.XDG_RUNTIME_DIR = '/nonexistent';",
        config.display()
    )
}

#[test]
fn the_unit_is_printed_written_verified_runs_the_daemon_and_is_removed() {
    let dir = tempfile::Builder::new()
        .prefix("orch-e2e-")
        .tempdir()
        .unwrap();
    let _sweeper = Sweeper(dir.path());
    let socket = dir.path().join("orch.sock");
    let nu = Nu::new(dir.path(), &socket);
    let config = dir.path().join("config");
    let unit_path = config.join("systemd/user/provisioning-orchestrator.service");
    let env = shell(&config);
    let flags = "--data-dir 'da ta%x' --parallel 3 --retain-label [ci=1d]";

    let printed = nu.json(&format!("{env} orch daemon install {flags} --print"));
    assert!(printed["unit"].is_null(), "{printed}");
    assert!(!unit_path.exists(), "--print writes nothing");
    let text = printed["text"].as_str().unwrap().to_string();
    let words = exec_start(&text);
    let data_dir = dir.path().join("da ta%x");
    let expected = [
        "--quiet",
        "--data-dir",
        &data_dir.display().to_string(),
        "--socket",
        &socket.display().to_string(),
        "--parallel",
        "3",
        "--retain-label",
        "ci=1d",
    ];
    assert_eq!(words[1..], expected, "{text}");
    assert!(Path::new(&words[0]).is_absolute(), "{text}");
    assert!(text.contains("KillMode=process"), "{text}");

    let installed = nu.json(&format!("{env} orch daemon install {flags}"));
    assert_eq!(installed["unit"], unit_path.display().to_string());
    assert_eq!(installed["enabled"], false);
    let note = installed["systemd"].as_str().unwrap();
    assert!(
        note.contains("did not answer") && note.contains("enable --now"),
        "{note}"
    );
    assert_eq!(std::fs::read_to_string(&unit_path).unwrap(), text);

    // systemd's own check of the unit file.
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&unit_path)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze runs (scripts/test.sh installs systemd)");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );

    // The command line the service would run starts a daemon that works.
    let mut daemon = Command::new(&words[0])
        .args(&words[1..])
        .current_dir("/")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(20), "the daemon answers", || {
        nu.try_run("orch health | get status").ok()
    });
    assert_eq!(nu.json("orch submit --wait true | get status"), "succeeded");
    let beside = nu
        .try_run(&format!("{env} orch daemon install {flags}"))
        .unwrap_err();
    assert!(
        beside.contains("a daemon already runs on this socket"),
        "{beside}"
    );
    assert!(
        data_dir.join("orchestrator.log").exists(),
        "the daemon runs on the data directory the flags named"
    );
    let _ = daemon.kill();
    let _ = daemon.wait();

    let removed = nu.json(&format!("{env} orch daemon uninstall"));
    assert_eq!(removed["removed"], true, "{removed}");
    assert!(!unit_path.exists());
    let again = nu.json(&format!("{env} orch daemon uninstall"));
    assert_eq!(again["removed"], false, "{again}");
}

#[test]
fn a_flag_a_unit_cannot_carry_is_refused_and_nothing_is_written() {
    let dir = tempfile::Builder::new()
        .prefix("orch-e2e-")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("orch.sock");
    let nu = Nu::new(dir.path(), &socket);
    let config = dir.path().join("config");
    let env = shell(&config);
    let error = nu
        .try_run(&format!(
            "{env} orch daemon install --data-dir \"x\nExecStartPre=/bin/sh\""
        ))
        .unwrap_err();
    assert!(error.contains("control character"), "{error}");
    assert!(!config.exists(), "nothing written");
    let missing = nu
        .try_run(&format!(
            "{env} orch daemon install --binary ./no-such-daemon --print"
        ))
        .unwrap_err();
    assert!(
        missing.contains("no file at") && missing.contains("no-such-daemon"),
        "{missing}"
    );
}
