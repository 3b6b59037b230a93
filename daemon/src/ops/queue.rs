//! The queue's controls: groups, their parallel limits, and pausing and resuming the
//! queue, a group or a running task. Changes are answered once they are durable.

use orch_protocol::{
    Actor, GroupView, QueueChange, QueueView, Task, TaskId, TaskSignal, TaskState,
};

use super::{AppError, Context};
use crate::engine::Command;

/// `Queue`: the stored controls, with how many tasks of each group run now (read from
/// the store, so any node of a cluster answers it).
pub fn view(ctx: &Context) -> Result<QueueView, AppError> {
    let controls = ctx.store.queue_controls()?;
    let mut running = std::collections::HashMap::<String, u64>::new();
    ctx.store
        .scan_status(orch_protocol::TaskStatus::Running, &mut |task| {
            if matches!(task.state, TaskState::Running { .. }) {
                let group = match &task.spec.group {
                    Some(g) if controls.groups.contains_key(g) => g.clone(),
                    _ => orch_protocol::DEFAULT_GROUP.to_string(),
                };
                *running.entry(group).or_default() += 1;
            }
        })?;
    let groups = controls.groups.iter().map(|(name, settings)| GroupView {
        name: name.clone(),
        parallel: settings.parallel,
        paused: settings.paused,
        running: running.get(name).copied().unwrap_or(0),
    });
    Ok(QueueView {
        paused: controls.paused,
        groups: groups.collect(),
    })
}

/// `QueueChange`: adds or removes a group, sets a limit, pauses or resumes.
pub async fn change(
    ctx: &Context,
    actor: Actor,
    change: QueueChange,
) -> Result<QueueView, AppError> {
    let change = |reply| Command::ChangeQueue {
        actor,
        change,
        reply,
    };
    Ok(ctx.engine.request(change).await?)
}

/// `PauseTask`: stops a running task's processes until it is resumed.
pub async fn pause_task(ctx: &Context, actor: Actor, id: TaskId) -> Result<Task, AppError> {
    let pause = |reply| Command::PauseTask { actor, id, reply };
    Ok(ctx.engine.request(pause).await?)
}

/// `ResumeTask`: continues a paused task.
pub async fn resume_task(ctx: &Context, actor: Actor, id: TaskId) -> Result<Task, AppError> {
    let resume = |reply| Command::ResumeTask { actor, id, reply };
    Ok(ctx.engine.request(resume).await?)
}

/// `SignalTask`: sends a signal to a running task's processes, once audited.
pub async fn signal_task(
    ctx: &Context,
    actor: Actor,
    id: TaskId,
    signal: TaskSignal,
) -> Result<Task, AppError> {
    let send = |reply| Command::SignalTask {
        actor,
        id,
        signal,
        reply,
    };
    Ok(ctx.engine.request(send).await?)
}

/// `SendInput`: writes to a running task's standard input, once audited.
pub async fn send_input(
    ctx: &Context,
    actor: Actor,
    id: TaskId,
    data: String,
    eof: bool,
) -> Result<Task, AppError> {
    let send = |reply| Command::SendInput {
        actor,
        id,
        data,
        eof,
        reply,
    };
    Ok(ctx.engine.request(send).await?)
}
