//! The audit tables of a stopped daemon's database, read and changed directly (as someone
//! with access to the file could), and the checks that go with them. What the daemon
//! committed after its last checkpoint is in the store's journal: `provisioning-orchestrator
//! checkpoint` folds it into the file first, as an operator does before reading the file.

use std::collections::BTreeMap;

use orch_e2e::{Daemon, Nu};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;

/// The live log: seq → entry (JSON).
pub const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
/// The archived segments: first seq → segment (JSON).
pub const SEGMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_segments");

/// A table of the database, open for writing.
pub type Table<'t> = redb::Table<'t, u64, &'static [u8]>;

fn database(daemon: &Daemon) -> Database {
    if let Err(e) = orch_e2e::checkpoint_tool(&daemon.data_dir()) {
        panic!("the checkpoint tool: {e}");
    }
    Database::open(daemon.data_dir().join("orchestrator.redb")).expect("the daemon is stopped")
}

/// Changes `table` of a stopped daemon's database.
pub fn tamper(
    daemon: &Daemon,
    table: TableDefinition<u64, &[u8]>,
    change: impl FnOnce(&mut Table),
) {
    let db = database(daemon);
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(table).unwrap();
        change(&mut table);
    }
    txn.commit().unwrap();
}

/// Every row of `table` of a stopped daemon's database, as stored.
pub fn rows(daemon: &Daemon, table: TableDefinition<u64, &[u8]>) -> BTreeMap<u64, Vec<u8>> {
    let db = database(daemon);
    let txn = db.begin_read().unwrap();
    let Ok(table) = txn.open_table(table) else {
        return BTreeMap::new();
    };
    table
        .iter()
        .unwrap()
        .map(|row| {
            let (key, body) = row.unwrap();
            (key.value(), body.value().to_vec())
        })
        .collect()
}

/// A stored row as JSON.
pub fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("rows are JSON")
}

/// `GET <path>` on the daemon's HTTP `port`, as its admin.
pub fn http_get(daemon: &Daemon, port: u16, path: &str) -> Value {
    let admin = orch_e2e::http::token(daemon, "admin");
    let out = std::process::Command::new("curl")
        .args(["-s", "-H", &format!("Authorization: Bearer {admin}")])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `orch audit verify`, with `GET /audit/verify` (on `port`) checked to agree on whether
/// the log is intact and where it is not.
pub fn verify(daemon: &Daemon, nu: &Nu, port: u16) -> Value {
    let report = nu.json("orch audit verify");
    let http = http_get(daemon, port, "/audit/verify");
    for field in ["intact", "entries", "archived", "bad_seq", "problem"] {
        let over_http = http.get(field).unwrap_or(&Value::Null);
        assert_eq!(
            over_http, &report[field],
            "GET /audit/verify agrees on {field}"
        );
    }
    report
}

/// Restarts the stopped daemon, checks that the log is found broken at `bad` with
/// `words` in the problem, and stops it again.
pub fn expect_broken(daemon: &mut Daemon, port: u16, bad: u64, words: &str) {
    daemon.restart();
    let report = verify(daemon, &daemon.nu(), port);
    daemon.kill9();
    assert_eq!(report["intact"], false, "{report}");
    assert_eq!(report["bad_seq"], bad, "{report}");
    let problem = report["problem"].as_str().unwrap();
    assert!(problem.contains(words), "{problem}");
}
