//! One batch as one transaction, in the order the redb backend applies it: task records
//! (their status, priority and label columns are the indexes; the counts change by the
//! status each write leaves and enters), events and their trimming, workflows (with their
//! status counts) and their removals, test environments, the highest id, task removals,
//! and the audit entries sealed onto the chain.
//!
//! A batch is turned into a [`Plan`] first (records encoded, counts worked out) on the
//! caller's thread; each kind of row is then written by one multi-row statement over
//! arrays, so a batch costs a handful of round trips whatever its size.

use std::collections::{BTreeMap, HashMap};

use super::bridge::{Conn, pg};
use super::{EVENTS_REMOVED_THROUGH, LAST_TASK_ID, encode, signed};
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
            .tasks
            .iter()
            .filter(|w| w.previous.is_none())
            .map(|w| w.task.id)
            .chain(batch.workflows.iter().map(|w| w.id))
            .chain(batch.test_envs.iter().map(|e| e.id))
            .max()
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
        })
    }

    /// Writes the plan in the open transaction on `conn` (the caller commits).
    pub(super) async fn apply(self, conn: &Conn) -> Result<(), StoreError> {
        let t = &self.tasks;
        if !t.ids.is_empty() {
            conn.execute(
                "INSERT INTO tasks (id, status, priority, label, body)
                 SELECT * FROM UNNEST($1::int8[], $2::int2[], $3::int4[], $4::text[], $5::text[])
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,
                    priority = EXCLUDED.priority, label = EXCLUDED.label, body = EXCLUDED.body",
                &[&t.ids, &t.statuses, &t.priorities, &t.labels, &t.bodies],
            )
            .await?;
        }
        if !self.events.0.is_empty() {
            conn.execute(
                "INSERT INTO events (seq, body) SELECT * FROM UNNEST($1::int8[], $2::text[])
                 ON CONFLICT (seq) DO UPDATE SET body = EXCLUDED.body",
                &[&self.events.0, &self.events.1],
            )
            .await?;
        }
        if let Some(through) = self.events_removed_through {
            conn.execute("DELETE FROM events WHERE seq <= $1", &[&through])
                .await?;
            raise_meta(conn, EVENTS_REMOVED_THROUGH, through).await?;
        }
        self.write_workflows(conn).await?;
        if !self.test_envs.0.is_empty() {
            conn.execute(
                "INSERT INTO test_envs (id, body) SELECT * FROM UNNEST($1::int8[], $2::text[])
                 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
                &[&self.test_envs.0, &self.test_envs.1],
            )
            .await?;
        }
        if let Some(newest) = self.newest {
            raise_meta(conn, LAST_TASK_ID, newest).await?;
        }
        if !self.removals.is_empty() {
            conn.execute("DELETE FROM tasks WHERE id = ANY($1)", &[&self.removals])
                .await?;
        }
        if !self.counts.is_empty() {
            let (codes, deltas): (Vec<i16>, Vec<i64>) = self.counts.into_iter().unzip();
            add_counts(conn, "task_counts", "int2", &codes, &deltas).await?;
        }
        if !self.audit.is_empty() {
            super::audit::append(conn, self.audit).await?;
        }
        Ok(())
    }

    /// Upserts the workflows, deletes the removed ones and moves their status counts.
    async fn write_workflows(&self, conn: &Conn) -> Result<(), StoreError> {
        if self.workflow_steps.is_empty() {
            return Ok(());
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
        if !self.workflows.is_empty() {
            let ids: Vec<i64> = self.workflows.keys().copied().collect();
            let (statuses, bodies): (Vec<&str>, Vec<&str>) = self
                .workflows
                .values()
                .map(|(s, b)| (s.as_str(), b.as_str()))
                .unzip();
            conn.execute(
                "INSERT INTO workflows (id, status, body)
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, body = EXCLUDED.body",
                &[&ids, &statuses, &bodies],
            )
            .await?;
        }
        if !self.workflow_removals.is_empty() {
            let sql = "DELETE FROM workflows WHERE id = ANY($1)";
            conn.execute(sql, &[&self.workflow_removals]).await?;
        }
        if !counts.is_empty() {
            let (names, deltas): (Vec<String>, Vec<i64>) = counts.into_iter().unzip();
            add_counts(conn, "workflow_counts", "text", &names, &deltas).await?;
        }
        Ok(())
    }
}

/// Sets the `meta` value `key` to `value` unless it is already higher.
async fn raise_meta(conn: &Conn, key: &str, value: i64) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value, EXCLUDED.value)",
        &[&key, &value],
    )
    .await
    .map(drop)
}

/// Adds `deltas` to the counts of `keys` in `table` (a row made for each key first), never
/// going below zero.
async fn add_counts<K: tokio_postgres::types::ToSql + Sync>(
    conn: &Conn,
    table: &str,
    key_type: &str,
    keys: &[K],
    deltas: &[i64],
) -> Result<(), StoreError> {
    let create = format!(
        "INSERT INTO {table} (status, n) SELECT key, 0 FROM UNNEST($1::{key_type}[]) AS k(key)
         ON CONFLICT (status) DO NOTHING"
    );
    conn.execute(&create, &[&keys]).await?;
    let add = format!(
        "UPDATE {table} SET n = GREATEST({table}.n + d.delta, 0)
         FROM UNNEST($1::{key_type}[], $2::int8[]) AS d(key, delta) WHERE {table}.status = d.key"
    );
    conn.execute(&add, &[&keys, &deltas]).await.map(drop)
}
