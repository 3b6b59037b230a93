//! The audit log: every change request is recorded (secrets redacted), and tampering with
//! the redb file (an edit, a deletion, a reordering, a removed tail) is detected.

use orch_e2e::Daemon;
use redb::{Database, ReadableDatabase, TableDefinition};
use serde_json::json;

const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");

/// The audit table, open for writing.
type AuditTable<'t> = redb::Table<'t, u64, &'static [u8]>;

/// Changes the audit table of a stopped daemon's database.
fn tamper(daemon: &Daemon, change: impl FnOnce(&mut AuditTable)) {
    let db = Database::open(daemon.data_dir().join("orchestrator.redb")).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(AUDIT).unwrap();
        change(&mut table);
    }
    txn.commit().unwrap();
}

fn entry(daemon: &Daemon, seq: u64) -> Vec<u8> {
    let db = Database::open(daemon.data_dir().join("orchestrator.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(AUDIT).unwrap();
    table.get(seq).unwrap().unwrap().value().to_vec()
}

/// `GET /audit/verify` with the daemon's admin token.
fn http_verify(daemon: &Daemon, port: &str) -> serde_json::Value {
    let admin = orch_e2e::http::token(daemon, "admin");
    let out = std::process::Command::new("curl")
        .args(["-s", "-H", &format!("Authorization: Bearer {admin}")])
        .arg(format!("http://127.0.0.1:{port}/audit/verify"))
        .output()
        .unwrap();
    let mut report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The plugin shows absent fields as null.
    for field in ["bad_seq", "problem"] {
        report
            .as_object_mut()
            .unwrap()
            .entry(field)
            .or_insert(serde_json::Value::Null);
    }
    report
}

#[test]
fn change_requests_are_recorded_and_tampering_is_detected() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut daemon = Daemon::start(&["--port", &port]);
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
    let verify = |nu: &orch_e2e::Nu| nu.json("orch audit verify");
    assert_eq!(
        verify(&nu),
        json!({"intact": true, "entries": 7, "bad_seq": null, "problem": null})
    );
    assert_eq!(nu.json("orch audit --limit 1 | get 0.action"), "shutdown");

    // From here the daemon is stopped between checks: each check tampers with the file,
    // starts the daemon, expects the problem, stops it and restores the entries.
    daemon.kill9();
    let originals: Vec<Vec<u8>> = (1..=7).map(|s| entry(&daemon, s)).collect();
    let check = |daemon: &mut Daemon, change: &dyn Fn(&mut AuditTable), bad: u64, words: &str| {
        tamper(daemon, |t| change(t));
        daemon.restart();
        let report = verify(&daemon.nu());
        assert_eq!(
            http_verify(daemon, &port),
            report,
            "GET /audit/verify agrees"
        );
        daemon.kill9();
        assert_eq!(report["intact"], false, "{report}");
        assert_eq!(report["bad_seq"], bad, "{report}");
        assert!(
            report["problem"].as_str().unwrap().contains(words),
            "{report}"
        );
        tamper(daemon, |t| {
            for (i, body) in originals.iter().enumerate() {
                t.insert(i as u64 + 1, body.as_slice()).unwrap();
            }
        });
    };
    let edited = String::from_utf8(originals[1].clone())
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
            t.insert(2, originals[3].as_slice()).unwrap();
            t.insert(4, originals[1].as_slice()).unwrap();
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
    assert_eq!(verify(&daemon.nu())["intact"], true);
}
