//! Schedules through the real plugin and daemon: one-second patterns that submit tasks
//! exactly once per time, a pause, a kill -9 with the catch-up policies (skip, once), a
//! scheduled batch workflow, the refusals, and the completions of schedule names.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::{Value, json};

/// The row of schedule `name`.
fn row(nu: &orch_e2e::Nu, name: &str) -> Value {
    nu.json(&format!(
        "orch schedule list | where name == {name} | first"
    ))
}

/// How many tasks carry `label`.
fn tasks_labelled(nu: &orch_e2e::Nu, label: &str) -> u64 {
    nu.json(&format!("orch tasks --label {label} --limit 1000 | length"))
        .as_u64()
        .unwrap()
}

#[test]
fn one_second_schedules_run_once_per_time_and_catch_up_by_policy_after_a_kill_9() {
    let mut daemon = Daemon::start(&["--parallel", "8"]);
    let nu = daemon.nu();
    let added = nu.json("orch schedule add skipper '* * * * * *' --label skipper true");
    assert_eq!(added["timezone"], "UTC");
    assert_eq!(added["catch_up"], "skip");
    nu.run("orch schedule add onceler '* * * * * *' --catch-up once --label onceler true | ignore");
    eventually(Duration::from_secs(15), "both ran twice", || {
        (row(&nu, "skipper")["runs"].as_u64() >= Some(2)
            && row(&nu, "onceler")["runs"].as_u64() >= Some(2))
        .then_some(())
    });
    // Paused: nothing more is submitted.
    nu.run("orch schedule pause skipper | ignore");
    let paused_runs = row(&nu, "skipper")["runs"].clone();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(row(&nu, "skipper")["runs"], paused_runs);
    nu.run("orch schedule resume skipper | ignore");
    daemon.kill9();
    std::thread::sleep(Duration::from_millis(3500));
    daemon.restart();
    eventually(Duration::from_secs(15), "both run again", || {
        let (s, o) = (row(&nu, "skipper"), row(&nu, "onceler"));
        (s["skipped"].as_u64() >= Some(3) && o["runs"].as_u64() > Some(3)).then_some(())
    });
    let onceler = row(&nu, "onceler");
    assert_eq!(onceler["skipped"], 0, "once: one run for the missed times");
    nu.run("orch schedule pause skipper | ignore");
    nu.run("orch schedule pause onceler | ignore");
    // Exactly once: each run is one task, and no time ran twice.
    for name in ["skipper", "onceler"] {
        let schedule = row(&nu, name);
        let runs = schedule["runs"].as_u64().unwrap();
        assert_eq!(tasks_labelled(&nu, name), runs, "{name}: {schedule:#}");
        let audit = nu.json(&format!(
            "orch audit --limit 1000 | where action == schedule_run and params.name == {name} | get params.slot | uniq | length"
        ));
        assert_eq!(audit.as_u64(), Some(runs), "{name}: each time ran once");
    }
    // The downtime's times: skipped by one, one run for them by the other.
    let next = nu.json("orch schedule next onceler --count 3 | length");
    assert_eq!(next, 3);
    let removed = nu.json("orch schedule remove skipper");
    assert_eq!(removed["name"], "skipper");
    assert_eq!(nu.json("orch schedule list | get name"), json!(["onceler"]));
}

#[test]
fn a_scheduled_batch_workflow_runs_and_bad_schedules_are_refused() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let workflow = "{kind: batch, workflow: {name: nightly, operations: [{id: a, type: command, command: ['true']}]}}";
    let added = nu.json(&format!(
        "orch schedule add nightly '* * * * * *' --workflow {workflow} --tz Europe/Berlin"
    ));
    assert_eq!(
        (added["kind"].clone(), added["timezone"].clone()),
        (json!("batch"), json!("Europe/Berlin"))
    );
    let id = eventually(Duration::from_secs(15), "a workflow submitted", || {
        row(&nu, "nightly")["last_id"].as_u64()
    });
    nu.run("orch schedule pause nightly | ignore");
    let shown = nu.json(&format!("orch workflow show {id} | get name"));
    assert_eq!(shown, "nightly");
    let errors = [
        ("orch schedule add x 'every day' true", "not a cron pattern"),
        (
            "orch schedule add x '0 3 * * *' --tz Mars/Base true",
            "IANA",
        ),
        (
            "orch schedule add nightly '0 3 * * *' true",
            "exists already",
        ),
        ("orch schedule add '../x' '0 3 * * *' true", "schedule name"),
        (
            "orch schedule add x '0 3 * * *' --catch-up sometimes true",
            "skip, once or all",
        ),
        ("orch schedule add x '0 3 * * *'", "nothing to run"),
        ("orch schedule add x '0 0 0 30 2 *' true", "no time to come"),
        (
            "orch schedule add x '0 3 * * *' --group nope true",
            "does not exist",
        ),
        ("orch schedule pause nope", "does not exist"),
        (
            "orch schedule add x '0 3 * * *' --workflow {kind: servers, infra: nope}",
            "nope",
        ),
    ];
    for (script, expected) in errors {
        let error = nu.try_run(script).unwrap_err();
        assert!(error.contains(expected), "{script}: {error}");
    }
    assert_eq!(nu.json("orch schedule list | get name"), json!(["nightly"]));
    let names = nu.complete("orch schedule resume ");
    assert_eq!(names, vec!["nightly".to_string()]);
}
