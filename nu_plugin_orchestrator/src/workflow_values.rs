//! Nushell values for workflows, their plans and the extensions registry (rows derive
//! [`IntoValue`], as in [`crate::convert`]).

use chrono::{DateTime, FixedOffset};
use nu_protocol::{IntoValue, Record, Span, Value};
use orch_protocol::{
    ExtensionsReport, PlannedStep, StatusCounts, StepStatus, WorkflowPlan, WorkflowState,
    WorkflowSummary,
};

use crate::convert::{date, int, joined};

/// Counts by status as a record (one int column per status, in life-cycle order).
fn counts(counts: &StatusCounts, span: Span) -> Record {
    counts
        .by_name()
        .into_iter()
        .map(|(status, n)| (status.to_string(), Value::int(int(n), span)))
        .collect()
}

/// One row of `orch workflow list`: the state's own data (when it ended, why, which
/// steps failed) after its counts.
#[derive(IntoValue)]
struct WorkflowRow {
    id: i64,
    name: String,
    kind: &'static str,
    status: &'static str,
    steps: i64,
    succeeded: i64,
    running: i64,
    submitted: DateTime<FixedOffset>,
    finished: Option<DateTime<FixedOffset>>,
    reason: Option<String>,
    failed: Option<Vec<String>>,
}

impl WorkflowRow {
    fn of(w: &WorkflowSummary) -> WorkflowRow {
        let (finished, reason, failed) = match &w.state {
            WorkflowState::Running { .. } => (None, None, None),
            WorkflowState::Succeeded { finished_at } => (Some(*finished_at), None, None),
            WorkflowState::Failed {
                finished_at,
                failed,
            } => (Some(*finished_at), None, Some(failed)),
            WorkflowState::Cancelled { at } => (Some(*at), None, None),
            WorkflowState::RollingBack { reason, .. } => (None, Some(reason), None),
            WorkflowState::RolledBack {
                finished_at,
                reason,
            } => (Some(*finished_at), Some(reason), None),
            WorkflowState::RollbackFailed {
                finished_at,
                failed,
            } => (Some(*finished_at), None, Some(failed)),
        };
        WorkflowRow {
            id: int(w.id),
            name: w.name.clone(),
            kind: w.kind.as_str(),
            status: w.state.status().as_str(),
            steps: int(w.steps),
            succeeded: int(w.step_counts.succeeded),
            running: int(w.step_counts.running),
            submitted: date(w.submitted_at),
            finished: finished.map(date),
            reason: reason.cloned(),
            failed: failed.cloned(),
        }
    }
}

/// One row of `orch workflow list`.
pub fn workflow_row(w: &WorkflowSummary, span: Span) -> Value {
    WorkflowRow::of(w).into_value(span)
}

/// What a summary shows besides the row: its settings, and its steps and compensations
/// counted by status.
#[derive(IntoValue)]
struct SummaryColumns {
    priority: i32,
    parallel_limit: Option<u32>,
    rollback_enabled: bool,
    waves: Option<i64>,
    step_counts: Record,
    compensations: i64,
    compensation_counts: Record,
}

/// A workflow's summary as a record: the row plus its settings and its steps and
/// compensations counted by status.
pub fn workflow_summary(w: &WorkflowSummary, span: Span) -> Value {
    let columns = SummaryColumns {
        priority: w.priority,
        parallel_limit: w.parallel_limit,
        rollback_enabled: w.rollback_enabled,
        waves: w.waves.map(int),
        step_counts: counts(&w.step_counts, span),
        compensations: int(w.compensations),
        compensation_counts: counts(&w.compensation_counts, span),
    };
    joined(WorkflowRow::of(w), columns, span)
}

/// A step of `orch workflow show`'s `step_list`.
#[derive(IntoValue)]
struct StepRow {
    step: String,
    task: i64,
    status: Option<&'static str>,
    description: String,
    dependencies: Vec<String>,
    soft_dependencies: Vec<String>,
    has_rollback: bool,
}

/// A compensation of `orch workflow show`'s `rollback` list.
#[derive(IntoValue)]
struct CompensationRow {
    step: String,
    task: i64,
    status: Option<&'static str>,
    round: u32,
}

/// What `orch workflow show` adds to the summary.
#[derive(IntoValue)]
struct DetailColumns {
    step_list: Vec<StepRow>,
    rollback: Vec<CompensationRow>,
    request: Option<serde_json::Value>,
}

/// The full record of `orch workflow show`: the summary plus the given steps
/// (`step_list`) and compensations (`rollback`), and the request when it came along.
pub fn workflow_detail(
    w: &WorkflowSummary,
    entries: &[StepStatus],
    request: Option<&serde_json::Value>,
    span: Span,
) -> Value {
    let status = |e: &StepStatus| e.status.map(|s| s.as_str());
    let (rollbacks, steps): (Vec<&StepStatus>, Vec<&StepStatus>) =
        entries.iter().partition(|e| e.rollback);
    let columns = DetailColumns {
        step_list: steps
            .into_iter()
            .map(|s| StepRow {
                step: s.id.clone(),
                task: s.task as i64,
                status: status(s),
                description: s.description.clone(),
                dependencies: s.dependencies.clone(),
                soft_dependencies: s.soft_dependencies.clone(),
                has_rollback: s.has_rollback,
            })
            .collect(),
        rollback: rollbacks
            .into_iter()
            .map(|r| CompensationRow {
                step: r.id.clone(),
                task: r.task as i64,
                status: status(r),
                round: r.round.unwrap_or(0),
            })
            .collect(),
        request: request.cloned(),
    };
    joined(workflow_summary(w, span), columns, span)
}

