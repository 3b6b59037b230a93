//! The placements of a cluster's attempts (`cluster_attempts`, schema migration 3): one
//! row per attempt the leader placed on a node, written in the same transaction as the
//! attempt's `Running` record. The node's worker runs it (noting its instance in
//! `launched_by` before it starts the process) and writes its outcome into the row; the
//! leader commits the outcome with the task's next state and removes the row in that
//! same transaction. A stop (cancel, shutdown) is a flag the leader sets on the row.
//!
//! Wake-ups go through LISTEN/NOTIFY: the leader's commits that place or stop attempts
//! notify [`ATTEMPTS_CHANNEL`], a worker's outcomes [`OUTCOMES_CHANNEL`]; both sides poll
//! as well, as a fallback.
//!
//! A worker's writes are fenced by its own lease: a node whose lease ran out (the
//! leader may have given its attempts to others) writes nothing.

use std::collections::HashSet;

use orch_protocol::{Nudge, TaskId};

use super::bridge::pg;
use super::codec::{signed, unsigned};
use super::write::Pipeline;
use super::{PostgresStore, cluster::NOW_MS};
use crate::store::{PlacementWrites, StoreError};

/// The channel the leader's commits that place or stop attempts notify.
pub(super) const ATTEMPTS_CHANNEL: &str = "orch_attempts";
/// The channel a worker's outcomes notify.
pub(super) const OUTCOMES_CHANNEL: &str = "orch_outcomes";

/// The attempts whose outcomes were recorded, and those no longer the node's to report,
/// as `(task, attempt)`.
pub type Reported = (HashSet<(TaskId, u32)>, HashSet<(TaskId, u32)>);

/// An attempt placed on a node, as its worker reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeAttempt {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// What to run (the task spec as JSON).
    pub spec: String,
    /// The leader asked for it to be stopped.
    pub stop: bool,
    /// The leader asked for it to be paused (until this is false again).
    pub paused: bool,
    /// The signals and input the leader asked for, in order (an entry this node cannot
    /// read is left out).
    pub nudges: Vec<Nudge>,
    /// The worker instance that started it, if one did.
    pub launched_by: Option<String>,
}

/// What a node reported of an attempt it runs, as the leader reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementReport {
    /// The task.
    pub id: TaskId,
    /// Which attempt.
    pub attempt: u32,
    /// Its outcome as the worker wrote it, once it ended.
    pub outcome: Option<String>,
    /// Its latest progress (JSON), with the version raised at each write.
    pub progress: Option<(u64, String)>,
}

/// A node as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlots {
    /// Its name.
    pub name: String,
    /// How many attempts it runs at once.
    pub parallel: u32,
    /// Its labels.
    pub labels: Vec<String>,
    /// Its lease runs and it runs placed attempts (a daemon of an earlier binary does
    /// not): it takes attempts.
    pub live: bool,
    /// Its attempts may still run (its lease, or a dead instance's, has not run out).
    pub holding: bool,
}

/// The rows of a batch's placements, ready to bind.
pub(super) struct PlacementRows {
    placed: (Vec<i64>, Vec<i32>, Vec<String>, Vec<String>),
    stops: (Vec<i64>, Vec<i32>),
    pauses: (Vec<i64>, Vec<i32>, Vec<bool>),
    nudges: (Vec<i64>, Vec<i32>, Vec<String>),
    done: (Vec<i64>, Vec<i32>),
}

impl PlacementRows {
    /// Encodes `writes`.
    pub(super) fn of(writes: &PlacementWrites) -> Result<PlacementRows, StoreError> {
        let mut placed = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for p in &writes.placed {
            placed.0.push(signed("task", p.id)?);
            placed.1.push(attempt_column(p.attempt));
            placed.2.push(p.node.clone());
            placed.3.push(super::encode("a task spec", &p.spec)?);
        }
        let mut pauses = (Vec::new(), Vec::new(), Vec::new());
        for (id, attempt, paused) in &writes.pauses {
            pauses.0.push(signed("task", *id)?);
            pauses.1.push(attempt_column(*attempt));
            pauses.2.push(*paused);
        }
        let mut nudges = (Vec::new(), Vec::new(), Vec::new());
        for (id, attempt, nudge) in &writes.nudges {
            nudges.0.push(signed("task", *id)?);
            nudges.1.push(attempt_column(*attempt));
            nudges.2.push(super::encode("a signal or input", nudge)?);
        }
        Ok(PlacementRows {
            placed,
            stops: key_columns(&writes.stops)?,
            pauses,
            nudges,
            done: key_columns(&writes.done)?,
        })
    }

