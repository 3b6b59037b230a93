//! Nushell values for the orchestrator's data.

use chrono::{DateTime, Utc};
use nu_protocol::{LabeledError, Record, Span, Value, record};
use orch_protocol::{
    Attempt, AttemptOutcome, AuditEntry, Event, HealthReport, Task, TaskKind, TaskState, TaskStatus,
};

/// A datetime value.
pub fn date(at: DateTime<Utc>, span: Span) -> Value {
    Value::date(at.fixed_offset(), span)
}

/// A datetime value, or nothing.
pub fn opt_date(at: Option<DateTime<Utc>>, span: Span) -> Value {
    at.map_or(Value::nothing(span), |at| date(at, span))
}

/// The time between two instants as a duration value.
pub fn between(from: DateTime<Utc>, to: DateTime<Utc>, span: Span) -> Value {
    let nanos = (to - from).num_nanoseconds().unwrap_or(i64::MAX);
    Value::duration(nanos, span)
}

/// Milliseconds as a duration value.
pub fn millis(ms: u64, span: Span) -> Value {
    Value::duration((ms as i64).saturating_mul(1_000_000), span)
}

fn opt_string(s: Option<&str>, span: Span) -> Value {
    s.map_or(Value::nothing(span), |s| Value::string(s, span))
}

fn exit_code(outcome: Option<&AttemptOutcome>, span: Span) -> Value {
    match outcome {
        Some(AttemptOutcome::Exited { code }) => Value::int(i64::from(*code), span),
        _ => Value::nothing(span),
    }
}

/// Why a task did not succeed, in words.
fn error_text(task: &Task) -> Option<String> {
    match &task.state {
        TaskState::Failed { reason, .. } => Some(reason.describe()),
        TaskState::DependencyFailed { dependency, .. } => {
            Some(format!("dependency {dependency} did not succeed"))
        }
        TaskState::Cancelled { .. } => Some("cancelled".into()),
        TaskState::RetryWaiting { .. } => task
            .last_attempt()
            .and_then(|a| a.outcome.as_ref())
            .map(|o| format!("attempt failed: {}", o.describe())),
        _ => None,
    }
}

/// One row of `orch tasks`.
pub fn task_row(task: &Task, span: Span) -> Value {
    let last = task.last_attempt();
    let started = last.map(|a| a.started_at);
    let finished = task.state.finished_at().filter(|_| started.is_some());
    let duration = match (started, finished) {
        (Some(s), Some(f)) => between(s, f, span),
        _ => Value::nothing(span),
    };
    Value::record(
        record! {
            "id" => Value::int(task.id as i64, span),
            "label" => opt_string(task.spec.label.as_deref(), span),
            "status" => Value::string(task.state.status().as_str(), span),
            "priority" => Value::int(i64::from(task.spec.priority), span),
            "command" => Value::string(task.spec.describe(), span),
            "attempts" => Value::int(task.attempts.len() as i64, span),
            "exit_code" => exit_code(last.and_then(|a| a.outcome.as_ref()), span),
            "submitted" => date(task.submitted_at, span),
            "started" => opt_date(started, span),
            "finished" => opt_date(finished, span),
            "duration" => duration,
            "progress" => task.progress.as_ref().and_then(|p| p.percent)
                .map_or(Value::nothing(span), |p| Value::float(p, span)),
            "error" => opt_string(error_text(task).as_deref(), span),
        },
        span,
    )
}

/// The full record of `orch task`: the row plus the spec and every attempt.
pub fn task_detail(task: &Task, span: Span) -> Value {
    let Value::Record { val, .. } = task_row(task, span) else {
        unreachable!("task_row returns a record")
    };
    let mut rec = val.into_owned();
    let spec = &task.spec;
    let (kind, program) = match &spec.kind {
        TaskKind::Command { .. } => ("command", Value::nothing(span)),
        TaskKind::Nu { code } => ("nu", Value::string(code, span)),
        TaskKind::NuFile { path } => ("nu_file", Value::string(path.display().to_string(), span)),
    };
    rec.push("kind", Value::string(kind, span));
    rec.push("script", program);
    rec.push("retries", Value::int(i64::from(spec.retries), span));
    rec.push("backoff", millis(spec.backoff.initial_ms, span));
    rec.push("max_backoff", millis(spec.backoff.max_ms, span));
    rec.push(
        "timeout",
        spec.timeout_ms
            .map_or(Value::nothing(span), |ms| millis(ms, span)),
    );
    rec.push("after", ids(&spec.after, span));
    rec.push("params", json_to_value(&spec.params, span));
    rec.push("state", state_details(&task.state, span));
    rec.push(
        "progress_message",
        opt_string(
            task.progress.as_ref().and_then(|p| p.message.as_deref()),
            span,
        ),
    );
    let attempts = task.attempts.iter().map(|a| attempt(a, span)).collect();
    rec.push("attempt_history", Value::list(attempts, span));
    Value::record(rec, span)
}

fn ids(ids: &[u64], span: Span) -> Value {
    Value::list(
        ids.iter().map(|id| Value::int(*id as i64, span)).collect(),
        span,
    )
}

