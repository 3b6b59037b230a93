//! One batch as one transaction, in the order the redb backend applies it: task records
//! (their status, priority and label columns are the indexes; the counts change by the
//! status each write leaves and enters), events and their trimming, workflows (with their
//! status counts) and their removals, test environments, the highest id, task removals,
//! and the audit entries sealed onto the chain.
//!
//! A batch is turned into a [`Plan`] first (records encoded, counts worked out) on the
//! caller's thread; each kind of row is then written by one multi-row statement over
//! arrays (`UNNEST`), and those statements are sent together as one pipeline, so a batch
//! costs a few round trips (begin, the reads the writes depend on, the writes, commit)
//! whatever its size.

use std::collections::{BTreeMap, HashMap};

use tokio_postgres::types::ToSql;

use super::bridge::{Conn, pg};
use super::placement::PlacementRows;
use super::{EVENTS_REMOVED_THROUGH, LAST_TASK_ID, MIGRATION_UNDERWAY, encode, signed};
use crate::audit::AuditRecord;
use crate::store::{StoreError, WriteBatch};

/// Task rows to upsert (the last write of each id in the batch).
#[derive(Default)]
struct TaskRows {
    ids: Vec<i64>,
    statuses: Vec<i16>,
    priorities: Vec<i32>,
    labels: Vec<Option<String>>,
    bodies: Vec<String>,
}

/// A batch ready to be written.
pub(super) struct Plan {
    tasks: TaskRows,
    /// Status code → change in its count (every status a write or removal touched).
    counts: BTreeMap<i16, i64>,
    events: (Vec<i64>, Vec<String>),
    events_removed_through: Option<i64>,
    /// Workflow id → its status name and record, the last write of each.
    workflows: BTreeMap<i64, (String, String)>,
    /// Workflow statuses in the order the batch sets them (for the counts).
    workflow_steps: Vec<(i64, Option<String>)>,
    workflow_removals: Vec<i64>,
    test_envs: (Vec<i64>, Vec<String>),
    newest: Option<i64>,
    removals: Vec<i64>,
    audit: Vec<AuditRecord>,
    migration_underway: Option<bool>,
    placements: PlacementRows,
    /// The queue's controls, as JSON.
    controls: Option<String>,
    /// Schedules to write: names and bodies.
    schedules: (Vec<String>, Vec<String>),
    /// Schedules to remove, by name.
    schedule_removals: Vec<String>,
    /// Notifiers to write: names and bodies.
    notifiers: (Vec<String>, Vec<String>),
    /// Notifiers to remove, by name.
    notifier_removals: Vec<String>,
    /// Notifications to write: keys, bodies, notifiers and when due (ms).
    outbox: OutboxRows,
    /// Notifications to remove, by key.
    outbox_removals: Vec<String>,
    /// Notifiers whose notifications all go.
    outbox_purges: Vec<String>,
}

/// The columns of outbox rows to write.
#[derive(Default)]
struct OutboxRows {
    keys: Vec<String>,
    bodies: Vec<String>,
    notifiers: Vec<String>,
    due_ms: Vec<i64>,
}

