//! The reads that must not scan: task lists (index-ordered, below the cursor, stopping at
//! the limit), and the reads of one consistent state on a connection of their own: the
//! start-up snapshot (the queued tasks from the queue index alone) and the scans by
//! status, which fetch through a cursor a page at a time.

use std::ops::ControlFlow;
use std::sync::Arc;

use orch_protocol::{Task, TaskFilter, TaskId, TaskStatus, TestEnv, Workflow};
use tokio_postgres::Row;

use super::bridge::{Bridge, Conn, pg};
use super::{EVENTS_REMOVED_THROUGH, LAST_TASK_ID, MIGRATION_UNDERWAY, decode, record, unsigned};
use crate::store::{Snapshot, StoreError};

/// How many rows a cursor fetches at a time.
const PAGE: usize = 256;

/// A task list's query: the newest tasks at or below `highest`.
pub(super) struct ListQuery {
    /// `None`: nothing can match (a cursor of 0, or a limit of 0).
    highest: Option<i64>,
    limit: Option<i64>,
    label: Option<String>,
    statuses: Vec<i16>,
}

impl ListQuery {
    /// The query for `filter`.
    pub(super) fn of(filter: &TaskFilter) -> ListQuery {
        let highest = filter.before.map_or(Some(u64::MAX), |b| b.checked_sub(1));
        let mut statuses: Vec<i16> = filter.status.iter().map(|s| i16::from(s.code())).collect();
        statuses.sort_unstable();
        statuses.dedup();
        ListQuery {
            highest: highest
                .filter(|_| filter.limit != Some(0))
                .map(|h| i64::try_from(h).unwrap_or(i64::MAX)),
            limit: filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX)),
            label: filter.label.clone(),
            statuses,
        }
    }

    /// From the label index when a label is given (the statuses checked on each row), else
    /// from the status index (the newest `limit` of each status, merged), else from the
    /// primary key. The status codes are small integers of ours (never text from a
    /// request), so writing them into the statement needs no quoting.
    pub(super) async fn run(self, conn: &Conn) -> Result<Vec<Task>, StoreError> {
        let Some(highest) = self.highest else {
            return Ok(Vec::new());
        };
        let rows = if let Some(label) = &self.label {
            let sql = "SELECT id, body FROM tasks
                WHERE label = $1 AND id <= $2 AND (cardinality($3::int2[]) = 0 OR status = ANY($3))
                ORDER BY id DESC LIMIT $4";
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                [label, &highest, &self.statuses, &self.limit];
            conn.query(sql, &params).await?
        } else if !self.statuses.is_empty() {
            // One index-ordered range per status (their codes written in, so that the
            // planner sees each one's share of the table), merged newest first.
            let ranges: Vec<String> = self
                .statuses
                .iter()
                .map(|code| {
                    format!(
                        "(SELECT id, body FROM tasks WHERE status = {code} AND id <= $1
                          ORDER BY id DESC LIMIT $2)"
                    )
                })
                .collect();
            let sql = format!(
                "SELECT id, body FROM ({}) AS t ORDER BY id DESC LIMIT $2",
                ranges.join(" UNION ALL ")
            );
            conn.query(&sql, &[&highest, &self.limit]).await?
        } else {
            let sql = "SELECT id, body FROM tasks WHERE id <= $1 ORDER BY id DESC LIMIT $2";
            conn.query(sql, &[&highest, &self.limit]).await?
        };
        rows.iter().map(|r| record("task", r)).collect()
    }
}

/// The sequence number of the last logged event, or of the last one trimmed away.
pub(super) async fn last_event_seq(conn: &Conn) -> Result<u64, StoreError> {
    let sql = "SELECT GREATEST(
        COALESCE((SELECT max(seq) FROM events), 0),
        COALESCE((SELECT value FROM meta WHERE key = $1), 0))";
    let row = conn.query_opt(sql, &[&EVENTS_REMOVED_THROUGH]).await?;
    row.map_or(Ok(0), |r| unsigned("event seq", r.try_get(0).map_err(pg)?))
}

/// A read-only, repeatable-read transaction on a connection of its own (closed, and so
/// ended, when dropped).
pub(super) struct ReadSnapshot<'a> {
    bridge: &'a Bridge,
    conn: Arc<Conn>,
}

