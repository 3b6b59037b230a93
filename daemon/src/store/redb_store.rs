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
//! - `meta`: the highest task (or workflow, or test environment) id ever assigned.

use std::path::Path;

use orch_protocol::{
    AuditEntry, AuditFilter, AuditReport, Event, Task, TaskFilter, TaskId, TaskStatus, TestEnv,
    Workflow, WorkflowId,
};

use crate::audit::AuditRecord;
use redb::{
    Database, DatabaseError, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    StorageError, TableDefinition, WriteTransaction,
};

use super::{Snapshot, Store, StoreError, WriteBatch};

const TASKS: TableDefinition<u64, &[u8]> = TableDefinition::new("tasks");
const BY_STATUS: TableDefinition<(u8, u64), ()> = TableDefinition::new("tasks_by_status");
const QUEUE: TableDefinition<(i64, u64), ()> = TableDefinition::new("queue");
const COUNTS: TableDefinition<u8, u64> = TableDefinition::new("status_counts");
const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
const AUDIT_HEAD: TableDefinition<u8, &[u8]> = TableDefinition::new("audit_head");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const WORKFLOWS: TableDefinition<u64, &[u8]> = TableDefinition::new("workflows");
const TEST_ENVS: TableDefinition<u64, &[u8]> = TableDefinition::new("test_envs");

/// The highest task id ever assigned (ids are never reused, even after `orch clean`).
const LAST_TASK_ID: &str = "last_task_id";

/// The single key of `audit_head`.
const HEAD: u8 = 0;

/// A [`Store`] in a redb database file.
pub struct RedbStore {
    db: Database,
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

impl RedbStore {
    /// Opens the database at `path`, creating it only when no file exists there. An empty
    /// file, a file that is not a redb database, or one whose pages fail redb's integrity
    /// check is refused with [`StoreError::Unusable`] and left as it is; redb's own panics
    /// on a damaged file are caught and reported the same way.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let db = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_new(path)?;
                open_existing(path)?
            }
            Err(e) => return Err(backend(format!("cannot open {}: {e}", path.display()))),
            Ok(meta) if !meta.is_file() => return Err(unusable(path, "it is not a regular file")),
            Ok(meta) if meta.len() == 0 => {
                return Err(unusable(path, "it is empty (0 bytes), not a database"));
            }
            Ok(_) => open_existing(path)?,
        };
        ensure_tables(&db)?;
        Ok(RedbStore { db })
    }

    fn apply(txn: &WriteTransaction, batch: &WriteBatch) -> Result<(), redb::Error> {
        let mut tasks = txn.open_table(TASKS)?;
        let mut by_status = txn.open_table(BY_STATUS)?;
        let mut queue = txn.open_table(QUEUE)?;
        let mut counts = txn.open_table(COUNTS)?;
        let mut events = txn.open_table(EVENTS)?;
        for write in &batch.tasks {
            let task = &write.task;
            let status = task.state.status();
            let body = serde_json::to_vec(task).expect("task records always serialize");
            tasks.insert(task.id, body.as_slice())?;
            if write.previous == Some(status) {
                continue;
            }
            if let Some(previous) = write.previous {
                by_status.remove((previous.code(), task.id))?;
                let n = counts.get(previous.code())?.map_or(0, |v| v.value());
                counts.insert(previous.code(), n.saturating_sub(1))?;
                if previous == TaskStatus::Queued {
                    queue.remove(queue_key(task))?;
                }
            }
            by_status.insert((status.code(), task.id), ())?;
            let n = counts.get(status.code())?.map_or(0, |v| v.value());
            counts.insert(status.code(), n + 1)?;
            if status == TaskStatus::Queued {
                queue.insert(queue_key(task), ())?;
            }
        }
        for event in &batch.events {
            let body = serde_json::to_vec(event).expect("events always serialize");
            events.insert(event.seq, body.as_slice())?;
        }
        let mut workflows = txn.open_table(WORKFLOWS)?;
        for workflow in &batch.workflows {
            let body = serde_json::to_vec(workflow).expect("workflow records always serialize");
            workflows.insert(workflow.id, body.as_slice())?;
        }
        let mut envs = txn.open_table(TEST_ENVS)?;
        for env in &batch.test_envs {
            let body = serde_json::to_vec(env).expect("environment records always serialize");
            envs.insert(env.id, body.as_slice())?;
        }
        let newest = batch
            .tasks
            .iter()
            .filter(|w| w.previous.is_none())
            .map(|w| w.task.id)
            .chain(batch.workflows.iter().map(|w| w.id))
            .chain(batch.test_envs.iter().map(|e| e.id))
            .max();
        if let Some(newest) = newest {
            let mut meta = txn.open_table(META)?;
            let last = meta.get(LAST_TASK_ID)?.map_or(0, |v| v.value());
            if newest > last {
                meta.insert(LAST_TASK_ID, newest)?;
            }
        }
        for task in &batch.removals {
            let status = task.state.status();
            tasks.remove(task.id)?;
            by_status.remove((status.code(), task.id))?;
            let n = counts.get(status.code())?.map_or(0, |v| v.value());
            counts.insert(status.code(), n.saturating_sub(1))?;
        }
        if !batch.audit.is_empty() {
            Self::append_audit(txn, &batch.audit)?;
        }
        Ok(())
    }

    /// Seals the records onto the end of the audit chain.
    fn append_audit(txn: &WriteTransaction, records: &[AuditRecord]) -> Result<(), redb::Error> {
        let mut audit = txn.open_table(AUDIT)?;
        let mut head_table = txn.open_table(AUDIT_HEAD)?;
        let (mut seq, mut hash) = match head_table.get(HEAD)? {
            Some(head) => serde_json::from_slice::<(u64, String)>(head.value())
                .map_err(|e| redb::Error::Corrupted(format!("audit head: {e}")))?,
            None => (0, crate::audit::GENESIS.to_string()),
        };
        let now = chrono::Utc::now();
        for record in records {
            seq += 1;
            let entry = crate::audit::seal(record.clone(), seq, now, &hash);
            let body = serde_json::to_vec(&entry).expect("audit entries serialize");
            audit.insert(seq, body.as_slice())?;
            hash = entry.hash;
        }
        let head = serde_json::to_vec(&(seq, &hash)).expect("the head serializes");
        head_table.insert(HEAD, head.as_slice())?;
        Ok(())
    }
}

