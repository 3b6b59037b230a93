//! Durable state: the [`Store`] trait and its backends.
//!
//! Every state change reaches the store as a [`WriteBatch`] (task records plus the events
//! they emit) and is durable when [`Store::commit`] returns. [`committer::GroupCommitter`]
//! batches concurrent changes into one transaction; callers act only after their batch is
//! committed.

pub mod audit;
pub mod committer;
#[cfg(test)]
pub(crate) mod conformance;
pub mod postgres;
pub mod redb;

use orch_protocol::{
    Event, Notifier, Nudge, OutboxEntry, QueueControls, Schedule, Task, TaskFilter, TaskId,
    TaskStatus, TestEnv, Workflow, WorkflowId,
};

use crate::audit::AuditRecord;

pub use audit::AuditLog;
pub use committer::GroupCommitter;
pub use postgres::{
    Beat, ForwardedRequest, Leader, NodeAttempt, NodeRecord, NodeSlots, PlacementReport,
    PostgresStore, Registration, RequestState,
};
pub use redb::RedbStore;

/// `provisioning-orchestrator checkpoint DIR`: folds the journal of the redb store in data
/// directory `dir` into its file (the store is opened, which applies what the journal
/// holds, and closed, which checkpoints). A missing store is an error, not a new one.
/// Prints a JSON report; exit 1 with the reason on stderr when it cannot.
pub fn checkpoint_tool(dir: &std::path::Path) -> std::process::ExitCode {
    use std::io::Write as _;
    let path = dir.join(crate::STORE_FILE);
    let outcome = if path.is_file() {
        RedbStore::open_replaying(&path).map(|(store, replayed)| {
            drop(store);
            replayed
        })
    } else {
        Err(StoreError::Backend(format!(
            "{}: no store there (a data directory holds {})",
            path.display(),
            crate::STORE_FILE
        )))
    };
    match outcome {
        Ok(applied) => {
            let report = serde_json::json!({
                "store": path.display().to_string(),
                "journal": RedbStore::journal_path(&path).display().to_string(),
                "applied": applied,
                "checkpointed": true,
            });
            let _ = writeln!(std::io::stdout(), "{report:#}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "provisioning-orchestrator checkpoint: {e}"
            );
            std::process::ExitCode::FAILURE
        }
    }
}

/// Errors from a store backend.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database file is held by another process (another daemon on the same data dir).
    #[error(
        "the database {path} is already open in another process (is another daemon using this data dir?)"
    )]
    AlreadyOpen {
        /// The database file.
        path: String,
    },
    /// The database file exists but cannot be used (empty, not a database, corrupt). It was
    /// left as it is.
    #[error(
        "the store {path} cannot be used: {problem}. Nothing was changed. To recover, restore {path} from a backup, or move the whole data directory aside to start afresh with an empty store"
    )]
    Unusable {
        /// The database file.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The backend failed.
    #[error("store error: {0}")]
    Backend(String),
    /// A write of a node that no longer holds the leadership of its cluster (another node
    /// took over): refused, nothing written.
    #[error(
        "refused: this node led the cluster in term {term}, but another node has taken over since, or its lease ran out; it writes nothing more"
    )]
    Fenced {
        /// The term this node held.
        term: u64,
    },
    /// A stored record could not be decoded.
    #[error("corrupt record {what}: {error}")]
    Corrupt {
        /// Which record.
        what: String,
        /// The decoding error.
        error: String,
    },
}

/// One task record to write, with the status it had before (for the indexes).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskWrite {
    /// The record as it is now.
    pub task: Task,
    /// Its status before this change; `None` for a new task.
    pub previous: Option<TaskStatus>,
    /// For an edit (`orch edit`): the indexed fields as they were before it, when they
    /// may have changed (the indexes move from them).
    pub reindex: Option<Indexed>,
}

/// The fields of a task record that the stores index besides its status.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Indexed {
    /// Its priority (the queue's order).
    pub priority: i32,
    /// Its label.
    pub label: Option<String>,
}

