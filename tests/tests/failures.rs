//! Retries with backoff, timeouts that kill the whole process group, cancel and manual
//! retry, through the real `nu` and plugin.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn a_failing_task_is_retried_then_fails() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let out = daemon.dir().join("attempts.txt");
    let task = nu.json(&format!(
        "orch submit [sh -c 'echo $ORCH_ATTEMPT >> {}; exit 4'] --retries 2 --backoff 20ms \
         | orch wait | first | select status attempts exit_code error",
        out.display()
    ));
    assert_eq!(task["status"], "failed");
    assert_eq!(task["attempts"], 3);
    assert_eq!(task["exit_code"], 4);
    assert_eq!(task["error"], "exit code 4");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "1\n2\n3\n");
    let history = nu.json("orch task 1 | get attempt_history | get outcome");
    assert_eq!(
        history,
        serde_json::json!(["exit code 4", "exit code 4", "exit code 4"])
    );
    let events = nu.json("orch watch --task 1 | get event");
    assert_eq!(
        events,
        serde_json::json!([
            "submitted",
            "started",
            "attempt_failed",
            "queued",
            "started",
            "attempt_failed",
            "queued",
            "started",
            "failed"
        ])
    );
}

#[test]
fn a_flaky_task_succeeds_on_a_later_attempt() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let marker = daemon.dir().join("flaky");
    let task = nu.json(&format!(
        "orch submit [sh -c 'if [ -f {m} ]; then exit 0; else touch {m}; exit 1; fi'] --retries 3 --backoff 10ms \
         | orch wait | first | select status attempts",
        m = marker.display()
    ));
    assert_eq!(
        task,
        serde_json::json!({"status": "succeeded", "attempts": 2})
    );
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let pid_file = daemon.dir().join("background.pid");
    // The task starts a background grandchild, records its pid, then waits.
    let task = nu.json(&format!(
        "orch submit [sh -c 'sleep 60 & echo $! > {}; wait'] --timeout 1sec \
         | orch wait | first | select status error",
        pid_file.display()
    ));
    assert_eq!(task["status"], "failed");
    assert_eq!(task["error"], "timed out after 1s");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    eventually(Duration::from_secs(5), "the grandchild to die", || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for init to reap it.
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
}

#[test]
fn cancel_stops_a_running_task_and_its_dependants_and_retry_revives_them() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    let done = daemon.dir().join("done.txt");
    let script = format!(
        "while [ ! -f {g} ]; do sleep 0.01; done; echo ran >> {d}",
        g = gate.display(),
        d = done.display()
    );
    nu.run(&format!(
        "let a = (orch submit [sh -c '{script}']); orch submit --after $a.id [sh -c 'echo dependant >> {d}'] | ignore",
        d = done.display()
    ));
    eventually(Duration::from_secs(10), "task 1 to run", || {
        (nu.json("orch task 1 | get status") == "running").then_some(())
    });
    let cancelled = nu.json("orch cancel 1 | select status error");
    assert_eq!(
        cancelled,
        serde_json::json!({"status": "cancelled", "error": "cancelled"})
    );
    assert_eq!(nu.json("orch task 2 | get status"), "dependency_failed");
    let again = nu.run("try { orch cancel 1 } catch {|e| $e.rendered }");
    assert!(again.contains("already cancelled"), "{again}");
    assert_eq!(lines(&done), 0);
    std::fs::write(&gate, "").unwrap();
    let statuses = nu.json("orch retry 1 | ignore; orch wait 1 2 | get status");
    assert_eq!(statuses, serde_json::json!(["succeeded", "succeeded"]));
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "ran\ndependant\n");
    let attempts = nu.json("orch task 1 | get attempt_history.outcome");
    assert_eq!(attempts, serde_json::json!(["cancelled", "exit code 0"]));
}

#[test]
fn a_missing_program_fails_with_its_reason() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let task = nu.json("orch submit no-such-program-here | orch wait | first | get error");
    let error = task.as_str().unwrap();
    assert!(
        error.contains("could not start: no-such-program-here"),
        "{error}"
    );
    let log = nu.run("orch logs 1");
    assert!(log.contains("could not start the task"), "{log}");
}

#[test]
fn retrying_one_failed_dependency_keeps_a_dependant_failed_by_another() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let marker = daemon.dir().join("second-try");
    // A fails the first time only; D always fails; C needs both.
    let result = nu.json(&format!(
        "let a = (orch submit [sh -c 'if [ -f {m} ]; then exit 0; else touch {m}; exit 1; fi']); \
         let d = (orch submit false); \
         let c = (orch submit --after [$a.id $d.id] echo c); \
         orch wait $a.id $d.id $c.id | ignore; \
         orch retry $a.id | ignore; \
         orch wait --timeout 30sec $a.id $c.id | select id status error",
        m = marker.display()
    ));
    assert_eq!(
        result,
        serde_json::json!([
            {"id": 1, "status": "succeeded", "error": null},
            {"id": 3, "status": "dependency_failed", "error": "dependency 2 did not succeed"}
        ])
    );
}

#[test]
fn a_cancel_in_progress_survives_a_graceful_stop() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // The task survives SIGTERM (noting it in its log), so the cancel waits out the grace
    // period before SIGKILL.
    nu.run("orch submit [sh -c \"trap 'echo got-term' TERM; while true; do sleep 0.05; done\"] | ignore");
    eventually(Duration::from_secs(10), "task 1 to run", || {
        (nu.json("orch task 1 | get status") == "running").then_some(())
    });
    let mut cancel = nu.spawn("orch cancel 1 | get status");
    eventually(
        Duration::from_secs(10),
        "the cancel to signal the task",
        || nu.run("orch logs 1").contains("got-term").then_some(()),
    );
    let status = daemon.terminate();
    assert!(status.success(), "{status}");
    let _ = cancel.wait();
    daemon.restart();
    assert_eq!(nu.json("orch task 1 | get status"), "cancelled");
}

#[test]
fn resubmit_runs_a_copy_and_keeps_the_original() {
    let daemon = orch_e2e::Daemon::start(&[]);
    let nu = daemon.nu();
    let original = nu.json(
        "orch submit --label copy --priority 3 --params {n: 1} --nu 'print $params.n; exit 2' | get id",
    );
    assert_eq!(
        nu.json(&format!("orch wait {original} | get 0.status")),
        "failed"
    );
    let copy = nu.json(&format!("orch resubmit {original}"));
    assert_ne!(copy["id"], original);
    assert_eq!(
        (copy["label"].clone(), copy["priority"].clone()),
        ("copy".into(), 3.into())
    );
    let id = &copy["id"];
    assert_eq!(nu.json(&format!("orch wait {id} | get 0.status")), "failed");
    assert_eq!(nu.run(&format!("orch logs {id}")), "1\n");
    assert_eq!(
        nu.json(&format!("orch task {original} | get attempts")),
        1,
        "the original stays"
    );
    let several = nu.json("orch tasks --label copy | orch resubmit | length");
    assert_eq!(several, 2);
    let missing = nu.try_run("orch resubmit 999").unwrap_err();
    assert!(missing.contains("999"), "{missing}");
}
