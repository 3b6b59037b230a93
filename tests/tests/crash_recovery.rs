//! `kill -9` of the daemon mid-run, then a restart: nothing queued is lost, nothing that
//! succeeded runs again, interrupted attempts follow their retry policy, and processes
//! the dead daemon left behind are stopped. The tests about interrupted attempts run the
//! daemon with `--no-supervisor` (with supervisors, running attempts survive the kill:
//! see supervisor.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use orch_e2e::{Daemon, eventually};

fn ids(value: serde_json::Value) -> BTreeSet<u64> {
    serde_json::from_value(value).unwrap()
}

#[test]
fn kill_9_mid_run_loses_nothing_and_repeats_no_success() {
    let mut daemon = Daemon::start(&["--parallel", "4", "--no-supervisor"]);
    let nu = daemon.nu();
    let out = daemon.dir().join("ran.txt");
    let script = format!("sleep 0.2; echo $ORCH_TASK_ID >> {}", out.display());
    nu.run(&format!(
        "1..60 | each {{ {{command: [sh -c '{script}'], retries: 2, backoff: 10ms, label: crash}} }} | orch submit | ignore"
    ));
    eventually(Duration::from_secs(30), "ten successes", || {
        let n = nu
            .json("orch tasks --status succeeded | length")
            .as_u64()
            .unwrap();
        (n >= 10).then_some(())
    });
    let succeeded_before = ids(nu.json("orch tasks --status succeeded | get id"));
    let running_before = ids(nu.json("orch tasks --status running | get id"));
    daemon.kill9();
    assert!(
        !running_before.is_empty(),
        "some tasks were running at the kill"
    );

    daemon.restart();
    let final_statuses =
        nu.json("orch tasks --label crash | get id | orch wait --timeout 2min | get status | uniq");
    assert_eq!(final_statuses, serde_json::json!(["succeeded"]));
    let mut runs: BTreeMap<u64, usize> = BTreeMap::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        *runs.entry(line.parse().unwrap()).or_default() += 1;
    }
    assert_eq!(runs.len(), 60, "every task ran: {runs:?}");
    for id in &succeeded_before {
        assert_eq!(
            runs[id], 1,
            "task {id} succeeded before the crash and ran again"
        );
    }
    // A task running at the crash shows the interrupted attempt in its history.
    let interrupted = ids(nu.json(
        "orch tasks --label crash | get id | each {|id| orch task $id } \
         | where {|t| 'interrupted: the daemon stopped' in $t.attempt_history.outcome } | get id",
    ));
    let still_running: BTreeSet<u64> = running_before
        .difference(&succeeded_before)
        .copied()
        .collect();
    assert!(
        still_running.iter().any(|id| interrupted.contains(id)),
        "running at the kill: {still_running:?}, interrupted: {interrupted:?}"
    );
}

#[test]
fn an_interrupted_task_without_retries_fails_and_its_leftover_process_is_stopped() {
    let mut daemon = Daemon::start(&["--no-supervisor"]);
    let nu = daemon.nu();
    let pid_file = daemon.dir().join("leader.pid");
    nu.run(&format!(
        "orch submit [sh -c 'echo $$ > {}; sleep 60'] | ignore",
        pid_file.display()
    ));
    let pid = eventually(Duration::from_secs(10), "the task to start", || {
        let pid = std::fs::read_to_string(&pid_file).ok()?;
        Some(pid.trim().to_string()).filter(|p| !p.is_empty())
    });
    daemon.kill9();
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the orphan outlives the daemon"
    );

    daemon.restart();
    let task = nu.json("orch task 1 | select status error attempts");
    assert_eq!(
        task,
        serde_json::json!({"status": "failed", "error": "interrupted: the daemon stopped", "attempts": 1})
    );
    eventually(Duration::from_secs(5), "the orphan to be stopped", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
}

#[test]
fn graceful_stop_requeues_running_tasks_without_using_a_retry() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    nu.run(&format!(
        "orch submit [sh -c 'while [ ! -f {} ]; do sleep 0.01; done'] | ignore; orch submit --after 1 echo later | ignore",
        gate.display()
    ));
    eventually(Duration::from_secs(10), "task 1 to run", || {
        (nu.json("orch task 1 | get status") == "running").then_some(())
    });
    let status = daemon.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
    assert!(
        !daemon.socket().exists(),
        "the socket is removed on a clean exit"
    );

    daemon.restart();
    std::fs::write(&gate, "").unwrap();
    let tasks = nu.json("orch wait 1 2 | select status attempts");
    assert_eq!(
        tasks,
        serde_json::json!([{"status": "succeeded", "attempts": 2}, {"status": "succeeded", "attempts": 1}])
    );
    let outcomes = nu.json("orch task 1 | get attempt_history.outcome");
    assert_eq!(
        outcomes,
        serde_json::json!(["interrupted: the daemon stopped", "exit code 0"])
    );
}

#[test]
fn repeated_kill_9_during_a_burst_keeps_every_guarantee() {
    let mut daemon = Daemon::start(&["--parallel", "6"]);
    let nu = daemon.nu();
    let out = daemon.dir().join("ran.txt");
    // Half the tasks depend on the one before them, so releases are interrupted too.
    let script = format!("sleep 0.05; echo $ORCH_TASK_ID >> {}", out.display());
    nu.run(&format!(
        "1..150 | each {{|i| {{command: [sh -c '{script}'], retries: 5, backoff: 10ms, after: (if $i mod 2 == 0 {{ [($i - 1)] }} else {{ [] }})}} }} | orch submit | ignore"
    ));
    let count_runs = || {
        let mut runs: BTreeMap<u64, usize> = BTreeMap::new();
        for line in std::fs::read_to_string(&out).unwrap_or_default().lines() {
            *runs.entry(line.parse().unwrap()).or_default() += 1;
        }
        runs
    };
    // (tasks succeeded before a kill, how often each had run by then)
    let mut checkpoints = Vec::new();
    for round in 1..=3u64 {
        eventually(Duration::from_secs(60), "progress before the kill", || {
            let n = nu
                .json("orch tasks --status succeeded | length")
                .as_u64()
                .unwrap();
            (n >= round * 25).then_some(())
        });
        let succeeded = ids(nu.json("orch tasks --status succeeded | get id"));
        daemon.kill9();
        checkpoints.push((succeeded, count_runs()));
        daemon.restart();
    }
    let statuses = nu.json("1..150 | orch wait --timeout 2min | get status | uniq");
    assert_eq!(statuses, serde_json::json!(["succeeded"]));
    let runs = count_runs();
    assert_eq!(runs.len(), 150, "every task ran");
    // Nothing that had succeeded when the daemon was killed ran again afterwards. (An
    // attempt interrupted by a kill may have finished its work while the daemon was down,
    // so a task can appear twice; but never after its success was recorded.)
    for (succeeded, runs_then) in &checkpoints {
        for id in succeeded {
            assert_eq!(
                runs[id], runs_then[id],
                "task {id} succeeded before a kill and ran again"
            );
        }
    }
    // Dependencies held across the crashes: each even task finished after its odd one.
    let order: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let position = |id: u64| order.iter().position(|x| *x == id).unwrap();
    for even in (2..=150).step_by(2) {
        assert!(
            position(even - 1) < position(even),
            "task {even} ran before task {}",
            even - 1
        );
    }
}
