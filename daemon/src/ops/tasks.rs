//! Tasks: submit, list (and search), get, find dependants, wait for, cancel, retry,
//! change (stash, enqueue, edit) and clean. Changes are answered once they are durable.

use std::collections::{HashMap, HashSet};

use orch_protocol::{
    Actor, CleanFilter, Dependants, EventKind, MAX_CLEAN_BATCH, Task, TaskChange, TaskFilter,
    TaskId, TaskKind, TaskSpec,
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

/// How many tasks a search or a look for dependants reads at most per request: what it
/// costs is bounded, whatever the store holds.
pub const SCAN_BUDGET: usize = 10_000;

/// How many tasks are read from the store at a time while scanning.
const SCAN_PAGE: usize = 500;

/// The most dependants listed.
const MAX_DEPENDANTS: usize = 100;

/// What a search looks for beyond the store's own filters (status, label, cursor).
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// Only tasks of this group.
    pub group: Option<String>,
    /// Only tasks whose id, command, label, step or workflow contains this text (case
    /// insensitive).
    pub text: Option<String>,
}

/// What a search found.
#[derive(Debug, Clone)]
pub struct Found {
    /// The matches, newest first (at most the filter's limit).
    pub tasks: Vec<Task>,
    /// Where the next page starts (the filter's `before`), when the store holds older
    /// tasks the search did not look at.
    pub next_before: Option<TaskId>,
}

/// Tasks matching `filter` and `search`, newest first: the store's indexes find those of
/// the filter, `search` is checked on each, and at most [`SCAN_BUDGET`] are read (the
/// answer then says where to go on).
pub fn search(ctx: &Context, filter: &TaskFilter, search: &Search) -> Result<Found, AppError> {
    let limit = filter.limit.unwrap_or(usize::MAX);
    let text = search.text.as_deref().map(str::to_lowercase);
    let mut found = Found {
        tasks: Vec::new(),
        next_before: None,
    };
    let mut before = filter.before;
    let mut read = 0;
    while found.tasks.len() < limit && read < SCAN_BUDGET {
        let page = TaskFilter {
            limit: Some(SCAN_PAGE.min(SCAN_BUDGET - read)),
            before,
            ..filter.clone()
        };
        let tasks = ctx.store.list(&page)?;
        let Some(last) = tasks.last().map(|t| t.id) else {
            return Ok(found);
        };
        let full = tasks.len() == page.limit.unwrap_or(0);
        read += tasks.len();
        for task in tasks {
            if found.tasks.len() == limit {
                // Not looked at: the next page starts at it.
                found.next_before = Some(task.id + 1);
                return Ok(found);
            }
            if matches(&task, search, text.as_deref()) {
                found.tasks.push(task);
            }
        }
        before = Some(last);
        found.next_before = full.then_some(last);
        if !full {
            break;
        }
    }
    Ok(found)
}

/// Whether `task` is of `search`'s group and holds its (lower-case) text.
fn matches(task: &Task, search: &Search, text: Option<&str>) -> bool {
    let spec = &task.spec;
    if let Some(group) = &search.group
        && spec.group_name() != group
    {
        return false;
    }
    let Some(text) = text else {
        return true;
    };
    let mut words = vec![task.id.to_string()];
    match &spec.kind {
        TaskKind::Command { program, args } => {
            words.push(program.clone());
            words.extend(args.iter().cloned());
        }
        other => words.push(serde_json::to_string(other).unwrap_or_default()),
    }
    words.extend(spec.label.iter().cloned());
    if let Some(step) = &spec.workflow {
        words.push(step.step.clone());
        words.push(format!("workflow {}", step.workflow));
    }
    words.iter().any(|w| w.to_lowercase().contains(text))
}

/// The tasks that depend on task `id`, oldest first: at most [`MAX_DEPENDANTS`], among
/// the next [`SCAN_BUDGET`] ids (a task depends only on older ones).
pub fn dependants(ctx: &Context, id: TaskId) -> Result<Dependants, AppError> {
    get(ctx, id)?;
    let newest_page = TaskFilter {
        limit: Some(1),
        ..TaskFilter::default()
    };
    let newest = ctx.store.list(&newest_page)?.first().map_or(id, |t| t.id);
    let mut through = newest.min(id.saturating_add(SCAN_BUDGET as u64));
    let mut tasks = Vec::new();
    let mut before = through.saturating_add(1);
    while before > id + 1 {
        let page = TaskFilter {
            limit: Some(SCAN_PAGE),
            before: Some(before),
            ..TaskFilter::default()
        };
        let read = ctx.store.list(&page)?;
        let Some(last) = read.last().map(|t| t.id) else {
            break;
        };
        let depends = |t: &Task| t.spec.after.contains(&id) || t.spec.soft_after.contains(&id);
        tasks.extend(read.into_iter().filter(|t| t.id > id && depends(t)));
        before = last;
    }
    tasks.sort_by_key(|t| t.id);
    if tasks.len() > MAX_DEPENDANTS {
        through = tasks[MAX_DEPENDANTS].id - 1;
        tasks.truncate(MAX_DEPENDANTS);
    }
    Ok(Dependants {
        tasks,
        searched_through: through,
        complete: through == newest,
    })
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
