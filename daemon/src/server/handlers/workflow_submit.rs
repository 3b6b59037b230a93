//! `WorkflowSubmit` and `WorkflowPlan`: expand and check a workflow request, then plan
//! it, or create it (and, with `wait`, answer once it has finished).

use orch_protocol::{
    ErrorKind, ErrorReply, EventKind, Response, WorkflowId, WorkflowRequest, WorkflowSubmitted,
};
use tokio::sync::broadcast::error::RecvError;

use super::workflows::stored_summary;
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

/// `WorkflowSubmit`: plans (check mode) or creates the workflow; with `wait`, answers
/// once it has finished.
pub async fn submit(
    ctx: &Context,
    actor: orch_protocol::Actor,
    request: WorkflowRequest,
) -> Result<WorkflowSubmitted, ErrorReply> {
    let draft = prepare(ctx, &request)?;
    if request.check_mode() {
        return Ok(WorkflowSubmitted::Planned(workflows::plan(
            &draft,
            ctx.parallel_limit,
        )));
    }
    // Subscribed before the workflow exists, so no event of it can be missed.
    let mut events = ctx.bus.subscribe();
    let mut summary = ctx
        .engine
        .request(|reply| Command::SubmitWorkflow {
            actor,
            draft: Box::new(draft),
            reply,
        })
        .await?;
    let id = summary.id;
    while request.wait() && !summary.state.status().is_final() {
        let changed = tokio::select! {
            event = events.recv() => match event {
                Ok(event) => ends(id, &event.kind, event.task),
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return Err(unavailable()),
            },
            () = ctx.shutdown.cancelled() => return Err(unavailable()),
        };
        if changed {
            summary = stored_summary(ctx, id)?;
        }
    }
    Ok(WorkflowSubmitted::Created(summary))
}

/// `WorkflowSubmit` on the socket: stops waiting when the client hangs up (the workflow,
/// once created, goes on).
pub async fn handle(
    ctx: &Context,
    conn: &mut Connection,
    request: WorkflowRequest,
) -> std::io::Result<()> {
    let actor = conn.actor.clone();
    let result = tokio::select! {
        result = submit(ctx, actor, request) => result,
        () = conn.closed() => return Ok(()),
    };
    let response = match result {
        Ok(answer) => Response::WorkflowSubmitted(Box::new(answer)),
        Err(reply) => Response::Error(reply),
    };
    conn.send(&response).await
}

/// Whether an event may have finished workflow `id`.
fn ends(id: WorkflowId, kind: &EventKind, task: u64) -> bool {
    task == id && matches!(kind, EventKind::Workflow { status, .. } if status.is_final())
}

fn unavailable() -> ErrorReply {
    ErrorReply::new(ErrorKind::Unavailable, "the daemon is shutting down")
}
