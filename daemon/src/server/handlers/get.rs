//! `Get`: one committed task.

use orch_protocol::{ErrorReply, Response, TaskId};

use super::{no_such_task, store_error};
use crate::server::Context;

pub fn handle(ctx: &Context, id: TaskId) -> Result<Response, ErrorReply> {
    match ctx.store.get(id).map_err(store_error)? {
        Some(task) => Ok(Response::Task {
            task: Box::new(task),
        }),
        None => Err(no_such_task(id)),
    }
}
