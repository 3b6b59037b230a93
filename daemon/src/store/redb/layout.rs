//! The layout version of a store file, and the migration of an older layout at open.
//!
//! - Layout 1 (no `layout` key in `meta`): the tables before the label index.
//! - Layout 2: adds `tasks_by_label`, `workflow_status` and `workflow_counts`, filled from
//!   every record by the migration.
//! - Layout 3: tasks may be delayed (status code 8) and carry a start time, which a daemon
//!   of an earlier layout cannot read: nothing to migrate, the version makes it refuse
//!   the file.
//! - Layout 4: tasks may name a group, and running ones be paused; the `settings` table
//!   holds the queue's controls, `schedules` the schedules, `notifiers` and
//!   `notify_outbox` the notifications. Nothing to migrate (the tables
//!   are made at open); the version makes an earlier daemon refuse the file.
//! - Layout 5: tasks may be stashed (status code 9), which a daemon of an earlier layout
//!   cannot read: nothing to migrate, the version makes it refuse the file.
//! - Layout 6: tasks may take input (a spec's `stdin`), which a daemon of an earlier
//!   layout cannot read: nothing to migrate, the version makes it refuse the file.
//! - Layout 7: the event log may hold `env` events (a test environment's changes), which
//!   a daemon of an earlier layout cannot read: nothing to migrate, the version makes it
//!   refuse the file.
//! - Layout 8: the commits since the last checkpoint may be only in the journal beside
//!   the file (`<file>.journal`, see `journal`), which a daemon of an earlier layout
//!   would not apply: nothing to migrate, the version makes it refuse the file.
//!
//! A migration runs in one write transaction: a crash during it leaves the file at its
//! old layout, migrated again at the next open. A file of a newer layout is refused (this
//! daemon would not keep its indexes up to date).

use ::redb::{Database, ReadableTable, ReadableTableMetadata};
use orch_protocol::{Task, Workflow};

use super::{BY_LABEL, META, TASKS, WORKFLOWS, backend, decode};
use crate::store::StoreError;

/// The layout this daemon writes.
pub(super) const CURRENT: u64 = 8;

/// The `meta` key holding the layout version.
const LAYOUT: &str = "layout";

/// What [`upgrade`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Upgrade {
    /// The file already had the current layout.
    Current,
    /// The file was migrated from this layout.
    Migrated(u64),
}

/// Brings the file to [`CURRENT`], or refuses a newer layout (as the problem to report).
pub(super) fn upgrade(db: &Database) -> Result<Result<Upgrade, String>, StoreError> {
    let txn = db.begin_write().map_err(backend)?;
    let found = {
        let meta = txn.open_table(META).map_err(backend)?;
        meta.get(LAYOUT).map_err(backend)?.map(|v| v.value())
    };
    let from = match found {
        Some(CURRENT) => return Ok(Ok(Upgrade::Current)),
        Some(newer) if newer > CURRENT => {
            return Ok(Err(format!(
                "it has store layout {newer}, written by a newer daemon; this one reads layouts up to {CURRENT}"
            )));
        }
        Some(older) => older,
        None => 1,
    };
    let empty = txn
        .open_table(TASKS)
        .map_err(backend)?
        .is_empty()
        .map_err(backend)?;
    if from < 2 {
        fill_label_index(&txn)?;
        count_workflows(&txn)?;
    }
    txn.open_table(META)
        .map_err(backend)?
        .insert(LAYOUT, CURRENT)
        .map_err(backend)?;
    txn.commit().map_err(backend)?;
    // A new file (or one that never held a task) has nothing to migrate.
    Ok(Ok(if empty {
        Upgrade::Current
    } else {
        Upgrade::Migrated(from)
    }))
}

