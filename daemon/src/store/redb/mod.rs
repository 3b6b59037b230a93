//! The embedded default backend: one redb file in the data directory.
//!
//! Tables:
//! - `tasks`: task id → task record (JSON).
//! - `tasks_by_status`: (status code, task id) → (), the status index.
//! - `queue`: (−priority, task id) → (), queued tasks in the order they run.
//! - `status_counts`: status code → number of tasks.
//! - `events`: sequence number → event (JSON), the event log.
//! - `audit`: sequence number → audit entry (JSON), hash-chained; `audit_head`: the last
//!   entry's sequence number and hash, kept apart so that a removed tail is detected.
//! - `workflows`: workflow id → workflow record (JSON): its steps, their compensations
//!   and its state.
//! - `test_envs`: test environment id → its record (JSON).
//! - `tasks_by_label`: (label, task id) → (), the label index (layout 2).
//! - `workflow_status`: workflow id → its status's name, and `workflow_counts`: status
//!   name → number of workflows (layout 2), so that `/metrics` does not read every
//!   workflow.
//! - `meta`: the highest task (or workflow, or test environment) id ever assigned, the
//!   layout version (`layout`), the last event removed by the event retention and the
//!   highest sequence number ever logged (so that a trimmed log's numbering does not
//!   restart).
//!
//! Opening (creation, the integrity check, redb's panics, the page cache) is in `open`;
//! the layout version and the migration of an older one in `layout`; how a batch becomes
//! one transaction is in `write`; the audit log's tables, reads and appends are in
//! `audit`; the snapshot and the lists in `read`; the other reads are here.

mod audit;
mod checkpoint;
mod journal;
mod layout;
mod open;
mod read;
mod write;

use orch_protocol::{Event, Task, TaskFilter, TaskId, TaskStatus, Workflow, WorkflowId};

use ::redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Snapshot, Store, StoreError, WriteBatch};
use audit::{AUDIT, AUDIT_HEAD};

const TASKS: TableDefinition<u64, &[u8]> = TableDefinition::new("tasks");
const BY_STATUS: TableDefinition<(u8, u64), ()> = TableDefinition::new("tasks_by_status");
const QUEUE: TableDefinition<(i64, u64), ()> = TableDefinition::new("queue");
const COUNTS: TableDefinition<u8, u64> = TableDefinition::new("status_counts");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const WORKFLOWS: TableDefinition<u64, &[u8]> = TableDefinition::new("workflows");
const TEST_ENVS: TableDefinition<u64, &[u8]> = TableDefinition::new("test_envs");
const BY_LABEL: TableDefinition<(&str, u64), ()> = TableDefinition::new("tasks_by_label");
const WORKFLOW_STATUS: TableDefinition<u64, &str> = TableDefinition::new("workflow_status");
const WORKFLOW_COUNTS: TableDefinition<&str, u64> = TableDefinition::new("workflow_counts");
/// Small JSON settings by name: the queue's controls under [`QUEUE_CONTROLS`].
const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");

/// Schedules by name.
const SCHEDULES: TableDefinition<&str, &[u8]> = TableDefinition::new("schedules");
/// Notifiers by name.
const NOTIFIERS: TableDefinition<&str, &[u8]> = TableDefinition::new("notifiers");
/// The notifications not delivered yet, by key.
const OUTBOX: TableDefinition<&str, &[u8]> = TableDefinition::new("notify_outbox");
/// The outbox by notifier, then when due (milliseconds), then key.
const OUTBOX_DUE: TableDefinition<(&str, i64, &str), ()> = TableDefinition::new("notify_due");

/// The `settings` key of the queue's controls (groups, pauses).
const QUEUE_CONTROLS: &str = "queue_controls";

/// The highest task id ever assigned (ids are never reused, even after `orch clean`).
const LAST_TASK_ID: &str = "last_task_id";
/// The events up to this sequence number were removed (`--retain-events`).
const EVENTS_REMOVED_THROUGH: &str = "events_removed_through";
/// `meta` key present (value 1) while a migration fills the store.
const MIGRATION_UNDERWAY: &str = "migration_underway";

/// A [`Store`] in a redb database file, with its commit journal beside it.
pub struct RedbStore {
    db: Database,
    /// Durable commits use redb's quick repair (see `open::QuickRepair`).
    quick_repair: open::QuickRepair,
    /// The journal that makes commits durable between checkpoints (see `checkpoint`).
    durable: checkpoint::Durable,
}

impl RedbStore {
    /// Where the journal of the store file `store` is (beside it).
    pub fn journal_path(store: &std::path::Path) -> std::path::PathBuf {
        journal::path_of(store)
    }
}

impl Drop for RedbStore {
    /// A store closed cleanly leaves nothing to apply again at the next open.
    fn drop(&mut self) {
        if let Err(e) = self.settle() {
            tracing::warn!(error = %e, "the store's last checkpoint failed: the next open applies the journal");
        }
    }
}

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn queue_key(task: &Task) -> (i64, u64) {
    (-i64::from(task.spec.priority), task.id)
}

fn decode<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        error: e.to_string(),
    })
}

