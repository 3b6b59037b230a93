//! Settings from a config file and the environment with the real daemon: the data
//! directory's `config.toml` (or `--config`), `PROVISIONING_ORCHESTRATOR_<FLAG>` over it,
//! the command line over both; bad settings refused at start, naming the file and key.

use std::process::Stdio;

use orch_e2e::Daemon;

#[test]
fn the_file_then_the_environment_then_the_command_line_set_the_daemon() {
    let mut daemon =
        Daemon::start_with_env(&[], &[("PROVISIONING_ORCHESTRATOR_RETAIN_EVENTS", "7d")]);
    daemon.terminate();
    std::fs::write(
        daemon.data_dir().join("config.toml"),
        "parallel = 3\nretain_finished = \"30d\"\nretain_label = [\"ci=1d\"]\nretain_events = \"1d\"\n",
    )
    .unwrap();
    daemon.restart();
    let nu = daemon.nu();
    let health = nu.json("orch health | select parallel_limit retention.finished retention.labels.ci retention.events");
    assert_eq!(health["parallel_limit"], 3, "from the file: {health}");
    assert_eq!(health["retention.finished"], "30days");
    assert_eq!(health["retention.labels.ci"], "1day");
    assert_eq!(
        health["retention.events"], "7days",
        "the environment wins over the file"
    );
    let log = std::fs::read_to_string(daemon.data_dir().join("orchestrator.log")).unwrap();
    assert!(
        log.contains("config file") && log.contains("parallel, retain_finished, retain_label"),
        "the log says where settings came from: {log}"
    );
    daemon.terminate();
    daemon.set_args(&["--parallel", "5"]);
    daemon.restart();
    assert_eq!(
        nu.json("orch health | get parallel_limit"),
        5,
        "the command line wins"
    );
}

#[test]
fn bad_settings_are_refused_at_start_naming_their_source() {
    let mut daemon = Daemon::start(&[]);
    daemon.terminate();
    let config = daemon.data_dir().join("config.toml");
    let refused = |daemon: &Daemon, args: &[&str], expected: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut child = daemon.spawn(&args);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(2), "{}", daemon.stderr());
        let stderr = daemon.stderr();
        for text in expected {
            assert!(stderr.contains(text), "{text:?} in: {stderr}");
        }
        std::fs::write(daemon.dir().join("daemon.stderr"), "").unwrap();
    };
    std::fs::write(&config, "paralel = 2\n").unwrap();
    refused(
        &daemon,
        &[],
        &["config.toml (`paralel`)", "is not a setting"],
    );
    std::fs::write(&config, "parallel = \"lots\"\n").unwrap();
    refused(&daemon, &[], &["config file", "'lots'", "--parallel"]);
    std::fs::write(&config, "[parallel]\nx = 1\n").unwrap();
    refused(&daemon, &[], &["(`parallel`)", "expected a string"]);
    std::fs::remove_file(&config).unwrap();
    refused(
        &daemon,
        &["--config", "/nonexistent/orch.toml"],
        &["/nonexistent/orch.toml: no such file"],
    );
    // A bad value from the environment names the variable.
    let mut child = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .arg("--data-dir")
        .arg(daemon.data_dir())
        .arg("--socket")
        .arg(daemon.socket())
        .env("PROVISIONING_ORCHESTRATOR_NO_SUPERVISOR", "maybe")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("$PROVISIONING_ORCHESTRATOR_NO_SUPERVISOR"),
        "{stderr}"
    );
    // Nothing refused started: the daemon still starts as before.
    daemon.restart();
}

#[test]
fn versions_are_shown_by_the_daemon_the_plugin_and_the_module() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let out = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .arg("--version")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let version = nu.json("orch version");
    let plugin = version["plugin"].as_str().unwrap().to_string();
    assert_eq!(printed, format!("provisioning-orchestrator {plugin}"));
    assert_eq!(version["daemon"]["version"], plugin.as_str());
    assert_eq!(version["daemon"]["protocol"], version["protocol"]);
    let module = nu.provisioning_json("provisioning version | get plugin");
    assert_eq!(module, plugin.as_str());
    daemon.terminate();
    assert_eq!(
        nu.json("orch version | get daemon"),
        serde_json::Value::Null
    );
}
