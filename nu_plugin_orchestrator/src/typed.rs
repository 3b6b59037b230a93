//! The daemon's JSON as Nushell values with real types, by one rule for every record it
//! sends (audit parameters, event details, test environments, topologies):
//!
//! - a number under a key ending in `_ms` is a duration (`duration_ms: 1sec 250ms`);
//! - a number under a key ending in `_bytes` is a file size, under `_mb` one of that many
//!   MiB (`memory_mb: 1.0 GiB`);
//! - an RFC 3339 string under a key that names an instant (`*_at`, `since`, `until`,
//!   `at`, `not_before`, `slot`) is a datetime; other strings stay strings, whatever
//!   they look like (a check's expected output may well look like a date).
//!
//! Keys keep their names, so that the fields are those of the JSON and TOML people write.
//! What users gave the daemon as data (`params`, whatever its type) is left as it came.
//! [`untyped`] turns such a record back into the daemon's JSON (a topology shown, edited
//! and piped into `orch test env create`); Nushell's own `to json` writes durations in
//! nanoseconds and file sizes in bytes, so a record saved that way is not the daemon's
//! JSON any more.

use nu_protocol::{IntoValue, LabeledError, Record, Span, Value};

use crate::json::value_to_json;

/// JSON from the daemon, typed by the rule above when it becomes a Nushell value.
#[derive(Debug, Clone)]
pub struct Typed(pub serde_json::Value);

impl Typed {
    /// A serializable value of the protocol, typed.
    pub fn of<T: serde::Serialize>(item: &T) -> Typed {
        Typed(serde_json::to_value(item).unwrap_or_default())
    }
}

impl IntoValue for Typed {
    fn into_value(self, span: Span) -> Value {
        typed(self.0, None, span)
    }
}

/// `json` as a Nushell value; `key` is the record key it is under, if any.
fn typed(json: serde_json::Value, key: Option<&str>, span: Span) -> Value {
    use serde_json::Value as J;
    match json {
        given if key == Some("params") => given.into_value(span),
        J::Object(map) => {
            let mut record = Record::with_capacity(map.len());
            for (k, v) in map {
                let value = typed(v, Some(&k), span);
                record.push(k, value);
            }
            Value::record(record, span)
        }
        J::Array(items) => Value::list(
            items.into_iter().map(|v| typed(v, key, span)).collect(),
            span,
        ),
        J::Number(n) => match (key.and_then(unit_of), n.as_f64()) {
            (Some(unit), Some(x)) => unit.value(x, span),
            _ => J::Number(n).into_value(span),
        },
        J::String(text) => match key.filter(|k| names_an_instant(k)) {
            Some(_) => match chrono::DateTime::parse_from_rfc3339(&text) {
                Ok(at) => Value::date(at, span),
                Err(_) => Value::string(text, span),
            },
            None => Value::string(text, span),
        },
        other => other.into_value(span),
    }
}

/// What a number under a key means, by the key's ending.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Millis,
    Bytes,
    Mebibytes,
}

impl Unit {
    /// `x` of this unit as a Nushell value.
    fn value(self, x: f64, span: Span) -> Value {
        let whole =
            |factor: f64| (x * factor).round().clamp(i64::MIN as f64, i64::MAX as f64) as i64;
        match self {
            Unit::Millis => Value::duration(whole(1e6), span),
            Unit::Bytes => Value::filesize(whole(1.0), span),
            Unit::Mebibytes => Value::filesize(whole(1024.0 * 1024.0), span),
        }
    }
}

/// A record of the daemon's shown with [`Typed`] (and maybe edited) as its JSON again:
/// durations under `_ms` keys in milliseconds, sizes under `_mb` keys in MiB (rounded
/// up) and under `_bytes` keys in bytes; the rest as [`value_to_json`] has it.
pub fn untyped(value: &Value) -> Result<serde_json::Value, LabeledError> {
    json_of(value, None)
}