/// A step of a plan.
#[derive(IntoValue)]
struct PlannedRow {
    step: String,
    description: String,
    dependencies: Vec<String>,
    soft_dependencies: Vec<String>,
    has_rollback: bool,
}

impl PlannedRow {
    fn of(s: &PlannedStep) -> PlannedRow {
        PlannedRow {
            step: s.id.clone(),
            description: s.description.clone(),
            dependencies: s.dependencies.clone(),
            soft_dependencies: s.soft_dependencies.clone(),
            has_rollback: s.has_rollback,
        }
    }
}

/// A plan: its counts, its waves, its rollback waves and its steps.
#[derive(IntoValue)]
struct PlanRow {
    name: String,
    kind: &'static str,
    parallel_limit: u32,
    step_count: i64,
    wave_count: i64,
    rollback_wave_count: i64,
    truncated: bool,
    waves: Vec<Vec<String>>,
    rollback_waves: Vec<Vec<String>>,
    steps: Vec<PlannedRow>,
}

/// A plan: its waves, its rollback waves and its steps.
pub fn plan(plan: &WorkflowPlan, span: Span) -> Value {
    PlanRow {
        name: plan.name.clone(),
        kind: plan.kind.as_str(),
        parallel_limit: plan.parallel_limit,
        step_count: int(plan.step_count),
        wave_count: int(plan.wave_count),
        rollback_wave_count: int(plan.rollback_wave_count),
        truncated: plan.truncated,
        waves: plan.waves.clone(),
        rollback_waves: plan.rollback_waves.clone(),
        steps: plan.steps.iter().map(PlannedRow::of).collect(),
    }
    .into_value(span)
}

/// Which part of the registry `orch extensions ...` shows.
#[derive(Debug, Clone, Copy)]
pub enum ExtensionKind {
    /// Providers.
    Providers,
    /// Taskservs.
    Taskservs,
    /// Cluster definitions.
    Clusters,
}

/// A manifest that could not be loaded, as a row among the extensions.
#[derive(IntoValue)]
struct ProblemRow {
    name: String,
    path: String,
    problem: String,
}

/// The rows of one part of the registry (as the JSON the daemon sent, made Nushell
/// values), followed by the manifests that could not be loaded, as rows with `problem`.
pub fn extensions(report: &ExtensionsReport, kind: ExtensionKind, span: Span) -> Value {
    let (items, folder) = match kind {
        ExtensionKind::Providers => (serde_json::to_value(&report.providers), "providers"),
        ExtensionKind::Taskservs => (serde_json::to_value(&report.taskservs), "taskservs"),
        ExtensionKind::Clusters => (serde_json::to_value(&report.clusters), "clusters"),
    };
    let mut rows = match items.unwrap_or_default().into_value(span) {
        Value::List { vals, .. } => vals.into_owned(),
        _ => Vec::new(),
    };
    let problems = report
        .problems
        .iter()
        .filter(|p| p.path.components().any(|c| c.as_os_str() == folder));
    for problem in problems {
        let name = problem.path.parent().and_then(|d| d.file_name());
        let row = ProblemRow {
            name: name.map_or(String::new(), |n| n.to_string_lossy().into_owned()),
            path: problem.path.display().to_string(),
            problem: problem.problem.clone(),
        };
        rows.push(row.into_value(span));
    }
    Value::list(rows, span)
}

#[cfg(test)]
mod tests {
    use orch_protocol::{TaskStatus, WorkflowKind};

    use super::*;

    #[test]
    fn a_summary_has_its_dates_and_its_counts_in_life_cycle_order() {
        let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let mut step_counts = StatusCounts::default();
        step_counts.add(Some(TaskStatus::Succeeded));
        let summary = WorkflowSummary {
            id: 3,
            name: "w".into(),
            kind: WorkflowKind::Batch,
            submitted_at: at,
            priority: 0,
            parallel_limit: None,
            rollback_enabled: false,
            state: WorkflowState::Succeeded { finished_at: at },
            last_event: 9,
            steps: 1,
            step_counts,
            compensations: 0,
            compensation_counts: StatusCounts::default(),
            waves: Some(1),
        };
        let span = Span::test_data();
        let value = workflow_summary(&summary, span);
        let column = |name: &str| value.get_data_by_key(name).unwrap();
        assert_eq!(column("finished"), Value::date(at.fixed_offset(), span));
        assert_eq!(column("failed"), Value::nothing(span));
        let counts = column("step_counts");
        let names: Vec<&str> = counts
            .as_record()
            .unwrap()
            .columns()
            .map(String::as_str)
            .collect();
        assert_eq!(
            names[..5],
            ["blocked", "queued", "running", "retry_waiting", "succeeded"]
        );
        assert_eq!(
            counts.get_data_by_key("succeeded"),
            Some(Value::int(1, span))
        );
    }
}
