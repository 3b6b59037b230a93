//! `Submit`: add tasks, answered once they are durable.

use orch_protocol::{Actor, ErrorReply, Task, TaskSpec};

use crate::engine::Command;
use crate::server::Context;

pub async fn handle(
    ctx: &Context,
    actor: Actor,
    specs: Vec<TaskSpec>,
) -> Result<Vec<Task>, ErrorReply> {
    ctx.engine
        .request(|reply| Command::Submit {
            actor,
            specs,
            reply,
        })
        .await
}