/// A set of changes that become durable together (serializable: the redb store's journal
/// keeps each batch until its checkpoint; placements, which only a cluster's store is
/// given, are not part of that).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteBatch {
    /// Task records to insert or replace, in order.
    pub tasks: Vec<TaskWrite>,
    /// Events to append, in order.
    pub events: Vec<Event>,
    /// Audit records to seal and append, in order.
    pub audit: Vec<AuditRecord>,
    /// Finished tasks to delete (after the task writes above).
    pub removals: Vec<Task>,
    /// Finished workflows to delete (after the workflow writes above).
    pub workflow_removals: Vec<WorkflowId>,
    /// Workflow records to insert or replace.
    pub workflows: Vec<Workflow>,
    /// Test environment records to insert or replace.
    pub test_envs: Vec<TestEnv>,
    /// Remove the logged events up to this sequence number (the event retention).
    pub events_removed_through: Option<u64>,
    /// Every id up to this one counts as assigned, even with no record left (a migration
    /// carries the highest id over, so that a removed task's id is never given again).
    pub ids_used_through: Option<u64>,
    /// `Some(true)`: the store is being filled by a migration, and a daemon refuses it
    /// until `Some(false)` says the copy is complete and checked.
    pub migration_underway: Option<bool>,
    /// Attempts placed on, stopped on and taken back from the nodes of a cluster (only a
    /// cluster's store, PostgreSQL, is given any).
    #[serde(skip)]
    pub placements: PlacementWrites,
    /// The queue's controls (groups, pauses) to store in place of the current ones.
    pub controls: Option<QueueControls>,
    /// Schedules to insert or replace (by name).
    pub schedules: Vec<Schedule>,
    /// Schedules to remove, by name (after the writes above).
    pub schedule_removals: Vec<String>,
    /// Notifiers to insert or replace (by name).
    pub notifiers: Vec<Notifier>,
    /// Notifiers to remove, by name (after the writes above).
    pub notifier_removals: Vec<String>,
    /// Notifications to put in the outbox, or to replace there (by key).
    pub outbox: Vec<OutboxEntry>,
    /// Notifications to take out of the outbox, by key (after the writes above).
    pub outbox_removals: Vec<String>,
    /// Notifiers whose notifications all leave the outbox (removed notifiers), after the
    /// writes above.
    pub outbox_purges: Vec<String>,
}

/// What a batch changes in the placements of a cluster's attempts: each row tells a node
/// to run an attempt; the node's worker reports its outcome in the same row.
#[derive(Debug, Default)]
pub struct PlacementWrites {
    /// Attempts placed (each one's `Running` record is in the same batch).
    pub placed: Vec<PlacedAttempt>,
    /// Attempts to stop, as `(task, attempt)` (a cancel or a shutdown).
    pub stops: Vec<(TaskId, u32)>,
    /// Attempts to pause (`true`: SIGSTOP) or resume (`false`: SIGCONT), as
    /// `(task, attempt, paused)`.
    pub pauses: Vec<(TaskId, u32, bool)>,
    /// Signals and input for attempts, as `(task, attempt, nudge)`, in order.
    pub nudges: Vec<(TaskId, u32, Nudge)>,
    /// Attempts whose end the batch records, as `(task, attempt)`: their rows go.
    pub done: Vec<(TaskId, u32)>,
}

impl PlacementWrites {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.placed.is_empty()
            && self.stops.is_empty()
            && self.pauses.is_empty()
            && self.nudges.is_empty()
            && self.done.is_empty()
    }

    /// Adds `other`'s writes after these (every field named, so that none is forgotten).
    fn append(&mut self, other: PlacementWrites) {
        let PlacementWrites {
            placed,
            stops,
            pauses,
            nudges,
            done,
        } = other;
        self.placed.extend(placed);
        self.stops.extend(stops);
        self.pauses.extend(pauses);
        self.nudges.extend(nudges);
        self.done.extend(done);
    }
}

/// An attempt placed on a node.
#[derive(Debug, Clone)]
pub struct PlacedAttempt {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// The node that runs it.
    pub node: String,
    /// What to run.
    pub spec: orch_protocol::TaskSpec,
}

