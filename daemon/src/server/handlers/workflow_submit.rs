//! `WorkflowSubmit` and `WorkflowPlan`: expand and check a workflow request, then plan
//! it, or create it (and, with `wait`, answer once it has finished).

use orch_protocol::{
    ErrorKind, ErrorReply, EventKind, Response, WorkflowId, WorkflowRequest, WorkflowSubmitted,
};
use tokio::sync::broadcast::error::RecvError;

use super::workflows::stored_view;
use crate::engine::Command;
use crate::extensions::Registry;
use crate::server::{Connection, Context};
use crate::workflows::{self, Draft, Sources};

/// Expands and checks `request` against the extensions and the workspace.
fn prepare(ctx: &Context, request: &WorkflowRequest) -> Result<Draft, ErrorReply> {
    let registry = Registry::load(&ctx.modules_dir);
    let sources = Sources {
        registry: &registry,
        workspace: &ctx.workspace,
    };
    workflows::prepare(request, &sources)
        .map_err(|message| ErrorReply::field(ErrorKind::BadRequest, "workflow", message))
}

/// `WorkflowPlan`.
pub fn plan(ctx: &Context, request: &WorkflowRequest) -> Result<Response, ErrorReply> {
    let draft = prepare(ctx, request)?;
    Ok(Response::Plan(Box::new(workflows::plan(
        &draft,
        ctx.parallel_limit,
    ))))
}

/// `WorkflowSubmit`.
pub async fn handle(
    ctx: &Context,
    conn: &mut Connection,
    request: WorkflowRequest,
) -> std::io::Result<()> {
    let draft = match prepare(ctx, &request) {
        Ok(draft) => draft,
        Err(reply) => return conn.send(&Response::Error(reply)).await,
    };
    if request.check_mode() {
        let plan = workflows::plan(&draft, ctx.parallel_limit);
        let answer = WorkflowSubmitted::Planned(plan);
        return conn
            .send(&Response::WorkflowSubmitted(Box::new(answer)))
            .await;
    }
    // Subscribed before the workflow exists, so no event of it can be missed.
    let mut events = ctx.bus.subscribe();
    let actor = conn.actor.clone();
    let created = ctx
        .engine
        .request(|reply| Command::SubmitWorkflow {
            actor,
            draft: Box::new(draft),
            reply,
        })
        .await;
    let mut view = match created {
        Ok(view) => view,
        Err(reply) => return conn.send(&Response::Error(reply)).await,
    };
    let id = view.workflow.id;
    while request.wait() && !view.workflow.state.status().is_final() {
        let changed = tokio::select! {
            event = events.recv() => match event {
                Ok(event) => ends(id, &event.kind, event.task),
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return unavailable(conn).await,
            },
            () = conn.closed() => return Ok(()),
            () = ctx.shutdown.cancelled() => return unavailable(conn).await,
        };
        if changed {
            view = match stored_view(ctx, id) {
                Ok(view) => view,
                Err(reply) => return conn.send(&Response::Error(reply)).await,
            };
        }
    }
    let answer = WorkflowSubmitted::Created(view);
    conn.send(&Response::WorkflowSubmitted(Box::new(answer)))
        .await
}

/// Whether an event may have finished workflow `id`.
fn ends(id: WorkflowId, kind: &EventKind, task: u64) -> bool {
    task == id && matches!(kind, EventKind::Workflow { status, .. } if status.is_final())
}

async fn unavailable(conn: &mut Connection) -> std::io::Result<()> {
    let reply = ErrorReply::new(ErrorKind::Unavailable, "the daemon is shutting down");
    conn.send(&Response::Error(reply)).await
}
