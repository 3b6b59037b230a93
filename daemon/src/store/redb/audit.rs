//! The audit log in redb: the `audit` table (sequence number → entry, JSON) and
//! `audit_head` (the last entry's sequence number and hash, kept apart so that a removed
//! tail is detected); reading and checking them, and sealing new records onto the chain
//! inside a batch's transaction.

use ::redb::{ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use orch_protocol::{AuditEntry, AuditFilter, AuditReport};

use super::{RedbStore, backend, decode};
use crate::audit::AuditRecord;
use crate::store::{AuditLog, StoreError};

/// Sequence number → audit entry (JSON).
pub(super) const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
/// The single row [`HEAD`] → the last entry's `(seq, hash)` (JSON).
pub(super) const AUDIT_HEAD: TableDefinition<u8, &[u8]> = TableDefinition::new("audit_head");

/// The single key of `audit_head`.
const HEAD: u8 = 0;

impl AuditLog for RedbStore {
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        for entry in table.iter().map_err(backend)?.rev() {
            if out.len() >= limit {
                break;
            }
            let (seq, body) = entry.map_err(backend)?;
            let entry: AuditEntry = decode(&format!("audit entry {}", seq.value()), body.value())?;
            if filter.action.as_ref().is_none_or(|a| *a == entry.action) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    fn verify_audit(&self) -> Result<AuditReport, StoreError> {
        let txn = self.db.begin_read().map_err(backend)?;
        let table = txn.open_table(AUDIT).map_err(backend)?;
        let head = txn.open_table(AUDIT_HEAD).map_err(backend)?;
        let head = match head.get(HEAD).map_err(backend)? {
            Some(h) => Some(decode::<(u64, String)>("audit head", h.value())?),
            None => None,
        };
        let mut entries = Vec::new();
        for entry in table.iter().map_err(backend)? {
            let (seq, body) = entry.map_err(backend)?;
            match serde_json::from_slice::<AuditEntry>(body.value()) {
                Ok(entry) => entries.push((seq.value(), entry)),
                Err(e) => {
                    return Ok(AuditReport {
                        entries: entries.len() as u64,
                        intact: false,
                        bad_seq: Some(seq.value()),
                        problem: Some(format!("entry {} cannot be read: {e}", seq.value())),
                    });
                }
            }
        }
        Ok(crate::audit::verify(entries.into_iter(), head))
    }
}

/// Seals the records onto the end of the audit chain (in the batch's transaction).
pub(super) fn append(txn: &WriteTransaction, records: &[AuditRecord]) -> Result<(), redb::Error> {
    let mut audit = txn.open_table(AUDIT)?;
    let mut head_table = txn.open_table(AUDIT_HEAD)?;
    let (mut seq, mut hash) = match head_table.get(HEAD)? {
        Some(head) => serde_json::from_slice::<(u64, String)>(head.value())
            .map_err(|e| redb::Error::Corrupted(format!("audit head: {e}")))?,
        None => (0, crate::audit::GENESIS.to_string()),
    };
    let now = chrono::Utc::now();
    for record in records {
        seq += 1;
        let entry = crate::audit::seal(record.clone(), seq, now, &hash);
        let body = serde_json::to_vec(&entry).expect("audit entries serialize");
        audit.insert(seq, body.as_slice())?;
        hash = entry.hash;
    }
    let head = serde_json::to_vec(&(seq, &hash)).expect("the head serializes");
    head_table.insert(HEAD, head.as_slice())?;
    Ok(())
}