fn json_of(value: &Value, key: Option<&str>) -> Result<serde_json::Value, LabeledError> {
    use serde_json::Value as J;
    let unit = key.and_then(unit_of);
    Ok(match value {
        other if key == Some("params") => value_to_json(other)?,
        Value::Record { val, .. } => J::Object(
            val.iter()
                .map(|(k, v)| Ok((k.clone(), json_of(v, Some(k))?)))
                .collect::<Result<_, LabeledError>>()?,
        ),
        Value::List { vals, .. } => J::Array(
            vals.iter()
                .map(|v| json_of(v, key))
                .collect::<Result<_, _>>()?,
        ),
        Value::Duration { val, .. } if unit == Some(Unit::Millis) => J::from(val / 1_000_000),
        Value::Filesize { val, .. } if unit == Some(Unit::Mebibytes) => {
            J::from((val.get().max(0) as u64).div_ceil(1024 * 1024))
        }
        other => value_to_json(other)?,
    })
}

/// Whether a key names an instant.
fn names_an_instant(key: &str) -> bool {
    key.ends_with("_at") || matches!(key, "since" | "until" | "at" | "not_before" | "slot")
}

fn unit_of(key: &str) -> Option<Unit> {
    if key.ends_with("_ms") {
        Some(Unit::Millis)
    } else if key.ends_with("_bytes") {
        Some(Unit::Bytes)
    } else if key.ends_with("_mb") {
        Some(Unit::Mebibytes)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value(json: serde_json::Value) -> Value {
        Typed(json).into_value(Span::test_data())
    }

    #[test]
    fn times_sizes_and_instants_get_their_types_by_key_and_form() {
        let v = value(json!({
            "duration_ms": 1250,
            "memory_mb": 1024,
            "max_bytes": 2048,
            "created_at": "2026-12-04T10:00:00Z",
            "name": "etcd",
            "ttl_ms": null,
            "nodes": [{"probe_timeout_ms": 5000}],
        }));
        let record = v.as_record().unwrap();
        assert_eq!(
            record.get("duration_ms").unwrap().as_duration().unwrap(),
            1_250_000_000
        );
        assert_eq!(
            record
                .get("memory_mb")
                .unwrap()
                .as_filesize()
                .unwrap()
                .get(),
            1 << 30
        );
        assert_eq!(
            record
                .get("max_bytes")
                .unwrap()
                .as_filesize()
                .unwrap()
                .get(),
            2048
        );
        assert!(record.get("created_at").unwrap().as_date().is_ok());
        assert_eq!(record.get("name").unwrap().as_str().unwrap(), "etcd");
        assert!(record.get("ttl_ms").unwrap().is_nothing());
        let node = &record.get("nodes").unwrap().as_list().unwrap()[0];
        let timeout = node.as_record().unwrap().get("probe_timeout_ms").unwrap();
        assert_eq!(timeout.as_duration().unwrap(), 5_000_000_000);
    }

    #[test]
    fn a_typed_record_turns_back_into_the_same_json() {
        let json = json!({
            "nodes": [{"name": "a", "resources": {"cpus": 1.5, "memory_mb": 1024}}],
            "probe": {"timeout_ms": 5000, "max_bytes": 4096},
            "params": {"wait_ms": 5},
        });
        assert_eq!(untyped(&value(json.clone())).unwrap(), json);
    }

    #[test]
    fn what_users_gave_as_params_is_left_as_it_came() {
        let v = value(json!({"params": {"wait_ms": 5, "when": "2026-12-04T10:00:00Z"}}));
        let params = v.as_record().unwrap().get("params").unwrap();
        let params = params.as_record().unwrap();
        assert_eq!(params.get("wait_ms").unwrap().as_int().unwrap(), 5);
        assert!(params.get("when").unwrap().as_str().is_ok());
        let v = value(json!({"params": "2026-12-04T10:00:00Z"}));
        assert!(
            v.as_record()
                .unwrap()
                .get("params")
                .unwrap()
                .as_str()
                .is_ok()
        );
    }

    #[test]
    fn a_string_that_looks_like_a_date_stays_a_string_unless_its_key_names_an_instant() {
        let v = value(json!({"expect": "2026-12-04T10:00:00Z", "since": "2026-12-04T10:00:00Z"}));
        let record = v.as_record().unwrap();
        assert!(record.get("expect").unwrap().as_str().is_ok());
        assert!(record.get("since").unwrap().as_date().is_ok());
    }
}
