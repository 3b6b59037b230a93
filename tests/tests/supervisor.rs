//! Running attempts survive a daemon crash: each runs under a supervisor that outlives
//! the daemon; the next daemon re-attaches to it, or collects the outcome it recorded
//! while the daemon was down. Nothing runs twice.

use std::collections::BTreeMap;
use std::time::Duration;

use orch_e2e::{Daemon, eventually, pids_matching, supervisor_pids};
use serde_json::json;

/// How often each task id appears in `file` (one line per run).
fn runs(file: &std::path::Path) -> BTreeMap<u64, usize> {
    let mut runs = BTreeMap::new();
    for line in std::fs::read_to_string(file).unwrap_or_default().lines() {
        *runs.entry(line.trim().parse().unwrap()).or_default() += 1;
    }
    runs
}

fn wait_running(nu: &orch_e2e::Nu, n: u64) {
    eventually(Duration::from_secs(60), "the tasks to run", || {
        let running = nu.json("orch tasks --status running | length").as_u64();
        (running == Some(n)).then_some(())
    });
}

#[test]
fn fifty_running_tasks_survive_kill_9_with_one_attempt_each_and_whole_logs() {
    let mut daemon = Daemon::start(&["--parallel", "50"]);
    let nu = daemon.nu();
    let ran = daemon.dir().join("ran.txt");
    let script = format!(
        "echo start; sleep 3; echo done; echo $ORCH_TASK_ID >> {}",
        ran.display()
    );
    nu.run(&format!(
        "1..50 | each {{ {{command: [sh -c '{script}'], label: s}} }} | orch submit | ignore"
    ));
    wait_running(&nu, 50);
    daemon.kill9();
    daemon.restart();
    let tasks = nu.json(
        "orch tasks --label s | get id | orch wait --timeout 2min | select status attempts | uniq",
    );
    assert_eq!(tasks, json!([{"status": "succeeded", "attempts": 1}]));
    let logs = nu.json("orch tasks --label s | get id | each {|id| orch logs $id } | uniq");
    assert_eq!(logs, json!(["start\ndone\n"]));
    let runs = runs(&ran);
    assert_eq!(runs.len(), 50);
    assert!(runs.values().all(|n| *n == 1), "{runs:?}");
}

#[test]
fn tasks_that_end_while_the_daemon_is_down_are_recorded_not_run_again() {
    let mut daemon = Daemon::start(&["--parallel", "8"]);
    let nu = daemon.nu();
    let ran = daemon.dir().join("ran.txt");
    let gate = daemon.dir().join("gate");
    let script = format!(
        "while [ ! -f {} ]; do sleep 0.02; done; echo $ORCH_TASK_ID >> {}; exit $(( ORCH_TASK_ID % 2 ))",
        gate.display(),
        ran.display()
    );
    nu.run(&format!(
        "1..6 | each {{ {{command: [sh -c '{script}'], label: g}} }} | orch submit | ignore; orch submit --after 2 echo dependant | ignore"
    ));
    wait_running(&nu, 6);
    daemon.kill9();
    std::fs::write(&gate, "").unwrap();
    eventually(Duration::from_secs(20), "the tasks to end", || {
        (runs(&ran).len() == 6).then_some(())
    });
    daemon.restart();
    let tasks = nu.json("1..7 | orch wait --timeout 1min | select status attempts");
    let expected: Vec<_> = (1..=7)
        .map(|i| {
            let status = if i % 2 == 1 && i < 7 {
                "failed"
            } else {
                "succeeded"
            };
            json!({"status": status, "attempts": 1})
        })
        .collect();
    assert_eq!(tasks, json!(expected), "{}", nu.task_logs());
    assert!(runs(&ran).values().all(|n| *n == 1));
    assert_eq!(nu.json("orch task 1 | get error"), json!("exit code 1"));
}

