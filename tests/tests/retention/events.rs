//! `--retain-events`: old events are removed (recorded in the audit log), a watch from a
//! removed point is refused naming `since` and where to resume, a watch of a finished
//! task whose events went ends, and the numbering goes on after the log was emptied.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

#[test]
fn old_events_go_and_a_watch_from_before_them_is_refused_clearly() {
    let mut daemon = Daemon::start(&["--retain-events", "1s"]);
    let nu = daemon.nu();
    nu.run("orch submit echo one | ignore; orch wait 1 | ignore");
    // Queued, started, succeeded: 3 events.
    let removed = eventually(Duration::from_secs(20), "the events removed", || {
        let through = nu.json("orch health | get retention.events_removed_through");
        (through.as_u64().unwrap() >= 3).then_some(through.as_u64().unwrap())
    });
    let err = nu.try_run("orch watch --since 1").unwrap_err();
    assert!(
        err.contains("since") && err.contains(&format!("events up to {removed} were removed")),
        "{err}"
    );
    // The finished task's history is gone: its watch ends rather than wait for ever.
    assert_eq!(nu.json("orch watch --task 1 | length"), json!(0));
    assert_eq!(nu.json("orch task 1 | get status"), "succeeded");
    let trims =
        nu.json("orch audit --action events_trim | get 0 | select interface params.retention");
    assert_eq!(
        trims,
        json!({"interface": "daemon", "params.retention": "1s"})
    );
    // After a kill -9 and a restart (without the retention, so that nothing more goes),
    // new events number on from the removed ones.
    daemon.kill9();
    daemon.set_args(&[]);
    daemon.restart();
    nu.run("orch submit true | ignore; orch wait 2 | ignore");
    let first = nu.json("orch watch --task 2 | first | get seq").as_u64();
    assert!(
        first.is_some_and(|seq| seq > removed),
        "{first:?} after {removed}"
    );
}
