//! `Submit`: add tasks, answered once they are durable.

use orch_protocol::{ErrorReply, Response, TaskSpec};

use crate::engine::Command;
use crate::server::Context;

pub async fn handle(ctx: &Context, specs: Vec<TaskSpec>) -> Result<Response, ErrorReply> {
    let tasks = ctx
        .engine
        .request(|reply| Command::Submit { specs, reply })
        .await?;
    Ok(Response::Tasks { tasks })
}
