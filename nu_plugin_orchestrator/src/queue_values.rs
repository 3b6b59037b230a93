//! Nushell values for the queue's controls: the groups as a table, and the whole view
//! (whether the queue is paused, and its groups) as a record.

use nu_protocol::{IntoValue, Span, Value};
use orch_protocol::{GroupView, QueueView};

/// One group as a row.
#[derive(IntoValue)]
struct GroupRow {
    name: String,
    /// How many of its tasks may run at once (nothing: as many as the nodes have slots).
    parallel: Option<i64>,
    paused: bool,
    running: i64,
}

fn row(group: GroupView, span: Span) -> Value {
    GroupRow {
        name: group.name,
        parallel: group.parallel.map(i64::from),
        paused: group.paused,
        running: i64::try_from(group.running).unwrap_or(i64::MAX),
    }
    .into_value(span)
}

/// The groups, one row each.
pub fn groups_table(view: QueueView, span: Span) -> Value {
    let rows = view.groups.into_iter().map(|g| row(g, span)).collect();
    Value::list(rows, span)
}

/// The view: `paused` (the whole queue) and `groups`.
pub fn queue_record(view: QueueView, span: Span) -> Value {
    let paused = view.paused;
    let mut record = nu_protocol::Record::new();
    record.push("paused", Value::bool(paused, span));
    record.push("groups", groups_table(view, span));
    Value::record(record, span)
}
