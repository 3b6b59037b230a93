//! `Shutdown`: stop the daemon gracefully.

use orch_protocol::Response;

use crate::server::{Connection, Context};

pub async fn handle(ctx: &Context, conn: &mut Connection) -> std::io::Result<()> {
    tracing::info!("shutdown requested by a client");
    let sent = conn.send(&Response::ShuttingDown).await;
    ctx.shutdown.cancel();
    sent
}
