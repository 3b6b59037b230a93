//! The tamper-evident audit log.
//!
//! Every request that changes state (submit, cancel, retry, shutdown) is recorded with who
//! asked, what, when, its parameters (secrets redacted) and its outcome, in the same
//! transaction as the change itself. Entries are numbered without gaps and hash-chained:
//! each entry's SHA-256 covers the previous entry's hash and its own fields, and the
//! store keeps the head (last seq and hash) apart.
//!
//! - [`chain`]: checking a run of entries (an edited, deleted, moved or reordered entry, a
//!   removed tail), and reading checkpoint entries.
//! - [`segment`]: the sealed segment files older entries are archived to.
//! - [`archive`]: compaction (a segment written, then in one transaction the entries
//!   removed and a checkpoint entry appended), listing, export and the check of the whole
//!   log, segments included.
//! - [`retention`]: the daemon's own periodic compaction (`--retain-audit`).
//! - [`offline`]: checking a segment file without a daemon (`audit verify-segment`).

pub mod archive;
pub mod chain;
pub mod offline;
pub mod retention;
pub mod segment;

use chrono::{DateTime, Utc};
use orch_protocol::{Actor, AuditEntry};
use sha2::{Digest, Sha256};

/// The previous hash of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What replaces a secret in recorded parameters (and in what readers below admin see).
pub const REDACTED: &str = "[redacted]";

/// A change to record; the store numbers, timestamps and seals it at commit.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Who asked.
    pub actor: Actor,
    /// What was asked (one of the daemon's own names: borrowed, but owned when read back
    /// from a store's journal).
    pub action: std::borrow::Cow<'static, str>,
    /// The request's parameters (redacted by [`AuditRecord::new`]).
    pub params: serde_json::Value,
    /// Whether it was carried out.
    pub ok: bool,
    /// The outcome in words.
    pub outcome: String,
}

impl AuditRecord {
    /// A record with `params` redacted.
    pub fn new(
        actor: Actor,
        action: &'static str,
        mut params: serde_json::Value,
        result: Result<String, String>,
    ) -> AuditRecord {
        redact(&mut params);
        let (ok, outcome) = match result {
            Ok(outcome) => (true, outcome),
            Err(error) => (false, error),
        };
        AuditRecord {
            actor,
            action: action.into(),
            params,
            ok,
            outcome,
        }
    }
}

/// Submitted specs larger than this (as JSON) are recorded as a summary.
const MAX_RECORDED_SPECS_BYTES: usize = 64 * 1024;

/// The parameters recorded for a submission: the specs themselves, or for a large one its
/// count, the SHA-256 of its JSON and its first few specs (so an entry stays small).
pub fn submitted_params(specs: &[orch_protocol::TaskSpec]) -> serde_json::Value {
    let json = serde_json::to_vec(specs).expect("specs serialize");
    if json.len() <= MAX_RECORDED_SPECS_BYTES {
        return serde_json::json!({ "tasks": specs });
    }
    serde_json::json!({
        "task_count": specs.len(),
        "tasks_sha256": hex(&Sha256::digest(&json)),
        "first_tasks": &specs[..specs.len().min(3)],
    })
}

/// The audit parameters of a change to task `id`: the change itself, or for a large edit
/// (a long script) the fields it sets and the SHA-256 of its JSON.
pub fn task_change_params(
    id: orch_protocol::TaskId,
    change: &orch_protocol::TaskChange,
) -> serde_json::Value {
    let json = serde_json::to_vec(change).expect("changes serialize");
    if json.len() <= MAX_RECORDED_SPECS_BYTES {
        return serde_json::json!({ "id": id, "change": change });
    }
    let fields = match change {
        orch_protocol::TaskChange::Edit(edit) => edit.fields(),
        _ => Vec::new(),
    };
    serde_json::json!({
        "id": id,
        "change": { "change": "edit", "fields": fields },
        "change_sha256": hex(&Sha256::digest(&json)),
    })
}

