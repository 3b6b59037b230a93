//! `Health`: liveness plus counts by status.

use orch_protocol::{ErrorReply, HealthReport, PROTOCOL_VERSION, Response};

use super::store_error;
use crate::server::Context;

pub fn handle(ctx: &Context) -> Result<Response, ErrorReply> {
    let counts = ctx.store.count_by_status().map_err(store_error)?;
    Ok(Response::Health(HealthReport {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: PROTOCOL_VERSION,
        pid: std::process::id(),
        started_at: ctx.started_at,
        data_dir: ctx.data_dir.clone(),
        socket: ctx.socket.clone(),
        storage: ctx.store.backend_name().to_string(),
        parallel_limit: ctx.parallel_limit,
        counts: counts.into_iter().collect(),
    }))
}
