//! Nushell values as JSON: task parameters, request records, and workflow definitions
//! given as records or NUON.

use nu_protocol::{LabeledError, Value};

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
