//! Checking the hash chain one entry at a time, over any run of entries: the archived
//! segments then the live log (from genesis), the live log after the newest segment (before
//! a compaction), or one segment file on its own (offline, from wherever it starts).
//!
//! A [`Chain`] detects an entry stored under another number (moved), a gap (deleted), a
//! broken `prev_hash` link (removed, reordered or replaced), a hash that does not match
//! the content (edited) and, given the head, a removed tail. It also collects the
//! checkpoint entries it passes, each with the segment it sealed.

use orch_protocol::{AuditEntry, SegmentSeal};

use super::{GENESIS, hash_of};

/// The action of a compaction's entries: with `archived` in its params, a checkpoint (the
/// segment it sealed); without, a compaction request that archived nothing.
pub const CHECKPOINT_ACTION: &str = "audit_compact";

/// The first problem found: which entry, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct Broken {
    /// The entry found wrong (or the entry expected there).
    pub seq: u64,
    /// What is wrong, in words.
    pub problem: String,
}

impl Broken {
    /// A problem at entry `seq`.
    pub fn at(seq: u64, problem: impl Into<String>) -> Broken {
        Broken {
            seq,
            problem: problem.into(),
        }
    }
}

/// Where a run of entries must start.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Start {
    /// At entry `seq`, whose `prev_hash` must be `hash`.
    At { seq: u64, prev_hash: String },
    /// Wherever the first entry says (a segment checked on its own).
    Anywhere,
}

/// A chain being checked.
#[derive(Debug, Clone)]
pub struct Chain {
    start: Start,
    /// The last entry passed: its seq and hash.
    last: Option<(u64, String)>,
    checked: u64,
    checkpoints: Vec<(u64, SegmentSeal)>,
}

impl Chain {
    /// A chain from its first entry (1, after [`GENESIS`]).
    pub fn from_genesis() -> Chain {
        Chain::after(0, GENESIS)
    }

    /// A chain that continues after entry `seq`, whose hash is `hash`.
    pub fn after(seq: u64, hash: &str) -> Chain {
        Chain::starting(Start::At {
            seq: seq + 1,
            prev_hash: hash.to_string(),
        })
    }

    /// A chain that starts wherever its first entry says (nothing before it is known).
    pub fn anywhere() -> Chain {
        Chain::starting(Start::Anywhere)
    }

    fn starting(start: Start) -> Chain {
        Chain {
            start,
            last: None,
            checked: 0,
            checkpoints: Vec::new(),
        }
    }

    /// How many entries were passed.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The last entry passed (its seq and hash).
    pub fn last(&self) -> Option<(u64, &str)> {
        self.last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()))
    }

    /// The checkpoint entries passed (their seq) with what each sealed.
    pub fn checkpoints(&self) -> &[(u64, SegmentSeal)] {
        &self.checkpoints
    }

    /// The entry the chain expects next and the `prev_hash` it must carry (none before the
    /// first entry of a chain that starts anywhere).
    fn expected(&self) -> Option<(u64, &str)> {
        match (&self.last, &self.start) {
            (Some((seq, hash)), _) => Some((seq + 1, hash.as_str())),
            (None, Start::At { seq, prev_hash }) => Some((*seq, prev_hash.as_str())),
            (None, Start::Anywhere) => None,
        }
    }

    /// Decodes the entry stored under `key` and passes it.
    pub fn push_json(&mut self, key: u64, body: &[u8]) -> Result<AuditEntry, Broken> {
        let entry: AuditEntry = serde_json::from_slice(body)
            .map_err(|e| Broken::at(key, format!("entry {key} cannot be read: {e}")))?;
        self.push(key, &entry)?;
        Ok(entry)
    }

    /// Passes the entry stored under `key` (its own seq, in a segment file).
    pub fn push(&mut self, key: u64, entry: &AuditEntry) -> Result<(), Broken> {
        if entry.seq != key {
            return Err(Broken::at(
                key,
                format!(
                    "the entry stored as {key} says it is entry {}: entries were moved",
                    entry.seq
                ),
            ));
        }
        let (expected, prev_hash) = self.expected().unwrap_or((key, entry.prev_hash.as_str()));
        if key < expected {
            return Err(Broken::at(
                expected,
                format!(
                    "after entry {} comes entry {key} again: entries were repeated or reordered",
                    expected - 1
                ),
            ));
        }
        if key != expected {
            return Err(Broken::at(
                expected,
                format!("entry {expected} is missing (the log jumps to {key})"),
            ));
        }
        if entry.prev_hash != prev_hash {
            return Err(Broken::at(
                key,
                format!(
                    "entry {key} does not follow entry {}: entries were removed, reordered or replaced",
                    key.saturating_sub(1)
                ),
            ));
        }
        if hash_of(entry) != entry.hash {
            return Err(Broken::at(
                key,
                format!("entry {key} was altered (its content does not match its hash)"),
            ));
        }
        if let Some(seal) = checkpoint_seal(entry)? {
            self.checkpoints.push((key, seal));
        }
        self.last = Some((key, entry.hash.clone()));
        self.checked += 1;
        Ok(())
    }

    /// Checks the end of the chain against the store's head (the last entry written).
    pub fn end(&self, head: Option<(u64, String)>) -> Result<(), Broken> {
        let (last_seq, last_hash) = self.last().unwrap_or(match &self.start {
            Start::At { seq, prev_hash } => (seq - 1, prev_hash.as_str()),
            Start::Anywhere => (0, GENESIS),
        });
        match head {
            Some((seq, hash)) if seq != last_seq || hash != last_hash => Err(Broken::at(
                seq,
                format!(
                    "the log ends at entry {last_seq}, but entry {seq} was written: entries were removed from the end"
                ),
            )),
            None if last_seq > 0 => Err(Broken::at(last_seq, "the log's head record is missing")),
            _ => Ok(()),
        }
    }
}

