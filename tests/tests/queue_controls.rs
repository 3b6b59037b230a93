//! Groups and pauses through the real plugin and daemon: a group's limit changed at run
//! time, a paused queue that stops its running task (SIGSTOP, seen in /proc) and starts
//! nothing across a kill -9, a paused task on its own, the refusals, and the completions
//! of group names.

use std::path::Path;
use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

/// A task that writes its process id to `pid_file`, then ticks until it is stopped.
fn ticking(pid_file: &Path) -> String {
    format!(
        "orch submit -- sh -c 'echo $$ > {}; while true; do sleep 0.1; done' | get id",
        pid_file.display()
    )
}

/// The process id a [`ticking`] task wrote, once it did.
fn pid_of(pid_file: &Path) -> u32 {
    eventually(Duration::from_secs(15), "the task writes its pid", || {
        std::fs::read_to_string(pid_file).ok()?.trim().parse().ok()
    })
}

/// The state letter of process `pid` in /proc (`T`: stopped).
fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses.
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.trim().chars().next())
        .unwrap_or('?')
}

/// Waits until process `pid` is stopped (`stopped`) or not.
fn until_stopped(pid: u32, stopped: bool) {
    let what = if stopped { "stopped" } else { "running" };
    eventually(
        Duration::from_secs(10),
        &format!("process {pid} {what}"),
        || ((proc_state(pid) == 'T') == stopped).then_some(()),
    );
}

#[test]
fn a_group_limit_holds_tasks_and_changes_at_run_time() {
    let daemon = Daemon::start(&["--parallel", "8"]);
    let nu = daemon.nu();
    let view =
        nu.json("orch group add deploy --parallel 1 | get groups | where name == deploy | first");
    assert_eq!(view["parallel"], 1);
    let ids = nu.json("1..3 | each { orch submit --group deploy sleep 30 | get id }");
    let running = || nu.json("orch tasks --status running | length");
    eventually(Duration::from_secs(10), "one deploy runs", || {
        (running() == 1).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(running(), 1, "the others wait for the group");
    let first = &ids[0];
    assert_eq!(nu.json(&format!("orch task {first} | get group")), "deploy");
    let other = nu.json("orch submit true | get id");
    assert_eq!(
        nu.json(&format!("orch wait {other} | get 0.status")),
        "succeeded",
        "the default group is not held back"
    );
    nu.run("orch parallel 3 --group deploy | ignore");
    eventually(Duration::from_secs(10), "three deploys run", || {
        (running() == 3).then_some(())
    });
    let deploy = nu.json("orch group list | where name == deploy | first");
    assert_eq!(
        (deploy["parallel"].clone(), deploy["running"].clone()),
        (json!(3), json!(3))
    );
    let unknown = nu.try_run("orch submit --group nope true").unwrap_err();
    assert!(unknown.contains("orch group add nope"), "{unknown}");
    let removed = nu.try_run("orch group remove default").unwrap_err();
    assert!(removed.contains("cannot be removed"), "{removed}");
    let missing = nu.try_run("orch parallel 2 --group nope").unwrap_err();
    assert!(missing.contains("does not exist"), "{missing}");
    let negative = nu.try_run("orch parallel (-1)").unwrap_err();
    assert!(negative.contains("invalid limit"), "{negative}");
    let bad_name = nu.try_run("orch group add '../x'").unwrap_err();
    assert!(bad_name.contains("not a group name"), "{bad_name}");
    assert_eq!(
        nu.complete("orch parallel 2 --group "),
        vec!["default".to_string(), "deploy".to_string()]
    );
    nu.run("orch group remove deploy | ignore");
    assert_eq!(nu.json("orch group list | get name"), json!(["default"]));
    assert_eq!(
        nu.json(&format!("orch task {first} | get group")),
        "deploy",
        "a task keeps the name it was given"
    );
    nu.run("orch tasks --status running | orch cancel | ignore");
}

#[test]
fn a_paused_queue_stops_its_task_and_starts_nothing_across_a_kill_9() {
    let mut daemon = Daemon::start(&["--parallel", "2"]);
    let nu = daemon.nu();
    let pid_file = daemon.dir().join("pid");
    let id = nu.json(&ticking(&pid_file));
    let pid = pid_of(&pid_file);
    let view = nu.json("orch pause");
    assert_eq!(view["paused"], true);
    until_stopped(pid, true);
    assert!(
        nu.json(&format!("orch task {id} | get state.paused_at"))
            .is_string(),
        "the task says since when it is paused"
    );
    let waiting = nu.json("orch submit true | get id");
    daemon.kill9();
    daemon.restart();
    assert_eq!(nu.json("orch group list --all | get paused"), true);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        nu.json(&format!("orch task {waiting} | get status")),
        "queued",
        "a paused queue starts nothing"
    );
    assert_eq!(proc_state(pid), 'T', "still stopped after the restart");
    nu.run("orch resume | ignore");
    until_stopped(pid, false);
    assert_eq!(
        nu.json(&format!("orch wait {waiting} | get 0.status")),
        "succeeded"
    );
    nu.run(&format!("orch cancel {id} | ignore"));
    assert_eq!(
        nu.json(&format!("orch task {id} | get status")),
        "cancelled"
    );
    let events = nu.json(&format!("orch watch --task {id} | get event"));
    assert_eq!(
        events,
        json!(["submitted", "started", "paused", "resumed", "cancelled"])
    );
}

#[test]
fn a_single_task_is_paused_and_a_group_pause_can_wait() {
    let daemon = Daemon::start(&["--parallel", "4"]);
    let nu = daemon.nu();
    nu.run("orch group add deploy | ignore");
    let pid_file = daemon.dir().join("pid");
    let id = nu.json(&ticking(&pid_file));
    let pid = pid_of(&pid_file);
    let row = nu.json(&format!("orch pause {id}"));
    assert_eq!(row["status"], "running");
    until_stopped(pid, true);
    nu.run(&format!("orch resume {id} | ignore"));
    until_stopped(pid, false);
    let queued = nu.json("orch submit --delay 1hr true | get id");
    let refused = nu.try_run(&format!("orch pause {queued}")).unwrap_err();
    assert!(refused.contains("only a running task"), "{refused}");
    let both = nu
        .try_run(&format!("orch pause {id} --group deploy"))
        .unwrap_err();
    assert!(both.contains("tasks and a group"), "{both}");
    let wait = nu.try_run(&format!("orch pause {id} --wait")).unwrap_err();
    assert!(wait.contains("--wait"), "{wait}");
    // A group paused with --wait lets its running task run, and starts no other.
    let deploy_pid = daemon.dir().join("deploy-pid");
    let deploy = nu.json(&format!(
        "orch submit --group deploy -- sh -c 'echo $$ > {}; while true; do sleep 0.1; done' | get id",
        deploy_pid.display()
    ));
    let deploy_pid = pid_of(&deploy_pid);
    nu.run("orch pause --group deploy --wait | ignore");
    let held = nu.json("orch submit --group deploy true | get id");
    std::thread::sleep(Duration::from_millis(500));
    assert_ne!(proc_state(deploy_pid), 'T', "its running task goes on");
    assert_eq!(nu.json(&format!("orch task {held} | get status")), "queued");
    assert_eq!(
        nu.json("orch group list | where name == deploy | get 0.paused"),
        true
    );
    nu.run("orch resume --group deploy | ignore");
    assert_eq!(
        nu.json(&format!("orch wait {held} | get 0.status")),
        "succeeded"
    );
    nu.run(&format!("orch cancel {id} {deploy} {queued} | ignore"));
}
