//! Per-label retentions, longer and shorter than the default, `never`, and bad values
//! refused with the flag and the value named.

use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use serde_json::json;

use super::task_ids;

#[test]
fn a_label_keeps_its_tasks_shorter_or_longer_than_the_default() {
    // Shorter: `ci` goes after a second while the default keeps the rest an hour.
    let mut daemon = Daemon::start(&["--retain-finished", "1h", "--retain-label", "ci=1s"]);
    let nu = daemon.nu();
    nu.run(
        "orch submit echo plain | ignore; orch submit --label ci echo ci | ignore; \
         orch submit --label servers echo servers | ignore; \
         orch submit --label pinned echo pinned | ignore; orch wait 1 2 3 4 | ignore",
    );
    eventually(Duration::from_secs(20), "the ci task removed", || {
        (!task_ids(&nu).contains(&2)).then_some(())
    });
    assert_eq!(task_ids(&nu), [1, 3, 4].into());
    assert_eq!(
        nu.json("orch health | get retention | select finished labels events"),
        json!({"finished": "1h", "labels": {"ci": "1s"}, "events": "never"})
    );
    // Longer: the default is a second, `servers` an hour and `pinned` for ever.
    daemon.kill9();
    daemon.set_args(&[
        "--retain-finished",
        "1s",
        "--retain-label",
        "servers=1h",
        "--retain-label",
        "pinned=never",
    ]);
    daemon.restart();
    eventually(Duration::from_secs(20), "the plain task removed", || {
        (!task_ids(&nu).contains(&1)).then_some(())
    });
    assert_eq!(task_ids(&nu), [3, 4].into());
    let logs = super::log_ids(&daemon.data_dir());
    assert_eq!(logs, [3, 4].into(), "the removed tasks' logs are gone");
}

#[test]
fn a_bad_retention_is_refused_naming_the_flag_and_the_value() {
    let daemon = Daemon::start(&[]);
    for (flag, value, says) in [
        ("--retain-finished", "soon", "30d"),
        ("--retain-events", "0s", "longer than zero"),
        ("--retain-label", "servers", "LABEL=RETENTION"),
    ] {
        let out = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
            .args(["--data-dir", "/nonexistent/never-created", flag, value])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag) && err.contains(value) && err.contains(says),
            "{err}"
        );
    }
    // Through `orch daemon start` too: the daemon's refusal reaches the shell.
    let elsewhere = orch_e2e::Nu::new(daemon.dir(), &daemon.dir().join("other.sock"));
    let err = elsewhere
        .try_run("orch daemon start --data-dir other --retain-finished soon")
        .unwrap_err();
    assert!(
        err.contains("--retain-finished") && err.contains("soon"),
        "{err}"
    );
    // And good ones are passed on.
    let policy = elsewhere.json(
        "orch daemon start --data-dir other --retain-finished 2days --retain-label [a=1h b=never] --retain-events 7days | ignore; \
         orch health | get retention | reject events_removed_through",
    );
    assert_eq!(
        policy,
        json!({"finished": "2days", "labels": {"a": "1h", "b": "never"}, "events": "7days"})
    );
    elsewhere.run("orch daemon stop | ignore");
}