    /// Adds the statements that write these rows (and wake the workers) to `steps`.
    pub(super) fn write<'a>(&'a self, steps: &mut Pipeline<'a>) {
        if !self.done.0.is_empty() {
            steps.push(
                "DELETE FROM cluster_attempts AS c
                 USING UNNEST($1::int8[], $2::int4[]) AS d(task_id, attempt)
                 WHERE c.task_id = d.task_id AND c.attempt = d.attempt",
                vec![&self.done.0, &self.done.1],
            );
        }
        let p = &self.placed;
        if !p.0.is_empty() {
            steps.push(
                "INSERT INTO cluster_attempts (task_id, attempt, node, spec)
                 SELECT * FROM UNNEST($1::int8[], $2::int4[], $3::text[], $4::text[])",
                vec![&p.0, &p.1, &p.2, &p.3],
            );
        }
        if !self.stops.0.is_empty() {
            steps.push(
                "UPDATE cluster_attempts AS c SET stop = true
                 FROM UNNEST($1::int8[], $2::int4[]) AS s(task_id, attempt)
                 WHERE c.task_id = s.task_id AND c.attempt = s.attempt",
                vec![&self.stops.0, &self.stops.1],
            );
        }
        let q = &self.pauses;
        if !q.0.is_empty() {
            // In order: the last change of an attempt in the batch is the one that stays.
            steps.push(
                "UPDATE cluster_attempts AS c SET paused = s.paused
                 FROM (SELECT DISTINCT ON (task_id, attempt) task_id, attempt, paused
                       FROM UNNEST($1::int8[], $2::int4[], $3::bool[]) WITH ORDINALITY
                            AS u(task_id, attempt, paused, n)
                       ORDER BY task_id, attempt, n DESC) AS s
                 WHERE c.task_id = s.task_id AND c.attempt = s.attempt",
                vec![&q.0, &q.1, &q.2],
            );
        }
        let g = &self.nudges;
        if !g.0.is_empty() {
            // In order: each attempt's nudges appended as they were asked for.
            steps.push(
                "UPDATE cluster_attempts AS c SET nudges = c.nudges || s.nudges
                 FROM (SELECT task_id, attempt, array_agg(nudge ORDER BY n) AS nudges
                       FROM UNNEST($1::int8[], $2::int4[], $3::text[]) WITH ORDINALITY
                            AS u(task_id, attempt, nudge, n)
                       GROUP BY task_id, attempt) AS s
                 WHERE c.task_id = s.task_id AND c.attempt = s.attempt",
                vec![&g.0, &g.1, &g.2],
            );
        }
        if !p.0.is_empty() || !self.stops.0.is_empty() || !q.0.is_empty() || !g.0.is_empty() {
            steps.push("SELECT pg_notify($1, '')", vec![&ATTEMPTS_CHANNEL]);
        }
    }
}

/// The `nudges` column (JSON texts) as nudges (one this binary cannot read is left out).
fn nudges_of(texts: Vec<String>) -> Vec<Nudge> {
    texts
        .iter()
        .filter_map(|text| serde_json::from_str(text).ok())
        .collect()
}

/// An attempt number as the `integer` column.
fn attempt_column(attempt: u32) -> i32 {
    i32::try_from(attempt).unwrap_or(i32::MAX)
}

/// The `integer` column as an attempt number.
fn attempt_of(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

/// The statement that succeeds only while node `$1` instance `$2`'s lease runs.
pub(super) fn lease_runs() -> String {
    format!(
        "EXISTS (SELECT 1 FROM cluster_nodes WHERE node = $1 AND instance = $2
            AND expires_ms > {NOW_MS})"
    )
}

impl PostgresStore {
    /// Every placed attempt: task, attempt and node.
    pub fn placements(&self) -> Result<Vec<(TaskId, u32, String)>, StoreError> {
        self.read(|conn| async move {
            let rows = conn
                .query(
                    "SELECT task_id, attempt, node FROM cluster_attempts ORDER BY task_id",
                    &[],
                )
                .await?;
            keyed_texts(rows)
        })
    }

    /// What the nodes reported of their attempts and the leader has not committed yet:
    /// each attempt with an outcome or a progress written.
    pub fn placement_reports(&self) -> Result<Vec<PlacementReport>, StoreError> {
        self.read(|conn| async move {
            let rows = conn
                .query(
                    "SELECT task_id, attempt, outcome, progress_version, progress
                     FROM cluster_attempts
                     WHERE outcome IS NOT NULL OR progress IS NOT NULL ORDER BY task_id",
                    &[],
                )
                .await?;
            let mut reports = Vec::with_capacity(rows.len());
            for row in rows {
                let progress: Option<String> = row.try_get(4).map_err(pg)?;
                let version = unsigned("progress", row.try_get(3).map_err(pg)?)?;
                reports.push(PlacementReport {
                    id: unsigned("task", row.try_get(0).map_err(pg)?)?,
                    attempt: attempt_of(row.try_get(1).map_err(pg)?),
                    outcome: row.try_get(2).map_err(pg)?,
                    progress: progress.map(|p| (version, p)),
                });
            }
            Ok(reports)
        })
    }

