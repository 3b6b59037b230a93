//! `--retain-audit`: the daemon archives the entries older than the retention by itself,
//! records each run with a checkpoint entry, leaves an idle log alone, and keeps what it
//! archived across a kill -9.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

use super::compaction::refused_cancels;

#[test]
fn the_daemon_archives_entries_past_the_retention_by_itself() {
    let mut daemon = Daemon::start(&["--retain-audit", "2s"]);
    let nu = daemon.nu();
    refused_cancels(&nu, 3);
    let segments = || {
        daemon
            .nu()
            .json("orch audit segments | select first last checkpoint")
    };
    let first = eventually(Duration::from_secs(15), "the retention's first run", || {
        let found = segments();
        (found != json!([])).then_some(found)
    });
    assert_eq!(first, json!([{"first": 1, "last": 3, "checkpoint": 4}]));
    let checkpoint = nu.json("orch audit | get 0 | select seq action interface params.retention");
    assert_eq!(
        checkpoint,
        json!({"seq": 4, "action": "audit_compact", "interface": "daemon", "params.retention": "2s"})
    );
    // Idle: the checkpoint alone is not archived again and again.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(segments(), first);
    refused_cancels(&nu, 1);
    let second = eventually(
        Duration::from_secs(15),
        "the retention's second run",
        || {
            let found = segments();
            (found.as_array().unwrap().len() == 2).then_some(found)
        },
    );
    assert_eq!(second[1], json!({"first": 4, "last": 5, "checkpoint": 6}));
    daemon.kill9();
    daemon.restart();
    let report = daemon
        .nu()
        .json("orch audit verify | select intact entries archived");
    assert_eq!(report, json!({"intact": true, "entries": 1, "archived": 5}));
}
