//! Nushell values for the orchestrator's data: tasks, events, audit entries and health
//! reports as records with real Nushell types (datetime, duration).
//!
//! Output rows are structs deriving [`IntoValue`]: a field becomes a column of the same
//! name, `Option` a value or nothing, `Vec` a list, `DateTime<FixedOffset>` a datetime,
//! [`Duration`] a duration, and a `serde_json::Value` the Nushell value of that JSON.

use chrono::{DateTime, FixedOffset, Utc};
use nu_protocol::{IntoValue, Record, Span, Value};
use orch_protocol::{
    Attempt, AttemptOutcome, Event, HealthReport, Task, TaskKind, TaskState, TaskStatus,
};

/// A Nushell duration, in nanoseconds (signed, as Nushell's are).
#[derive(Debug, Clone, Copy)]
pub struct Duration(i64);

impl Duration {
    /// The time from `from` to `to`.
    pub fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
        Duration((to - from).num_nanoseconds().unwrap_or(i64::MAX))
    }

    /// `ms` milliseconds.
    pub fn millis(ms: u64) -> Duration {
        Duration((ms as i64).saturating_mul(1_000_000))
    }
}

impl IntoValue for Duration {
    fn into_value(self, span: Span) -> Value {
        Value::duration(self.0, span)
    }
}

/// An instant as a Nushell datetime.
pub fn date(at: DateTime<Utc>) -> DateTime<FixedOffset> {
    at.fixed_offset()
}

