//! One batch as one write transaction: task records and their indexes (status index,
//! counts, queue, labels), events, workflows (with their status counts), test environments, the highest id, removals, and the
//! audit entries sealed onto the chain.

use ::redb::{ReadableTable, WriteTransaction};
use chrono::{DateTime, Utc};
use orch_protocol::TaskStatus;

use super::{
    BY_LABEL, BY_STATUS, COUNTS, EVENTS, EVENTS_REMOVED_THROUGH, LAST_TASK_ID, META,
    MIGRATION_UNDERWAY, NOTIFIERS, OUTBOX, OUTBOX_DUE, QUEUE, QUEUE_CONTROLS, SCHEDULES, SETTINGS,
    TASKS, TEST_ENVS, WORKFLOW_COUNTS, WORKFLOW_STATUS, WORKFLOWS, queue_key,
};
use crate::store::WriteBatch;

/// Writes `batch` in `txn` (the caller commits); its audit records are sealed with the
/// time `at` (given, so that a batch applied again from the journal is sealed the same).
pub(super) fn apply(
    txn: &WriteTransaction,
    batch: &WriteBatch,
    at: DateTime<Utc>,
) -> Result<(), redb::Error> {
    let mut tasks = txn.open_table(TASKS)?;
    let mut by_status = txn.open_table(BY_STATUS)?;
    let mut queue = txn.open_table(QUEUE)?;
    let mut counts = txn.open_table(COUNTS)?;
    let mut events = txn.open_table(EVENTS)?;
    let mut by_label = txn.open_table(BY_LABEL)?;
    for write in &batch.tasks {
        let task = &write.task;
        let status = task.state.status();
        let body = serde_json::to_vec(task).expect("task records always serialize");
        tasks.insert(task.id, body.as_slice())?;
        // What the indexes hold the record under: as it was before an edit, else as it is.
        let (old_priority, old_label) = match &write.reindex {
            Some(before) => (before.priority, before.label.as_deref()),
            None => (task.spec.priority, task.spec.label.as_deref()),
        };
        let label = task.spec.label.as_deref();
        if write.previous.is_none() || old_label != label {
            if let (Some(_), Some(old)) = (write.previous, old_label) {
                by_label.remove((old, task.id))?;
            }
            if let Some(label) = label {
                by_label.insert((label, task.id), ())?;
            }
        }
        let old_queue_key = (-i64::from(old_priority), task.id);
        if write.previous == Some(status) {
            if status == TaskStatus::Queued && old_queue_key != queue_key(task) {
                queue.remove(old_queue_key)?;
                queue.insert(queue_key(task), ())?;
            }
            continue;
        }
        if let Some(previous) = write.previous {
            by_status.remove((previous.code(), task.id))?;
            let n = counts.get(previous.code())?.map_or(0, |v| v.value());
            counts.insert(previous.code(), n.saturating_sub(1))?;
            if previous == TaskStatus::Queued {
                queue.remove(old_queue_key)?;
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
    if let Some(through) = batch.events_removed_through {
        events.retain_in(..=through, |_, _| false)?;
        let mut meta = txn.open_table(META)?;
        let before = meta.get(EVENTS_REMOVED_THROUGH)?.map_or(0, |v| v.value());
        meta.insert(EVENTS_REMOVED_THROUGH, through.max(before))?;
    }
    let mut workflows = txn.open_table(WORKFLOWS)?;
    for workflow in &batch.workflows {
        let body = serde_json::to_vec(workflow).expect("workflow records always serialize");
        workflows.insert(workflow.id, body.as_slice())?;
        count_workflow(txn, workflow.id, workflow.state.status().as_str())?;
    }
    for id in &batch.workflow_removals {
        workflows.remove(*id)?;
        uncount_workflow(txn, *id)?;
    }
    let mut envs = txn.open_table(TEST_ENVS)?;
    for env in &batch.test_envs {
        let body = serde_json::to_vec(env).expect("environment records always serialize");
        envs.insert(env.id, body.as_slice())?;
    }
    let newest = batch.highest_new_id();
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
        if let Some(label) = &task.spec.label {
            by_label.remove((label.as_str(), task.id))?;
        }
        let n = counts.get(status.code())?.map_or(0, |v| v.value());
        counts.insert(status.code(), n.saturating_sub(1))?;
    }
    if !batch.audit.is_empty() {
        super::audit::append(txn, &batch.audit, at)?;
    }
    if !batch.schedules.is_empty() || !batch.schedule_removals.is_empty() {
        let mut table = txn.open_table(SCHEDULES)?;
        for schedule in &batch.schedules {
            let body = serde_json::to_vec(schedule).expect("schedules serialize");
            table.insert(schedule.spec.name.as_str(), body.as_slice())?;
        }
        for name in &batch.schedule_removals {
            table.remove(name.as_str())?;
        }
    }
    put_named(
        txn,
        NOTIFIERS,
        batch.notifiers.iter().map(|n| (n.spec.name.as_str(), n)),
    )?;
    remove_named(txn, NOTIFIERS, &batch.notifier_removals)?;
    write_outbox(txn, batch)?;
    if let Some(controls) = &batch.controls {
        let body = serde_json::to_vec(controls).expect("the queue's controls serialize");
        txn.open_table(SETTINGS)?
            .insert(QUEUE_CONTROLS, body.as_slice())?;
    }
    match batch.migration_underway {
        Some(true) => drop(txn.open_table(META)?.insert(MIGRATION_UNDERWAY, 1)?),
        Some(false) => drop(txn.open_table(META)?.remove(MIGRATION_UNDERWAY)?),
        None => {}
    }
    Ok(())
}

/// Forgets removed workflow `id`'s status, and counts it no more.
fn uncount_workflow(txn: &WriteTransaction, id: u64) -> Result<(), redb::Error> {
    let mut statuses = txn.open_table(WORKFLOW_STATUS)?;
    let Some(previous) = statuses.remove(id)?.map(|v| v.value().to_string()) else {
        return Ok(());
    };
    let mut counts = txn.open_table(WORKFLOW_COUNTS)?;
    let n = counts.get(previous.as_str())?.map_or(0, |v| v.value());
    counts.insert(previous.as_str(), n.saturating_sub(1))?;
    Ok(())
}

/// Records workflow `id`'s status, `status`, in the workflow status table and counts.
pub(super) fn count_workflow(
    txn: &WriteTransaction,
    id: u64,
    status: &str,
) -> Result<(), redb::Error> {
    let mut statuses = txn.open_table(WORKFLOW_STATUS)?;
    let previous = statuses.insert(id, status)?.map(|v| v.value().to_string());
    if previous.as_deref() == Some(status) {
        return Ok(());
    }
    let mut counts = txn.open_table(WORKFLOW_COUNTS)?;
    if let Some(previous) = previous {
        let n = counts.get(previous.as_str())?.map_or(0, |v| v.value());
        counts.insert(previous.as_str(), n.saturating_sub(1))?;
    }
    let n = counts.get(status)?.map_or(0, |v| v.value());
    counts.insert(status, n + 1)?;
    Ok(())
}

/// Writes JSON records by name into `table`.
fn put_named<'a, T: serde::Serialize + 'a>(
    txn: &WriteTransaction,
    table: ::redb::TableDefinition<&str, &[u8]>,
    records: impl Iterator<Item = (&'a str, &'a T)>,
) -> Result<(), redb::Error> {
    let mut records = records.peekable();
    if records.peek().is_none() {
        return Ok(());
    }
    let mut table = txn.open_table(table)?;
    for (name, record) in records {
        let body = serde_json::to_vec(record).expect("records serialize");
        table.insert(name, body.as_slice())?;
    }
    Ok(())
}

/// Removes records by name from `table`.
fn remove_named(
    txn: &WriteTransaction,
    table: ::redb::TableDefinition<&str, &[u8]>,
    names: &[String],
) -> Result<(), redb::Error> {
    if names.is_empty() {
        return Ok(());
    }
    let mut table = txn.open_table(table)?;
    for name in names {
        table.remove(name.as_str())?;
    }
    Ok(())
}

/// Writes the batch's outbox changes: entries (and their place in the due index), then
/// removals by key, then purges by notifier.
fn write_outbox(txn: &WriteTransaction, batch: &WriteBatch) -> Result<(), redb::Error> {
    if batch.outbox.is_empty() && batch.outbox_removals.is_empty() && batch.outbox_purges.is_empty()
    {
        return Ok(());
    }
    let mut outbox = txn.open_table(OUTBOX)?;
    let mut index = txn.open_table(OUTBOX_DUE)?;
    let unindex = |index: &mut redb::Table<(&str, i64, &str), ()>, old: &[u8]| {
        if let Ok(old) = serde_json::from_slice::<orch_protocol::OutboxEntry>(old) {
            let due = old.due.timestamp_millis();
            index.remove((old.notifier.as_str(), due, old.key.as_str()))?;
        }
        Ok::<(), redb::Error>(())
    };
    for entry in &batch.outbox {
        let body = serde_json::to_vec(entry).expect("notifications serialize");
        if let Some(old) = outbox.insert(entry.key.as_str(), body.as_slice())? {
            unindex(&mut index, old.value())?;
        }
        let due = entry.due.timestamp_millis();
        index.insert((entry.notifier.as_str(), due, entry.key.as_str()), ())?;
    }
    for key in &batch.outbox_removals {
        if let Some(old) = outbox.remove(key.as_str())? {
            unindex(&mut index, old.value())?;
        }
    }
    for name in &batch.outbox_purges {
        let range = (name.as_str(), i64::MIN, "")..=(name.as_str(), i64::MAX, "\u{10ffff}");
        let keys: Vec<String> = index
            .range(range)?
            .map(|row| row.map(|(k, _)| k.value().2.to_string()))
            .collect::<Result<_, _>>()?;
        for key in keys {
            if let Some(old) = outbox.remove(key.as_str())? {
                unindex(&mut index, old.value())?;
            }
        }
    }
    Ok(())
}