impl Plan {
    /// Encodes `batch`.
    pub(super) fn of(batch: &WriteBatch) -> Result<Plan, StoreError> {
        let mut counts = BTreeMap::new();
        let mut last: HashMap<u64, usize> = HashMap::new();
        for (i, write) in batch.tasks.iter().enumerate() {
            last.insert(write.task.id, i);
            let status = write.task.state.status();
            if write.previous == Some(status) {
                continue;
            }
            if let Some(previous) = write.previous {
                *counts.entry(i16::from(previous.code())).or_insert(0) -= 1;
            }
            *counts.entry(i16::from(status.code())).or_insert(0) += 1;
        }
        let mut tasks = TaskRows::default();
        for (i, write) in batch.tasks.iter().enumerate() {
            if last.get(&write.task.id) != Some(&i) {
                continue;
            }
            let task = &write.task;
            tasks.ids.push(signed("task", task.id)?);
            tasks.statuses.push(i16::from(task.state.status().code()));
            tasks.priorities.push(task.spec.priority);
            tasks.labels.push(task.spec.label.clone());
            tasks.bodies.push(encode("a task", task)?);
        }
        let mut events = BTreeMap::new();
        for event in &batch.events {
            events.insert(signed("event", event.seq)?, encode("an event", event)?);
        }
        let mut workflows = BTreeMap::new();
        let mut workflow_steps = Vec::new();
        for workflow in &batch.workflows {
            let id = signed("workflow", workflow.id)?;
            let status = workflow.state.status().as_str().to_string();
            workflow_steps.push((id, Some(status.clone())));
            workflows.insert(id, (status, encode("a workflow", workflow)?));
        }
        let mut workflow_removals = Vec::new();
        for id in &batch.workflow_removals {
            let id = signed("workflow", *id)?;
            workflow_steps.push((id, None));
            workflow_removals.push(id);
        }
        let mut test_envs = BTreeMap::new();
        for env in &batch.test_envs {
            test_envs.insert(
                signed("test environment", env.id)?,
                encode("a test environment", env)?,
            );
        }
        let newest = batch
            .highest_new_id()
            .map(|id| signed("task", id))
            .transpose()?;
        let mut removals = Vec::new();
        for task in &batch.removals {
            removals.push(signed("task", task.id)?);
            *counts
                .entry(i16::from(task.state.status().code()))
                .or_insert(0) -= 1;
        }
        let through = batch.events_removed_through;
        Ok(Plan {
            tasks,
            counts,
            events: events.into_iter().unzip(),
            events_removed_through: through.map(|t| signed("event", t)).transpose()?,
            workflows,
            workflow_steps,
            workflow_removals,
            test_envs: test_envs.into_iter().unzip(),
            newest,
            removals,
            audit: batch.audit.clone(),
            migration_underway: batch.migration_underway,
            placements: PlacementRows::of(&batch.placements)?,
            controls: batch
                .controls
                .as_ref()
                .map(|c| encode("the queue's controls", c))
                .transpose()?,
            schedules: batch
                .schedules
                .iter()
                .map(|s| Ok((s.spec.name.clone(), encode("a schedule", s)?)))
                .collect::<Result<Vec<_>, StoreError>>()?
                .into_iter()
                .unzip(),
            schedule_removals: batch.schedule_removals.clone(),
            notifiers: named_rows(
                batch.notifiers.iter().map(|n| (&n.spec.name, n)),
                "a notifier",
            )?,
            notifier_removals: batch.notifier_removals.clone(),
            outbox: outbox_rows(&batch.outbox)?,
            outbox_removals: batch.outbox_removals.clone(),
            outbox_purges: batch.outbox_purges.clone(),
        })
    }

