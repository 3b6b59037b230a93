//! Between Rust values and the stored columns: ids and sequence numbers as `bigint`,
//! status codes as `smallint`, and records as the JSON text serde_json writes.

use orch_protocol::TaskStatus;

use super::bridge::pg;
use crate::store::StoreError;

/// `value` as a PostgreSQL `bigint` (ids and sequence numbers stay far below its top).
pub(super) fn signed(what: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Backend(format!("{what} {value} does not fit in a bigint")))
}

/// A stored `bigint` that cannot be negative.
pub(super) fn unsigned(what: &str, value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt {
        what: what.to_string(),
        error: format!("negative value {value}"),
    })
}

/// A stored status code.
pub(super) fn status_of(id: i64, code: i16) -> Result<TaskStatus, StoreError> {
    TaskStatus::ALL
        .into_iter()
        .find(|s| i16::from(s.code()) == code)
        .ok_or_else(|| StoreError::Corrupt {
            what: format!("task {id}"),
            error: format!("unknown status code {code}"),
        })
}

/// Decodes a stored JSON record.
pub(super) fn decode<T: serde::de::DeserializeOwned>(
    what: &str,
    body: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        error: e.to_string(),
    })
}

/// A record as the JSON text to store.
pub(super) fn encode<T: serde::Serialize>(what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Backend(format!("cannot encode {what}: {e}")))
}

/// The body of a `(id, body)` row, decoded.
pub(super) fn record<T: serde::de::DeserializeOwned>(
    what: &str,
    row: &tokio_postgres::Row,
) -> Result<T, StoreError> {
    let id: i64 = row.try_get(0).map_err(pg)?;
    decode(&format!("{what} {id}"), row.try_get(1).map_err(pg)?)
}
