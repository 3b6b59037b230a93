//! `orch kill` through the real plugin and daemon: a signal reaches the task's process
//! group (which handles it and runs on), again after a kill -9 of the daemon (the
//! supervisor still runs the task), the task ends as its process does, each request is
//! audited; without --signal it is a cancel; the refusals name the problem; --signal
//! completes.

use std::path::Path;
use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

/// A task that says which signals it got (USR1: on it goes; HUP: it exits 0), after
/// writing `ready` once its traps are set.
fn trapping(ready: &Path) -> String {
    format!(
        "orch submit -- sh -c \"trap 'echo got-usr1' USR1; trap 'echo got-hup; exit 0' HUP; touch {}; while true; do sleep 0.1; done\" | get id",
        ready.display()
    )
}

#[test]
fn a_signal_reaches_the_task_before_and_after_a_daemon_restart() {
    let mut daemon = Daemon::start(&["--parallel", "2"]);
    let nu = daemon.nu();
    let ready = daemon.dir().join("ready");
    let id = nu.json(&trapping(&ready));
    eventually(Duration::from_secs(15), "the task sets its traps", || {
        ready.exists().then_some(())
    });
    let row = nu.json(&format!("orch kill {id} --signal usr1"));
    assert_eq!(row["status"], "running", "the task handles it and runs on");
    let logs = |id: &serde_json::Value| nu.run(&format!("orch logs {id}"));
    eventually(Duration::from_secs(10), "the task gets SIGUSR1", || {
        logs(&id).contains("got-usr1").then_some(())
    });

    daemon.kill9();
    daemon.restart();
    nu.run(&format!("orch kill {id} --signal SIGHUP | ignore"));
    let done = nu.json(&format!("orch wait {id} --timeout 15sec | get 0.status"));
    assert_eq!(done, "succeeded", "it exits 0 on SIGHUP");
    assert!(logs(&id).contains("got-hup"));
    let audited = nu.json("orch audit --action signal | each { [$in.params.signal $in.outcome] }");
    assert_eq!(
        audited,
        json!([
            ["HUP", format!("SIGHUP sent to task {id} (attempt 1)")],
            ["USR1", format!("SIGUSR1 sent to task {id} (attempt 1)")]
        ]),
        "newest first"
    );

    // A task that dies of the signal fails, as a task killed by it would.
    let dying = nu.json("orch submit sleep 600 | get id");
    eventually(Duration::from_secs(10), "the task runs", || {
        (nu.json(&format!("orch task {dying} | get status")) == "running").then_some(())
    });
    nu.run(&format!("orch kill {dying} -s TERM | ignore"));
    let task = nu.json(&format!("orch wait {dying} | get 0"));
    assert_eq!(task["status"], "failed");
    let outcome = nu.json(&format!(
        "orch task {dying} | get attempt_history.0.outcome"
    ));
    assert_eq!(outcome, "killed by signal 15", "{task}");
}

#[test]
fn kill_without_a_signal_cancels_and_bad_requests_are_refused_naming_why() {
    let daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    let ids = nu.json("[(orch submit sleep 600 | get id) (orch submit sleep 600 | get id)]");
    let (running, queued) = (&ids[0], &ids[1]);
    eventually(Duration::from_secs(10), "the first task runs", || {
        (nu.json(&format!("orch task {running} | get status")) == "running").then_some(())
    });

    let pause = nu
        .try_run(&format!("orch kill {running} --signal STOP"))
        .unwrap_err();
    assert!(pause.contains("orch pause"), "{pause}");
    let unknown = nu
        .try_run(&format!("orch kill {running} --signal SEGV"))
        .unwrap_err();
    assert!(unknown.contains("`SEGV` is not a signal"), "{unknown}");
    assert!(unknown.contains("HUP, INT, QUIT"), "{unknown}");
    let not_running = nu
        .try_run(&format!("orch kill {queued} --signal HUP"))
        .unwrap_err();
    assert!(
        not_running.contains(&format!(
            "task {queued} is queued: only a running task is signalled"
        )),
        "{not_running}"
    );
    let missing = nu.try_run("orch kill 999 --signal HUP").unwrap_err();
    assert!(missing.contains("task 999 does not exist"), "{missing}");
    let none = nu.try_run("orch kill --signal HUP").unwrap_err();
    assert!(none.contains("no task id"), "{none}");
    assert_eq!(
        nu.json(&format!("orch task {running} | get status")),
        "running",
        "nothing was sent"
    );

    let rows = nu.json(&format!("[{running} {queued}] | orch kill"));
    let statuses: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("cancelled"), json!("cancelled")]);

    let offered = nu.complete("orch kill 1 --signal ");
    for name in ["HUP", "USR1", "TERM", "KILL"] {
        assert!(offered.contains(&name.to_string()), "{offered:?}");
    }
    assert!(!offered.contains(&"STOP".to_string()), "{offered:?}");
}