/// The data that belongs to the task's state (what it waits on, when it retries...).
fn state_details(state: &TaskState, span: Span) -> Value {
    let mut rec = Record::new();
    match state {
        TaskState::Blocked { waiting_on } => rec.push("waiting_on", ids(waiting_on, span)),
        TaskState::Queued { since } => rec.push("since", date(*since, span)),
        TaskState::Running {
            attempt,
            started_at,
        } => {
            rec.push("attempt", Value::int(i64::from(*attempt), span));
            rec.push("started_at", date(*started_at, span));
        }
        TaskState::RetryWaiting {
            next_attempt,
            retry_at,
        } => {
            rec.push("next_attempt", Value::int(i64::from(*next_attempt), span));
            rec.push("retry_at", date(*retry_at, span));
        }
        TaskState::Succeeded { finished_at } => rec.push("finished_at", date(*finished_at, span)),
        TaskState::Failed {
            finished_at,
            reason,
        } => {
            rec.push("finished_at", date(*finished_at, span));
            rec.push("reason", Value::string(reason.describe(), span));
        }
        TaskState::Cancelled { at } => rec.push("at", date(*at, span)),
        TaskState::DependencyFailed { at, dependency } => {
            rec.push("at", date(*at, span));
            rec.push("dependency", Value::int(*dependency as i64, span));
        }
    }
    Value::record(rec, span)
}

fn attempt(a: &Attempt, span: Span) -> Value {
    Value::record(
        record! {
            "attempt" => Value::int(i64::from(a.number), span),
            "started" => date(a.started_at, span),
            "finished" => opt_date(a.finished_at, span),
            "duration" => a.finished_at.map_or(Value::nothing(span), |f| between(a.started_at, f, span)),
            "outcome" => opt_string(a.outcome.as_ref().map(|o| o.describe()).as_deref(), span),
            "exit_code" => exit_code(a.outcome.as_ref(), span),
        },
        span,
    )
}

/// One event of `orch watch`.
pub fn event(event: &Event, span: Span) -> Value {
    let mut details = match serde_json::to_value(&event.kind) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    details.remove("type");
    Value::record(
        record! {
            "seq" => Value::int(event.seq as i64, span),
            "at" => date(event.at, span),
            "task" => Value::int(event.task as i64, span),
            "event" => Value::string(event.kind.name(), span),
            "details" => json_to_value(&serde_json::Value::Object(details), span),
        },
        span,
    )
}

/// One row of `orch audit`.
pub fn audit_entry(entry: &AuditEntry, span: Span) -> Value {
    Value::record(
        record! {
            "seq" => Value::int(entry.seq as i64, span),
            "at" => date(entry.at, span),
            "uid" => Value::int(i64::from(entry.actor.uid), span),
            "interface" => Value::string(&entry.actor.interface, span),
            "action" => Value::string(&entry.action, span),
            "ok" => Value::bool(entry.ok, span),
            "outcome" => Value::string(&entry.outcome, span),
            "params" => json_to_value(&entry.params, span),
            "hash" => Value::string(&entry.hash, span),
        },
        span,
    )
}

/// The record of `orch health`.
pub fn health(report: &HealthReport, span: Span) -> Value {
    let mut counts = Record::new();
    for status in TaskStatus::ALL {
        let n = report.counts.get(&status).copied().unwrap_or(0);
        counts.push(status.as_str(), Value::int(n as i64, span));
    }
    Value::record(
        record! {
            "status" => Value::string("ok", span),
            "version" => Value::string(&report.version, span),
            "protocol" => Value::int(i64::from(report.protocol), span),
            "pid" => Value::int(i64::from(report.pid), span),
            "started" => date(report.started_at, span),
            "uptime" => between(report.started_at, Utc::now(), span),
            "storage" => Value::string(&report.storage, span),
            "data_dir" => Value::string(report.data_dir.display().to_string(), span),
            "socket" => Value::string(report.socket.display().to_string(), span),
            "parallel_limit" => Value::int(report.parallel_limit as i64, span),
            "tasks" => Value::record(counts, span),
        },
        span,
    )
}

/// A JSON value as a Nushell value.
pub fn json_to_value(json: &serde_json::Value, span: Span) -> Value {
    match json {
        serde_json::Value::Null => Value::nothing(span),
        serde_json::Value::Bool(b) => Value::bool(*b, span),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::int(i, span),
            None => Value::float(n.as_f64().unwrap_or(f64::NAN), span),
        },
        serde_json::Value::String(s) => Value::string(s, span),
        serde_json::Value::Array(items) => {
            Value::list(items.iter().map(|v| json_to_value(v, span)).collect(), span)
        }
        serde_json::Value::Object(map) => Value::record(
            map.iter()
                .map(|(k, v)| (k.clone(), json_to_value(v, span)))
                .collect(),
            span,
        ),
    }
}

/// A Nushell value as JSON, for task parameters. Datetimes become RFC 3339 strings,
/// durations and file sizes become integers (nanoseconds, bytes).
pub fn value_to_json(value: &Value) -> Result<serde_json::Value, LabeledError> {
    use serde_json::Value as J;
    Ok(match value {
        Value::Nothing { .. } => J::Null,
        Value::Bool { val, .. } => J::Bool(*val),
        Value::Int { val, .. } => J::from(*val),
        Value::Float { val, .. } => J::from(*val),
        Value::String { val, .. } | Value::Glob { val, .. } => J::String(val.clone()),
        Value::Date { val, .. } => J::String(val.to_rfc3339()),
        Value::Duration { val, .. } => J::from(*val),
        Value::Filesize { val, .. } => J::from(val.get()),
        Value::List { vals, .. } => {
            J::Array(vals.iter().map(value_to_json).collect::<Result<_, _>>()?)
        }
        Value::Record { val, .. } => J::Object(
            val.iter()
                .map(|(k, v)| Ok((k.clone(), value_to_json(v)?)))
                .collect::<Result<_, LabeledError>>()?,
        ),
        other => {
            return Err(LabeledError::new("cannot pass this value to a task").with_label(
                format!(
                    "a {} cannot be turned into task parameters (use records, lists, strings, numbers, booleans, dates, durations)",
                    other.get_type()
                ),
                other.span(),
            ));
        }
    })
}