    /// Writes the plan in the open transaction on `conn` (the caller commits): the reads
    /// the writes depend on first (the workflows' statuses, the audit head), then every
    /// write, in order, sent together.
    pub(super) async fn apply(mut self, conn: &Conn) -> Result<(), StoreError> {
        let workflow_counts = self.workflow_counts(conn).await?;
        let records = std::mem::take(&mut self.audit);
        let sealed = if records.is_empty() {
            None
        } else {
            Some(super::audit::seal(conn, records).await?)
        };
        let task_counts: (Vec<i16>, Vec<i64>) = self.counts.iter().map(|(k, v)| (*k, *v)).unzip();
        let workflow_ids: Vec<i64> = self.workflows.keys().copied().collect();
        let (workflow_statuses, workflow_bodies): (Vec<&str>, Vec<&str>) = self
            .workflows
            .values()
            .map(|(s, b)| (s.as_str(), b.as_str()))
            .unzip();
        let mut steps = Pipeline::default();
        let t = &self.tasks;
        if !t.ids.is_empty() {
            steps.push(
                "INSERT INTO tasks (id, status, priority, label, body)
                 SELECT * FROM UNNEST($1::int8[], $2::int2[], $3::int4[], $4::text[], $5::text[])
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,
                    priority = EXCLUDED.priority, label = EXCLUDED.label, body = EXCLUDED.body",
                vec![&t.ids, &t.statuses, &t.priorities, &t.labels, &t.bodies],
            );
        }
        if !self.events.0.is_empty() {
            steps.push(
                "INSERT INTO events (seq, body) SELECT * FROM UNNEST($1::int8[], $2::text[])
                 ON CONFLICT (seq) DO UPDATE SET body = EXCLUDED.body",
                vec![&self.events.0, &self.events.1],
            );
            // One wake-up per transaction (delivered at its commit) for the nodes that
            // follow the event log; a fixed payload, so the server has nothing to
            // de-duplicate.
            steps.push(
                "SELECT pg_notify($1, '')",
                vec![&super::listen::EVENTS_CHANNEL],
            );
        }
        if let Some(through) = &self.events_removed_through {
            steps.push("DELETE FROM events WHERE seq <= $1", vec![through]);
            steps.push(RAISE_META, vec![&EVENTS_REMOVED_THROUGH, through]);
        }
        if !workflow_ids.is_empty() {
            steps.push(
                "INSERT INTO workflows (id, status, body)
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, body = EXCLUDED.body",
                vec![&workflow_ids, &workflow_statuses, &workflow_bodies],
            );
        }
        if !self.workflow_removals.is_empty() {
            let sql = "DELETE FROM workflows WHERE id = ANY($1)";
            steps.push(sql, vec![&self.workflow_removals]);
        }
        if let Some((names, deltas)) = &workflow_counts {
            steps.add_counts("workflow_counts", "text", names, deltas);
        }
        if !self.test_envs.0.is_empty() {
            steps.push(
                "INSERT INTO test_envs (id, body) SELECT * FROM UNNEST($1::int8[], $2::text[])
                 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
                vec![&self.test_envs.0, &self.test_envs.1],
            );
        }
        if let Some(newest) = &self.newest {
            steps.push(RAISE_META, vec![&LAST_TASK_ID, newest]);
        }
        if !self.removals.is_empty() {
            let sql = "DELETE FROM tasks WHERE id = ANY($1)";
            steps.push(sql, vec![&self.removals]);
        }
        if !task_counts.0.is_empty() {
            steps.add_counts("task_counts", "int2", &task_counts.0, &task_counts.1);
        }
        if let Some(sealed) = &sealed {
            sealed.write(&mut steps);
        }
        self.placements.write(&mut steps);
        if !self.schedules.0.is_empty() {
            // One row per name: the last write of each in the batch.
            steps.push(
                "INSERT INTO schedules (name, body)
                 SELECT DISTINCT ON (name) name, body
                 FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS s(name, body, n)
                 ORDER BY name, n DESC
                 ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body",
                vec![&self.schedules.0, &self.schedules.1],
            );
        }
        if !self.schedule_removals.is_empty() {
            let sql = "DELETE FROM schedules WHERE name = ANY($1)";
            steps.push(sql, vec![&self.schedule_removals]);
        }
        upsert_notifiers(&mut steps, &self.notifiers);
        if !self.notifier_removals.is_empty() {
            let sql = "DELETE FROM notifiers WHERE name = ANY($1)";
            steps.push(sql, vec![&self.notifier_removals]);
        }
        let o = &self.outbox;
        if !o.keys.is_empty() {
            steps.push(
                "INSERT INTO notify_outbox (key, body, notifier, due_ms)
                 SELECT DISTINCT ON (key) key, body, notifier, due_ms
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::int8[]) WITH ORDINALITY
                      AS s(key, body, notifier, due_ms, n)
                 ORDER BY key, n DESC
                 ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body,
                    notifier = EXCLUDED.notifier, due_ms = EXCLUDED.due_ms",
                vec![&o.keys, &o.bodies, &o.notifiers, &o.due_ms],
            );
        }
        if !self.outbox_removals.is_empty() {
            let sql = "DELETE FROM notify_outbox WHERE key = ANY($1)";
            steps.push(sql, vec![&self.outbox_removals]);
        }
        if !self.outbox_purges.is_empty() {
            let sql = "DELETE FROM notify_outbox WHERE notifier = ANY($1)";
            steps.push(sql, vec![&self.outbox_purges]);
        }
        if let Some(controls) = &self.controls {
            steps.push(
                "INSERT INTO queue_controls (body) VALUES ($1)
                 ON CONFLICT (only_row) DO UPDATE SET body = EXCLUDED.body",
                vec![controls],
            );
        }
        match self.migration_underway {
            Some(true) => steps.push(
                "INSERT INTO meta (key, value) VALUES ($1, 1) ON CONFLICT (key) DO NOTHING",
                vec![&MIGRATION_UNDERWAY],
            ),
            Some(false) => steps.push("DELETE FROM meta WHERE key = $1", vec![&MIGRATION_UNDERWAY]),
            None => {}
        }
        conn.pipeline(&steps.0).await
    }

    /// How the batch's workflow writes and removals move the workflow counts (status name
    /// → change), from the statuses stored before it.
    async fn workflow_counts(
        &self,
        conn: &Conn,
    ) -> Result<Option<(Vec<String>, Vec<i64>)>, StoreError> {
        if self.workflow_steps.is_empty() {
            return Ok(None);
        }
        let ids: Vec<i64> = self.workflow_steps.iter().map(|(id, _)| *id).collect();
        let mut current: HashMap<i64, Option<String>> = HashMap::new();
        let sql = "SELECT id, status FROM workflows WHERE id = ANY($1)";
        for row in conn.query(sql, &[&ids]).await? {
            current.insert(row.try_get(0).map_err(pg)?, row.try_get(1).map_err(pg)?);
        }
        let mut counts: BTreeMap<String, i64> = BTreeMap::new();
        for (id, status) in &self.workflow_steps {
            let before = current.get(id).cloned().flatten();
            if before == *status {
                continue;
            }
            if let Some(before) = before {
                *counts.entry(before).or_insert(0) -= 1;
            }
            if let Some(status) = status {
                *counts.entry(status.clone()).or_insert(0) += 1;
            }
            current.insert(*id, status.clone());
        }
        Ok((!counts.is_empty()).then(|| counts.into_iter().unzip()))
    }
}

