//! `Cancel`: stop a task, answered once the cancellation is durable.

use orch_protocol::{Actor, ErrorReply, Response, TaskId};

use crate::engine::Command;
use crate::server::Context;

pub async fn handle(ctx: &Context, actor: Actor, id: TaskId) -> Result<Response, ErrorReply> {
    let task = ctx
        .engine
        .request(|reply| Command::Cancel { actor, id, reply })
        .await?;
    Ok(Response::Task {
        task: Box::new(task),
    })
}
