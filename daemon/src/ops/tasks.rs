//! Tasks: submit, list, get, wait for, cancel, retry, change (stash, enqueue, edit) and
//! clean. Changes are answered once
//! they are durable.

use std::collections::{HashMap, HashSet};

use orch_protocol::{
    Actor, CleanFilter, EventKind, MAX_CLEAN_BATCH, Task, TaskChange, TaskFilter, TaskId, TaskSpec,
};

use super::{AppError, AppErrorKind, Context};
use crate::engine::{Command, Keep, Rule, Selection};
use crate::events::Stream;

/// `Submit`: adds tasks, all or none (`stashed`: held until enqueued).
pub async fn submit(
    ctx: &Context,
    actor: Actor,
    specs: Vec<TaskSpec>,
    stashed: bool,
) -> Result<Vec<Task>, AppError> {
    let submit = |reply| Command::Submit {
        actor,
        specs,
        stashed,
        reply,
    };
    Ok(ctx.engine.request(submit).await?)
}

/// `List`: committed tasks matching a filter, newest first.
pub fn list(ctx: &Context, filter: &TaskFilter) -> Result<Vec<Task>, AppError> {
    Ok(ctx.store.list(filter)?)
}

/// `Get`: one committed task.
pub fn get(ctx: &Context, id: TaskId) -> Result<Task, AppError> {
    ctx.store.get(id)?.ok_or_else(|| AppError::no_such_task(id))
}

/// `Cancel`: stops a task.
pub async fn cancel(ctx: &Context, actor: Actor, id: TaskId) -> Result<Task, AppError> {
    let cancel = |reply| Command::Cancel { actor, id, reply };
    Ok(ctx.engine.request(cancel).await?)
}

/// `Retry`: queues a failed or cancelled task again.
pub async fn retry(ctx: &Context, actor: Actor, id: TaskId) -> Result<Task, AppError> {
    let retry = |reply| Command::Retry { actor, id, reply };
    Ok(ctx.engine.request(retry).await?)
}

/// `ChangeTask`: stashes, enqueues or edits a task that has not started.
pub async fn change(
    ctx: &Context,
    actor: Actor,
    id: TaskId,
    change: TaskChange,
) -> Result<Task, AppError> {
    let change = |reply| Command::ChangeTask {
        actor,
        id,
        change,
        reply,
    };
    Ok(ctx.engine.request(change).await?)
}

/// `Clean`: removes finished tasks (and workflows, when asked); what was removed.
pub async fn clean(
    ctx: &Context,
    actor: Actor,
    filter: CleanFilter,
) -> Result<Selection, AppError> {
    let rule = clean_rule(filter)?;
    let clean = |reply| Command::Clean { actor, rule, reply };
    Ok(ctx.engine.request(clean).await?)
}

/// The rule of an `orch clean`: everything final that the filter names, now.
fn clean_rule(filter: CleanFilter) -> Result<Rule, AppError> {
    let limit = filter.limit.unwrap_or(MAX_CLEAN_BATCH);
    if !(1..=MAX_CLEAN_BATCH).contains(&limit) {
        return Err(AppError::field(
            AppErrorKind::Invalid,
            "limit",
            format!("the limit must be between 1 and {MAX_CLEAN_BATCH}, not {limit}"),
        ));
    }
    let age = std::time::Duration::from_millis(filter.older_than_ms.unwrap_or(0));
    Ok(Rule {
        keep: Keep::For(age),
        labels: Default::default(),
        only_label: filter.label,
        status: filter.status,
        workflows: filter.workflows,
        limit,
        retention: false,
    })
}

/// `Wait`: every named task once all are in a final state, in the order named.
pub async fn wait(ctx: &Context, ids: Vec<TaskId>) -> Result<Vec<Task>, AppError> {
    if ids.is_empty() {
        return Err(AppError::field(
            AppErrorKind::Invalid,
            "ids",
            "no task ids to wait for",
        ));
    }
    // Subscribed before the first check, so no change after it can be missed.
    let mut events = Stream::from_now(&ctx.bus, ctx.store.clone())?;
    let mut pending: HashSet<TaskId> = ids.iter().copied().collect();
    let mut finished = HashMap::new();
    let all: Vec<TaskId> = pending.iter().copied().collect();
    check(ctx, &all, &mut pending, &mut finished)?;
    while !pending.is_empty() {
        let event = tokio::select! {
            event = events.next() => event?,
            () = ctx.shutdown.cancelled() => None,
        };
        match event {
            Some(event) if pending.contains(&event.task) && ends_task(&event.kind) => {
                check(ctx, &[event.task], &mut pending, &mut finished)?;
            }
            Some(_) => {}
            None => return Err(AppError::shutting_down()),
        }
    }
    Ok(ids.iter().map(|id| finished[id].clone()).collect())
}

/// Events after which a task may be final (a submission can be final at once: its
/// dependency had already failed).
fn ends_task(kind: &EventKind) -> bool {
    kind.is_final() || matches!(kind, EventKind::Submitted { .. })
}

/// Moves each of `ids` that is in a final state from `pending` to `finished`.
fn check(
    ctx: &Context,
    ids: &[TaskId],
    pending: &mut HashSet<TaskId>,
    finished: &mut HashMap<TaskId, Task>,
) -> Result<(), AppError> {
    for id in ids {
        let task = get(ctx, *id)?;
        if task.state.status().is_final() {
            pending.remove(id);
            finished.insert(*id, task);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_limit_outside_one_batch_is_refused_naming_the_field() {
        for limit in [0, MAX_CLEAN_BATCH + 1] {
            let filter = CleanFilter {
                limit: Some(limit),
                ..CleanFilter::default()
            };
            let error = clean_rule(filter).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("limit"));
            assert!(
                error.message.contains(&limit.to_string()),
                "{}",
                error.message
            );
        }
        let rule = clean_rule(CleanFilter::default()).unwrap();
        assert_eq!(
            (rule.keep, rule.limit, rule.workflows, rule.retention),
            (
                Keep::For(std::time::Duration::ZERO),
                MAX_CLEAN_BATCH,
                false,
                false
            )
        );
    }
}