    /// Every node, with what placement needs of it.
    pub fn node_slots(&self) -> Result<Vec<NodeSlots>, StoreError> {
        self.read(|conn| async move {
            let sql = format!(
                "SELECT node, parallel, labels, expires_ms > {NOW_MS} AND runs_placements,
                    GREATEST(expires_ms, fenced_until_ms) > {NOW_MS}
                 FROM cluster_nodes ORDER BY node"
            );
            let rows = conn.query(&sql, &[]).await?;
            let mut nodes = Vec::with_capacity(rows.len());
            for row in rows {
                let labels: String = row.try_get(2).map_err(pg)?;
                nodes.push(NodeSlots {
                    name: row.try_get(0).map_err(pg)?,
                    parallel: u32::try_from(row.try_get::<_, i32>(1).map_err(pg)?).unwrap_or(0),
                    labels: serde_json::from_str(&labels).unwrap_or_default(),
                    live: row.try_get(3).map_err(pg)?,
                    holding: row.try_get(4).map_err(pg)?,
                });
            }
            Ok(nodes)
        })
    }

    /// The attempts placed on `node` whose outcome it has not reported yet.
    pub fn node_attempts(&self, node: &str) -> Result<Vec<NodeAttempt>, StoreError> {
        let node = node.to_string();
        self.read(|conn| async move {
            let rows = conn
                .query(
                    "SELECT task_id, attempt, spec, stop, launched_by, paused, nudges FROM cluster_attempts
                     WHERE node = $1 AND outcome IS NULL ORDER BY task_id",
                    &[&node],
                )
                .await?;
            let mut attempts = Vec::with_capacity(rows.len());
            for row in rows {
                attempts.push(NodeAttempt {
                    id: unsigned("task", row.try_get(0).map_err(pg)?)?,
                    attempt: attempt_of(row.try_get(1).map_err(pg)?),
                    spec: row.try_get(2).map_err(pg)?,
                    stop: row.try_get(3).map_err(pg)?,
                    launched_by: row.try_get(4).map_err(pg)?,
                    paused: row.try_get(5).map_err(pg)?,
                    nudges: nudges_of(row.try_get(6).map_err(pg)?),
                });
            }
            Ok(attempts)
        })
    }

    /// Notes that instance `instance` of `node` starts these attempts, while its lease
    /// runs; returns those noted (the others are no longer this node's to run).
    pub fn mark_launched(
        &self,
        node: &str,
        instance: &str,
        keys: &[(TaskId, u32)],
    ) -> Result<HashSet<(TaskId, u32)>, StoreError> {
        let (node, instance) = (node.to_string(), instance.to_string());
        let (ids, attempts) = key_columns(keys)?;
        self.read(|conn| async move {
            let sql = format!(
                "UPDATE cluster_attempts AS c SET launched_by = $2
                 FROM UNNEST($3::int8[], $4::int4[]) AS k(task_id, attempt)
                 WHERE c.task_id = k.task_id AND c.attempt = k.attempt AND c.node = $1
                    AND c.outcome IS NULL AND {}
                 RETURNING c.task_id, c.attempt",
                lease_runs()
            );
            let rows = conn
                .query(&sql, &[&node, &instance, &ids, &attempts])
                .await?;
            returned_keys(rows)
        })
    }