/// A count as a Nushell int (the largest int when it does not fit).
pub fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The columns of `first`, then those of `more`, as one record (both must be records,
/// as derived rows are).
pub fn joined(first: impl IntoValue, more: impl IntoValue, span: Span) -> Value {
    let (Value::Record { val: first, .. }, Value::Record { val: more, .. }) =
        (first.into_value(span), more.into_value(span))
    else {
        unreachable!("rows are records")
    };
    let mut record = first.into_owned();
    for (column, value) in more.into_owned() {
        record.push(column, value);
    }
    Value::record(record, span)
}

fn exit_code(outcome: Option<&AttemptOutcome>) -> Option<i64> {
    match outcome {
        Some(AttemptOutcome::Exited { code }) => Some(i64::from(*code)),
        _ => None,
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
#[derive(IntoValue)]
struct TaskRow {
    id: i64,
    label: Option<String>,
    status: &'static str,
    priority: i32,
    command: String,
    attempts: i64,
    exit_code: Option<i64>,
    submitted: DateTime<FixedOffset>,
    started: Option<DateTime<FixedOffset>>,
    finished: Option<DateTime<FixedOffset>>,
    duration: Option<Duration>,
    progress: Option<f64>,
    error: Option<String>,
}

impl TaskRow {
    fn of(task: &Task) -> TaskRow {
        let last = task.last_attempt();
        let started = last.map(|a| a.started_at);
        let finished = task.state.finished_at().filter(|_| started.is_some());
        TaskRow {
            id: task.id as i64,
            label: task.spec.label.clone(),
            status: task.state.status().as_str(),
            priority: task.spec.priority,
            command: task.spec.describe(),
            attempts: task.attempts.len() as i64,
            exit_code: exit_code(last.and_then(|a| a.outcome.as_ref())),
            submitted: date(task.submitted_at),
            started: started.map(date),
            finished: finished.map(date),
            duration: started.zip(finished).map(|(s, f)| Duration::between(s, f)),
            progress: task.progress.as_ref().and_then(|p| p.percent),
            error: error_text(task),
        }
    }
}

/// One row of `orch tasks`.
pub fn task_row(task: &Task, span: Span) -> Value {
    TaskRow::of(task).into_value(span)
}

/// What `orch task` shows besides the row: the spec and every attempt.
#[derive(IntoValue)]
struct TaskDetail {
    kind: &'static str,
    script: Option<String>,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    timeout: Option<Duration>,
    after: Vec<i64>,
    /// Its start time (`--at` / `--delay`), if it has one.
    not_before: Option<DateTime<FixedOffset>>,
    /// The group it runs in (`--group`).
    group: String,
    params: serde_json::Value,
    state: Value,
    progress_message: Option<String>,
    attempt_history: Vec<AttemptRow>,
}

/// The full record of `orch task`: the row plus the spec and every attempt.
pub fn task_detail(task: &Task, span: Span) -> Value {
    let spec = &task.spec;
    let (kind, script) = match &spec.kind {
        TaskKind::Command { .. } => ("command", None),
        TaskKind::Nu { code } => ("nu", Some(code.clone())),
        TaskKind::NuFile { path } => ("nu_file", Some(path.display().to_string())),
    };
    let detail = TaskDetail {
        kind,
        script,
        retries: spec.retries,
        backoff: Duration::millis(spec.backoff.initial_ms),
        max_backoff: Duration::millis(spec.backoff.max_ms),
        timeout: spec.timeout_ms.map(Duration::millis),
        after: ids(&spec.after),
        not_before: spec.not_before.map(|t| t.fixed_offset()),
        group: spec.group_name().to_string(),
        params: spec.params.clone(),
        state: state_details(&task.state, span),
        progress_message: task.progress.as_ref().and_then(|p| p.message.clone()),
        attempt_history: task.attempts.iter().map(AttemptRow::of).collect(),
    };
    joined(TaskRow::of(task), detail, span)
}

fn ids(ids: &[u64]) -> Vec<i64> {
    ids.iter().map(|id| *id as i64).collect()
}

/// The data that belongs to the task's state (what it waits on, when it retries...).
fn state_details(state: &TaskState, span: Span) -> Value {
    let mut rec = Record::new();
    let date = |at: &DateTime<Utc>| Value::date(at.fixed_offset(), span);
    match state {
        TaskState::Blocked { waiting_on } => {
            rec.push("waiting_on", ids(waiting_on).into_value(span))
        }
        TaskState::Delayed { until } => rec.push("until", date(until)),
        TaskState::Queued { since } | TaskState::Stashed { since } => {
            rec.push("since", date(since))
        }
        TaskState::Running {
            attempt,
            started_at,
            paused_at,
        } => {
            rec.push("attempt", attempt.into_value(span));
            rec.push("started_at", date(started_at));
            // Since when its processes are stopped (`orch pause`), when they are.
            if let Some(paused_at) = paused_at {
                rec.push("paused_at", date(paused_at));
            }
        }
        TaskState::RetryWaiting {
            next_attempt,
            retry_at,
        } => {
            rec.push("next_attempt", next_attempt.into_value(span));
            rec.push("retry_at", date(retry_at));
        }
        TaskState::Succeeded { finished_at } => rec.push("finished_at", date(finished_at)),
        TaskState::Failed {
            finished_at,
            reason,
        } => {
            rec.push("finished_at", date(finished_at));
            rec.push("reason", Value::string(reason.describe(), span));
        }
        TaskState::Cancelled { at } => rec.push("at", date(at)),
        TaskState::DependencyFailed { at, dependency } => {
            rec.push("at", date(at));
            rec.push("dependency", Value::int(*dependency as i64, span));
        }
    }
    Value::record(rec, span)
}

/// One attempt of `orch task`'s `attempt_history`.
#[derive(IntoValue)]
struct AttemptRow {
    attempt: u32,
    started: DateTime<FixedOffset>,
    finished: Option<DateTime<FixedOffset>>,
    duration: Option<Duration>,
    outcome: Option<String>,
    exit_code: Option<i64>,
    /// The node of the cluster that ran it (none on a single daemon).
    node: Option<String>,
}

impl AttemptRow {
    fn of(a: &Attempt) -> AttemptRow {
        AttemptRow {
            attempt: a.number,
            started: date(a.started_at),
            finished: a.finished_at.map(date),
            duration: a.finished_at.map(|f| Duration::between(a.started_at, f)),
            outcome: a.outcome.as_ref().map(AttemptOutcome::describe),
            exit_code: exit_code(a.outcome.as_ref()),
            node: a.node.clone(),
        }
    }
}

/// One event of `orch watch`.
#[derive(IntoValue)]
struct EventRow {
    seq: i64,
    at: DateTime<FixedOffset>,
    task: i64,
    event: &'static str,
    details: crate::typed::Typed,
}

/// One event of `orch watch`.
pub fn event(event: &Event, span: Span) -> Value {
    let mut details = match serde_json::to_value(&event.kind) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    details.remove("type");
    EventRow {
        seq: event.seq as i64,
        at: date(event.at),
        task: event.task as i64,
        event: event.kind.name(),
        details: crate::typed::Typed(serde_json::Value::Object(details)),
    }
    .into_value(span)
}

/// The record of `orch health`.
#[derive(IntoValue)]
struct HealthRow {
    status: &'static str,
    version: String,
    protocol: u32,
    pid: u32,
    started: DateTime<FixedOffset>,
    uptime: Duration,
    storage: String,
    data_dir: String,
    socket: String,
    parallel_limit: i64,
    tasks: Record,
    retention: Record,
    /// The node and its cluster; nothing on redb.
    cluster: Value,
}

/// The record of `orch health`.
pub fn health(report: &HealthReport, span: Span) -> Value {
    let mut tasks = Record::new();
    for status in TaskStatus::ALL {
        let n = report.counts.get(&status).copied().unwrap_or(0);
        tasks.push(status.as_str(), Value::int(n as i64, span));
    }
    let mut labels = Record::new();
    for (label, keep) in &report.retention.labels {
        labels.push(label, Value::string(keep, span));
    }
    let r = &report.retention;
    let retention = nu_protocol::record! {
        "finished" => Value::string(&r.finished, span),
        "labels" => Value::record(labels, span),
        "events" => Value::string(&r.events, span),
        "events_removed_through" => Value::int(r.events_removed_through as i64, span),
    };
    HealthRow {
        status: "ok",
        version: report.version.clone(),
        protocol: report.protocol,
        pid: report.pid,
        started: date(report.started_at),
        uptime: Duration::between(report.started_at, Utc::now()),
        storage: report.storage.clone(),
        data_dir: report.data_dir.display().to_string(),
        socket: report.socket.display().to_string(),
        parallel_limit: report.parallel_limit as i64,
        tasks,
        retention,
        cluster: report
            .cluster
            .as_ref()
            .map_or(Value::nothing(span), |c| node_health(c, span)),
    }
    .into_value(span)
}

/// The `cluster` record of `orch health`.
fn node_health(health: &orch_protocol::NodeHealth, span: Span) -> Value {
    let leader = health.leader.as_ref();
    nu_protocol::record! {
        "node" => Value::string(&health.node, span),
        "role" => Value::string(health.role.as_str(), span),
        "leader" => leader.map_or(Value::nothing(span), |l| Value::string(&l.node, span)),
        "term" => leader.map_or(Value::nothing(span), |l| Value::int(l.term as i64, span)),
        "nodes_up" => Value::int(i64::from(health.nodes_up), span),
    }
    .into_value(span)
}

/// The row of one node in `orch cluster nodes`.
#[derive(IntoValue)]
struct NodeRow {
    name: String,
    role: &'static str,
    term: Value,
    host: String,
    pid: u32,
    socket: String,
    http: Value,
    parallel: u32,
    labels: Vec<String>,
    heartbeat: DateTime<FixedOffset>,
    lease_until: DateTime<FixedOffset>,
    started: DateTime<FixedOffset>,
    version: String,
}

/// The table of `orch cluster nodes`: the leader's row carries its term.
pub fn cluster_nodes(view: &orch_protocol::ClusterView, span: Span) -> Value {
    let rows = view.nodes.iter().map(|node| {
        let term = view
            .leader
            .as_ref()
            .filter(|_| node.role == orch_protocol::NodeRole::Leader)
            .map_or(Value::nothing(span), |l| Value::int(l.term as i64, span));
        NodeRow {
            name: node.name.clone(),
            role: node.role.as_str(),
            term,
            host: node.host.clone(),
            pid: node.pid,
            socket: node.socket.clone(),
            http: node
                .http
                .as_ref()
                .map_or(Value::nothing(span), |h| Value::string(h, span)),
            parallel: node.parallel,
            labels: node.labels.clone(),
            heartbeat: date(node.heartbeat_at),
            lease_until: date(node.lease_until),
            started: date(node.started_at),
            version: node.version.clone(),
        }
        .into_value(span)
    });
    Value::list(rows.collect(), span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_columns_keep_their_nushell_types() {
        let at = |s: i64| DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap();
        let mut spec = orch_protocol::TaskSpec::command("true", Vec::new());
        spec.timeout_ms = Some(1500);
        let task = Task {
            id: 7,
            spec,
            state: TaskState::Succeeded { finished_at: at(3) },
            submitted_at: at(0),
            attempts: vec![Attempt {
                number: 1,
                started_at: at(1),
                finished_at: Some(at(3)),
                outcome: Some(AttemptOutcome::Exited { code: 0 }),
                node: None,
            }],
            attempts_before_retry: 0,
            progress: None,
        };
        let span = Span::test_data();
        let detail = task_detail(&task, span);
        let column = |name: &str| detail.get_data_by_key(name).unwrap();
        assert_eq!(column("id"), Value::int(7, span));
        assert_eq!(column("submitted"), Value::date(at(0).fixed_offset(), span));
        assert_eq!(column("duration"), Value::duration(2_000_000_000, span));
        assert_eq!(column("timeout"), Value::duration(1_500_000_000, span));
        assert_eq!(column("label"), Value::nothing(span));
        assert_eq!(column("exit_code"), Value::int(0, span));
    }
}
