//! `Retry`: queue a failed or cancelled task again.

use orch_protocol::{Actor, ErrorReply, Response, TaskId};

use crate::engine::Command;
use crate::server::Context;

pub async fn handle(ctx: &Context, actor: Actor, id: TaskId) -> Result<Response, ErrorReply> {
    let task = ctx
        .engine
        .request(|reply| Command::Retry { actor, id, reply })
        .await?;
    Ok(Response::Task {
        task: Box::new(task),
    })
}