    /// Records the outcomes of `node`'s attempts (each the worker's text), while instance
    /// `instance`'s lease runs, and wakes the leader. Returns those recorded, and those
    /// that are no longer this node's to report (taken back, or already reported): the
    /// others (the lease ran out for a moment) are to be written again.
    pub fn record_outcomes(
        &self,
        node: &str,
        instance: &str,
        outcomes: &[(TaskId, u32, String)],
    ) -> Result<Reported, StoreError> {
        let (node, instance) = (node.to_string(), instance.to_string());
        let keys: Vec<(TaskId, u32)> = outcomes.iter().map(|(i, a, _)| (*i, *a)).collect();
        let (ids, attempts) = key_columns(&keys)?;
        let texts: Vec<String> = outcomes.iter().map(|(_, _, o)| o.clone()).collect();
        self.read(|conn| async move {
            let sql = format!(
                "UPDATE cluster_attempts AS c SET outcome = o.outcome
                 FROM UNNEST($3::int8[], $4::int4[], $5::text[]) AS o(task_id, attempt, outcome)
                 WHERE c.task_id = o.task_id AND c.attempt = o.attempt AND c.node = $1
                    AND c.outcome IS NULL AND {}
                 RETURNING c.task_id, c.attempt",
                lease_runs()
            );
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&node, &instance, &ids, &attempts, &texts];
            let recorded = returned_keys(conn.query(&sql, &params).await?)?;
            if !recorded.is_empty() {
                let channel = OUTCOMES_CHANNEL;
                conn.execute("SELECT pg_notify($1, '')", &[&channel])
                    .await?;
            }
            let waiting = conn
                .query(
                    "SELECT c.task_id, c.attempt FROM cluster_attempts AS c
                     JOIN UNNEST($2::int8[], $3::int4[]) AS k(task_id, attempt)
                        ON c.task_id = k.task_id AND c.attempt = k.attempt
                     WHERE c.node = $1 AND c.outcome IS NULL",
                    &[&node, &ids, &attempts],
                )
                .await?;
            let waiting = returned_keys(waiting)?;
            let gone = keys
                .into_iter()
                .filter(|k| !recorded.contains(k) && !waiting.contains(k))
                .collect();
            Ok((recorded, gone))
        })
    }

    /// Records the latest progress of `node`'s running attempts (each as JSON), while
    /// instance `instance`'s lease runs, and wakes the leader (on the outcomes' channel);
    /// how many were recorded.
    pub fn record_progress(
        &self,
        node: &str,
        instance: &str,
        progress: &[(TaskId, u32, String)],
    ) -> Result<u64, StoreError> {
        let (node, instance) = (node.to_string(), instance.to_string());
        let keys: Vec<(TaskId, u32)> = progress.iter().map(|(i, a, _)| (*i, *a)).collect();
        let (ids, attempts) = key_columns(&keys)?;
        let texts: Vec<String> = progress.iter().map(|(_, _, p)| p.clone()).collect();
        self.read(|conn| async move {
            let sql = format!(
                "WITH p AS (
                    UPDATE cluster_attempts AS c
                    SET progress = u.progress, progress_version = c.progress_version + 1
                    FROM UNNEST($3::int8[], $4::int4[], $5::text[]) AS u(task_id, attempt, progress)
                    WHERE c.task_id = u.task_id AND c.attempt = u.attempt AND c.node = $1
                       AND c.outcome IS NULL AND {}
                    RETURNING 1
                 )
                 SELECT count(*), pg_notify($6, '') FROM p HAVING count(*) > 0",
                lease_runs()
            );
            let channel = OUTCOMES_CHANNEL;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
                [&node, &instance, &ids, &attempts, &texts, &channel];
            let row = conn.query_opt(&sql, &params).await?;
            match row {
                Some(row) => unsigned("progress", row.try_get(0).map_err(pg)?),
                None => Ok(0),
            }
        })
    }

    /// Wake-ups when attempts are placed or stopped (for a node's worker).
    pub fn placement_wakeups(&self) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        self.wakeups(ATTEMPTS_CHANNEL)
    }

    /// Wake-ups when a node reports outcomes (for the leader).
    pub fn outcome_wakeups(&self) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        self.wakeups(OUTCOMES_CHANNEL)
    }
}

/// `keys` as the two array columns.
fn key_columns(keys: &[(TaskId, u32)]) -> Result<(Vec<i64>, Vec<i32>), StoreError> {
    let mut columns = (
        Vec::with_capacity(keys.len()),
        Vec::with_capacity(keys.len()),
    );
    for &(id, attempt) in keys {
        columns.0.push(signed("task", id)?);
        columns.1.push(attempt_column(attempt));
    }
    Ok(columns)
}

/// The `(task_id, attempt, text)` of each row.
fn keyed_texts(rows: Vec<tokio_postgres::Row>) -> Result<Vec<(TaskId, u32, String)>, StoreError> {
    let mut keyed = Vec::with_capacity(rows.len());
    for row in rows {
        let id = unsigned("task", row.try_get(0).map_err(pg)?)?;
        let attempt = attempt_of(row.try_get(1).map_err(pg)?);
        keyed.push((id, attempt, row.try_get(2).map_err(pg)?));
    }
    Ok(keyed)
}

/// The `(task_id, attempt)` of each row.
fn returned_keys(rows: Vec<tokio_postgres::Row>) -> Result<HashSet<(TaskId, u32)>, StoreError> {
    let mut keys = HashSet::with_capacity(rows.len());
    for row in rows {
        let id = unsigned("task", row.try_get(0).map_err(pg)?)?;
        keys.insert((id, attempt_of(row.try_get(1).map_err(pg)?)));
    }
    Ok(keys)
}
