//! The audit log's part of the store: the [`AuditLog`] trait every backend implements
//! beside [`super::Store`] (its supertrait). Entries are appended with the batches they
//! belong to (`WriteBatch::audit`); this is how they are read and checked.

use orch_protocol::{AuditEntry, AuditFilter, AuditReport};

use super::StoreError;

/// Reading and checking the hash-chained audit log.
pub trait AuditLog {
    /// Audit entries matching `filter`, newest first.
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError>;

    /// Checks the audit log's hash chain against its head.
    fn verify_audit(&self) -> Result<AuditReport, StoreError>;
}
