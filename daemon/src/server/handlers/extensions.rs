//! `Extensions`: the providers, taskservs and cluster definitions, with any manifest
//! problems.

use orch_protocol::{ExtensionsReport, Response};

use crate::extensions::Registry;
use crate::server::Context;

/// `Extensions`.
pub fn handle(ctx: &Context) -> Response {
    Response::Extensions(Box::new(report(ctx)))
}

/// The registry as read now.
pub fn report(ctx: &Context) -> ExtensionsReport {
    Registry::load(&ctx.modules_dir).report()
}