/// Every table, so that reads never meet a missing one.
fn ensure_tables(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(backend)?;
    txn.open_table(TASKS).map_err(backend)?;
    txn.open_table(BY_STATUS).map_err(backend)?;
    txn.open_table(QUEUE).map_err(backend)?;
    txn.open_table(COUNTS).map_err(backend)?;
    txn.open_table(EVENTS).map_err(backend)?;
    txn.open_table(AUDIT).map_err(backend)?;
    txn.open_table(AUDIT_HEAD).map_err(backend)?;
    txn.open_table(META).map_err(backend)?;
    txn.open_table(WORKFLOWS).map_err(backend)?;
    txn.open_table(TEST_ENVS).map_err(backend)?;
    txn.commit().map_err(backend)
}

fn unusable(path: &Path, problem: impl Into<String>) -> StoreError {
    StoreError::Unusable {
        path: path.display().to_string(),
        problem: problem.into(),
    }
}

/// Creates a new database at `path`, which must not exist: initialized under a temporary
/// name and then linked into place, so that an interrupted creation never leaves a
/// half-made (or empty) file at `path`, and a file that appeared meanwhile is not replaced.
fn create_new(path: &Path) -> Result<(), StoreError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".new-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let cannot =
        |e: &dyn std::fmt::Display| backend(format!("cannot create {}: {e}", path.display()));
    let _ = std::fs::remove_file(&tmp);
    let created = Database::create(&tmp)
        .map_err(|e| cannot(&e))
        .and_then(|db| ensure_tables(&db))
        .and_then(|()| std::fs::hard_link(&tmp, path).map_err(|e| cannot(&e)));
    let _ = std::fs::remove_file(&tmp);
    created?;
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| cannot(&e))?;
    }
    Ok(())
}

