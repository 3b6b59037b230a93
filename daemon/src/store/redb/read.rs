//! The reads that must not scan: the start-up snapshot (live work only, the queued tasks
//! from the queue index alone) and task lists (through the status and label indexes,
//! newest first below a cursor, stopping at the limit).

use std::collections::HashSet;

use ::redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};
use orch_protocol::{Task, TaskFilter, TaskId, TaskStatus, TestEnv, Workflow};

use super::{
    BY_LABEL, BY_STATUS, LAST_TASK_ID, META, MIGRATION_UNDERWAY, NOTIFIERS, OUTBOX, OUTBOX_DUE,
    QUEUE, QUEUE_CONTROLS, SCHEDULES, SETTINGS, TASKS, TEST_ENVS, WORKFLOWS,
};
use super::{backend, decode};
use crate::store::{Snapshot, StoreError};

/// The start-up snapshot, without `last_event_seq` (the caller adds it): every workflow and
/// its tasks, the other blocked, running and retry-waiting tasks, and the queue's ids and
/// priorities from its index (no queued record is decoded).
pub(super) fn snapshot(txn: &ReadTransaction) -> Result<Snapshot, StoreError> {
    let tasks_table = txn.open_table(TASKS).map_err(backend)?;
    let workflows = all::<Workflow>(txn, WORKFLOWS, "workflow")?;
    let mut wanted: Vec<TaskId> = workflows
        .iter()
        .flat_map(|w| {
            let steps = w.steps.iter().map(|s| s.task);
            steps.chain(w.rollback_steps.iter().map(|r| r.task))
        })
        .collect();
    let by_status = txn.open_table(BY_STATUS).map_err(backend)?;
    for status in crate::store::HELD {
        let range = (status.code(), 0)..=(status.code(), u64::MAX);
        for entry in by_status.range(range).map_err(backend)? {
            wanted.push(entry.map_err(backend)?.0.value().1);
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mut tasks = Vec::with_capacity(wanted.len());
    for id in wanted {
        if let Some(body) = tasks_table.get(id).map_err(backend)? {
            tasks.push(decode::<Task>(&format!("task {id}"), body.value())?);
        }
    }
    let queue_table = txn.open_table(QUEUE).map_err(backend)?;
    let mut queue = Vec::with_capacity(queue_table.len().map_err(backend)? as usize);
    for entry in queue_table.iter().map_err(backend)? {
        let (priority, id) = entry.map_err(backend)?.0.value();
        let priority = i32::try_from(-priority).unwrap_or(i32::MAX);
        queue.push((id, priority));
    }
    let meta = txn.open_table(META).map_err(backend)?;
    let last_task_id = meta
        .get(LAST_TASK_ID)
        .map_err(backend)?
        .map_or(0, |v| v.value());
    Ok(Snapshot {
        tasks,
        workflows,
        test_envs: all::<TestEnv>(txn, TEST_ENVS, "test environment")?,
        queue,
        last_event_seq: 0,
        last_task_id,
        migration_underway: meta.get(MIGRATION_UNDERWAY).map_err(backend)?.is_some(),
        controls: controls(txn)?,
        schedules: schedules(txn)?,
        notifiers: named(txn, NOTIFIERS, "notifier", usize::MAX)?,
    })
}

/// The queue's controls as stored (the default ones when none were).
pub(super) fn controls(txn: &ReadTransaction) -> Result<orch_protocol::QueueControls, StoreError> {
    let settings = txn.open_table(SETTINGS).map_err(backend)?;
    match settings.get(QUEUE_CONTROLS).map_err(backend)? {
        Some(body) => decode("the queue's controls", body.value()),
        None => Ok(orch_protocol::QueueControls::default()),
    }
}

/// Every record of a JSON table, by id.
fn all<T: serde::de::DeserializeOwned>(
    txn: &ReadTransaction,
    table: ::redb::TableDefinition<u64, &[u8]>,
    what: &str,
) -> Result<Vec<T>, StoreError> {
    let table = txn.open_table(table).map_err(backend)?;
    let mut out = Vec::new();
    for entry in table.iter().map_err(backend)? {
        let (id, body) = entry.map_err(backend)?;
        out.push(decode::<T>(
            &format!("{what} {}", id.value()),
            body.value(),
        )?);
    }
    Ok(out)
}

/// The tasks `filter` selects, newest first, below its cursor and up to its limit: from
/// the label index when a label is given (the status checked on each record), else from
/// the status index (one range per status, merged newest first), else from the records.
pub(super) fn list(txn: &ReadTransaction, filter: &TaskFilter) -> Result<Vec<Task>, StoreError> {
    let Some(highest) = filter.before.map_or(Some(u64::MAX), |b| b.checked_sub(1)) else {
        return Ok(Vec::new());
    };
    let limit = filter.limit.unwrap_or(usize::MAX);
    let tasks = txn.open_table(TASKS).map_err(backend)?;
    let statuses: HashSet<TaskStatus> = filter.status.iter().copied().collect();
    let mut out = Vec::new();
    let mut take = |id: u64| -> Result<bool, StoreError> {
        if let Some(body) = tasks.get(id).map_err(backend)? {
            let task: Task = decode(&format!("task {id}"), body.value())?;
            if statuses.is_empty() || statuses.contains(&task.state.status()) {
                out.push(task);
            }
        }
        Ok(out.len() < limit)
    };
    if limit == 0 {
        return Ok(Vec::new());
    }
    if let Some(label) = &filter.label {
        let by_label = txn.open_table(BY_LABEL).map_err(backend)?;
        let range = (label.as_str(), 0)..=(label.as_str(), highest);
        for entry in by_label.range(range).map_err(backend)?.rev() {
            if !take(entry.map_err(backend)?.0.value().1)? {
                break;
            }
        }
    } else if !statuses.is_empty() {
        let by_status = txn.open_table(BY_STATUS).map_err(backend)?;
        let mut ranges = Vec::new();
        for status in &statuses {
            let range = (status.code(), 0)..=(status.code(), highest);
            ranges.push(by_status.range(range).map_err(backend)?.rev().peekable());
        }
        loop {
            let mut newest: Option<(usize, u64)> = None;
            for (i, range) in ranges.iter_mut().enumerate() {
                if let Some(entry) = range.peek() {
                    let id = match entry {
                        Ok((key, _)) => key.value().1,
                        Err(e) => return Err(backend(e)),
                    };
                    if newest.is_none_or(|(_, n)| id > n) {
                        newest = Some((i, id));
                    }
                }
            }
            let Some((i, id)) = newest else { break };
            ranges[i].next();
            if !take(id)? {
                break;
            }
        }
    } else {
        let ids = txn.open_table(TASKS).map_err(backend)?;
        for entry in ids.range(..=highest).map_err(backend)?.rev() {
            if !take(entry.map_err(backend)?.0.value())? {
                break;
            }
        }
    }
    Ok(out)
}

/// Calls `each` with every task in `status`, oldest first.
pub(super) fn scan_status(
    txn: &ReadTransaction,
    status: TaskStatus,
    each: &mut dyn FnMut(Task),
) -> Result<(), StoreError> {
    let tasks = txn.open_table(TASKS).map_err(backend)?;
    let by_status = txn.open_table(BY_STATUS).map_err(backend)?;
    let range = (status.code(), 0)..=(status.code(), u64::MAX);
    for entry in by_status.range(range).map_err(backend)? {
        let id = entry.map_err(backend)?.0.value().1;
        if let Some(body) = tasks.get(id).map_err(backend)? {
            each(decode(&format!("task {id}"), body.value())?);
        }
    }
    Ok(())
}

/// Every schedule, by name.
pub(super) fn schedules(txn: &ReadTransaction) -> Result<Vec<orch_protocol::Schedule>, StoreError> {
    let table = txn.open_table(SCHEDULES).map_err(backend)?;
    let mut schedules = Vec::new();
    for entry in table.iter().map_err(backend)? {
        let (name, body) = entry.map_err(backend)?;
        schedules.push(decode(&format!("schedule {}", name.value()), body.value())?);
    }
    Ok(schedules)
}

/// The first `limit` records of a table of JSON records by name, in name order.
pub(super) fn named<T: serde::de::DeserializeOwned>(
    txn: &ReadTransaction,
    table: ::redb::TableDefinition<&str, &[u8]>,
    what: &str,
    limit: usize,
) -> Result<Vec<T>, StoreError> {
    let table = txn.open_table(table).map_err(backend)?;
    let mut records = Vec::new();
    for entry in table.iter().map_err(backend)?.take(limit) {
        let (name, body) = entry.map_err(backend)?;
        records.push(decode(&format!("{what} {}", name.value()), body.value())?);
    }
    Ok(records)
}

/// The notifications due at `now_ms`, of each notifier the first `per_notifier` by when
/// they are due (the notifiers are those of the `notifiers` table: a removed one's
/// notifications went with it).
pub(super) fn outbox_due(
    txn: &ReadTransaction,
    now_ms: i64,
    per_notifier: usize,
) -> Result<Vec<orch_protocol::OutboxEntry>, StoreError> {
    let notifiers = txn.open_table(NOTIFIERS).map_err(backend)?;
    let index = txn.open_table(OUTBOX_DUE).map_err(backend)?;
    let outbox = txn.open_table(OUTBOX).map_err(backend)?;
    let mut due = Vec::new();
    for entry in notifiers.iter().map_err(backend)? {
        let name = entry.map_err(backend)?.0.value().to_string();
        let range = (name.as_str(), i64::MIN, "")..=(name.as_str(), now_ms, "\u{10ffff}");
        for row in index.range(range).map_err(backend)?.take(per_notifier) {
            let row = row.map_err(backend)?;
            let (_, _, key) = row.0.value();
            if let Some(body) = outbox.get(key).map_err(backend)? {
                due.push(decode(&format!("notification {key}"), body.value())?);
            }
        }
    }
    Ok(due)
}

/// When the first notification of the outbox is due.
pub(super) fn outbox_next_due(
    txn: &ReadTransaction,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    let notifiers = txn.open_table(NOTIFIERS).map_err(backend)?;
    let index = txn.open_table(OUTBOX_DUE).map_err(backend)?;
    let mut first: Option<i64> = None;
    for entry in notifiers.iter().map_err(backend)? {
        let name = entry.map_err(backend)?.0.value().to_string();
        let range = (name.as_str(), i64::MIN, "")..=(name.as_str(), i64::MAX, "\u{10ffff}");
        if let Some(row) = index.range(range).map_err(backend)?.next() {
            let (_, due, _) = row.map_err(backend)?.0.value();
            first = Some(first.map_or(due, |f| f.min(due)));
        }
    }
    Ok(first.and_then(chrono::DateTime::from_timestamp_millis))
}