/// Counts every workflow record's status.
fn count_workflows(txn: &::redb::WriteTransaction) -> Result<(), StoreError> {
    let workflows = txn.open_table(WORKFLOWS).map_err(backend)?;
    for entry in workflows.iter().map_err(backend)? {
        let (id, body) = entry.map_err(backend)?;
        let id = id.value();
        let workflow: Workflow = decode(&format!("workflow {id}"), body.value())?;
        super::write::count_workflow(txn, id, workflow.state.status().as_str()).map_err(backend)?;
    }
    Ok(())
}

/// Indexes every task record's label.
fn fill_label_index(txn: &::redb::WriteTransaction) -> Result<(), StoreError> {
    let tasks = txn.open_table(TASKS).map_err(backend)?;
    let mut by_label = txn.open_table(BY_LABEL).map_err(backend)?;
    for entry in tasks.iter().map_err(backend)? {
        let (id, body) = entry.map_err(backend)?;
        let id = id.value();
        let task: Task = decode(&format!("task {id}"), body.value())?;
        if let Some(label) = &task.spec.label {
            by_label.insert((label.as_str(), id), ()).map_err(backend)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use orch_protocol::{Task, TaskFilter, TaskSpec, TaskState};

    use ::redb::ReadableDatabase;

    use super::super::{BY_STATUS, COUNTS, QUEUE, RedbStore};
    use super::*;
    use crate::store::Store;

    fn labelled(id: u64, label: &str) -> Task {
        let mut spec = TaskSpec::command("true", vec![]);
        spec.label = Some(label.into());
        Task {
            id,
            spec,
            state: TaskState::Queued { since: Utc::now() },
            submitted_at: Utc::now(),
            attempts: vec![],
            attempts_before_retry: 0,
            progress: None,
        }
    }

    /// A file as a layout-1 daemon left it: queued tasks, no label index, no layout key.
    fn write_v1(path: &std::path::Path, tasks: &[Task]) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut records = txn.open_table(TASKS).unwrap();
            let mut by_status = txn.open_table(BY_STATUS).unwrap();
            let mut queue = txn.open_table(QUEUE).unwrap();
            let mut counts = txn.open_table(COUNTS).unwrap();
            for task in tasks {
                let body = serde_json::to_vec(task).unwrap();
                records.insert(task.id, body.as_slice()).unwrap();
                by_status
                    .insert((task.state.status().code(), task.id), ())
                    .unwrap();
                queue.insert((0, task.id), ()).unwrap();
            }
            let code = orch_protocol::TaskStatus::Queued.code();
            counts.insert(code, tasks.len() as u64).unwrap();
        }
        txn.commit().unwrap();
    }

    #[test]
    fn a_layout_1_store_is_migrated_at_open_and_its_labels_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        write_v1(
            &path,
            &[labelled(1, "a"), labelled(2, "b"), labelled(3, "a")],
        );
        let store = RedbStore::open(&path).unwrap();
        let filter = TaskFilter {
            label: Some("a".into()),
            ..TaskFilter::default()
        };
        let ids: Vec<u64> = store.list(&filter).unwrap().iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![3, 1]);
        assert_eq!(store.load().unwrap().queue, vec![(1, 0), (2, 0), (3, 0)]);
        assert_eq!(upgrade(&store.db).unwrap(), Ok(Upgrade::Current));
    }

    #[test]
    fn a_store_of_a_newer_layout_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        drop(RedbStore::open(&path).unwrap());
        {
            let db = Database::open(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(META)
                .unwrap()
                .insert(LAYOUT, CURRENT + 1)
                .unwrap();
            txn.commit().unwrap();
        }
        let error = RedbStore::open(&path).err().unwrap();
        let message = error.to_string();
        assert!(
            matches!(error, StoreError::Unusable { .. }) && message.contains("newer daemon"),
            "{message}"
        );
        let db = Database::open(&path).unwrap();
        let txn = db.begin_read().unwrap();
        let layout = txn
            .open_table(META)
            .unwrap()
            .get(LAYOUT)
            .unwrap()
            .unwrap()
            .value();
        assert_eq!(layout, CURRENT + 1);
    }
}