/// Opens an existing database with redb's integrity check (every page's checksum), and
/// turns both its errors and its panics on a damaged file into [`StoreError::Unusable`].
fn open_existing(path: &Path) -> Result<Database, StoreError> {
    let mut builder = Database::builder();
    builder.set_check_integrity_on_open(true);
    let opened = without_panic_output(|| builder.open(path));
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(DatabaseError::DatabaseAlreadyOpen)) => Err(StoreError::AlreadyOpen {
            path: path.display().to_string(),
        }),
        Ok(Err(DatabaseError::Storage(StorageError::Io(e))))
            if e.kind() != std::io::ErrorKind::InvalidData =>
        {
            Err(backend(format!("cannot open {}: {e}", path.display())))
        }
        Ok(Err(e)) => Err(unusable(
            path,
            format!("it is not a readable redb database ({e})"),
        )),
        Err(panic) => Err(unusable(
            path,
            format!("it is corrupt (reading it failed: {panic})"),
        )),
    }
}

/// Runs `f`, catching a panic (as its message) without printing it: redb may panic on a
/// file damaged outside it. Used at start-up only, before other threads run.
fn without_panic_output<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}

impl Store for RedbStore {
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        for entry in table.iter().map_err(backend)?.rev() {
            if out.len() >= limit {
                break;
            }
            let (seq, body) = entry.map_err(backend)?;
            let entry: AuditEntry = decode(&format!("audit entry {}", seq.value()), body.value())?;
            if filter.action.as_ref().is_none_or(|a| *a == entry.action) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    fn verify_audit(&self) -> Result<AuditReport, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        let head = txn.open_table(AUDIT_HEAD).map_err(backend)?;
        let head = match head.get(HEAD).map_err(backend)? {
            Some(h) => Some(decode::<(u64, String)>("audit head", h.value())?),
            None => None,
        };
        let mut entries = Vec::new();
        for entry in table.iter().map_err(backend)? {
            let (seq, body) = entry.map_err(backend)?;
            match serde_json::from_slice::<AuditEntry>(body.value()) {
                Ok(entry) => entries.push((seq.value(), entry)),
                Err(e) => {
                    return Ok(AuditReport {
                        entries: entries.len() as u64,
                        intact: false,
                        bad_seq: Some(seq.value()),
                        problem: Some(format!("entry {} cannot be read: {e}", seq.value())),
                    });
                }
            }
        }
        Ok(crate::audit::verify(entries.into_iter(), head))
    }

