//! A PostgreSQL backend: the same records, indexes and counts as the redb backend, in one
//! database, so that the daemon's state can live on a server.
//!
//! Tables (the schema and its migrations are in `schema`):
//! - `tasks`: id, status code, priority, label and the record (JSON text); indexed by
//!   `(status, id)`, `(label, id)`, and for the queue `(priority DESC, id)` over the queued
//!   ones only.
//! - `task_counts`: status code → number of tasks; `workflow_counts`: status name →
//!   number of workflows, kept in each batch's transaction.
//! - `events`: sequence number → event; `meta`: the highest id ever assigned and the last
//!   event removed by the retention.
//! - `workflows` (id, status name, record) and `test_envs` (id, record).
//! - `audit` (seq, action, entry as serde_json wrote it), `audit_head` (the last entry's
//!   seq and hash) and `audit_segments`.
//!
//! The client is asynchronous; `bridge` runs it on the store's own runtime behind the
//! synchronous trait. `target` keeps the URL (and its password) out of every message.
//! A batch becomes one transaction in `write`; the snapshot, lists and scans are in
//! `read`; the audit log in `audit`. One connection writes (commits and archiving, one at
//! a time), one serves the point reads and lists (the client pipelines concurrent
//! queries on it), and the start-up snapshot and the scans each read from a connection of
//! their own, in one repeatable-read transaction.

mod audit;
mod bridge;
mod cluster;
mod codec;
mod listen;
mod placement;
mod read;
mod relay;
mod schema;
mod target;
#[cfg(test)]
mod tests;
mod write;

use std::sync::{Arc, Mutex, PoisonError};

use orch_protocol::{Event, Task, TaskFilter, TaskId, TaskStatus, Workflow, WorkflowId};

use super::{Snapshot, Store, StoreError, WriteBatch};
use bridge::{Bridge, Conn, pg};
pub use cluster::{Beat, Leader, NodeRecord, Registration};
use codec::{decode, encode, record, signed, status_of, unsigned};
pub use placement::{NodeAttempt, NodeSlots, PlacementReport};
pub use relay::{ForwardedRequest, RequestState};
use target::Target;
pub use target::describe;

/// The session-level advisory lock on the database: shared by the daemons of a cluster,
/// exclusive for a migration (which needs the database to itself).
const OWNER_LOCK: i64 = 0x6f72_6368_6f77_6e72; // "orchownr"

/// How long `connect` waits for another daemon's lock (one that just exited) to go.
const OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The highest task id ever assigned (`meta` key).
const LAST_TASK_ID: &str = "last_task_id";
/// The events up to this sequence number were removed (`meta` key).
const EVENTS_REMOVED_THROUGH: &str = "events_removed_through";
/// Present (value 1) while a migration fills the database (`meta` key).
const MIGRATION_UNDERWAY: &str = "migration_underway";

/// A [`Store`] in a PostgreSQL database.
pub struct PostgresStore {
    /// Commits and archiving, one at a time.
    writer: Arc<Conn>,
    write_lock: Mutex<()>,
    /// Point reads and lists.
    reader: Arc<Conn>,
    /// Dropped last: the runtime the connections run on.
    bridge: Bridge,
    /// A lock of the caller's to hold as long as the store lives (the data directory's).
    held: Option<std::fs::File>,
    /// Whether the owner lock is held shared (by a daemon of a cluster).
    shared: bool,
    /// The leadership every write checks, once this daemon leads ([`Self::fence`]).
    fence: Mutex<Option<cluster::Fence>>,
    /// The connection of the cluster's calls (heartbeats, elections, views).
    cluster_conn: Mutex<Option<Arc<Conn>>>,
}

/// How a store holds its database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Alone (a migration): refused while any daemon uses the database.
    Exclusive,
    /// As one node of a cluster: other daemons may use the database too.
    Shared,
}

