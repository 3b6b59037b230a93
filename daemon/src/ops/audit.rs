//! `Audit` and `AuditVerify`: read and check the audit log.

use orch_protocol::{AuditEntry, AuditFilter, AuditReport};

use super::{AppError, Context};

/// `Audit`: entries, newest first.
pub fn list(ctx: &Context, filter: &AuditFilter) -> Result<Vec<AuditEntry>, AppError> {
    Ok(ctx.store.audit(filter)?)
}

/// `AuditVerify`: the hash chain checked.
pub fn verify(ctx: &Context) -> Result<AuditReport, AppError> {
    Ok(ctx.store.verify_audit()?)
}
