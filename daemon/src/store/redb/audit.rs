//! The audit log in redb: the `audit` table (sequence number → entry, JSON),
//! `audit_head` (the last entry's sequence number and hash, kept apart so that a removed
//! tail is detected) and `audit_segments` (first archived entry → the segment, JSON; a
//! store from before compaction lacks it until the first one, and reads it as empty);
//! reading and walking them, sealing new records onto the chain inside a batch's
//! transaction, and handing the oldest entries over to a segment.

use std::ops::ControlFlow;

use ::redb::{
    Durability, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition, TableError, WriteTransaction,
};
use chrono::{DateTime, Utc};
use orch_protocol::{AuditEntry, AuditFilter, AuditSegment, SegmentSeal};

use super::{RedbStore, backend, decode};
use crate::audit::AuditRecord;
use crate::store::audit::AuditHead;
use crate::store::{AuditLog, StoreError};

/// Sequence number → audit entry (JSON).
pub(super) const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
/// The single row [`HEAD`] → the last entry's `(seq, hash)` (JSON).
pub(super) const AUDIT_HEAD: TableDefinition<u8, &[u8]> = TableDefinition::new("audit_head");
/// First archived entry → the segment holding it (JSON [`AuditSegment`]).
const AUDIT_SEGMENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_segments");

/// The single key of `audit_head`.
const HEAD: u8 = 0;

impl AuditLog for RedbStore {
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let below = table
            .range(..filter.before.unwrap_or(u64::MAX))
            .map_err(backend)?;
        for entry in below.rev() {
            if out.len() >= limit {
                break;
            }
            let (seq, body) = entry.map_err(backend)?;
            let entry: AuditEntry = decode(&format!("audit entry {}", seq.value()), body.value())?;
            if filter.passes(&entry) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    fn walk_audit(
        &self,
        visit: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<AuditHead, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let head = read_head(&txn)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        for entry in table.iter().map_err(backend)? {
            let (seq, body) = entry.map_err(backend)?;
            if visit(seq.value(), body.value()).is_break() {
                break;
            }
        }
        Ok(head)
    }

    fn audit_segments(&self) -> Result<Vec<AuditSegment>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = match txn.open_table(AUDIT_SEGMENTS) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(backend(e)),
        };
        let mut out = Vec::new();
        for entry in table.iter().map_err(backend)? {
            let (first, body) = entry.map_err(backend)?;
            out.push(decode(
                &format!("audit segment {}", first.value()),
                body.value(),
            )?);
        }
        Ok(out)
    }

    fn archive_audit(
        &self,
        seal: &SegmentSeal,
        checkpoint: AuditRecord,
    ) -> Result<AuditSegment, StoreError> {
        let mut txn = self.db.begin_write().map_err(backend)?;
        txn.set_durability(Durability::Immediate).map_err(backend)?;
        remove_archived(&txn, seal)?;
        let (seq, at) = append(&txn, &[checkpoint], Utc::now()).map_err(backend)?;
        let segment = AuditSegment {
            seal: seal.clone(),
            checkpoint: seq,
            archived_at: at,
        };
        let body = serde_json::to_vec(&segment).expect("segments serialize");
        let mut segments = txn.open_table(AUDIT_SEGMENTS).map_err(backend)?;
        segments
            .insert(seal.first, body.as_slice())
            .map_err(backend)?;
        drop(segments);
        txn.commit().map_err(backend)?;
        Ok(segment)
    }

    fn import_audit(
        &self,
        entries: &[(u64, Vec<u8>)],
        segments: &[AuditSegment],
        head: &AuditHead,
    ) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(backend)?;
        txn.set_durability(Durability::Immediate).map_err(backend)?;
        let mut audit = txn.open_table(AUDIT).map_err(backend)?;
        let mut head_table = txn.open_table(AUDIT_HEAD).map_err(backend)?;
        let mut segment_table = txn.open_table(AUDIT_SEGMENTS).map_err(backend)?;
        let empty = audit.is_empty().map_err(backend)?
            && head_table.is_empty().map_err(backend)?
            && segment_table.is_empty().map_err(backend)?;
        if !empty {
            return Err(StoreError::Backend(
                "the target already has an audit log; nothing was imported".into(),
            ));
        }
        for (seq, body) in entries {
            audit.insert(*seq, body.as_slice()).map_err(backend)?;
        }
        for segment in segments {
            let body = serde_json::to_vec(segment).expect("segments serialize");
            segment_table
                .insert(segment.seal.first, body.as_slice())
                .map_err(backend)?;
        }
        if let Some(head) = head {
            let body = serde_json::to_vec(head).expect("the head serializes");
            head_table.insert(HEAD, body.as_slice()).map_err(backend)?;
        }
        drop((audit, head_table, segment_table));
        txn.commit().map_err(backend)
    }
}

/// The stored head.
fn read_head(txn: &ReadTransaction) -> Result<AuditHead, StoreError> {
    let table = txn.open_table(AUDIT_HEAD).map_err(backend)?;
    match table.get(HEAD).map_err(backend)? {
        Some(head) => Ok(Some(decode("audit head", head.value())?)),
        None => Ok(None),
    }
}

/// Removes the live entries `seal` archived, once sure they are the ones it archived.
fn remove_archived(txn: &WriteTransaction, seal: &SegmentSeal) -> Result<(), StoreError> {
    let mut table = txn.open_table(AUDIT).map_err(backend)?;
    let first = table.first().map_err(backend)?.map(|(k, _)| k.value());
    let last_hash = match table.get(seal.last).map_err(backend)? {
        Some(body) => Some(decode::<AuditEntry>("audit entry", body.value())?.hash),
        None => None,
    };
    if first != Some(seal.first) || last_hash.as_deref() != Some(seal.last_hash.as_str()) {
        return Err(StoreError::Backend(format!(
            "the audit log changed while entries {}–{} were being archived; nothing was archived",
            seal.first, seal.last
        )));
    }
    table
        .retain_in(seal.first..=seal.last, |_, _| false)
        .map_err(backend)
}

/// Seals the records onto the end of the audit chain (in the batch's transaction) with
/// the time `now`; returns the new head's sequence number and that time.
pub(super) fn append(
    txn: &WriteTransaction,
    records: &[AuditRecord],
    now: DateTime<Utc>,
) -> Result<(u64, DateTime<Utc>), redb::Error> {
    let mut audit = txn.open_table(AUDIT)?;
    let mut head_table = txn.open_table(AUDIT_HEAD)?;
    let (mut seq, mut hash) = match head_table.get(HEAD)? {
        Some(head) => serde_json::from_slice::<(u64, String)>(head.value())
            .map_err(|e| redb::Error::Corrupted(format!("audit head: {e}")))?,
        None => (0, crate::audit::GENESIS.to_string()),
    };
    for record in records {
        seq += 1;
        let entry = crate::audit::seal(record.clone(), seq, now, &hash);
        let body = serde_json::to_vec(&entry).expect("audit entries serialize");
        audit.insert(seq, body.as_slice())?;
        hash = entry.hash;
    }
    let head = serde_json::to_vec(&(seq, &hash)).expect("the head serializes");
    head_table.insert(HEAD, head.as_slice())?;
    Ok((seq, now))
}
