//! Nushell values for workflows, their plans and the extensions registry.

use nu_protocol::{Record, Span, Value, record};
use orch_protocol::{
    ExtensionsReport, StatusCounts, StepStatus, WorkflowPlan, WorkflowState, WorkflowSummary,
};

use crate::convert::{date, json_to_value};

/// Strings as a list value.
fn strings(items: &[String], span: Span) -> Value {
    Value::list(items.iter().map(|s| Value::string(s, span)).collect(), span)
}

/// The state's own data: when it ended, why, which steps failed.
fn state_fields(state: &WorkflowState, rec: &mut Record, span: Span) {
    let (finished, reason, failed) = match state {
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
    rec.push(
        "finished",
        finished.map_or(Value::nothing(span), |f| date(f, span)),
    );
    rec.push(
        "reason",
        reason.map_or(Value::nothing(span), |r| Value::string(r, span)),
    );
    rec.push(
        "failed",
        failed.map_or(Value::nothing(span), |f| strings(f, span)),
    );
}

/// Counts by status as a record.
fn counts(counts: &StatusCounts, span: Span) -> Value {
    let int = |n: u64| Value::int(i64::try_from(n).unwrap_or(i64::MAX), span);
    Value::record(
        record! {
            "blocked" => int(counts.blocked),
            "queued" => int(counts.queued),
            "running" => int(counts.running),
            "retry_waiting" => int(counts.retry_waiting),
            "succeeded" => int(counts.succeeded),
            "failed" => int(counts.failed),
            "cancelled" => int(counts.cancelled),
            "dependency_failed" => int(counts.dependency_failed),
            "removed" => int(counts.removed),
        },
        span,
    )
}

/// One row of `orch workflow list`.
pub fn workflow_row(w: &WorkflowSummary, span: Span) -> Value {
    let int = |n: u64| Value::int(i64::try_from(n).unwrap_or(i64::MAX), span);
    let mut rec = record! {
        "id" => int(w.id),
        "name" => Value::string(&w.name, span),
        "kind" => Value::string(w.kind.as_str(), span),
        "status" => Value::string(w.state.status().as_str(), span),
        "steps" => int(w.steps),
        "succeeded" => int(w.step_counts.succeeded),
        "running" => int(w.step_counts.running),
        "submitted" => date(w.submitted_at, span),
    };
    state_fields(&w.state, &mut rec, span);
    Value::record(rec, span)
}

/// A workflow's summary as a record: the row plus its settings and its steps and
/// compensations counted by status.
pub fn workflow_summary(w: &WorkflowSummary, span: Span) -> Value {
    let Value::Record { val, .. } = workflow_row(w, span) else {
        unreachable!("workflow_row returns a record")
    };
    let mut rec = val.into_owned();
    let int = |n: u64| Value::int(i64::try_from(n).unwrap_or(i64::MAX), span);
    rec.push("priority", Value::int(i64::from(w.priority), span));
    rec.push(
        "parallel_limit",
        w.parallel_limit
            .map_or(Value::nothing(span), |l| Value::int(i64::from(l), span)),
    );
    rec.push("rollback_enabled", Value::bool(w.rollback_enabled, span));
    rec.push("waves", w.waves.map_or(Value::nothing(span), int));
    rec.push("step_counts", counts(&w.step_counts, span));
    rec.push("compensations", int(w.compensations));
    rec.push("compensation_counts", counts(&w.compensation_counts, span));
    Value::record(rec, span)
}

/// The full record of `orch workflow show`: the summary plus the given steps
/// (`step_list`) and compensations (`rollback`), and the request when it came along.
pub fn workflow_detail(
    w: &WorkflowSummary,
    entries: &[StepStatus],
    request: Option<&serde_json::Value>,
    span: Span,
) -> Value {
    let Value::Record { val, .. } = workflow_summary(w, span) else {
        unreachable!("workflow_summary returns a record")
    };
    let mut rec = val.into_owned();
    let status = |e: &StepStatus| {
        e.status
            .map_or(Value::nothing(span), |s| Value::string(s.as_str(), span))
    };
    let steps = entries
        .iter()
        .filter(|e| !e.rollback)
        .map(|s| {
            Value::record(
                record! {
                    "step" => Value::string(&s.id, span),
                    "task" => Value::int(s.task as i64, span),
                    "status" => status(s),
                    "description" => Value::string(&s.description, span),
                    "dependencies" => strings(&s.dependencies, span),
                    "soft_dependencies" => strings(&s.soft_dependencies, span),
                    "has_rollback" => Value::bool(s.has_rollback, span),
                },
                span,
            )
        })
        .collect();
    rec.push("step_list", Value::list(steps, span));
    let rollbacks = entries
        .iter()
        .filter(|e| e.rollback)
        .map(|r| {
            Value::record(
                record! {
                    "step" => Value::string(&r.id, span),
                    "task" => Value::int(r.task as i64, span),
                    "status" => status(r),
                    "round" => Value::int(i64::from(r.round.unwrap_or(0)), span),
                },
                span,
            )
        })
        .collect();
    rec.push("rollback", Value::list(rollbacks, span));
    rec.push(
        "request",
        request.map_or(Value::nothing(span), |r| json_to_value(r, span)),
    );
    Value::record(rec, span)
}

/// A plan: its waves, its rollback waves and its steps.
pub fn plan(plan: &WorkflowPlan, span: Span) -> Value {
    let waves =
        |waves: &[Vec<String>]| Value::list(waves.iter().map(|w| strings(w, span)).collect(), span);
    let steps = plan
        .steps
        .iter()
        .map(|s| {
            Value::record(
                record! {
                    "step" => Value::string(&s.id, span),
                    "description" => Value::string(&s.description, span),
                    "dependencies" => strings(&s.dependencies, span),
                    "soft_dependencies" => strings(&s.soft_dependencies, span),
                    "has_rollback" => Value::bool(s.has_rollback, span),
                },
                span,
            )
        })
        .collect();
    let int = |n: u64| Value::int(i64::try_from(n).unwrap_or(i64::MAX), span);
    Value::record(
        record! {
            "name" => Value::string(&plan.name, span),
            "kind" => Value::string(plan.kind.as_str(), span),
            "parallel_limit" => Value::int(i64::from(plan.parallel_limit), span),
            "step_count" => int(plan.step_count),
            "wave_count" => int(plan.wave_count),
            "rollback_wave_count" => int(plan.rollback_wave_count),
            "truncated" => Value::bool(plan.truncated, span),
            "waves" => waves(&plan.waves),
            "rollback_waves" => waves(&plan.rollback_waves),
            "steps" => Value::list(steps, span),
        },
        span,
    )
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

/// The rows of one part of the registry (as the JSON the daemon sent, made Nushell
/// values), followed by the manifests that could not be loaded, as rows with `problem`.
pub fn extensions(report: &ExtensionsReport, kind: ExtensionKind, span: Span) -> Value {
    let (items, folder) = match kind {
        ExtensionKind::Providers => (serde_json::to_value(&report.providers), "providers"),
        ExtensionKind::Taskservs => (serde_json::to_value(&report.taskservs), "taskservs"),
        ExtensionKind::Clusters => (serde_json::to_value(&report.clusters), "clusters"),
    };
    let mut rows = match json_to_value(&items.unwrap_or_default(), span) {
        Value::List { vals, .. } => vals.into_owned(),
        _ => Vec::new(),
    };
    let problems = report
        .problems
        .iter()
        .filter(|p| p.path.components().any(|c| c.as_os_str() == folder));
    for problem in problems {
        rows.push(Value::record(
            record! {
                "name" => Value::string(
                    problem.path.parent().and_then(|d| d.file_name())
                        .map_or(String::new(), |n| n.to_string_lossy().into_owned()),
                    span,
                ),
                "path" => Value::string(problem.path.display().to_string(), span),
                "problem" => Value::string(&problem.problem, span),
            },
            span,
        ));
    }
    Value::list(rows, span)
}
