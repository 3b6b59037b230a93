//! Every change request is recorded (secrets redacted), and tampering with the redb file
//! (an edit, a deletion, a reordering, a removed tail) is detected.

use orch_e2e::Daemon;
use serde_json::json;

use super::store_file::{AUDIT, Table, expect_broken, rows, tamper, verify};

#[test]
fn change_requests_are_recorded_and_tampering_is_detected() {
    let port = orch_e2e::free_port();
    let mut daemon = Daemon::start(&["--port", &port.to_string()]);
    let nu = daemon.nu();
    nu.run("orch submit --env {DB_PASSWORD: hunter2, REGION: eu} [sh -c 'sleep 60'] | ignore");
    let _ = nu.try_run("orch submit --after 99 true");
    let _ = nu.try_run("orch cancel 42");
    nu.run("orch submit true | ignore; orch cancel 1 | ignore; orch retry 1 | ignore");
    let log = nu.json("orch audit | reverse | select seq action ok outcome");
    assert_eq!(
        log,
        json!([
            {"seq": 1, "action": "submit", "ok": true, "outcome": "task 1"},
            {"seq": 2, "action": "submit", "ok": false, "outcome": "task #0 depends on task 99, which does not exist"},
            {"seq": 3, "action": "cancel", "ok": false, "outcome": "there is no task 42"},
            {"seq": 4, "action": "submit", "ok": true, "outcome": "task 2"},
            {"seq": 5, "action": "cancel", "ok": true, "outcome": "task 1: stopping its running attempt"},
            {"seq": 6, "action": "retry", "ok": true, "outcome": "task 1 queued again"},
        ])
    );
    let first =
        nu.json("orch audit --action submit | last | select uid interface params.tasks.0.env");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        first,
        json!({"uid": uid, "interface": "socket", "params.tasks.0.env": {"DB_PASSWORD": "[redacted]", "REGION": "eu"}})
    );
    nu.run("orch daemon stop | ignore");
    daemon.kill9();
    daemon.restart();
    assert_eq!(
        verify(&daemon, &daemon.nu(), port),
        json!({"intact": true, "entries": 7, "archived": 0, "bad_seq": null, "problem": null, "segments": []})
    );
    assert_eq!(nu.json("orch audit --limit 1 | get 0.action"), "shutdown");

    // From here the daemon is stopped between checks: each check tampers with the file,
    // starts the daemon, expects the problem, stops it and restores the entries.
    daemon.kill9();
    let originals = rows(&daemon, AUDIT);
    let check = |daemon: &mut Daemon, change: &dyn Fn(&mut Table), bad: u64, words: &str| {
        tamper(daemon, AUDIT, |t| change(t));
        expect_broken(daemon, port, bad, words);
        tamper(daemon, AUDIT, |t| {
            for (seq, body) in &originals {
                t.insert(*seq, body.as_slice()).unwrap();
            }
        });
    };
    let edited = String::from_utf8(originals[&2].clone())
        .unwrap()
        .replace("does not exist", "was fine");
    check(
        &mut daemon,
        &|t| {
            t.insert(2, edited.as_bytes()).unwrap();
        },
        2,
        "was altered",
    );
    check(
        &mut daemon,
        &|t| {
            t.remove(3).unwrap();
        },
        3,
        "entry 3 is missing",
    );
    check(
        &mut daemon,
        &|t| {
            t.insert(2, originals[&4].as_slice()).unwrap();
            t.insert(4, originals[&2].as_slice()).unwrap();
        },
        2,
        "were moved",
    );
    check(
        &mut daemon,
        &|t| {
            t.remove(7).unwrap();
        },
        7,
        "removed from the end",
    );
    // Restored, the log verifies again.
    daemon.restart();
    assert_eq!(verify(&daemon, &daemon.nu(), port)["intact"], true);
}
