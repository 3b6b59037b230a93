//! The tamper-evident audit log.
//!
//! Every request that changes state (submit, cancel, retry, shutdown) is recorded with who
//! asked, what, when, its parameters (secrets redacted) and its outcome, in the same
//! transaction as the change itself. Entries are numbered without gaps and hash-chained:
//! each entry's SHA-256 covers the previous entry's hash and its own fields, and the
//! store keeps the head (last seq and hash) apart. [`verify`] then detects an edited
//! entry, a deleted one (in the middle or at the end) and a reordering.

use chrono::{DateTime, Utc};
use orch_protocol::{Actor, AuditEntry, AuditReport};
use sha2::{Digest, Sha256};

/// The previous hash of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What replaces a secret in recorded parameters (and in what readers below admin see).
pub const REDACTED: &str = "[redacted]";

/// A change to record; the store numbers, timestamps and seals it at commit.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// Who asked.
    pub actor: Actor,
    /// What was asked.
    pub action: &'static str,
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
            action,
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

fn hex(bytes: &[u8]) -> String {
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

/// Checks entries in storage order (`(key, entry)`) against the chain and the stored head
/// (`(seq, hash)` of the last entry written).
pub fn verify(
    entries: impl Iterator<Item = (u64, AuditEntry)>,
    head: Option<(u64, String)>,
) -> AuditReport {
    let mut checked = 0;
    let mut prev_hash = GENESIS.to_string();
    let bad = |checked, seq, problem: String| AuditReport {
        entries: checked,
        intact: false,
        bad_seq: Some(seq),
        problem: Some(problem),
    };
    for (key, entry) in entries {
        let expected = checked + 1;
        if entry.seq != key {
            return bad(
                checked,
                key,
                format!(
                    "the entry stored as {key} says it is entry {}: entries were moved",
                    entry.seq
                ),
            );
        }
        if key != expected {
            return bad(
                checked,
                expected,
                format!("entry {expected} is missing (the log jumps to {key})"),
            );
        }
        if entry.prev_hash != prev_hash {
            return bad(
                checked,
                key,
                format!(
                    "entry {key} does not follow entry {}: entries were removed, reordered or replaced",
                    key - 1
                ),
            );
        }
        if hash_of(&entry) != entry.hash {
            return bad(
                checked,
                key,
                format!("entry {key} was altered (its content does not match its hash)"),
            );
        }
        prev_hash = entry.hash;
        checked += 1;
    }
    match head {
        Some((seq, hash)) if seq != checked || hash != prev_hash => bad(
            checked,
            seq,
            format!(
                "the log ends at entry {checked}, but entry {seq} was written: entries were removed from the end"
            ),
        ),
        None if checked > 0 => bad(checked, checked, "the log's head record is missing".into()),
        _ => AuditReport {
            entries: checked,
            intact: true,
            bad_seq: None,
            problem: None,
        },
    }
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
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(n: u64) -> Vec<(u64, AuditEntry)> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let actor = Actor {
                    uid: 0,
                    interface: "socket".into(),
                };
                let record = AuditRecord::new(actor, "submit", json!({"n": seq}), Ok("ok".into()));
                let entry = seal(record, seq, Utc::now(), &prev);
                prev = entry.hash.clone();
                (seq, entry)
            })
            .collect()
    }

    fn head(entries: &[(u64, AuditEntry)]) -> Option<(u64, String)> {
        entries.last().map(|(s, e)| (*s, e.hash.clone()))
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = chain(5);
        let report = verify(entries.clone().into_iter(), head(&entries));
        assert!(report.intact, "{report:?}");
        assert_eq!(report.entries, 5);
    }

    #[test]
    fn edits_deletions_and_reorderings_are_detected() {
        let entries = chain(5);
        let h = head(&entries);
        let mut edited = entries.clone();
        edited[2].1.outcome = "nothing happened".into();
        assert_eq!(verify(edited.into_iter(), h.clone()).bad_seq, Some(3));
        let mut deleted = entries.clone();
        deleted.remove(1);
        assert_eq!(verify(deleted.into_iter(), h.clone()).bad_seq, Some(2));
        let truncated = entries[..4].to_vec();
        assert_eq!(verify(truncated.into_iter(), h.clone()).bad_seq, Some(5));
        let mut swapped = entries.clone();
        let (a, b) = (swapped[1].1.clone(), swapped[2].1.clone());
        swapped[1].1 = b;
        swapped[2].1 = a;
        assert_eq!(verify(swapped.into_iter(), h).bad_seq, Some(2));
    }

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
