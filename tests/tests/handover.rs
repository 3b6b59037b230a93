//! `orch daemon upgrade`, `orch daemon restart` and `orch daemon stop --leave-running`:
//! the daemon hands its running tasks over to the next one, and none is interrupted.

use std::collections::BTreeMap;
use std::time::Duration;

use orch_e2e::{Daemon, Nu, binary, eventually};
use serde_json::json;

/// Submits `n` tasks that print `start`, pause 3 s, print `done` and note their id in
/// `ran.txt`; waits until all run.
fn submit_running(daemon: &Daemon, nu: &Nu, n: u64) {
    let ran = daemon.dir().join("ran.txt");
    let script = format!(
        "echo start; sleep 3; echo done; echo $ORCH_TASK_ID >> {}",
        ran.display()
    );
    nu.run(&format!(
        "1..{n} | each {{ {{command: [sh -c '{script}'], label: h}} }} | orch submit | ignore"
    ));
    eventually(Duration::from_secs(60), "the tasks to run", || {
        let running = nu.json("orch tasks --status running | length").as_u64();
        (running == Some(n)).then_some(())
    });
}

/// Every task succeeded with one attempt and a whole log, and ran once.
fn all_ran_once(daemon: &Daemon, nu: &Nu, n: usize) {
    let tasks = nu.json(
        "orch tasks --label h | get id | orch wait --timeout 2min | select status attempts | uniq",
    );
    assert_eq!(tasks, json!([{"status": "succeeded", "attempts": 1}]));
    let logs = nu.json("orch tasks --label h | get id | each {|id| orch logs $id } | uniq");
    assert_eq!(logs, json!(["start\ndone\n"]));
    let mut runs: BTreeMap<String, usize> = BTreeMap::new();
    let ran = std::fs::read_to_string(daemon.dir().join("ran.txt")).unwrap();
    for line in ran.lines() {
        *runs.entry(line.to_string()).or_default() += 1;
    }
    assert_eq!(runs.len(), n);
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
}

#[test]
fn an_upgrade_to_a_new_binary_interrupts_none_of_twenty_running_tasks() {
    let mut daemon = Daemon::start(&["--parallel", "20"]);
    let nu = daemon.nu();
    let new = daemon.dir().join("provisioning-orchestrator-new");
    std::fs::copy(binary("provisioning-orchestrator"), &new).unwrap();
    submit_running(&daemon, &nu, 20);
    let old_pid = daemon.pid().unwrap();
    let status = nu.json(&format!(
        "orch daemon upgrade --binary {} | select running pid",
        new.display()
    ));
    daemon.kill9(); // reaps the old daemon, which has exited
    assert_eq!(status["running"], true);
    let new_pid = status["pid"].as_u64().unwrap();
    assert_ne!(new_pid, u64::from(old_pid));
    assert_eq!(
        std::fs::read_link(format!("/proc/{new_pid}/exe")).unwrap(),
        new
    );
    all_ran_once(&daemon, &nu, 20);
}

#[test]
fn an_upgrade_refuses_a_binary_that_is_not_a_daemon_and_keeps_the_daemon() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let missing = daemon.dir().join("missing");
    let err = nu
        .try_run(&format!(
            "orch daemon upgrade --binary {}",
            missing.display()
        ))
        .unwrap_err();
    assert!(err.contains("not a daemon binary"), "{err}");
    let err = nu
        .try_run("orch daemon upgrade --binary /bin/true")
        .unwrap_err();
    assert!(err.contains("--version"), "{err}");
    let pid = nu.json("orch daemon status | get pid");
    assert_eq!(pid, json!(daemon.pid().unwrap()));
}

#[test]
fn a_restart_interrupts_no_running_task() {
    let mut daemon = Daemon::start(&["--parallel", "8"]);
    let nu = daemon.nu();
    submit_running(&daemon, &nu, 8);
    let status = nu.json("orch daemon restart | get running");
    daemon.kill9();
    assert_eq!(status, true);
    all_ran_once(&daemon, &nu, 8);
}

#[test]
fn stop_leave_running_leaves_the_tasks_for_the_next_daemon() {
    let mut daemon = Daemon::start(&["--parallel", "4"]);
    let nu = daemon.nu();
    submit_running(&daemon, &nu, 4);
    let stopped = nu.json("orch daemon stop --leave-running | get stopped");
    assert_eq!(stopped, true);
    daemon.kill9();
    // While no daemon runs, the tasks go on and end.
    eventually(Duration::from_secs(20), "the tasks to end", || {
        let ran = std::fs::read_to_string(daemon.dir().join("ran.txt")).unwrap_or_default();
        (ran.lines().count() == 4).then_some(())
    });
    daemon.restart();
    all_ran_once(&daemon, &nu, 4);
}

#[test]
fn a_handover_from_an_operator_is_refused_and_the_daemon_keeps_running() {
    use std::os::unix::fs::PermissionsExt as _;
    if !orch_e2e::peer::is_root() {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    let daemon = Daemon::start(&["--allow-user", "65534:operator"]);
    std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let answers = orch_e2e::peer::socket_as(
        65534,
        &daemon.socket(),
        &[
            orch_e2e::peer::hello("operator"),
            json!({"request": "handover"}),
            json!({"request": "shutdown"}),
        ],
    );
    let refusals: Vec<&serde_json::Value> = answers[1..].iter().map(|f| &f[0]["message"]).collect();
    assert_eq!(
        refusals,
        [
            "permission denied: uid 65534 has the role operator; this request needs admin",
            "permission denied: uid 65534 has the role operator; this request needs admin",
        ],
        "{answers:?}"
    );
    let health = daemon.nu().json("orch health | get version");
    assert!(health.is_string(), "the daemon still answers: {health}");
}
