//! One handler per request kind.

pub(crate) mod audit;
pub(crate) mod cancel;
pub(crate) mod clean;
pub(crate) mod extensions;
pub(crate) mod get;
pub(crate) mod health;
pub(crate) mod list;
pub(crate) mod logs;
pub(crate) mod retry;
pub(crate) mod shutdown;
pub(crate) mod submit;
pub(crate) mod test_env_logs;
pub(crate) mod test_envs;
pub(crate) mod wait;
pub(crate) mod watch;
pub(crate) mod workflow_control;
pub(crate) mod workflow_submit;
pub(crate) mod workflows;

use orch_protocol::{ErrorKind, ErrorReply, Request, Response};

use super::{Connection, Context};
use crate::http::auth::Role;
use crate::store::StoreError;

/// Runs the handler for `request`. An `Err` means the connection is gone.
pub async fn dispatch(
    ctx: &Context,
    conn: &mut Connection,
    request: Request,
) -> std::io::Result<()> {
    let needed = required_role(&request);
    if conn.role < needed {
        let reply = ErrorReply::new(
            ErrorKind::PermissionDenied,
            format!(
                "permission denied: uid {} has the role {}; this request needs {}",
                conn.actor.uid,
                conn.role.as_str(),
                needed.as_str()
            ),
        );
        return conn.send(&Response::Error(reply)).await;
    }
    match request {
        Request::Health => reply(conn, health::handle(ctx)).await,
        Request::Submit { tasks } => {
            let actor = conn.actor.clone();
            reply_tasks(conn, submit::handle(ctx, actor, tasks).await).await
        }
        Request::List { filter } => reply_tasks(conn, list::handle(ctx, &filter)).await,
        Request::Get { id } => reply(conn, get::handle(ctx, id)).await,
        Request::Wait { ids } => wait::handle(ctx, conn, ids).await,
        Request::Cancel { id } => {
            let actor = conn.actor.clone();
            reply(conn, cancel::handle(ctx, actor, id).await).await
        }
        Request::Retry { id } => {
            let actor = conn.actor.clone();
            reply(conn, retry::handle(ctx, actor, id).await).await
        }
        Request::Watch {
            since,
            task,
            workflow,
        } => watch::handle(ctx, conn, since, task, workflow).await,
        Request::Logs { id, follow } => logs::handle(ctx, conn, id, follow).await,
        Request::Shutdown => shutdown::handle(ctx, conn).await,
        Request::Clean { filter } => {
            let actor = conn.actor.clone();
            reply(conn, clean::handle(ctx, actor, filter).await).await
        }
        Request::Audit { filter } => reply(conn, audit::list(ctx, &filter)).await,
        Request::AuditVerify => reply(conn, audit::verify(ctx)).await,
        Request::WorkflowSubmit { workflow } => workflow_submit::handle(ctx, conn, workflow).await,
        Request::WorkflowPlan { workflow } => {
            let submitter = workflow_submit::Submitter::of(conn);
            reply(conn, workflow_submit::plan(ctx, &workflow, submitter)).await
        }
        Request::Workflows { limit } => match workflows::list(ctx, limit) {
            Ok(summaries) => conn.send_list("workflows", &summaries).await,
            Err(reply) => conn.send(&Response::Error(reply)).await,
        },
        Request::Workflow { id, offset, limit } => {
            let page = workflows::get(ctx, id, offset, limit);
            reply(conn, page.map(|page| Response::Workflow(Box::new(page)))).await
        }
        Request::WorkflowCancel { id } => {
            let actor = conn.actor.clone();
            reply(conn, workflow_control::cancel(ctx, actor, id).await).await
        }
        Request::WorkflowRollback { id } => {
            let actor = conn.actor.clone();
            reply(conn, workflow_control::rollback(ctx, actor, id).await).await
        }
        Request::Extensions => reply(conn, Ok(extensions::handle(ctx))).await,
        Request::EnvCreate { env } => {
            let actor = conn.actor.clone();
            reply(conn, test_envs::create(ctx, actor, env).await).await
        }
        Request::Envs => reply(conn, Ok(test_envs::list(ctx))).await,
        Request::Env { id } => reply(conn, test_envs::get(ctx, id)).await,
        Request::EnvRun { id } => {
            let actor = conn.actor.clone();
            reply(conn, test_envs::run(ctx, actor, id).await).await
        }
        Request::EnvDelete { id } => {
            let actor = conn.actor.clone();
            reply(conn, test_envs::delete(ctx, actor, id).await).await
        }
        Request::EnvLogs { id, follow } => test_env_logs::handle(ctx, conn, id, follow).await,
        Request::Topologies => reply(conn, Ok(test_envs::topologies(ctx))).await,
    }
}

/// The role a socket request needs (the owner has them all): reads need viewer, changes
/// operator, the audit log and stopping the daemon admin.
fn required_role(request: &Request) -> Role {
    match request {
        Request::Health
        | Request::List { .. }
        | Request::Get { .. }
        | Request::Wait { .. }
        | Request::Watch { .. }
        | Request::Logs { .. }
        | Request::WorkflowPlan { .. }
        | Request::Workflows { .. }
        | Request::Workflow { .. }
        | Request::Extensions
        | Request::Envs
        | Request::Env { .. }
        | Request::EnvLogs { .. }
        | Request::Topologies => Role::Viewer,
        Request::Audit { .. } | Request::AuditVerify | Request::Shutdown => Role::Admin,
        Request::Submit { .. }
        | Request::Cancel { .. }
        | Request::Retry { .. }
        | Request::Clean { .. }
        | Request::WorkflowSubmit { .. }
        | Request::WorkflowCancel { .. }
        | Request::WorkflowRollback { .. }
        | Request::EnvCreate { .. }
        | Request::EnvRun { .. }
        | Request::EnvDelete { .. } => Role::Operator,
    }
}

/// Sends a handler's single answer.
async fn reply(conn: &mut Connection, result: Result<Response, ErrorReply>) -> std::io::Result<()> {
    let response = result.unwrap_or_else(Response::Error);
    conn.send(&response).await
}

/// Sends a handler's task list (in parts when it is long), or its error.
async fn reply_tasks(
    conn: &mut Connection,
    result: Result<Vec<orch_protocol::Task>, ErrorReply>,
) -> std::io::Result<()> {
    match result {
        Ok(tasks) => conn.send_tasks(&tasks).await,
        Err(reply) => conn.send(&Response::Error(reply)).await,
    }
}

/// A store failure as an error answer.
fn store_error(e: StoreError) -> ErrorReply {
    ErrorReply::new(ErrorKind::Internal, e.to_string())
}

/// The error for an unknown task id.
fn no_such_task(id: u64) -> ErrorReply {
    ErrorReply::field(ErrorKind::NotFound, "id", format!("there is no task {id}"))
}
