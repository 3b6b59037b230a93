//! `Clean`: remove finished tasks, answered once the removal is durable.

use orch_protocol::{Actor, CleanFilter, ErrorReply, Response};

use crate::engine::Command;
use crate::server::Context;

pub async fn handle(
    ctx: &Context,
    actor: Actor,
    filter: CleanFilter,
) -> Result<Response, ErrorReply> {
    let ids = ctx
        .engine
        .request(|reply| Command::Clean {
            actor,
            filter,
            reply,
        })
        .await?;
    Ok(Response::Removed { ids })
}
