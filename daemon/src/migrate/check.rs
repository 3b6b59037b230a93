//! The check after a copy: the target holds what the source holds, record for record.

use super::{EventPages, MigrateError, TaskPages, audit_of};
use crate::audit::chain::Chain;
use crate::store::Store;

/// Compares every kind of record of `source` and `target`; the first difference found is
/// the error.
pub(crate) fn same(source: &dyn Store, target: &dyn Store) -> Result<(), MigrateError> {
    let read = MigrateError::on("the check");
    same_tasks(source, target)?;
    let equal = |what: &str, same: bool| {
        if same {
            Ok(())
        } else {
            Err(MigrateError::Differs(what.to_string()))
        }
    };
    equal(
        "the task counts by status",
        source.count_by_status().map_err(&read)? == target.count_by_status().map_err(&read)?,
    )?;
    equal(
        "the workflows",
        source.workflows(None, usize::MAX).map_err(&read)?
            == target.workflows(None, usize::MAX).map_err(&read)?,
    )?;
    equal(
        "the workflow counts",
        source.count_workflows_by_status().map_err(&read)?
            == target.count_workflows_by_status().map_err(&read)?,
    )?;
    let (from, to) = (source.load().map_err(&read)?, target.load().map_err(&read)?);
    equal("the test environments", from.test_envs == to.test_envs)?;
    equal("the highest id", from.last_task_id == to.last_task_id)?;
    equal("the queue", from.queue == to.queue)?;
    equal(
        "the event retention's mark",
        source.events_removed_through().map_err(&read)?
            == target.events_removed_through().map_err(&read)?,
    )?;
    same_events(source, target)?;
    let (from, from_head) = audit_of(source).map_err(&read)?;
    let (to, to_head) = audit_of(target).map_err(&read)?;
    equal("the audit entries", from == to)?;
    equal("the audit head", from_head == to_head)?;
    equal(
        "the archived audit segments",
        source.audit_segments().map_err(&read)? == target.audit_segments().map_err(&read)?,
    )?;
    check_links(&to).map_err(|problem| MigrateError::Differs(format!("the audit chain: {problem}")))
}

/// Every task, page by page (newest first) from both.
fn same_tasks(source: &dyn Store, target: &dyn Store) -> Result<(), MigrateError> {
    let (mut from_pages, mut to_pages) = (TaskPages::new(), TaskPages::new());
    loop {
        let from = from_pages.next(source, "the check")?.unwrap_or_default();
        let to = to_pages.next(target, "the check")?.unwrap_or_default();
        if from != to {
            let id = from
                .iter()
                .zip(&to)
                .find(|(a, b)| a != b)
                .map(|(a, _)| a.id);
            let at = id.map_or("in their number".to_string(), |id| format!("task {id}"));
            return Err(MigrateError::Differs(format!("the tasks, at {at}")));
        }
        if from.is_empty() {
            return Ok(());
        }
    }
}

/// Every logged event, in order, from both.
fn same_events(source: &dyn Store, target: &dyn Store) -> Result<(), MigrateError> {
    let (mut from_pages, mut to_pages) = (EventPages::default(), EventPages::default());
    let mut after = 0;
    loop {
        let from = from_pages.next(source, "the check")?.unwrap_or_default();
        let to = to_pages.next(target, "the check")?.unwrap_or_default();
        if from != to {
            return Err(MigrateError::Differs(format!("the events after {after}")));
        }
        match from.last() {
            Some(last) => after = last.seq,
            None => return Ok(()),
        }
    }
}

/// Checks that the live entries link up (each carries its predecessor's hash and its own
/// hash is right).
fn check_links(entries: &[(u64, Vec<u8>)]) -> Result<(), String> {
    let mut chain = Chain::anywhere();
    for (seq, body) in entries {
        chain
            .push_json(*seq, body)
            .map_err(|broken| broken.problem)?;
    }
    Ok(())
}
