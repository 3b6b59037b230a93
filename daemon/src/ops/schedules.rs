//! Schedules: create one (its workflow, if any, checked by expanding it now), list them
//! with their upcoming times, pause, resume or remove one. Changes are answered once they
//! are durable.

use orch_protocol::{
    Actor, MAX_UPCOMING, Schedule, ScheduleChange, ScheduleSpec, ScheduleView, ScheduledWork,
};

use super::{AppError, AppErrorKind, Context};
use crate::engine::Command;
use crate::policy::Submitter;
use crate::schedules::Times;

/// `ScheduleAdd`.
pub async fn add(
    ctx: &Context,
    actor: Actor,
    submitter: Submitter,
    spec: ScheduleSpec,
) -> Result<Schedule, AppError> {
    // The pattern is read here, off the engine's task: one that never matches takes a
    // search to tell.
    let times = Times::of(&spec)?;
    if times.next_after(chrono::Utc::now()).is_none() {
        return Err(AppError::field(
            AppErrorKind::Invalid,
            "cron",
            format!("the pattern {:?} has no time to come", spec.cron),
        ));
    }
    if let ScheduledWork::Workflow { workflow } = &spec.work {
        if workflow.check_mode() || workflow.wait() {
            return Err(AppError::field(
                AppErrorKind::Invalid,
                "work",
                "a scheduled workflow runs on its own: leave out `check_mode` and `wait`",
            ));
        }
        // Checked now as a submission would be; expanded again at each run.
        super::workflow_submit::prepare(ctx, workflow, submitter)?;
    }
    let owner_host = (submitter == Submitter::Owner).then(crate::cluster::host_name);
    let add = |reply| Command::AddSchedule {
        actor,
        spec,
        owner_host,
        reply,
    };
    Ok(ctx.engine.request(add).await?)
}

/// `Schedules`: every schedule, with its next `upcoming` times (1 by default).
pub fn list(ctx: &Context, upcoming: Option<u32>) -> Result<Vec<ScheduleView>, AppError> {
    let count = upcoming.unwrap_or(1);
    if count > MAX_UPCOMING {
        return Err(AppError::field(
            AppErrorKind::Invalid,
            "upcoming",
            format!("at most {MAX_UPCOMING} upcoming times are shown, not {count}"),
        ));
    }
    let schedules = ctx.store.schedules()?;
    Ok(schedules
        .into_iter()
        .map(|schedule| {
            let upcoming = match (schedule.next_run, Times::of(&schedule.spec)) {
                (Some(next), Ok(times)) if count > 0 => {
                    let mut list = vec![next];
                    list.extend(times.upcoming(next, count as usize - 1));
                    list
                }
                _ => Vec::new(),
            };
            ScheduleView { schedule, upcoming }
        })
        .collect())
}

/// `ScheduleChange`: pauses, resumes or removes a schedule.
pub async fn change(
    ctx: &Context,
    actor: Actor,
    name: String,
    change: ScheduleChange,
) -> Result<Schedule, AppError> {
    let change = |reply| Command::ChangeSchedule {
        actor,
        name,
        change,
        reply,
    };
    Ok(ctx.engine.request(change).await?)
}