impl<'a> ReadSnapshot<'a> {
    /// Connects and begins the transaction.
    pub(super) fn begin(bridge: &'a Bridge) -> Result<ReadSnapshot<'a>, StoreError> {
        let conn = bridge.connect()?;
        let begin = conn.clone();
        bridge.run(async move {
            begin
                .batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await
        })?;
        Ok(ReadSnapshot { bridge, conn })
    }

    /// Runs `work` with the snapshot's connection.
    pub(super) fn run<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.bridge.run(work(self.conn.clone()))
    }

    /// Passes the rows of `select` (no parameters) to `each`, a page at a time, until
    /// `each` breaks.
    pub(super) fn cursor(
        &self,
        select: &str,
        each: &mut dyn FnMut(&Row) -> Result<ControlFlow<()>, StoreError>,
    ) -> Result<(), StoreError> {
        let declare = format!("DECLARE rows NO SCROLL CURSOR FOR {select}");
        self.run(|conn| async move { conn.batch(&declare).await })?;
        let fetch = format!("FETCH {PAGE} FROM rows");
        loop {
            let fetch = fetch.clone();
            let rows = self.run(|conn| async move { conn.query(&fetch, &[]).await })?;
            for row in &rows {
                if each(row)?.is_break() {
                    return Ok(());
                }
            }
            if rows.len() < PAGE {
                return Ok(());
            }
        }
    }
}

/// The start-up snapshot, all from one consistent read.
pub(super) fn snapshot(bridge: &Bridge) -> Result<Snapshot, StoreError> {
    ReadSnapshot::begin(bridge)?.run(|conn| async move {
        let rows = conn
            .query("SELECT id, body FROM workflows ORDER BY id", &[])
            .await?;
        let workflows: Vec<Workflow> = rows
            .iter()
            .map(|r| record("workflow", r))
            .collect::<Result<_, _>>()?;
        let mut wanted: Vec<i64> = Vec::new();
        for w in &workflows {
            let steps = w.steps.iter().map(|s| s.task);
            for id in steps.chain(w.rollback_steps.iter().map(|r| r.task)) {
                wanted.push(super::signed("task", id)?);
            }
        }
        let held: Vec<i16> = crate::store::HELD
            .iter()
            .map(|s| i16::from(s.code()))
            .collect();
        let sql = "SELECT id FROM tasks WHERE status = ANY($1)";
        for row in conn.query(sql, &[&held]).await? {
            wanted.push(row.try_get(0).map_err(pg)?);
        }
        wanted.sort_unstable();
        wanted.dedup();
        let sql = "SELECT id, body FROM tasks WHERE id = ANY($1) ORDER BY id";
        let rows = conn.query(sql, &[&wanted]).await?;
        let tasks: Vec<Task> = rows
            .iter()
            .map(|r| record("task", r))
            .collect::<Result<_, _>>()?;
        // The code written in, as in the queue index's predicate.
        let sql = format!(
            "SELECT id, priority FROM tasks WHERE status = {} ORDER BY priority DESC, id",
            TaskStatus::Queued.code()
        );
        let mut queue: Vec<(TaskId, i32)> = Vec::new();
        for row in conn.query(&sql, &[]).await? {
            let id = unsigned("task id", row.try_get(0).map_err(pg)?)?;
            queue.push((id, row.try_get(1).map_err(pg)?));
        }
        let rows = conn
            .query("SELECT id, body FROM test_envs ORDER BY id", &[])
            .await?;
        let test_envs: Vec<TestEnv> = rows
            .iter()
            .map(|r| record("test environment", r))
            .collect::<Result<_, _>>()?;
        let sql = "SELECT value FROM meta WHERE key = $1";
        let last_task_id = match conn.query_opt(sql, &[&LAST_TASK_ID]).await? {
            Some(row) => unsigned(LAST_TASK_ID, row.try_get(0).map_err(pg)?)?,
            None => 0,
        };
        let migration_underway = conn.query_opt(sql, &[&MIGRATION_UNDERWAY]).await?;
        let controls = controls(&conn).await?;
        let schedules = schedules(&conn).await?;
        let notifiers = named(&conn, "notifiers", "notifier", i64::MAX).await?;
        Ok(Snapshot {
            tasks,
            workflows,
            test_envs,
            queue,
            last_event_seq: last_event_seq(&conn).await?,
            last_task_id,
            migration_underway: migration_underway.is_some(),
            controls,
            schedules,
            notifiers,
        })
    })
}

