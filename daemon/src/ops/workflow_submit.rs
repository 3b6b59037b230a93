//! `WorkflowSubmit` and `WorkflowPlan`: expand and check a workflow request, then plan
//! it, or create it (and, with `wait`, answer once it has finished).

use orch_protocol::{EventKind, WorkflowId, WorkflowPlan, WorkflowRequest, WorkflowSubmitted};

use super::workflows::stored_summary;
use super::{AppError, AppErrorKind, Context};
use crate::engine::Command;
use crate::events::Stream;
use crate::extensions::Extensions;
use crate::policy::Submitter;
use crate::workflows::{self, Draft, Sources};

/// Refuses, for a confined submitter, a workspace other than the daemon's and a batch
/// directory outside it.
fn confine(
    workspace: &std::path::Path,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<(), AppError> {
    if submitter == Submitter::Owner {
        return Ok(());
    }
    let root = workspace.canonicalize().ok();
    let canonical = |path: &std::path::Path| path.canonicalize().ok();
    if let Some(given) = request.workspace()
        && (root.is_none() || canonical(given) != root)
    {
        return Err(AppError::field(
            AppErrorKind::PermissionDenied,
            "workspace",
            "`workspace`: only the daemon's owner on its socket may choose a workspace; leave it out to use the daemon's",
        ));
    }
    if let Some(given) = request.base_dir()
        && !canonical(given)
            .zip(root)
            .is_some_and(|(dir, root)| dir.starts_with(root))
    {
        return Err(AppError::field(
            AppErrorKind::PermissionDenied,
            "base_dir",
            "`base_dir`: must be inside the daemon's workspace (only the daemon's owner on its socket may choose another)",
        ));
    }
    Ok(())
}

/// Expands and checks `request` against the extensions and the workspace.
pub(super) fn prepare(
    ctx: &Context,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<Draft, AppError> {
    let expander = Expander {
        modules_dir: ctx.modules_dir.clone(),
        workspace: ctx.workspace.clone(),
        data_dir: ctx.data_dir.clone(),
    };
    expander.prepare(request, submitter)
}

/// What workflows are expanded from: the extensions and the workspace (for a request
/// now, or a schedule's at each run).
pub struct Expander {
    /// Where the extensions are read from.
    pub modules_dir: std::path::PathBuf,
    /// The daemon's workspace.
    pub workspace: std::path::PathBuf,
    /// The daemon's data directory.
    pub data_dir: std::path::PathBuf,
}

impl Expander {
    /// Expands and checks `request`, confined as `submitter` is.
    fn prepare(&self, request: &WorkflowRequest, submitter: Submitter) -> Result<Draft, AppError> {
        confine(&self.workspace, request, submitter)?;
        let extensions = Extensions::under(&self.modules_dir);
        let sources = Sources {
            extensions: &extensions,
            workspace: &self.workspace,
            data_dir: &self.data_dir,
        };
        Ok(workflows::prepare(request, &sources)?)
    }
}

impl crate::engine::Expand for Expander {
    fn expand(&self, request: &WorkflowRequest, owner_host: Option<&str>) -> Result<Draft, String> {
        let here = crate::cluster::host_name();
        let submitter = if owner_host == Some(here.as_str()) {
            Submitter::Owner
        } else {
            Submitter::Confined
        };
        self.prepare(request, submitter).map_err(|e| e.to_string())
    }
}

/// `WorkflowPlan`.
pub fn plan(
    ctx: &Context,
    request: &WorkflowRequest,
    submitter: Submitter,
) -> Result<WorkflowPlan, AppError> {
    let draft = prepare(ctx, request, submitter)?;
    Ok(workflows::plan(&draft, ctx.parallel_limit))
}

/// `WorkflowSubmit`: plans (check mode) or creates the workflow; with `wait`, answers
/// once it has finished.
pub async fn submit(
    ctx: &Context,
    actor: orch_protocol::Actor,
    submitter: Submitter,
    request: WorkflowRequest,
) -> Result<WorkflowSubmitted, AppError> {
    let draft = prepare(ctx, &request, submitter)?;
    if request.check_mode() {
        return Ok(WorkflowSubmitted::Planned(workflows::plan(
            &draft,
            ctx.parallel_limit,
        )));
    }
    // Subscribed before the workflow exists, so no event of it can be missed.
    let mut events = Stream::from_now(&ctx.bus, ctx.store.clone())?;
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
        let event = tokio::select! {
            event = events.next() => event?,
            () = ctx.shutdown.cancelled() => None,
        };
        match event {
            Some(event) if ends(id, &event.kind, event.task) => summary = stored_summary(ctx, id)?,
            Some(_) => {}
            None => return Err(AppError::shutting_down()),
        }
    }
    Ok(WorkflowSubmitted::Created(summary))
}

/// Whether an event may have finished workflow `id`.
fn ends(id: WorkflowId, kind: &EventKind, task: u64) -> bool {
    task == id && matches!(kind, EventKind::Workflow { status, .. } if status.is_final())
}