impl WriteBatch {
    /// Appends another batch's changes after this one's.
    pub fn append(&mut self, other: WriteBatch) {
        self.tasks.extend(other.tasks);
        self.events.extend(other.events);
        self.audit.extend(other.audit);
        self.removals.extend(other.removals);
        self.workflow_removals.extend(other.workflow_removals);
        self.workflows.extend(other.workflows);
        self.test_envs.extend(other.test_envs);
        self.events_removed_through = self
            .events_removed_through
            .max(other.events_removed_through);
        self.ids_used_through = self.ids_used_through.max(other.ids_used_through);
        self.migration_underway = other.migration_underway.or(self.migration_underway);
        self.placements.append(other.placements);
        self.controls = other.controls.or(self.controls.take());
        // Records by name: a later batch's removal cancels an earlier write, a later write
        // an earlier removal (the stores apply writes before removals).
        for name in other.schedule_removals {
            self.remove_schedule(name);
        }
        for schedule in other.schedules {
            self.put_schedule(schedule);
        }
        for name in other.notifier_removals {
            self.remove_notifier(name);
        }
        for notifier in other.notifiers {
            self.put_notifier(notifier);
        }
        for key in other.outbox_removals {
            self.remove_outbox(key);
        }
        for name in other.outbox_purges {
            self.outbox.retain(|e| e.notifier != name);
            self.outbox_purges.push(name);
        }
        for entry in other.outbox {
            self.put_outbox(entry);
        }
    }

    /// Writes `schedule` (by name), in place of a removal of it earlier in the batch.
    pub fn put_schedule(&mut self, schedule: Schedule) {
        let name = &schedule.spec.name;
        self.schedule_removals.retain(|n| n != name);
        self.schedules.push(schedule);
    }

    /// Removes schedule `name`, in place of writes of it earlier in the batch.
    pub fn remove_schedule(&mut self, name: String) {
        self.schedules.retain(|s| s.spec.name != name);
        self.schedule_removals.push(name);
    }

    /// Writes `notifier` (by name), in place of a removal of it earlier in the batch.
    pub fn put_notifier(&mut self, notifier: Notifier) {
        let name = &notifier.spec.name;
        self.notifier_removals.retain(|n| n != name);
        self.notifiers.push(notifier);
    }

    /// Removes notifier `name`, in place of writes of it earlier in the batch.
    pub fn remove_notifier(&mut self, name: String) {
        self.notifiers.retain(|n| n.spec.name != name);
        self.notifier_removals.push(name);
    }

    /// Puts `entry` in the outbox (by key), in place of a removal of it earlier in the
    /// batch.
    pub fn put_outbox(&mut self, entry: OutboxEntry) {
        self.outbox_removals.retain(|k| *k != entry.key);
        self.outbox.retain(|e| e.key != entry.key);
        self.outbox.push(entry);
    }

    /// Takes notification `key` out of the outbox, in place of writes of it earlier in
    /// the batch.
    pub fn remove_outbox(&mut self, key: String) {
        self.outbox.retain(|e| e.key != key);
        self.outbox_removals.push(key);
    }

    /// The highest id the batch takes: its new tasks', workflows' and test environments',
    /// and `ids_used_through`. The store's highest id assigned is raised to it.
    pub fn highest_new_id(&self) -> Option<u64> {
        self.tasks
            .iter()
            .filter(|w| w.previous.is_none())
            .map(|w| w.task.id)
            .chain(self.workflows.iter().map(|w| w.id))
            .chain(self.test_envs.iter().map(|e| e.id))
            .chain(self.ids_used_through)
            .max()
    }

    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
            && self.events.is_empty()
            && self.audit.is_empty()
            && self.removals.is_empty()
            && self.workflow_removals.is_empty()
            && self.workflows.is_empty()
            && self.test_envs.is_empty()
            && self.events_removed_through.is_none()
            && self.ids_used_through.is_none()
            && self.migration_underway.is_none()
            && self.placements.is_empty()
            && self.controls.is_none()
            && self.schedules.is_empty()
            && self.schedule_removals.is_empty()
            && self.notifiers.is_empty()
            && self.notifier_removals.is_empty()
            && self.outbox.is_empty()
            && self.outbox_removals.is_empty()
            && self.outbox_purges.is_empty()
    }
}

/// The statuses of unfinished tasks a [`Snapshot`] holds in full (queued ones are held
/// by id and priority only; finished ones stay in the store).
///
/// Stashed tasks are not among them: nothing schedules them until they are enqueued.
pub const HELD: [TaskStatus; 4] = [
    TaskStatus::Blocked,
    TaskStatus::Delayed,
    TaskStatus::Running,
    TaskStatus::RetryWaiting,
];