/// Sets the `meta` value `$1` to `$2` unless it is already higher.
const RAISE_META: &str = "INSERT INTO meta (key, value) VALUES ($1, $2)
    ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value, EXCLUDED.value)";

/// Parameters of one statement.
type Params<'a> = Vec<&'a (dyn ToSql + Sync)>;

/// Statements to run in order, sent together.
#[derive(Default)]
pub(super) struct Pipeline<'a>(pub(super) Vec<(String, Params<'a>)>);

impl<'a> Pipeline<'a> {
    /// Appends a statement.
    pub(super) fn push(&mut self, sql: impl Into<String>, params: Params<'a>) {
        self.0.push((sql.into(), params));
    }

    /// Appends the statements adding `deltas` to the counts of `keys` in `table` (a row
    /// made for each key first), never going below zero.
    fn add_counts<K: ToSql + Sync>(
        &mut self,
        table: &str,
        key_type: &str,
        keys: &'a Vec<K>,
        deltas: &'a Vec<i64>,
    ) {
        let create = format!(
            "INSERT INTO {table} (status, n) SELECT key, 0 FROM UNNEST($1::{key_type}[]) AS k(key)
             ON CONFLICT (status) DO NOTHING"
        );
        self.push(create, vec![keys]);
        let add = format!(
            "UPDATE {table} SET n = GREATEST({table}.n + d.delta, 0)
             FROM UNNEST($1::{key_type}[], $2::int8[]) AS d(key, delta) WHERE {table}.status = d.key"
        );
        self.push(add, vec![keys, deltas]);
    }
}

/// Names and JSON bodies of `records`.
fn named_rows<'a, T: serde::Serialize + 'a>(
    records: impl Iterator<Item = (&'a String, &'a T)>,
    what: &str,
) -> Result<(Vec<String>, Vec<String>), StoreError> {
    let mut rows = (Vec::new(), Vec::new());
    for (name, record) in records {
        rows.0.push(name.clone());
        rows.1.push(encode(what, record)?);
    }
    Ok(rows)
}

/// The statement that inserts or replaces notifier `rows` (names and bodies): the last of
/// a name in the batch stays.
fn upsert_notifiers<'a>(steps: &mut Pipeline<'a>, rows: &'a (Vec<String>, Vec<String>)) {
    if rows.0.is_empty() {
        return;
    }
    steps.push(
        "INSERT INTO notifiers (name, body)
         SELECT DISTINCT ON (name) name, body
         FROM UNNEST($1::text[], $2::text[]) WITH ORDINALITY AS s(name, body, n)
         ORDER BY name, n DESC
         ON CONFLICT (name) DO UPDATE SET body = EXCLUDED.body",
        vec![&rows.0, &rows.1],
    );
}

/// The columns of `entries`.
fn outbox_rows(entries: &[orch_protocol::OutboxEntry]) -> Result<OutboxRows, StoreError> {
    let mut rows = OutboxRows::default();
    for entry in entries {
        rows.keys.push(entry.key.clone());
        rows.bodies.push(encode("a notification", entry)?);
        rows.notifiers.push(entry.notifier.clone());
        rows.due_ms.push(entry.due.timestamp_millis());
    }
    Ok(rows)
}
