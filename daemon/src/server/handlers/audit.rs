//! `Audit` and `AuditVerify`: read and check the audit log.

use orch_protocol::{AuditFilter, ErrorReply, Response};

use super::store_error;
use crate::server::Context;

pub fn list(ctx: &Context, filter: &AuditFilter) -> Result<Response, ErrorReply> {
    let entries = ctx.store.audit(filter).map_err(store_error)?;
    Ok(Response::Audit { entries })
}

pub fn verify(ctx: &Context) -> Result<Response, ErrorReply> {
    let report = ctx.store.verify_audit().map_err(store_error)?;
    Ok(Response::AuditReport(report))
}