#[test]
fn a_timeout_and_a_cancel_issued_before_the_crash_still_take_effect() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // Task 1 outlives SIGTERM (its trap notes it, and a second sleep starts), so its
    // cancel waits out the grace period (3 s) before the KILL; the daemon dies in between.
    // Task 2's timeout passes while the daemon is down.
    let termed = daemon.dir().join("termed");
    nu.run(&format!(
        "orch submit [sh -c 'trap \"touch {}\" TERM; sleep 60; sleep 60'] | ignore; \
         orch submit --timeout 2sec sleep 60 | ignore",
        termed.display()
    ));
    wait_running(&nu, 2);
    let mut cancel = nu.spawn("orch cancel 1");
    eventually(
        Duration::from_secs(10),
        "the cancel to reach the task",
        || termed.exists().then_some(()),
    );
    daemon.kill9();
    let _ = cancel.wait();
    std::thread::sleep(Duration::from_secs(4));
    daemon.restart();
    let tasks = nu.json("orch wait 1 2 | select status attempts");
    assert_eq!(
        tasks,
        json!([{"status": "cancelled", "attempts": 1}, {"status": "failed", "attempts": 1}])
    );
    assert_eq!(
        nu.json("orch task 2 | get error"),
        json!("timed out after 2s")
    );
}

#[test]
fn a_workflow_step_survives_five_kills_without_starting_twice() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let step = |id: &str, deps: &[&str], wait: bool| {
        let hold = if wait {
            "; while not ('gate' | path exists) { sleep 20ms }"
        } else {
            ""
        };
        json!({"id": id, "type": "nu", "dependencies": deps,
               "nu": format!("\"{id}\\n\" | save -a runs.txt{hold}")})
    };
    let workflow = json!({"name": "held", "operations": [
        step("s1", &[], false), step("s2", &["s1"], true), step("s3", &["s2"], false),
    ]});
    let id = nu.json(&format!(
        "'{workflow}' | from json | orch workflow submit batch | get id"
    ));
    for _ in 0..5 {
        wait_running(&nu, 1);
        daemon.kill9();
        daemon.restart();
    }
    wait_running(&nu, 1);
    std::fs::write(daemon.dir().join("gate"), "").unwrap();
    let done = nu.json(&format!(
        "orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | get status"
    ));
    assert_eq!(done, "succeeded");
    let runs = std::fs::read_to_string(daemon.dir().join("runs.txt")).unwrap();
    assert_eq!(runs, "s1\ns2\ns3\n");
    let attempts = nu.json("orch tasks | get attempts | uniq");
    assert_eq!(attempts, json!([1]));
}

#[test]
fn twenty_kills_over_mixed_tasks_complete_no_command_twice() {
    let mut daemon = Daemon::start(&["--parallel", "10"]);
    let nu = daemon.nu();
    let ran = daemon.dir().join("ran.txt");
    // Pauses of 0 to 0.9 s; every third task depends on the one before it.
    nu.run(&format!(
        "1..120 | each {{|i| {{command: [sh -c $'sleep 0.($i mod 10); echo $ORCH_TASK_ID >> {}'], \
         after: (if $i mod 3 == 0 {{ [($i - 1)] }} else {{ [] }}), label: m, retries: 2, backoff: 10ms}} }} \
         | orch submit | ignore",
        ran.display()
    ));
    for round in 1..=20usize {
        eventually(Duration::from_secs(60), "progress before the kill", || {
            (runs(&ran).len() >= round * 5).then_some(())
        });
        daemon.kill9();
        daemon.restart();
    }
    // Every task succeeds. (A rare attempt may still fail to start and be retried, which
    // runs nothing twice.)
    let statuses =
        nu.json("orch tasks --label m | get id | orch wait --timeout 2min | get status | uniq");
    assert_eq!(statuses, json!(["succeeded"]));
    let runs = runs(&ran);
    assert_eq!(runs.len(), 120);
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
}

#[test]
fn one_supervisor_serves_every_attempt_and_its_death_interrupts_them_only() {
    let daemon = Daemon::start(&["--parallel", "4"]);
    let nu = daemon.nu();
    nu.run("1..3 | each { {command: [sleep 30], retries: 1, backoff: 10ms, label: long} } | orch submit | ignore");
    wait_running(&nu, 3);
    let pids = supervisor_pids(&daemon.data_dir());
    assert_eq!(pids.len(), 1, "one supervisor for the data dir: {pids:?}");
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pids[0], libc::SIGKILL);
    }
    // Its attempts are interrupted and tried again under a new supervisor.
    eventually(
        Duration::from_secs(30),
        "the second attempts to run",
        || {
            let attempts =
                nu.json("orch tasks --label long | where status == running | get attempts | uniq");
            (attempts == json!([2])).then_some(())
        },
    );
    let now = supervisor_pids(&daemon.data_dir());
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0], pids[0]);
    let events = nu.json("orch task 1 | get error");
    assert_eq!(
        events,
        json!(null),
        "the task runs again, with no error yet"
    );
    let quick = nu.json("orch submit --wait echo hi | get status");
    assert_eq!(quick, json!("succeeded"));
}

