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

/// Who submits a workflow, for the directories its request may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitter {
    /// The daemon's own user on the socket: may name any workspace and batch directory
    /// (it can read them anyway).
    Owner,
    /// A token over HTTP, or a user granted a role on the socket: the daemon's workspace
    /// only.
    Confined,
}

impl Submitter {
    /// The submitter on a socket connection: the owner when the peer is the daemon's user.
    pub fn of(conn: &Connection) -> Submitter {
        if conn.actor.uid == crate::socket::owner_uid() {
            Submitter::Owner
        } else {
            Submitter::Confined
        }
    }
}

/// Refuses, for a confined submitter, a workspace other than the daemon's and a batch
/// directory outside it.
fn confine(
    ctx: &Context,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<(), ErrorReply> {
    if submitter == Submitter::Owner {
        return Ok(());
    }
    let root = ctx.workspace.canonicalize().ok();
    let canonical = |path: &std::path::Path| path.canonicalize().ok();
    if let Some(given) = request.workspace()
        && (root.is_none() || canonical(given) != root)
    {
        return Err(ErrorReply::field(
            ErrorKind::PermissionDenied,
            "workspace",
            "`workspace`: only the daemon's owner on its socket may choose a workspace; leave it out to use the daemon's",
        ));
    }
    if let Some(given) = request.base_dir()
        && !canonical(given)
            .zip(root)
            .is_some_and(|(dir, root)| dir.starts_with(root))
    {
        return Err(ErrorReply::field(
            ErrorKind::PermissionDenied,
            "base_dir",
            "`base_dir`: must be inside the daemon's workspace (only the daemon's owner on its socket may choose another)",
        ));
    }
    Ok(())
}

/// Expands and checks `request` against the extensions and the workspace.
fn prepare(
    ctx: &Context,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<Draft, ErrorReply> {
    confine(ctx, request, submitter)?;
    let registry = Registry::load(&ctx.modules_dir);
    let sources = Sources {
        registry: &registry,
        workspace: &ctx.workspace,
        data_dir: &ctx.data_dir,
    };
    workflows::prepare(request, &sources).map_err(ErrorReply::from)
}

/// `WorkflowPlan`.
pub fn plan(
    ctx: &Context,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<Response, ErrorReply> {
    let draft = prepare(ctx, request, submitter)?;
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
    submitter: Submitter,
    request: WorkflowRequest,
) -> Result<WorkflowSubmitted, ErrorReply> {
    let draft = prepare(ctx, &request, submitter)?;
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
    let submitter = Submitter::of(conn);
    let result = tokio::select! {
        result = submit(ctx, actor, submitter, request) => result,
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