/// Calls `each` with every task in `status`, oldest first, from one consistent read.
pub(super) fn scan_status(
    bridge: &Bridge,
    status: TaskStatus,
    each: &mut dyn FnMut(Task),
) -> Result<(), StoreError> {
    let snapshot = ReadSnapshot::begin(bridge)?;
    // The code is a small integer of ours: no quoting is needed.
    let select = format!(
        "SELECT id, body FROM tasks WHERE status = {} ORDER BY id",
        status.code()
    );
    snapshot.cursor(&select, &mut |row| {
        let id: i64 = row.try_get(0).map_err(pg)?;
        each(decode(&format!("task {id}"), row.try_get(1).map_err(pg)?)?);
        Ok(ControlFlow::Continue(()))
    })
}

/// The queue's controls as stored (the default ones when none were).
pub(super) async fn controls(conn: &Conn) -> Result<orch_protocol::QueueControls, StoreError> {
    let sql = "SELECT body FROM queue_controls";
    let Some(row) = conn.query_opt(sql, &[]).await? else {
        return Ok(orch_protocol::QueueControls::default());
    };
    let body: String = row.try_get(0).map_err(pg)?;
    serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
        what: "the queue's controls".into(),
        error: e.to_string(),
    })
}

/// Every schedule, by name.
pub(super) async fn schedules(conn: &Conn) -> Result<Vec<orch_protocol::Schedule>, StoreError> {
    let rows = conn
        .query("SELECT name, body FROM schedules ORDER BY name", &[])
        .await?;
    let mut schedules = Vec::with_capacity(rows.len());
    for row in rows {
        let name: String = row.try_get(0).map_err(pg)?;
        let body: String = row.try_get(1).map_err(pg)?;
        schedules.push(
            serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                what: format!("schedule {name}"),
                error: e.to_string(),
            })?,
        );
    }
    Ok(schedules)
}

/// The first `limit` JSON records of `table` (`notifiers` or `notify_outbox`: its first
/// column the name, its second the body), in name order.
pub(super) async fn named<T: serde::de::DeserializeOwned>(
    conn: &Conn,
    table: &str,
    what: &str,
    limit: i64,
) -> Result<Vec<T>, StoreError> {
    // `table` is one of two constants of this module's callers, never input.
    let sql = format!("SELECT * FROM {table} ORDER BY 1 LIMIT $1");
    let rows = conn.query(&sql, &[&limit]).await?;
    let mut records = Vec::with_capacity(rows.len());
    for row in rows {
        let name: String = row.try_get(0).map_err(pg)?;
        let body: String = row.try_get(1).map_err(pg)?;
        records.push(
            serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                what: format!("{what} {name}"),
                error: e.to_string(),
            })?,
        );
    }
    Ok(records)
}

/// The notifications due at `now_ms`, of each notifier the first `per_notifier` by when
/// they are due.
pub(super) async fn outbox_due(
    conn: &Conn,
    now_ms: i64,
    per_notifier: i64,
) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
    let rows = conn
        .query(
            "SELECT o.key, o.body FROM notifiers AS n CROSS JOIN LATERAL (
                 SELECT key, body FROM notify_outbox
                 WHERE notifier = n.name AND due_ms <= $1
                 ORDER BY due_ms, key LIMIT $2) AS o",
            &[&now_ms, &per_notifier],
        )
        .await?;
    let mut due = Vec::with_capacity(rows.len());
    for row in rows {
        let key: String = row.try_get(0).map_err(pg)?;
        let body: String = row.try_get(1).map_err(pg)?;
        due.push(
            serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                what: format!("notification {key}"),
                error: e.to_string(),
            })?,
        );
    }
    Ok(due)
}

/// When the first notification of the outbox is due.
pub(super) async fn outbox_next_due(
    conn: &Conn,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    let sql = "SELECT min(due_ms) FROM notify_outbox";
    let first: Option<i64> = match conn.query_opt(sql, &[]).await? {
        Some(row) => row.try_get(0).map_err(pg)?,
        None => None,
    };
    Ok(first.and_then(chrono::DateTime::from_timestamp_millis))
}