    fn backend_name(&self) -> &'static str {
        "redb"
    }

    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(backend)?;
        txn.set_durability(Durability::Immediate).map_err(backend)?;
        Self::apply(&txn, batch).map_err(backend)?;
        txn.commit().map_err(backend)
    }

    fn load(&self) -> Result<Snapshot, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let tasks_table = txn.open_table(TASKS).map_err(backend)?;
        let mut tasks = Vec::with_capacity(tasks_table.len().map_err(backend)? as usize);
        for entry in tasks_table.iter().map_err(backend)? {
            let (id, body) = entry.map_err(backend)?;
            tasks.push(decode::<Task>(
                &format!("task {}", id.value()),
                body.value(),
            )?);
        }
        let queue_table = txn.open_table(QUEUE).map_err(backend)?;
        let mut queue = Vec::new();
        for entry in queue_table.iter().map_err(backend)? {
            queue.push(entry.map_err(backend)?.0.value().1);
        }
        let meta = txn.open_table(META).map_err(backend)?;
        let last_task_id = meta
            .get(LAST_TASK_ID)
            .map_err(backend)?
            .map_or(0, |v| v.value());
        let workflows_table = txn.open_table(WORKFLOWS).map_err(backend)?;
        let mut workflows = Vec::new();
        for entry in workflows_table.iter().map_err(backend)? {
            let (id, body) = entry.map_err(backend)?;
            workflows.push(decode::<Workflow>(
                &format!("workflow {}", id.value()),
                body.value(),
            )?);
        }
        let envs_table = txn.open_table(TEST_ENVS).map_err(backend)?;
        let mut test_envs = Vec::new();
        for entry in envs_table.iter().map_err(backend)? {
            let (id, body) = entry.map_err(backend)?;
            test_envs.push(decode::<TestEnv>(
                &format!("test environment {}", id.value()),
                body.value(),
            )?);
        }
        Ok(Snapshot {
            tasks,
            workflows,
            test_envs,
            queue,
            last_event_seq: self.last_event_seq()?,
            last_task_id,
        })
    }

    fn workflow(&self, id: WorkflowId) -> Result<Option<Workflow>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(WORKFLOWS).map_err(backend)?;
        match table.get(id).map_err(backend)? {
            Some(body) => Ok(Some(decode(&format!("workflow {id}"), body.value())?)),
            None => Ok(None),
        }
    }

    fn workflows(&self, limit: usize) -> Result<Vec<Workflow>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(WORKFLOWS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(backend)?.rev().take(limit) {
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
        let tasks = txn.open_table(TASKS).map_err(backend)?;
        let ids: Box<dyn Iterator<Item = Result<u64, StoreError>>> = if filter.status.is_empty() {
            Box::new(
                tasks
                    .iter()
                    .map_err(backend)?
                    .rev()
                    .map(|e| e.map(|(k, _)| k.value()).map_err(backend)),
            )
        } else {
            let by_status = txn.open_table(BY_STATUS).map_err(backend)?;
            let mut ids = Vec::new();
            for status in &filter.status {
                let range = (status.code(), 0)..=(status.code(), u64::MAX);
                for entry in by_status.range(range).map_err(backend)? {
                    ids.push(entry.map_err(backend)?.0.value().1);
                }
            }
            ids.sort_unstable_by(|a, b| b.cmp(a));
            Box::new(ids.into_iter().map(Ok))
        };
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        for id in ids {
            if out.len() >= limit {
                break;
            }
            let id = id?;
            let Some(body) = tasks.get(id).map_err(backend)? else {
                continue;
            };
            let task: Task = decode(&format!("task {id}"), body.value())?;
            if filter.label.is_none() || task.spec.label == filter.label {
                out.push(task);
            }
        }
        Ok(out)
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
        Ok(table
            .last()
            .map_err(backend)?
            .map_or(0, |(seq, _)| seq.value()))
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
    use crate::store::TaskWrite;
    use chrono::Utc;
    use orch_protocol::{TaskSpec, TaskState};

    fn task(id: u64, priority: i32, state: TaskState) -> Task {
        let mut spec = TaskSpec::command("true", vec![]);
        spec.priority = priority;
        Task {
            id,
            spec,
            state,
            submitted_at: Utc::now(),
            attempts: vec![],
            attempts_before_retry: 0,
            progress: None,
        }
    }

    fn queued() -> TaskState {
        TaskState::Queued { since: Utc::now() }
    }

    #[test]
    fn indexes_follow_state_changes_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        {
            let store = RedbStore::open(&path).unwrap();
            let mut batch = WriteBatch::default();
            for (id, prio) in [(1, 0), (2, 5), (3, 0)] {
                batch.tasks.push(TaskWrite {
                    task: task(id, prio, queued()),
                    previous: None,
                });
            }
            store.commit(&batch).unwrap();
            let running = TaskState::Running {
                attempt: 1,
                started_at: Utc::now(),
            };
            let batch = WriteBatch {
                tasks: vec![TaskWrite {
                    task: task(2, 5, running),
                    previous: Some(TaskStatus::Queued),
                }],
                ..WriteBatch::default()
            };
            store.commit(&batch).unwrap();
        }
        let store = RedbStore::open(&path).unwrap();
        let snapshot = store.load().unwrap();
        assert_eq!(snapshot.tasks.len(), 3);
        assert_eq!(snapshot.queue, vec![1, 3]);
        assert_eq!(snapshot.last_task_id, 3);
        let counts: std::collections::HashMap<_, _> =
            store.count_by_status().unwrap().into_iter().collect();
        assert_eq!(counts[&TaskStatus::Queued], 2);
        assert_eq!(counts[&TaskStatus::Running], 1);
        let filter = TaskFilter {
            status: vec![TaskStatus::Queued],
            ..TaskFilter::default()
        };
        let ids: Vec<_> = store.list(&filter).unwrap().iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![3, 1]);
    }

    #[test]
    fn a_second_open_of_the_same_file_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let _first = RedbStore::open(&path).unwrap();
        let err = RedbStore::open(&path).err().unwrap();
        assert!(matches!(err, StoreError::AlreadyOpen { .. }), "{err}");
    }
}
