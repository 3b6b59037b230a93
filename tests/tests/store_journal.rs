//! The redb store's journal with the real daemon: what a `kill -9` leaves only in the
//! journal comes back at the next start; `provisioning-orchestrator checkpoint DIR` folds
//! it into the store file (so that the file alone holds every commit), refuses while a
//! daemon holds the store and refuses a directory without one; a clean stop leaves
//! nothing in the journal.

use orch_e2e::{Daemon, checkpoint_tool};
use redb::{ReadableDatabase, ReadableTableMetadata, TableDefinition};

const TASKS: TableDefinition<u64, &[u8]> = TableDefinition::new("tasks");

/// How many task records the store file alone holds.
fn tasks_in_file(daemon: &Daemon) -> u64 {
    let db = redb::Database::open(daemon.data_dir().join("orchestrator.redb")).unwrap();
    let txn = db.begin_read().unwrap();
    txn.open_table(TASKS).unwrap().len().unwrap()
}

#[test]
fn commits_a_kill_left_in_the_journal_come_back_and_the_checkpoint_tool_folds_them_in() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("1..5 | each { orch submit --wait true } | ignore");
    // A task that reports progress every 10 ms: each report is a commit, so the store is
    // never idle long enough for a checkpoint (50 ms) before the kill.
    let busy = nu.json(
        "(orch submit --nu 'for i in 0..100000 { print ({progress: ($i mod 100)} | to json -r); sleep 10ms }').id",
    );
    orch_e2e::eventually(std::time::Duration::from_secs(20), "progress", || {
        nu.json(&format!("orch task {busy} | get progress"))
            .is_number()
            .then_some(())
    });
    // Refused while the daemon holds the store.
    let error = checkpoint_tool(&daemon.data_dir()).expect_err("refused while the daemon runs");
    assert!(error.contains("already open"), "{error}");
    daemon.kill9();
    let report = checkpoint_tool(&daemon.data_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(report["applied"].as_u64() >= Some(1), "{report}");
    assert_eq!(tasks_in_file(&daemon), 6, "the file alone holds every task");
    // Folded once: nothing is left to apply, and nothing is applied twice.
    let again = checkpoint_tool(&daemon.data_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again["applied"], 0);
    daemon.restart();
    let nu = daemon.nu();
    assert_eq!(
        nu.json("orch tasks | where status == succeeded | length"),
        5
    );
    assert_eq!(nu.json("orch audit verify | get intact"), true);
    nu.run(&format!("orch cancel {busy} | ignore"));
}

#[test]
fn a_kill_before_any_checkpoint_loses_no_task_and_a_clean_stop_leaves_the_journal_empty() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // Submitted and finished in a burst: no pause long enough for a checkpoint.
    nu.run("1..20 | each { orch submit true | get id } | orch wait | ignore");
    daemon.kill9();
    daemon.restart();
    let nu = daemon.nu();
    assert_eq!(
        nu.json("orch tasks | where status == succeeded | length"),
        20
    );
    nu.run("orch submit --wait true | ignore");
    daemon.terminate();
    // A clean stop checkpointed: the file alone has all 21, and the tool applies nothing.
    let report = checkpoint_tool(&daemon.data_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report["applied"], 0);
    assert_eq!(tasks_in_file(&daemon), 21);
}

#[test]
fn the_checkpoint_tool_refuses_a_directory_without_a_store() {
    let empty = tempfile::tempdir().unwrap();
    let error = checkpoint_tool(empty.path()).expect_err("refused without a store");
    assert!(error.contains("no store there"), "{error}");
    assert!(
        !empty.path().join("orchestrator.redb").exists(),
        "no store was made"
    );
}