#[test]
fn outcomes_outlive_the_supervisor_that_recorded_them() {
    let mut daemon = Daemon::start(&["--parallel", "4"]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    nu.run(&format!(
        "1..3 | each {{|i| {{command: [sh -c $'while [ ! -f {} ]; do sleep 0.02; done; exit ($i - 1)'], label: g}} }} | orch submit | ignore",
        gate.display()
    ));
    wait_running(&nu, 3);
    daemon.kill9();
    std::fs::write(&gate, "").unwrap();
    // With nothing left to run and no daemon, the supervisor writes its journal and exits.
    eventually(Duration::from_secs(20), "the supervisor to exit", || {
        supervisor_pids(&daemon.data_dir()).is_empty().then_some(())
    });
    assert!(daemon.data_dir().join("supervisor/ended.json").exists());
    daemon.restart();
    let tasks = nu.json("1..3 | orch wait --timeout 1min | select status attempts exit_code");
    assert_eq!(
        tasks,
        json!([
            {"status": "succeeded", "attempts": 1, "exit_code": 0},
            {"status": "failed", "attempts": 1, "exit_code": 1},
            {"status": "failed", "attempts": 1, "exit_code": 2},
        ])
    );
    // Once committed, the outcomes are released: the journal goes.
    eventually(Duration::from_secs(10), "the journal to be emptied", || {
        (!daemon.data_dir().join("supervisor/ended.json").exists()).then_some(())
    });
}

#[test]
fn a_supervisor_whose_data_dir_is_gone_stops_its_tasks() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let marker = format!("sleep 4{}", std::process::id() % 1000 + 1000);
    nu.run(&format!("orch submit [sh -c '{marker}'] | ignore"));
    wait_running(&nu, 1);
    assert!(!pids_matching(&marker).is_empty());
    daemon.kill9();
    std::fs::remove_dir_all(daemon.data_dir()).unwrap();
    eventually(
        Duration::from_secs(15),
        "the task and its supervisor to stop",
        || {
            (pids_matching(&marker).is_empty() && supervisor_pids(&daemon.data_dir()).is_empty())
                .then_some(())
        },
    );
}

#[test]
fn with_a_grace_period_a_supervisor_left_alone_cancels_its_tasks() {
    let mut daemon = Daemon::start(&["--supervisor-grace", "1s"]);
    let nu = daemon.nu();
    nu.run("orch submit sleep 60 | ignore");
    wait_running(&nu, 1);
    daemon.kill9();
    std::thread::sleep(Duration::from_secs(4));
    daemon.restart();
    let task = nu.json("orch wait 1 | select status attempts");
    assert_eq!(task, json!([{"status": "cancelled", "attempts": 1}]));
}

#[test]
fn another_client_on_the_supervisors_socket_changes_nothing() {
    use std::io::{Read as _, Write as _};
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("orch submit [sh -c 'sleep 2; echo done'] | ignore");
    wait_running(&nu, 1);
    // A second connection while the daemon's is open is refused (closed at once), and
    // whatever it sends is not read.
    let socket = daemon.data_dir().join("supervisor/sock");
    let mut intruder = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let _ = intruder.write_all(b"{\"do\":\"discard\",\"id\":1,\"attempt\":1}\nnot json\n");
    intruder
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = intruder.read_to_end(&mut answer);
    assert!(answer.is_empty(), "no hello for a second client");
    let task = nu.json("orch wait 1 | select status attempts");
    assert_eq!(task, json!([{"status": "succeeded", "attempts": 1}]));
    assert_eq!(nu.json("orch logs 1"), json!("done\n"));
}