/// What a checkpoint entry sealed; `None` for any other entry.
pub fn checkpoint_seal(entry: &AuditEntry) -> Result<Option<SegmentSeal>, Broken> {
    let archived = match entry.params.get("archived") {
        Some(archived) if entry.action == CHECKPOINT_ACTION => archived,
        _ => return Ok(None),
    };
    let seq = entry.seq;
    let seal: SegmentSeal = serde_json::from_value(archived.clone()).map_err(|e| {
        Broken::at(
            seq,
            format!("entry {seq} is a checkpoint whose seal cannot be read: {e}"),
        )
    })?;
    if seal.first > seal.last || seal.last >= seq {
        return Err(Broken::at(
            seq,
            format!(
                "entry {seq} is a checkpoint of entries {}–{}, which it cannot have archived",
                seal.first, seal.last
            ),
        ));
    }
    Ok(Some(seal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditRecord, seal};
    use chrono::Utc;
    use orch_protocol::Actor;
    use serde_json::json;

    fn actor() -> Actor {
        Actor {
            uid: 0,
            interface: "socket".into(),
        }
    }

    /// Entries 1..=n, each `params` from `params(seq)`.
    fn chain_of(n: u64, params: impl Fn(u64) -> serde_json::Value) -> Vec<AuditEntry> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let record = AuditRecord::new(actor(), "submit", params(seq), Ok("ok".into()));
                let entry = seal(record, seq, Utc::now(), &prev);
                prev = entry.hash.clone();
                entry
            })
            .collect()
    }

    fn chain(n: u64) -> Vec<AuditEntry> {
        chain_of(n, |seq| json!({ "n": seq }))
    }

    fn head(entries: &[AuditEntry]) -> Option<(u64, String)> {
        entries.last().map(|e| (e.seq, e.hash.clone()))
    }

    /// Where `chain` (keyed by position) breaks first.
    fn check(entries: &[(u64, AuditEntry)], head: Option<(u64, String)>) -> Result<u64, Broken> {
        let mut chain = Chain::from_genesis();
        for (key, entry) in entries {
            chain.push(*key, entry)?;
        }
        chain.end(head)?;
        Ok(chain.checked())
    }

    fn keyed(entries: Vec<AuditEntry>) -> Vec<(u64, AuditEntry)> {
        entries.into_iter().map(|e| (e.seq, e)).collect()
    }

    #[test]
    fn an_intact_chain_verifies() {
        let entries = chain(5);
        assert_eq!(check(&keyed(entries.clone()), head(&entries)), Ok(5));
        assert_eq!(check(&[], None), Ok(0));
    }

    #[test]
    fn edits_deletions_moves_and_reorderings_are_detected() {
        let entries = chain(5);
        let h = head(&entries);
        let bad = |entries: Vec<(u64, AuditEntry)>| check(&entries, h.clone()).unwrap_err().seq;
        let mut edited = keyed(entries.clone());
        edited[2].1.outcome = "nothing happened".into();
        assert_eq!(bad(edited), 3);
        let mut deleted = keyed(entries.clone());
        deleted.remove(1);
        assert_eq!(bad(deleted), 2);
        assert_eq!(bad(keyed(entries[..4].to_vec())), 5);
        let mut swapped = keyed(entries.clone());
        let (a, b) = (swapped[1].1.clone(), swapped[2].1.clone());
        swapped[1].1 = b;
        swapped[2].1 = a;
        assert_eq!(bad(swapped), 2);
        let mut renumbered = keyed(entries);
        renumbered[3].0 = 9;
        assert_eq!(bad(renumbered), 9);
    }

    #[test]
    fn a_chain_continues_after_an_archived_part_or_starts_anywhere() {
        let entries = chain(6);
        let (before, after) = entries.split_at(3);
        let mut continued = Chain::after(3, &before[2].hash);
        for entry in after {
            continued.push(entry.seq, entry).unwrap();
        }
        assert_eq!(continued.end(head(&entries)), Ok(()));
        let mut wrong_anchor = Chain::after(3, &before[1].hash);
        assert_eq!(wrong_anchor.push(4, &after[0]).unwrap_err().seq, 4);
        let mut alone = Chain::anywhere();
        for entry in after {
            alone.push(entry.seq, entry).unwrap();
        }
        assert_eq!(alone.last(), Some((6, entries[5].hash.as_str())));
    }

    #[test]
    fn checkpoints_are_collected_and_a_bad_seal_is_refused() {
        let seal_of = |first: u64, last: u64| SegmentSeal {
            file: format!("audit/segment-{first}-{last}.jsonl"),
            first,
            last,
            last_hash: "h".into(),
            sha256: "s".into(),
            bytes: 1,
        };
        let checkpoint = |entry: &mut AuditEntry, archived: serde_json::Value| {
            entry.action = CHECKPOINT_ACTION.into();
            entry.params = json!({ "archived": archived });
        };
        let mut entries = chain(3);
        checkpoint(&mut entries[2], json!(seal_of(1, 2)));
        assert_eq!(checkpoint_seal(&entries[2]), Ok(Some(seal_of(1, 2))));
        checkpoint(&mut entries[2], json!(seal_of(1, 3)));
        assert!(
            checkpoint_seal(&entries[2]).is_err(),
            "a checkpoint archives only earlier entries"
        );
        checkpoint(&mut entries[2], json!({ "file": "x" }));
        assert!(checkpoint_seal(&entries[2]).is_err());
        entries[2].params = json!({ "before": 3 });
        assert_eq!(
            checkpoint_seal(&entries[2]),
            Ok(None),
            "a compaction that archived nothing"
        );
    }
}
