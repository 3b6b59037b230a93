//! The audit log of change requests: who asked, what, and what came of it; which entries
//! to read, and the result of checking the log's hash chain.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Who asked for a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Actor {
    /// The peer's user id.
    pub uid: u32,
    /// How it reached the daemon (`socket`).
    pub interface: String,
}

/// One entry of the audit log: a request that changes state, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditEntry {
    /// Position in the log, from 1, without gaps.
    pub seq: u64,
    /// When the change was committed.
    pub at: DateTime<Utc>,
    /// Who asked.
    pub actor: Actor,
    /// What was asked: `submit`, `cancel`, `retry`, `shutdown`.
    pub action: String,
    /// The request's parameters, with secrets redacted.
    pub params: serde_json::Value,
    /// Whether it was carried out.
    pub ok: bool,
    /// The outcome in words (the task ids affected, or the error).
    pub outcome: String,
    /// The previous entry's hash (64 zeros for the first).
    pub prev_hash: String,
    /// SHA-256 over `prev_hash` and this entry's other fields.
    pub hash: String,
}

/// Which audit entries `Audit` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AuditFilter {
    /// Only this action.
    #[serde(default)]
    pub action: Option<String>,
    /// At most this many, newest first.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The result of checking the audit log's hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditReport {
    /// How many entries were checked.
    pub entries: u64,
    /// True when every entry is intact and in place.
    pub intact: bool,
    /// The first entry found wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_seq: Option<u64>,
    /// What is wrong with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}
