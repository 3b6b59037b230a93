//! The HTTP routes, per area: each runs its operation ([`crate::ops`]) and answers with
//! the domain value as JSON (secrets redacted for the caller's role), or an error with
//! its status. [`bind`] gives each route of the operations table its handler.

mod envs;
mod events;
mod system;
mod tasks;
mod tokens;
mod workflows;

pub use tokens::CallerView;
pub use workflows::WorkflowRestart;

use std::sync::Arc;

use axum::response::Response as HttpResponse;
use axum::routing::{MethodFilter, MethodRouter, on};
use orch_protocol::Actor;

use super::error::ApiError;
use crate::ops::{Context, Method, RouteId};
use crate::policy::Role;

/// Who is asking (set by the authentication layer).
#[derive(Clone)]
pub struct Caller {
    /// For the audit log.
    pub actor: Actor,
    /// The token's name.
    pub token: String,
    /// What the token may do (and see: secrets are redacted below admin).
    pub role: Role,
}

type Ctx = axum::extract::State<Arc<Context>>;
type Answer = Result<HttpResponse, ApiError>;

/// Axum's name for a method of the table.
pub fn filter(method: Method) -> MethodFilter {
    match method {
        Method::Get => MethodFilter::GET,
        Method::Post => MethodFilter::POST,
        Method::Delete => MethodFilter::DELETE,
    }
}

/// The handler of a route of the operations table, for its method.
pub fn bind(id: RouteId, method: Method) -> MethodRouter<Arc<Context>> {
    let method = filter(method);
    match id {
        RouteId::Health => on(method, system::health),
        RouteId::OpenApi => on(method, system::openapi),
        RouteId::Cluster => on(method, system::cluster),
        RouteId::Metrics => on(method, system::metrics),
        RouteId::Providers => on(method, system::providers),
        RouteId::Taskservs => on(method, system::taskservs),
        RouteId::Clusters => on(method, system::clusters),
        RouteId::Audit => on(method, system::audit),
        RouteId::AuditVerify => on(method, system::audit_verify),
        RouteId::AuditSegments => on(method, system::audit_segments),
        RouteId::Tasks => on(method, tasks::tasks),
        RouteId::Task => on(method, tasks::task),
        RouteId::TaskCancel => on(method, tasks::cancel),
        RouteId::TaskRetry => on(method, tasks::retry),
        RouteId::TaskLog => on(method, tasks::log),
        RouteId::TaskDependants => on(method, tasks::dependants),
        RouteId::Workflows => on(method, workflows::list),
        RouteId::Workflow => on(method, workflows::get),
        RouteId::WorkflowCancel => on(method, workflows::cancel),
        RouteId::WorkflowRollback => on(method, workflows::rollback),
        RouteId::WorkflowRestart => on(method, workflows::restart),
        RouteId::Topologies => on(method, envs::topologies),
        RouteId::Activity => on(method, system::activity),
        RouteId::Events => on(method, events::events),
        RouteId::ServersCreate => on(method, workflows::servers_create),
        RouteId::TaskservCreate | RouteId::TaskservInstall => {
            on(method, workflows::taskserv_create)
        }
        RouteId::ClusterCreate => on(method, workflows::cluster_create),
        RouteId::EnvCreate => on(method, envs::create),
        RouteId::Envs => on(method, envs::list),
        RouteId::Env => on(method, envs::get),
        RouteId::EnvRun => on(method, envs::run),
        RouteId::EnvDelete => on(method, envs::delete),
        RouteId::EnvLogs => on(method, envs::logs),
        RouteId::Queue => on(method, system::queue),
        RouteId::QueueChange => on(method, system::queue_change),
        RouteId::ScheduleAdd => on(method, system::schedule_add),
        RouteId::Schedules => on(method, system::schedules),
        RouteId::ScheduleRemove => on(method, system::schedule_remove),
        RouteId::WhoAmI => on(method, tokens::whoami),
        RouteId::Tokens => on(method, tokens::list),
        RouteId::TokenCreate => on(method, tokens::create),
        RouteId::TokenRevoke => on(method, tokens::revoke),
    }
}
