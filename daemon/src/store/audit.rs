//! The audit log's part of the store: the [`AuditLog`] trait every backend implements
//! beside [`super::Store`] (its supertrait). Entries are appended with the batches they
//! belong to (`WriteBatch::audit`); this is how they are read, walked for a check, and how
//! the oldest are handed over to an archived segment.

use std::ops::ControlFlow;

use orch_protocol::{AuditEntry, AuditFilter, AuditSegment, SegmentSeal};

use super::StoreError;
use crate::audit::AuditRecord;

/// The last entry written: its sequence number and hash (none before the first entry).
pub type AuditHead = Option<(u64, String)>;

/// Reading, walking and compacting the hash-chained audit log.
pub trait AuditLog {
    /// Live audit entries matching `filter`, newest first.
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError>;

    /// Passes every live entry, oldest first, to `visit` (its key and its stored JSON) until
    /// `visit` breaks, all from one consistent read; returns the head of that same read.
    fn walk_audit(
        &self,
        visit: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<AuditHead, StoreError>;

    /// The archived segments, oldest first.
    fn audit_segments(&self) -> Result<Vec<AuditSegment>, StoreError>;

    /// In one durable transaction: removes the live entries `seal` archived (refused, with
    /// nothing changed, unless the live log still starts at `seal.first` and its entry
    /// `seal.last` still has `seal.last_hash`), records the segment, and seals
    /// `checkpoint` onto the chain. Returns the segment as listed.
    fn archive_audit(
        &self,
        seal: &SegmentSeal,
        checkpoint: AuditRecord,
    ) -> Result<AuditSegment, StoreError>;

    /// For a migration into this (empty) store, in one durable transaction: writes
    /// `entries` (key and stored JSON, as [`walk_audit`](Self::walk_audit) gave them) and
    /// `segments` exactly as they were, so that the chain and its hashes are the same, and
    /// makes `head` the head. Refused, with nothing changed, when this store already has
    /// an audit log.
    fn import_audit(
        &self,
        entries: &[(u64, Vec<u8>)],
        segments: &[AuditSegment],
        head: &AuditHead,
    ) -> Result<(), StoreError>;
}
