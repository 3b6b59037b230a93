//! `Audit`, `AuditVerify`, `AuditSegments`, `AuditCompact` and `AuditExport`: read the
//! audit log, check it (archived segments included), list, make and export its segments.

use std::path::PathBuf;

use orch_protocol::{Actor, AuditCut, AuditEntry, AuditFilter, AuditReport, AuditSegment};

use super::logs::Follower;
use super::{AppError, AppErrorKind, Context};
use crate::audit::AuditRecord;
use crate::audit::archive::ArchiveError;
use crate::audit::chain::CHECKPOINT_ACTION;
use crate::engine::Command;

/// `Audit`: live entries, newest first.
pub fn list(ctx: &Context, filter: &AuditFilter) -> Result<Vec<AuditEntry>, AppError> {
    Ok(ctx.store.audit(filter)?)
}

/// `AuditVerify`: the whole hash chain checked, segments then live entries.
pub async fn verify(ctx: &Context) -> Result<AuditReport, AppError> {
    let archive = ctx.audit.clone();
    Ok(blocking(move || archive.verify()).await??)
}

/// `AuditSegments`: the archived segments, oldest first.
pub fn segments(ctx: &Context) -> Result<Vec<AuditSegment>, AppError> {
    Ok(ctx.audit.segments()?)
}

/// `AuditCompact`: archives the entries below `before` into a segment sealed by a
/// checkpoint entry (the record of this request). A request that archives nothing, or
/// fails, is recorded on its own.
pub async fn compact(
    ctx: &Context,
    actor: Actor,
    before: AuditCut,
) -> Result<Option<AuditSegment>, AppError> {
    let (archive, by) = (ctx.audit.clone(), actor.clone());
    let compacted = blocking(move || archive.compact(before, by, None))
        .await?
        .map_err(app_error);
    let outcome = match &compacted {
        Ok(Some(_)) => return compacted,
        Ok(None) => Ok(format!("no entry before {before} to archive")),
        Err(e) => Err(e.message.clone()),
    };
    let params = serde_json::json!({ "before": before });
    let record = AuditRecord::new(actor, CHECKPOINT_ACTION, params, outcome);
    ctx.engine
        .request(|reply| Command::Audit { record, reply })
        .await?;
    compacted
}

/// `AuditExport`: a reader of the segment file that holds entry `seq`.
pub fn export(
    ctx: &Context,
    seq: u64,
) -> Result<Follower<impl FnMut() -> Result<bool, AppError>>, AppError> {
    let path: PathBuf = ctx.audit.holding(seq).map_err(app_error)?;
    Ok(Follower::new(path, false, || Ok(false)))
}

/// Runs blocking archive work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AppError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        AppError::new(
            AppErrorKind::Internal,
            format!("the audit archive failed: {e}"),
        )
    })
}

fn app_error(e: ArchiveError) -> AppError {
    match e {
        ArchiveError::NoSegment(_) => AppError::field(AppErrorKind::NotFound, "seq", e.to_string()),
        ArchiveError::NotIntact(_) => AppError::new(AppErrorKind::Conflict, e.to_string()),
        ArchiveError::Store(e) => e.into(),
        ArchiveError::Io { .. } => AppError::new(AppErrorKind::Internal, e.to_string()),
    }
}
