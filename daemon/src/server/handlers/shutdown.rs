//! `Shutdown`: stop the daemon gracefully.

use orch_protocol::Response;

use crate::audit::AuditRecord;
use crate::engine::Command;
use crate::server::{Connection, Context};

pub async fn handle(ctx: &Context, conn: &mut Connection) -> std::io::Result<()> {
    tracing::info!(uid = conn.actor.uid, "shutdown requested by a client");
    let record = AuditRecord::new(
        conn.actor.clone(),
        "shutdown",
        serde_json::Value::Null,
        Ok("the daemon stops".into()),
    );
    if let Err(reply) = ctx
        .engine
        .request(|reply| Command::Audit { record, reply })
        .await
    {
        return conn.send(&Response::Error(reply)).await;
    }
    if let Err(e) = conn.hold_open_until_exit() {
        tracing::warn!(error = %e, "cannot hold the stopping client's connection until exit");
    }
    let sent = conn.send(&Response::ShuttingDown).await;
    ctx.shutdown.cancel();
    sent
}