impl Store for RedbStore {
    fn backend_name(&self) -> &'static str {
        "redb"
    }

    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError> {
        self.durable.commit(&self.db, &self.quick_repair, batch)
    }

    fn unsettled(&self) -> bool {
        self.durable.unsettled()
    }

    fn settle(&self) -> Result<(), StoreError> {
        self.durable.settle(&self.db, &self.quick_repair)
    }

    fn load(&self) -> Result<Snapshot, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let mut snapshot = read::snapshot(&txn)?;
        snapshot.last_event_seq = self.last_event_seq()?;
        Ok(snapshot)
    }

    fn workflow(&self, id: WorkflowId) -> Result<Option<Workflow>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(WORKFLOWS).map_err(backend)?;
        match table.get(id).map_err(backend)? {
            Some(body) => Ok(Some(decode(&format!("workflow {id}"), body.value())?)),
            None => Ok(None),
        }
    }

    fn workflows(
        &self,
        before: Option<WorkflowId>,
        limit: usize,
    ) -> Result<Vec<Workflow>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(WORKFLOWS).map_err(backend)?;
        let mut out = Vec::new();
        let below = table
            .range(..before.unwrap_or(WorkflowId::MAX))
            .map_err(backend)?;
        for entry in below.rev().take(limit) {
            let (id, body) = entry.map_err(backend)?;
            out.push(decode(&format!("workflow {}", id.value()), body.value())?);
        }
        Ok(out)
    }

    fn get(&self, id: TaskId) -> Result<Option<Task>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(TASKS).map_err(backend)?;
        match table.get(id).map_err(backend)? {
            Some(body) => Ok(Some(decode(&format!("task {id}"), body.value())?)),
            None => Ok(None),
        }
    }

    fn statuses(
        &self,
        ids: std::ops::RangeInclusive<TaskId>,
    ) -> Result<std::collections::HashMap<TaskId, TaskStatus>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let by_status = txn.open_table(BY_STATUS).map_err(backend)?;
        let mut out = std::collections::HashMap::new();
        for status in TaskStatus::ALL {
            let range = (status.code(), *ids.start())..=(status.code(), *ids.end());
            for entry in by_status.range(range).map_err(backend)? {
                out.insert(entry.map_err(backend)?.0.value().1, status);
            }
        }
        Ok(out)
    }

    fn list(&self, filter: &TaskFilter) -> Result<Vec<Task>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::list(&txn, filter)
    }

    fn scan_status(
        &self,
        status: TaskStatus,
        each: &mut dyn FnMut(Task),
    ) -> Result<(), StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::scan_status(&txn, status, each)
    }

    fn events_after(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(EVENTS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in table.range(after.saturating_add(1)..).map_err(backend)? {
            let (seq, body) = entry.map_err(backend)?;
            out.push(decode(&format!("event {}", seq.value()), body.value())?);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    fn last_event_seq(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(EVENTS).map_err(backend)?;
        let last = table
            .last()
            .map_err(backend)?
            .map_or(0, |(seq, _)| seq.value());
        // A log trimmed to nothing still numbers on from what it removed.
        Ok(last.max(self.events_removed_through()?))
    }

    fn events_removed_through(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let meta = txn.open_table(META).map_err(backend)?;
        let through = meta.get(EVENTS_REMOVED_THROUGH).map_err(backend)?;
        Ok(through.map_or(0, |v| v.value()))
    }

    fn count_workflows_by_status(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(WORKFLOW_COUNTS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(backend)? {
            let (status, n) = entry.map_err(backend)?;
            out.push((status.value().to_string(), n.value()));
        }
        Ok(out)
    }

    fn queue_controls(&self) -> Result<orch_protocol::QueueControls, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::controls(&txn)
    }

    fn schedules(&self) -> Result<Vec<orch_protocol::Schedule>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::schedules(&txn)
    }

    fn notifiers(&self) -> Result<Vec<orch_protocol::Notifier>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::named(&txn, NOTIFIERS, "notifier", usize::MAX)
    }

    fn outbox(&self, limit: usize) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::named(&txn, OUTBOX, "notification", limit)
    }

    fn outbox_due(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        per_notifier: usize,
    ) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::outbox_due(&txn, now.timestamp_millis(), per_notifier)
    }

    fn outbox_next_due(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        read::outbox_next_due(&txn)
    }

    fn count_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(COUNTS).map_err(backend)?;
        let mut out = Vec::new();
        for status in TaskStatus::ALL {
            let n = table
                .get(status.code())
                .map_err(backend)?
                .map_or(0, |v| v.value());
            out.push((status, n));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance::{Fixture, conformance_tests};

    /// A store file in a temporary directory.
    struct RedbFixture {
        dir: tempfile::TempDir,
    }

    impl Fixture for RedbFixture {
        fn open(&self) -> Box<dyn Store> {
            Box::new(RedbStore::open(&self.dir.path().join("state.redb")).unwrap())
        }

        fn data_dir(&self) -> &std::path::Path {
            self.dir.path()
        }
    }

    conformance_tests!(RedbFixture {
        dir: tempfile::tempdir().unwrap()
    });

    #[test]
    fn a_second_open_of_the_same_file_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let _first = RedbStore::open(&path).unwrap();
        let err = RedbStore::open(&path).err().unwrap();
        assert!(matches!(err, StoreError::AlreadyOpen { .. }), "{err}");
    }
}
