//! `EnvLogs`: a test environment's containers' logs, then its own log (setup, probes,
//! tests), optionally followed while the daemon works on it.

use orch_protocol::{EnvId, EnvState, Response};

use super::logs::{FOLLOW_POLL, Tail};
use crate::server::{Connection, Context};
use crate::testenv::engine::ContainerEngine;

pub async fn handle(
    ctx: &Context,
    conn: &mut Connection,
    id: EnvId,
    follow: bool,
) -> std::io::Result<()> {
    let env = match ctx.testenvs.get(id) {
        Ok(env) => env,
        Err(reply) => return conn.send(&Response::Error(reply)).await,
    };
    if !matches!(env.state, EnvState::Deleted { .. })
        && let Ok(engine) = ContainerEngine::connect().await
    {
        for node in &env.nodes {
            let logs = engine.logs(&node.container).await;
            let text = format!(
                "=== container {} ({}) ===\n{logs}",
                node.container, node.name
            );
            conn.send(&Response::Log { text }).await?;
        }
    }
    let path = ctx.testenvs.log_path(id);
    let mut tail = Tail::default();
    loop {
        let busy = ctx.testenvs.is_busy(id);
        while let Some(text) = tail.next_chunk(&path)? {
            conn.send(&Response::Log { text }).await?;
        }
        if !follow || !busy {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(FOLLOW_POLL) => {}
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => break,
        }
    }
    if let Some(text) = tail.rest() {
        conn.send(&Response::Log { text }).await?;
    }
    conn.send(&Response::StreamEnd).await
}
