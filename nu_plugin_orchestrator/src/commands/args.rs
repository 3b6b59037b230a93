//! Reading command arguments: named flags (where `null` means not given), task ids (one,
//! or many from pipeline input), statuses and limits, with errors that point at the
//! offending argument.

use nu_plugin::EvaluatedCall;
use nu_protocol::{LabeledError, Spanned, Value};
use orch_protocol::TaskStatus;

/// A named flag's value, where `--flag null` (what a wrapper passes for an unset
/// optional flag of its own) counts as not given.
pub fn flag<T: nu_protocol::FromValue>(
    call: &EvaluatedCall,
    name: &str,
) -> Result<Option<T>, LabeledError> {
    match call.get_flag_value(name) {
        None | Some(Value::Nothing { .. }) => Ok(None),
        Some(value) => Ok(Some(T::from_value(value)?)),
    }
}

/// A task id argument: a non-negative integer.
pub fn task_id(value: Spanned<i64>) -> Result<u64, LabeledError> {
    u64::try_from(value.item).map_err(|_| {
        LabeledError::new("invalid task id")
            .with_label("task ids are positive integers", value.span)
    })
}

/// Parses `--status` (a name or a list of names).
pub fn statuses(value: Option<Value>) -> Result<Vec<TaskStatus>, LabeledError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let values = match value {
        Value::List { vals, .. } => vals.into_owned(),
        other => vec![other],
    };
    values
        .iter()
        .map(|v| {
            let name = v.as_str().map_err(|e| {
                LabeledError::new("invalid status").with_label(e.to_string(), v.span())
            })?;
            TaskStatus::parse(name).ok_or_else(|| {
                let known: Vec<_> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
                LabeledError::new("unknown status").with_label(
                    format!("`{name}` is not a status; use one of {}", known.join(", ")),
                    v.span(),
                )
            })
        })
        .collect()
}

/// The `--limit` flag: a count that must not be negative.
pub fn limit_flag(call: &EvaluatedCall) -> Result<Option<usize>, LabeledError> {
    let Some(n) = call.get_flag::<i64>("limit")? else {
        return Ok(None);
    };
    usize::try_from(n).map(Some).map_err(|_| {
        LabeledError::new("invalid limit").with_label(
            "the limit must not be negative",
            call.get_flag_span("limit").unwrap_or(call.head),
        )
    })
}

/// The most ids a range of task ids may expand to.
const MAX_RANGE_IDS: usize = 1_000_000;

/// Task ids from pipeline input: ints, task records (with `id`), or lists of either.
pub fn ids_from_value(value: &Value, out: &mut Vec<u64>) -> Result<(), LabeledError> {
    match value {
        Value::Int {
            val, internal_span, ..
        } => out.push(task_id(Spanned {
            item: *val,
            span: *internal_span,
        })?),
        Value::Record {
            val, internal_span, ..
        } => match val.get("id") {
            Some(id) => ids_from_value(id, out)?,
            None => {
                return Err(LabeledError::new("no task id in record")
                    .with_label("expected a task record with an `id` column", *internal_span));
            }
        },
        Value::List { vals, .. } => {
            for v in vals {
                ids_from_value(v, out)?;
            }
        }
        Value::Range { val, .. } => {
            let span = value.span();
            // An open range (`1..`) never ends: refuse it rather than loop forever.
            let ids = val.into_range_iter(span, nu_protocol::Signals::empty());
            for (n, v) in ids.enumerate() {
                if n == MAX_RANGE_IDS {
                    return Err(LabeledError::new("range too long").with_label(
                        format!("a range of task ids may hold at most {MAX_RANGE_IDS} ids"),
                        span,
                    ));
                }
                ids_from_value(&v, out)?;
            }
        }
        Value::Nothing { .. } => {}
        other => {
            return Err(LabeledError::new("not a task id").with_label(
                format!("expected an int or a task record, got {}", other.get_type()),
                other.span(),
            ));
        }
    }
    Ok(())
}

/// The ids a command was given: its rest arguments from `first`, or else the ids (or
/// records with an `id`) piped in; each with the span to point an error at.
pub fn ids_of_call(
    call: &EvaluatedCall,
    first: usize,
    input: &Value,
) -> Result<Vec<(u64, nu_protocol::Span)>, LabeledError> {
    let named: Vec<Spanned<i64>> = call.rest(first)?;
    let mut ids = Vec::with_capacity(named.len());
    for arg in &named {
        ids.push((task_id(*arg)?, arg.span));
    }
    // The arguments win over the pipeline (inside `each`, the item is piped in too).
    if ids.is_empty() {
        let mut piped = Vec::new();
        ids_from_value(input, &mut piped)?;
        ids.extend(piped.into_iter().map(|id| (id, input.span())));
    }
    Ok(ids)
}
