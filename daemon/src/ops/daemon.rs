//! The daemon itself: its health, the extensions it reads, and recording a stop.

use orch_protocol::{Actor, ExtensionsReport, HealthReport, PROTOCOL_VERSION};

use super::{AppError, Context};
use crate::audit::AuditRecord;
use crate::engine::Command;
use crate::extensions::Registry;

/// `Health`: liveness plus counts by status.
pub fn health(ctx: &Context) -> Result<HealthReport, AppError> {
    let counts = ctx.store.count_by_status()?;
    Ok(HealthReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        pid: std::process::id(),
        started_at: ctx.started_at,
        data_dir: ctx.data_dir.clone(),
        socket: ctx.socket.clone(),
        storage: ctx.store.backend_name().to_string(),
        parallel_limit: ctx.parallel_limit,
        counts: counts.into_iter().collect(),
        retention: ctx.retention.report(ctx.store.events_removed_through()?),
        cluster: ctx.cluster.as_ref().map(|m| m.health()).transpose()?,
    })
}

/// `Cluster`: every node of this daemon's cluster and the leader; refused on redb.
pub fn cluster(ctx: &Context) -> Result<orch_protocol::ClusterView, AppError> {
    match &ctx.cluster {
        Some(membership) => Ok(membership.view()?),
        None => Err(AppError::new(
            super::AppErrorKind::Invalid,
            "this daemon keeps its state in redb and has no cluster: several daemons form one on a shared PostgreSQL store (--storage-type postgres)",
        )),
    }
}

/// `Extensions`: the providers, taskservs and cluster definitions as read now, with any
/// manifest problems.
pub fn extensions(ctx: &Context) -> ExtensionsReport {
    Registry::load(&ctx.modules_dir).report()
}

/// `Shutdown`: records who stops the daemon in the audit log (durable before the stop
/// begins; the caller then answers and cancels [`Context::shutdown`]); a standby's stop
/// is only logged.
pub async fn record_shutdown(ctx: &Context, actor: Actor) -> Result<(), AppError> {
    tracing::info!(uid = actor.uid, "shutdown requested by a client");
    if ctx.standby {
        // A standby writes nothing to the shared store (its audit log is the leader's).
        return Ok(());
    }
    let record = AuditRecord::new(
        actor,
        "shutdown",
        serde_json::Value::Null,
        Ok("the daemon stops".into()),
    );
    ctx.engine
        .request(|reply| Command::Audit { record, reply })
        .await?;
    Ok(())
}