/// Everything the engine needs at start-up: live work only. Finished tasks outside
/// workflows and queued ones stay in the store (the queued ones are named in `queue`).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The records the engine holds in full, by id: every task of a workflow, and every
    /// other unfinished task that is not simply queued (blocked, running, waiting for a
    /// retry).
    pub tasks: Vec<Task>,
    /// Every workflow, by id.
    pub workflows: Vec<Workflow>,
    /// Every test environment, by id.
    pub test_envs: Vec<TestEnv>,
    /// Queued tasks in queue order (priority, then submission order): id and priority.
    pub queue: Vec<(TaskId, i32)>,
    /// The sequence number of the last logged event (0 when none).
    pub last_event_seq: u64,
    /// The highest task id ever assigned (0 when none), removed tasks included.
    pub last_task_id: u64,
    /// A migration into this store began and did not finish: it holds part of its source.
    pub migration_underway: bool,
    /// The queue's controls (the default ones when none were ever stored).
    pub controls: QueueControls,
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
    /// Every notifier, by name.
    pub notifiers: Vec<Notifier>,
}

/// A durable home for tasks and events (and, through [`AuditLog`], the audit log).
/// Implementations must make a batch durable before `commit` returns, and reads must only
/// see committed data.
pub trait Store: AuditLog + Send + Sync + 'static {
    /// A short name for the backend, such as `redb`.
    fn backend_name(&self) -> &'static str;

    /// Writes a batch atomically and durably.
    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError>;

    /// Whether committed batches are durable only in a form the backend has yet to fold
    /// into its main file (the redb store's journal): [`Store::settle`] would do it.
    fn unsettled(&self) -> bool {
        false
    }

    /// Folds what is durable only in such a form into the main file (the redb store's
    /// checkpoint); the group committer calls it when no batch waits.
    fn settle(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Reads everything needed to rebuild the engine.
    fn load(&self) -> Result<Snapshot, StoreError>;

    /// One task.
    fn get(&self, id: TaskId) -> Result<Option<Task>, StoreError>;

    /// One workflow.
    fn workflow(&self, id: WorkflowId) -> Result<Option<Workflow>, StoreError>;

    /// The newest `limit` workflows, newest first; with `before`, only those with a
    /// smaller id (the next page).
    fn workflows(
        &self,
        before: Option<WorkflowId>,
        limit: usize,
    ) -> Result<Vec<Workflow>, StoreError>;

    /// Tasks matching `filter`, newest first (below its cursor, at most its limit), read
    /// through the indexes: the cost follows the result, not the store.
    fn list(&self, filter: &TaskFilter) -> Result<Vec<Task>, StoreError>;

    /// Calls `each` with every task in `status`, oldest first (the records are read one at a
    /// time, never all held at once).
    fn scan_status(&self, status: TaskStatus, each: &mut dyn FnMut(Task))
    -> Result<(), StoreError>;

    /// The status of every task whose id is in `ids` (from the status index, without
    /// reading the records); removed tasks are absent.
    fn statuses(
        &self,
        ids: std::ops::RangeInclusive<TaskId>,
    ) -> Result<std::collections::HashMap<TaskId, TaskStatus>, StoreError>;

    /// Logged events with a sequence number above `after`, oldest first, at most `limit`.
    fn events_after(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError>;

    /// The sequence number of the last logged event (0 when none).
    fn last_event_seq(&self) -> Result<u64, StoreError>;

    /// The events up to this sequence number were removed by the event retention (0:
    /// none was).
    fn events_removed_through(&self) -> Result<u64, StoreError>;

    /// The queue's controls (groups, pauses) as last stored.
    fn queue_controls(&self) -> Result<QueueControls, StoreError>;

    /// Every schedule, by name.
    fn schedules(&self) -> Result<Vec<Schedule>, StoreError>;

    /// Every notifier, by name.
    fn notifiers(&self) -> Result<Vec<Notifier>, StoreError>;

    /// The first `limit` notifications of the outbox, by key (the oldest events first).
    fn outbox(&self, limit: usize) -> Result<Vec<OutboxEntry>, StoreError>;

    /// The notifications due at `now`, of each notifier the first `per_notifier` by when
    /// they are due.
    fn outbox_due(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        per_notifier: usize,
    ) -> Result<Vec<OutboxEntry>, StoreError>;

    /// When the first notification of the outbox is due (none when it is empty).
    fn outbox_next_due(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError>;

    /// How many tasks are in each status.
    fn count_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError>;

    /// How many workflows are in each status (by the status's name; absent when none).
    fn count_workflows_by_status(&self) -> Result<Vec<(String, u64)>, StoreError>;
}
