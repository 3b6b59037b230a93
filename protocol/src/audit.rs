//! The audit log of change requests: who asked, what, and what came of it; which entries
//! to read; the segments older entries are archived to, and where a compaction cuts; and
//! the result of checking the whole chain.

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
    /// Only entries numbered below this (the next page below the last one shown).
    #[serde(default)]
    pub before: Option<u64>,
    /// Only the requests of this user id.
    #[serde(default)]
    pub uid: Option<u32>,
    /// Only requests that were carried out (`true`) or refused or failed (`false`).
    #[serde(default)]
    pub ok: Option<bool>,
}

impl AuditFilter {
    /// Whether `entry` passes the filter (its page and limit aside).
    pub fn passes(&self, entry: &AuditEntry) -> bool {
        self.action.as_ref().is_none_or(|a| *a == entry.action)
            && self.uid.is_none_or(|uid| uid == entry.actor.uid)
            && self.ok.is_none_or(|ok| ok == entry.ok)
    }
}

/// Which entries a compaction archives: the oldest ones, up to (not including) a sequence
/// number or a time. In JSON a number (`40`: entries 1–39) or an RFC 3339 time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum AuditCut {
    /// The entries numbered below this.
    Seq(u64),
    /// The entries committed before this time (the oldest run of them: archiving stops at
    /// the first later entry).
    Time(DateTime<Utc>),
}

impl<'de> Deserialize<'de> for AuditCut {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CutVisitor)
    }
}

/// Reads an [`AuditCut`], saying what is expected when it is neither form.
struct CutVisitor;

impl serde::de::Visitor<'_> for CutVisitor {
    type Value = AuditCut;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sequence number (1 or more) or an RFC 3339 time")
    }

    fn visit_u64<E: serde::de::Error>(self, seq: u64) -> Result<AuditCut, E> {
        match seq {
            0 => Err(E::custom("audit entries are numbered from 1")),
            seq => Ok(AuditCut::Seq(seq)),
        }
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<AuditCut, E> {
        DateTime::parse_from_rfc3339(text)
            .map(|at| AuditCut::Time(at.with_timezone(&Utc)))
            .map_err(|e| {
                E::custom(format!(
                    "`{text}` is not an RFC 3339 time ({e}): give a sequence number or a time such as 2025-01-31T00:00:00Z"
                ))
            })
    }
}

impl std::fmt::Display for AuditCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuditCut::Seq(seq) => write!(f, "entry {seq}"),
            AuditCut::Time(at) => write!(f, "{}", at.to_rfc3339()),
        }
    }
}

/// What a checkpoint entry seals: a segment file of archived entries `first..=last`.
/// Its params are `{"archived": <this>, "before": <the cut>}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SegmentSeal {
    /// The file, relative to the data directory (`audit/segment-1-40.jsonl`).
    pub file: String,
    /// The first entry in it.
    pub first: u64,
    /// The last entry in it.
    pub last: u64,
    /// The last entry's hash (the next entry's `prev_hash`).
    pub last_hash: String,
    /// SHA-256 of the whole file.
    pub sha256: String,
    /// The file's size in bytes.
    pub bytes: u64,
}

/// An archived segment of the audit log, as the daemon lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditSegment {
    /// What its checkpoint entry sealed.
    #[serde(flatten)]
    pub seal: SegmentSeal,
    /// The sequence number of the checkpoint entry that archived it.
    pub checkpoint: u64,
    /// When it was archived (the checkpoint entry's time).
    pub archived_at: DateTime<Utc>,
}

/// The result of checking the audit log's hash chain: the archived segments (each file
/// against its checkpoint), then the live entries up to the head.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditReport {
    /// How many live entries (not archived) were checked.
    pub entries: u64,
    /// How many archived entries (in segments) were checked.
    #[serde(default)]
    pub archived: u64,
    /// True when every entry is intact and in place.
    pub intact: bool,
    /// The first entry found wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_seq: Option<u64>,
    /// What is wrong with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The archived segments, oldest first.
    #[serde(default)]
    pub segments: Vec<AuditSegment>,
}

#[cfg(test)]
mod tests {
    use super::{AuditCut, AuditEntry, AuditFilter};

    #[test]
    fn a_filter_passes_the_entries_of_its_action_user_and_outcome() {
        let entry: AuditEntry = serde_json::from_value(serde_json::json!({
            "seq": 1, "at": "2026-12-06T00:00:00Z",
            "actor": {"uid": 1000, "interface": "socket"}, "action": "cancel",
            "params": {}, "ok": false, "outcome": "refused", "prev_hash": "", "hash": ""
        }))
        .unwrap();
        let passes = |filter: serde_json::Value| {
            serde_json::from_value::<AuditFilter>(filter)
                .unwrap()
                .passes(&entry)
        };
        assert!(passes(serde_json::json!({})));
        assert!(passes(
            serde_json::json!({"action": "cancel", "uid": 1000, "ok": false})
        ));
        assert!(!passes(serde_json::json!({"uid": 0})));
        assert!(!passes(serde_json::json!({"ok": true})));
        assert!(!passes(serde_json::json!({"action": "submit"})));
    }

    #[test]
    fn a_cut_is_a_sequence_number_or_a_time_and_anything_else_says_so() {
        let cut = |json: &str| serde_json::from_str::<AuditCut>(json);
        assert_eq!(cut("40").unwrap(), AuditCut::Seq(40));
        let at = cut("\"2025-01-31T01:00:00+01:00\"").unwrap();
        assert_eq!(
            serde_json::to_string(&at).unwrap(),
            "\"2025-01-31T00:00:00Z\""
        );
        assert!(
            cut("0")
                .unwrap_err()
                .to_string()
                .contains("numbered from 1")
        );
        assert!(
            cut("\"yesterday\"")
                .unwrap_err()
                .to_string()
                .contains("RFC 3339")
        );
        assert!(
            cut("-3")
                .unwrap_err()
                .to_string()
                .contains("a sequence number")
        );
    }
}
