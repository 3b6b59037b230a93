//! `Extensions`: the providers, taskservs and cluster definitions, with any manifest
//! problems.

use orch_protocol::Response;

use crate::extensions::Registry;
use crate::server::Context;

/// `Extensions`.
pub fn handle(ctx: &Context) -> Response {
    Response::Extensions(Box::new(Registry::load(&ctx.modules_dir).report()))
}