impl PostgresStore {
    /// Connects to the database at `url` (a `postgres://` URL or a `key=value` string),
    /// brings its schema to the current version, and takes the database for this daemon:
    /// a database another daemon is using is refused with [`StoreError::AlreadyOpen`], one
    /// whose schema is newer than this binary knows with [`StoreError::Unusable`] (left as
    /// it is). Errors name the server's host and database, never the URL.
    pub fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(url, false, Access::Exclusive)
    }

    /// Like [`connect`](Self::connect), as one node of a cluster: other daemons may use
    /// the database at the same time (the leadership decides which one writes); only a
    /// migration, which needs it alone, is kept out.
    pub fn join(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(url, false, Access::Shared)
    }

    /// Like [`connect`](Self::connect), but a database that holds no store (no schema
    /// yet) is refused with [`StoreError::Unusable`] and left as it is: for a migration's
    /// source, which must not be created by being read.
    pub fn open_existing(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open(url, true, Access::Exclusive)
    }

    fn open(url: &str, existing: bool, access: Access) -> Result<PostgresStore, StoreError> {
        let try_lock = match access {
            Access::Exclusive => "SELECT pg_try_advisory_lock($1)",
            Access::Shared => "SELECT pg_try_advisory_lock_shared($1)",
        };
        let bridge = Bridge::new(Target::parse(url)?)?;
        let writer = bridge.connect()?;
        let label = bridge.target.label.clone();
        let conn = writer.clone();
        let upgraded = bridge.run(async move {
            conn.batch("SET synchronous_commit TO on").await?;
            if existing {
                let row = conn
                    .query_opt("SELECT to_regclass('schema_version') IS NOT NULL", &[])
                    .await?;
                let found: bool = row.map(|r| r.try_get(0)).transpose().map_err(pg)?.unwrap_or(false);
                if !found {
                    return Ok(Err("it holds no orchestrator store (no schema_version table): nothing to migrate from".to_string()));
                }
            }
            let deadline = tokio::time::Instant::now() + OWNER_WAIT;
            loop {
                let row = conn
                    .query_opt(try_lock, &[&OWNER_LOCK])
                    .await?;
                if row
                    .map(|r| r.try_get::<_, bool>(0))
                    .transpose()
                    .map_err(pg)?
                    == Some(true)
                {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(StoreError::AlreadyOpen { path: label });
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            schema::upgrade(&conn).await
        })?;
        let label = &bridge.target.label;
        match upgraded {
            Err(problem) => {
                return Err(StoreError::Unusable {
                    path: label.clone(),
                    problem,
                });
            }
            Ok(schema::Upgrade::Migrated(from)) => {
                tracing::info!(store = %label, from, to = schema::CURRENT, "store schema migrated");
            }
            Ok(schema::Upgrade::Current) => {}
        }
        let reader = bridge.connect()?;
        Ok(PostgresStore {
            writer,
            write_lock: Mutex::new(()),
            reader,
            bridge,
            held: None,
            shared: access == Access::Shared,
            fence: Mutex::new(None),
            cluster_conn: Mutex::new(None),
        })
    }

    /// The store, holding `lock` (a file lock) until it is dropped.
    pub fn holding(mut self, lock: std::fs::File) -> PostgresStore {
        self.held = Some(lock);
        self
    }

    /// Runs `work` with the reader connection.
    fn read<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.bridge.run(work(self.reader.clone()))
    }

    /// Runs `work` in one transaction on the writer connection, one writer at a time.
    fn write<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let _one_writer = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let conn = self.writer.clone();
        let work = work(conn.clone());
        let fence = self
            .fence
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.bridge.run(async move {
            let fenced = async {
                if let Some(fence) = &fence {
                    fence.check(&conn).await?;
                }
                work.await
            };
            conn.transaction("BEGIN", fenced).await
        })
    }

    /// The largest task id assigned so far (0 before the first).
    pub fn last_task_id(&self) -> Result<u64, StoreError> {
        self.meta(LAST_TASK_ID)
    }

    /// The test environments on node `node`'s container engine, and those of no node
    /// (a single daemon's, whose containers the node must not take for leftovers).
    pub fn test_envs_of(&self, node: &str) -> Result<Vec<orch_protocol::TestEnv>, StoreError> {
        let node = node.to_string();
        self.read(|conn| async move {
            let rows = conn
                .query("SELECT id, body FROM test_envs ORDER BY id", &[])
                .await?;
            let envs: Vec<orch_protocol::TestEnv> = rows
                .iter()
                .map(|r| record("test environment", r))
                .collect::<Result<_, _>>()?;
            Ok(envs
                .into_iter()
                .filter(|e| e.node.as_deref().is_none_or(|n| n == node))
                .collect())
        })
    }

    /// The `meta` value under `key` (0 when unset).
    fn meta(&self, key: &'static str) -> Result<u64, StoreError> {
        self.read(|conn| async move {
            let row = conn
                .query_opt("SELECT value FROM meta WHERE key = $1", &[&key])
                .await?;
            row.map_or(Ok(0), |r| unsigned(key, r.try_get(0).map_err(pg)?))
        })
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Let the next daemon take the database at once (closing the connection would
        // too, once the server notices).
        let conn = self.writer.clone();
        let unlock = if self.shared {
            "SELECT pg_advisory_unlock_shared($1)"
        } else {
            "SELECT pg_advisory_unlock($1)"
        };
        let _ = self
            .bridge
            .run(async move { conn.execute(unlock, &[&OWNER_LOCK]).await.map(drop) });
    }
}

impl Store for PostgresStore {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    fn commit(&self, batch: &WriteBatch) -> Result<(), StoreError> {
        let plan = write::Plan::of(batch)?;
        self.write(|conn| async move { plan.apply(&conn).await })
    }

    fn load(&self) -> Result<Snapshot, StoreError> {
        read::snapshot(&self.bridge)
    }

    fn get(&self, id: TaskId) -> Result<Option<Task>, StoreError> {
        let key = signed("task", id)?;
        self.read(|conn| async move {
            let sql = "SELECT id, body FROM tasks WHERE id = $1";
            let row = conn.query_opt(sql, &[&key]).await?;
            row.map(|r| record("task", &r)).transpose()
        })
    }

