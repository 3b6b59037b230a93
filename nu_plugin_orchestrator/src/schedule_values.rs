//! Nushell values for schedules: one row each, with typed times.

use chrono::{DateTime, FixedOffset};
use nu_protocol::{IntoValue, Span, Value};
use orch_protocol::{CatchUp, Schedule, ScheduleView, ScheduledWork};

use crate::convert::{date, int};

/// One schedule as a row.
#[derive(IntoValue)]
struct ScheduleRow {
    name: String,
    cron: String,
    timezone: String,
    /// `task` or the workflow's kind (`servers`, `batch`, ...).
    kind: String,
    /// What each run submits, in words.
    what: String,
    paused: bool,
    next_run: Option<DateTime<FixedOffset>>,
    catch_up: &'static str,
    runs: i64,
    skipped: i64,
    /// The time of the last run (the one the pattern gave).
    last_run: Option<DateTime<FixedOffset>>,
    /// The task or workflow the last run submitted.
    last_id: Option<i64>,
    /// Why the last run submitted nothing.
    last_error: Option<String>,
    upcoming: Vec<DateTime<FixedOffset>>,
    created: DateTime<FixedOffset>,
}

fn catch_up_name(catch_up: CatchUp) -> &'static str {
    match catch_up {
        CatchUp::Skip => "skip",
        CatchUp::Once => "once",
        CatchUp::All => "all",
    }
}

/// What a schedule's runs submit: `task` and its command, or the workflow's kind.
fn work(schedule: &Schedule) -> (String, String) {
    match &schedule.spec.work {
        ScheduledWork::Task { task } => ("task".into(), task.describe()),
        ScheduledWork::Workflow { workflow } => {
            let kind = serde_json::to_value(workflow.kind())
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let what = serde_json::to_value(&**workflow)
                .map(|v| v.to_string())
                .unwrap_or_default();
            (kind, what)
        }
    }
}

/// A schedule (with its upcoming times) as a row.
pub fn schedule_row(view: ScheduleView, span: Span) -> Value {
    let schedule = view.schedule;
    let (kind, what) = work(&schedule);
    let last = schedule.last_run.as_ref();
    ScheduleRow {
        name: schedule.spec.name.clone(),
        cron: schedule.spec.cron.clone(),
        timezone: schedule.spec.timezone_name().to_string(),
        kind,
        what,
        paused: schedule.paused,
        next_run: schedule.next_run.map(date),
        catch_up: catch_up_name(schedule.spec.catch_up),
        runs: int(schedule.runs),
        skipped: int(schedule.skipped),
        last_run: last.map(|r| date(r.slot)),
        last_id: last.and_then(|r| r.id).map(int),
        last_error: last.and_then(|r| r.error.clone()),
        upcoming: view.upcoming.into_iter().map(date).collect(),
        created: date(schedule.created_at),
    }
    .into_value(span)
}

/// A schedule without its upcoming times (beyond the next run) as a row.
pub fn schedule_record(schedule: Schedule, span: Span) -> Value {
    let upcoming = schedule.next_run.into_iter().collect();
    schedule_row(ScheduleView { schedule, upcoming }, span)
}
