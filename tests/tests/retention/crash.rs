//! A kill -9 in the middle of a retention run over a backlog of several batches: after
//! the restart exactly what should go is gone (no more, nothing twice), with no log left
//! behind, and every batch is in the audit log once.

use std::time::{Duration, Instant};

use orch_e2e::{Daemon, eventually};
use orch_protocol::{Request, Response};

use super::{audited_removals, log_ids, task_ids};

/// More than two batches of finished tasks.
const BACKLOG: u64 = 22_000;

/// How many tasks the store holds, asked straight over the socket (quicker than `nu`, to
/// catch the run between two batches).
fn stored(daemon: &Daemon) -> Option<u64> {
    let mut client = orch_protocol::Client::connect(&daemon.socket(), "e2e").ok()?;
    match client.call(&Request::Health).ok()? {
        Response::Health(report) => Some(report.counts.values().sum()),
        _ => None,
    }
}

#[test]
fn kill_9_mid_retention_then_restart_removes_exactly_what_it_should() {
    let mut daemon = Daemon::start(&["--parallel", "8"]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    // 1-20 print (so they have logs); 21 is pinned by its label; 22 waits on a gate and
    // needs 1, which must stay; the backlog waits on 23, cancelled: it never runs, and is
    // final at once (dependency_failed).
    nu.run(&format!(
        "1..20 | each {{|i| {{command: [echo $i]}} }} | orch submit | ignore; \
         orch submit --label pinned echo pinned | ignore; \
         [{{command: [sh -c 'while [ ! -f {} ]; do sleep 0.05; done; echo done'], after: [1], retries: 5}}] | orch submit | ignore; \
         orch submit sleep 1000 | ignore; \
         1..{BACKLOG} | each {{|i| {{command: [true], after: [23]}} }} | orch submit | ignore; \
         orch wait ...(1..21 | each {{|i| $i }}) | ignore; orch cancel 23 | ignore",
        gate.display()
    ));
    let total = BACKLOG + 23;
    eventually(Duration::from_secs(60), "the backlog final", || {
        let final_ = nu.json("orch health | get tasks.dependency_failed");
        (final_ == BACKLOG).then_some(())
    });
    assert!(log_ids(&daemon.data_dir()).is_superset(&(1..=21).collect()));
    daemon.kill9();
    daemon.set_args(&[
        "--parallel",
        "8",
        "--retain-finished",
        "1s",
        "--retain-label",
        "pinned=never",
    ]);
    daemon.restart();
    // Killed as soon as the first batch is durable, before the last one is.
    let deadline = Instant::now() + Duration::from_secs(120);
    let at_kill = loop {
        let now = stored(&daemon).unwrap_or(total);
        if now < total {
            break now;
        }
        assert!(Instant::now() < deadline, "the retention did not start");
    };
    daemon.kill9();
    assert!(at_kill > 3, "killed mid-run ({at_kill} left)");
    daemon.restart();
    eventually(Duration::from_secs(120), "the rest removed", || {
        (stored(&daemon) == Some(3)).then_some(())
    });
    assert_eq!(task_ids(&nu), [1, 21, 22].into());
    // The logs of the removed tasks are gone, those of the kept ones stay.
    eventually(Duration::from_secs(20), "the logs deleted", || {
        let logs = log_ids(&daemon.data_dir());
        (logs.contains(&1) && logs.contains(&21) && logs.is_subset(&[1, 21, 22].into()))
            .then_some(())
    });
    // Every removal is in the audit log once, with the daemon as its actor.
    assert_eq!(audited_removals(&nu), total - 3);
    assert_eq!(
        nu.json("orch audit verify | get intact"),
        serde_json::Value::Bool(true)
    );
    // Task 1 goes once task 22 no longer needs it.
    std::fs::write(&gate, "").unwrap();
    eventually(Duration::from_secs(30), "1 and 22 removed", || {
        (task_ids(&nu) == [21].into()).then_some(())
    });
}
