//! A workflow is removed as a unit (its record, steps, compensations and their logs),
//! and only once it and all its tasks are final and old enough.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

use super::{log_ids, task_ids};

#[test]
fn a_workflow_goes_as_a_unit_only_once_final_and_old_enough() {
    let daemon = Daemon::start(&["--retain-finished", "1s"]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    // a prints and has a compensation; b waits on the gate, then fails: a rollback runs
    // a's compensation.
    let b = format!(
        "while not ('{}' | path exists) {{ sleep 50ms }}; print b; exit 3",
        gate.display()
    );
    let workflow = json!({"name": "kept-while-live", "rollback_enabled": true, "operations": [
        {"id": "a", "type": "nu", "nu": "print a", "rollback": "print undo-a"},
        {"id": "b", "type": "nu", "nu": b, "dependencies": ["a"]},
    ]});
    let wf = nu.json(&format!(
        "'{workflow}' | from json | orch workflow submit batch | get id"
    ));
    let show = |field: &str| nu.json(&format!("orch workflow show {wf} | get {field}"));
    let a = show("step_list.0.task").as_u64().unwrap();
    let b = show("step_list.1.task").as_u64().unwrap();
    eventually(Duration::from_secs(20), "a done", || {
        (show("step_list.0.status") == "succeeded").then_some(())
    });
    // A standalone task finished after a is removed: a retention run has passed a
    // finished step long enough ago, and left the live workflow whole.
    let probe = nu.json("orch submit echo probe | get id").as_u64().unwrap();
    nu.run(&format!("orch wait {probe} | ignore"));
    eventually(Duration::from_secs(20), "the probe removed", || {
        (!task_ids(&nu).contains(&probe)).then_some(())
    });
    assert_eq!(task_ids(&nu), [a, b].into());
    assert_eq!(show("status"), "running");
    assert!(log_ids(&daemon.data_dir()).contains(&a));
    // b fails, a is compensated, the workflow is rolled back: then all of it goes.
    std::fs::write(&gate, "").unwrap();
    eventually(Duration::from_secs(30), "the workflow removed", || {
        nu.try_run(&format!("orch workflow show {wf}"))
            .is_err()
            .then_some(())
    });
    assert_eq!(task_ids(&nu), [].into());
    assert_eq!(
        log_ids(&daemon.data_dir()),
        [].into(),
        "steps' and compensation's logs"
    );
    let audited = nu
        .json("orch audit --action clean | where interface == daemon | get outcome | str join ','");
    assert!(
        audited
            .as_str()
            .unwrap()
            .contains("removed 3 tasks and 1 workflows"),
        "{audited}"
    );
}