#[test]
fn input_reaches_the_task_before_and_after_a_daemon_restart_until_its_end() {
    let mut daemon = Daemon::start(&["--parallel", "2"]);
    let nu = daemon.nu();
    let id = nu.json(
        "orch submit --stdin -- sh -c 'read a; echo \"got $a\"; read b; echo \"got $b\"; cat; echo end' | get id",
    );
    let logs = || nu.run(&format!("orch logs {id}"));
    nu.run(&format!("orch send {id} 'one two' | ignore"));
    eventually(
        Duration::from_secs(10),
        "the task reads the first line",
        || logs().contains("got one two").then_some(()),
    );
    daemon.kill9();
    daemon.restart();
    nu.run(&format!("orch send {id} two | ignore"));
    nu.run(&format!("orch send {id} 'rest' --raw --eof | ignore"));
    let status = nu.json(&format!("orch wait {id} --timeout 15sec | get 0.status"));
    assert_eq!(status, "succeeded", "cat ends at the end of input");
    let log = logs();
    assert!(log.contains("got two\nrestend"), "{log}");
    let audited = nu.json("orch audit --action input | get params | each { [$in.bytes $in.eof] }");
    assert_eq!(
        audited,
        json!([[4, true], [4, false], [8, false]]),
        "sizes, newest first"
    );
    let said = nu.run("orch audit --action input | to json");
    assert!(
        !said.contains("one two"),
        "the audit log keeps sizes, not input: {said}"
    );

    let plain = nu.json("orch submit sleep 600 | get id");
    eventually(Duration::from_secs(10), "the task runs", || {
        (nu.json(&format!("orch task {plain} | get status")) == "running").then_some(())
    });
    let refused = nu.try_run(&format!("orch send {plain} hi")).unwrap_err();
    assert!(refused.contains("not submitted with --stdin"), "{refused}");
    let ended = nu.try_run(&format!("orch send {id} late")).unwrap_err();
    assert!(
        ended.contains("only a running task is given input"),
        "{ended}"
    );
    let big = nu
        .try_run(&format!("orch send {plain} ('x' | fill -c x -w 70000)"))
        .unwrap_err();
    assert!(big.contains("at most 65536 go at once"), "{big}");
    let nothing = nu.try_run(&format!("orch send {plain}")).unwrap_err();
    assert!(nothing.contains("nothing to send"), "{nothing}");
    nu.run(&format!("orch cancel {plain} | ignore"));
}

/// One request over a raw connection of the daemon's own user; the answer.
fn raw_request(daemon: &Daemon, request: serde_json::Value) -> serde_json::Value {
    use std::io::Write as _;
    let mut stream = orch_e2e::raw::raw_socket(daemon);
    orch_e2e::raw::handshake(&mut stream);
    stream
        .write_all(&orch_e2e::raw::frame(request.to_string().as_bytes()))
        .unwrap();
    orch_e2e::raw::read_frame(&mut stream).expect("an answer")
}

#[test]
fn hostile_signal_and_input_requests_are_refused_and_change_nothing() {
    let daemon = Daemon::start(&["--allow-user", "65534:viewer"]);
    let nu = daemon.nu();
    let id = nu.json("orch submit --stdin -- sh -c 'cat > /dev/null' | get id");
    eventually(Duration::from_secs(10), "the task runs", || {
        (nu.json(&format!("orch task {id} | get status")) == "running").then_some(())
    });

    // Past the plugin's own checks: more than 64 KiB at once, and names that are no signal.
    let big = "x".repeat(64 * 1024 + 1);
    let answer = raw_request(
        &daemon,
        json!({"request": "send_input", "id": id, "data": big}),
    );
    assert_eq!(
        (answer["kind"].clone(), answer["field"].clone()),
        (json!("bad_request"), json!("data")),
        "{answer}"
    );
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 65536 go at once"), "{answer}");
    for name in ["STOP", "SEGV", "../HUP", ""] {
        let answer = raw_request(
            &daemon,
            json!({"request": "signal_task", "id": id, "signal": name}),
        );
        assert_eq!(answer["response"], "error", "{name}: {answer}");
    }

    // A viewer may not signal or write to a task.
    if orch_e2e::peer::is_root() {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let answers = orch_e2e::peer::socket_as(
            65534,
            &daemon.socket(),
            &[
                orch_e2e::peer::hello("viewer"),
                json!({"request": "signal_task", "id": id, "signal": "KILL"}),
                json!({"request": "send_input", "id": id, "data": "x\n", "eof": true}),
            ],
        );
        for frames in &answers[1..] {
            let message = frames[0]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("this request needs operator"),
                "{answers:?}"
            );
        }
    } else {
        eprintln!("skipped the viewer's part: switching to another uid needs root");
    }
    assert_eq!(
        nu.json(&format!("orch task {id} | get status")),
        "running",
        "nothing reached it"
    );
    let done = nu.json("orch audit | where action in [signal input] and ok == true | length");
    assert_eq!(done, 0, "no signal or input was carried out");
    nu.run(&format!("orch cancel {id} | ignore"));
}