    fn workflow(&self, id: WorkflowId) -> Result<Option<Workflow>, StoreError> {
        let key = signed("workflow", id)?;
        self.read(|conn| async move {
            let sql = "SELECT id, body FROM workflows WHERE id = $1";
            let row = conn.query_opt(sql, &[&key]).await?;
            row.map(|r| record("workflow", &r)).transpose()
        })
    }

    fn workflows(
        &self,
        before: Option<WorkflowId>,
        limit: usize,
    ) -> Result<Vec<Workflow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let before = before.map_or(i64::MAX, |id| i64::try_from(id).unwrap_or(i64::MAX));
        // (An id past a bigint's range is above every stored one: the same as no cursor.)
        self.read(|conn| async move {
            let sql = "SELECT id, body FROM workflows WHERE id < $1 ORDER BY id DESC LIMIT $2";
            let rows = conn.query(sql, &[&before, &limit]).await?;
            rows.iter().map(|r| record("workflow", r)).collect()
        })
    }

    fn list(&self, filter: &TaskFilter) -> Result<Vec<Task>, StoreError> {
        let query = read::ListQuery::of(filter);
        self.read(|conn| async move { query.run(&conn).await })
    }

    fn scan_status(
        &self,
        status: TaskStatus,
        each: &mut dyn FnMut(Task),
    ) -> Result<(), StoreError> {
        read::scan_status(&self.bridge, status, each)
    }

    fn statuses(
        &self,
        ids: std::ops::RangeInclusive<TaskId>,
    ) -> Result<std::collections::HashMap<TaskId, TaskStatus>, StoreError> {
        let Ok(low) = i64::try_from(*ids.start()) else {
            return Ok(std::collections::HashMap::new());
        };
        let high = i64::try_from(*ids.end()).unwrap_or(i64::MAX);
        self.read(|conn| async move {
            let sql = "SELECT id, status FROM tasks WHERE id BETWEEN $1 AND $2";
            let mut out = std::collections::HashMap::new();
            for row in conn.query(sql, &[&low, &high]).await? {
                let id: i64 = row.try_get(0).map_err(pg)?;
                let status = status_of(id, row.try_get(1).map_err(pg)?)?;
                out.insert(unsigned("task id", id)?, status);
            }
            Ok(out)
        })
    }

    fn events_after(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        // As in the redb backend, the first event above `after` is returned even for a
        // limit of 0.
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        self.read(|conn| async move {
            let sql = "SELECT seq, body FROM events WHERE seq > $1 ORDER BY seq LIMIT $2";
            let rows = conn.query(sql, &[&after, &limit]).await?;
            rows.iter().map(|r| record("event", r)).collect()
        })
    }

    fn last_event_seq(&self) -> Result<u64, StoreError> {
        self.read(|conn| async move { read::last_event_seq(&conn).await })
    }

    fn events_removed_through(&self) -> Result<u64, StoreError> {
        self.meta(EVENTS_REMOVED_THROUGH)
    }

    fn queue_controls(&self) -> Result<orch_protocol::QueueControls, StoreError> {
        self.read(|conn| async move { read::controls(&conn).await })
    }

    fn schedules(&self) -> Result<Vec<orch_protocol::Schedule>, StoreError> {
        self.read(|conn| async move { read::schedules(&conn).await })
    }

    fn notifiers(&self) -> Result<Vec<orch_protocol::Notifier>, StoreError> {
        self.read(|conn| async move { read::named(&conn, "notifiers", "notifier", i64::MAX).await })
    }

    fn outbox(&self, limit: usize) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(
            |conn| async move { read::named(&conn, "notify_outbox", "notification", limit).await },
        )
    }

    fn outbox_due(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        per_notifier: usize,
    ) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
        let (now_ms, per) = (
            now.timestamp_millis(),
            i64::try_from(per_notifier).unwrap_or(i64::MAX),
        );
        self.read(|conn| async move { read::outbox_due(&conn, now_ms, per).await })
    }

    fn outbox_next_due(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        self.read(|conn| async move { read::outbox_next_due(&conn).await })
    }

    fn count_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError> {
        let counts = self.read(|conn| async move {
            let mut counts = std::collections::HashMap::new();
            for row in conn.query("SELECT status, n FROM task_counts", &[]).await? {
                let code: i16 = row.try_get(0).map_err(pg)?;
                counts.insert(code, unsigned("task count", row.try_get(1).map_err(pg)?)?);
            }
            Ok(counts)
        })?;
        let count = |s: TaskStatus| counts.get(&i16::from(s.code())).copied().unwrap_or(0);
        Ok(TaskStatus::ALL.into_iter().map(|s| (s, count(s))).collect())
    }

    fn count_workflows_by_status(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.read(|conn| async move {
            let sql = "SELECT status, n FROM workflow_counts ORDER BY status COLLATE \"C\"";
            let mut out = Vec::new();
            for row in conn.query(sql, &[]).await? {
                let n = unsigned("workflow count", row.try_get(1).map_err(pg)?)?;
                out.push((row.try_get(0).map_err(pg)?, n));
            }
            Ok(out)
        })
    }
}