/// The audit parameters of a schedule's creation: its settings, and its task as a
/// submission's are recorded (whole when small, else summed up by size and digest).
pub fn schedule_params(spec: &orch_protocol::ScheduleSpec) -> serde_json::Value {
    let mut params = serde_json::json!({
        "name": spec.name,
        "cron": spec.cron,
        "timezone": spec.timezone_name(),
        "catch_up": spec.catch_up,
    });
    params["work"] = match &spec.work {
        orch_protocol::ScheduledWork::Task { task } => submitted_params(std::slice::from_ref(task)),
        orch_protocol::ScheduledWork::Workflow { workflow } => {
            serde_json::to_value(workflow).unwrap_or_default()
        }
    };
    params
}

/// The audit parameters of a notifier's creation: its settings, without its secret, a
/// command's arguments or a URL's query (which may hold credentials).
pub fn notifier_params(spec: &orch_protocol::NotifierSpec) -> serde_json::Value {
    let target = match &spec.target {
        orch_protocol::NotifyTarget::Webhook { url, .. } => {
            let shown = url.split('?').next().unwrap_or_default();
            serde_json::json!({ "kind": "webhook", "url": shown, "secret": REDACTED })
        }
        orch_protocol::NotifyTarget::Command { command } => {
            let program = command.first().cloned().unwrap_or_default();
            let args = command.len().saturating_sub(1);
            serde_json::json!({ "kind": "command", "program": program, "args": args })
        }
    };
    serde_json::json!({ "name": spec.name, "target": target, "filter": spec.filter })
}

/// Lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Turns a record into entry `seq`, chained to `prev_hash`.
pub fn seal(record: AuditRecord, seq: u64, at: DateTime<Utc>, prev_hash: &str) -> AuditEntry {
    let mut entry = AuditEntry {
        seq,
        at,
        actor: record.actor,
        action: record.action.to_string(),
        params: record.params,
        ok: record.ok,
        outcome: record.outcome,
        prev_hash: prev_hash.to_string(),
        hash: String::new(),
    };
    entry.hash = hash_of(&entry);
    entry
}

/// The hash an entry must carry: SHA-256 over its previous hash and its fields.
pub fn hash_of(entry: &AuditEntry) -> String {
    let fields = (
        entry.seq,
        entry.at,
        &entry.actor,
        &entry.action,
        &entry.params,
        entry.ok,
        &entry.outcome,
    );
    let mut hasher = Sha256::new();
    hasher.update(entry.prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(serde_json::to_vec(&fields).expect("audit fields serialize"));
    hex(&hasher.finalize())
}

/// Replaces the values of secret-looking keys (password, secret, token, key, credential)
/// anywhere in `value`, and in an `env` list of `NAME=value` strings (as in a container's
/// inspect output) the values of secret-looking names.
pub fn redact(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if is_secret_name(key) {
                    *item = serde_json::Value::String(REDACTED.into());
                } else if key.eq_ignore_ascii_case("env") {
                    redact_env_list(item);
                    redact(item);
                } else {
                    redact(item);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// In a list of `NAME=value` strings, the values of secret-looking names.
fn redact_env_list(list: &mut serde_json::Value) {
    let Some(items) = list.as_array_mut() else {
        return;
    };
    for item in items {
        let Some((name, _)) = item.as_str().and_then(|s| s.split_once('=')) else {
            continue;
        };
        if is_secret_name(name) {
            *item = serde_json::Value::String(format!("{name}={REDACTED}"));
        }
    }
}

/// Whether a key names a secret (password, secret, token, credential, API or private key).
pub fn is_secret_name(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "api_key",
        "apikey",
        "private_key",
    ]
    .iter()
    .any(|s| key.contains(s))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod redaction_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_anywhere() {
        let mut params = json!({"env": {"DB_PASSWORD": "hunter2", "HOME": "/root"}, "params": [{"apiToken": "x"}]});
        redact(&mut params);
        assert_eq!(
            params,
            json!({"env": {"DB_PASSWORD": "[redacted]", "HOME": "/root"}, "params": [{"apiToken": "[redacted]"}]})
        );
        let mut inspect = json!({"Config": {"Env": ["PATH=/bin", "API_TOKEN=abc=def"]}});
        redact(&mut inspect);
        assert_eq!(
            inspect,
            json!({"Config": {"Env": ["PATH=/bin", "API_TOKEN=[redacted]"]}})
        );
    }
}
