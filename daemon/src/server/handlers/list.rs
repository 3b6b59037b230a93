//! `List`: committed tasks matching a filter, newest first.

use orch_protocol::{ErrorReply, Task, TaskFilter};

use super::store_error;
use crate::server::Context;

pub fn handle(ctx: &Context, filter: &TaskFilter) -> Result<Vec<Task>, ErrorReply> {
    ctx.store.list(filter).map_err(store_error)
}
