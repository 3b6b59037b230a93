//! `List`: committed tasks matching a filter, newest first.

use orch_protocol::{ErrorReply, Response, TaskFilter};

use super::store_error;
use crate::server::Context;

pub fn handle(ctx: &Context, filter: &TaskFilter) -> Result<Response, ErrorReply> {
    let tasks = ctx.store.list(filter).map_err(store_error)?;
    Ok(Response::Tasks { tasks })
}
