//! `orch workflow show <id>` (a workflow with its steps, read in pages), and `orch
//! workflow cancel <id>` and `orch workflow rollback <id>` (the workflow after the change
//! asked for).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, Signature, Span, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{ClientError, Request, Response, StepStatus, WorkflowId, WorkflowSummary};

use super::args;
use super::by_id::ById;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::workflow_values::{workflow_detail, workflow_summary};

/// Up to this many steps and compensations, the answer to a change (submit, cancel,
/// rollback) lists them all; a bigger workflow is shown by its summary.
pub const INLINE_STEPS: u64 = 1000;

/// A workflow's summary and its steps from `offset` (at most `limit`, else all of them),
/// read page after page, and its request when the first page carried it.
pub struct Shown {
    /// The summary (as of the last page read).
    pub summary: WorkflowSummary,
    /// The steps, then the compensations.
    pub entries: Vec<StepStatus>,
    /// The request the workflow was created from.
    pub request: Option<serde_json::Value>,
}

/// Reads workflow `id` and its steps from `offset`, page after page, until `limit`
/// entries (or all) are read.
pub fn read_steps(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    id: WorkflowId,
    mut offset: u64,
    limit: Option<usize>,
) -> Result<Shown, ClientError> {
    let mut entries = Vec::new();
    let mut request = None;
    loop {
        let remaining = limit.map(|l| l - entries.len());
        let answer = plugin.call(
            engine,
            &Request::Workflow {
                id,
                offset,
                limit: remaining,
            },
        )?;
        let Response::Workflow(view) = answer else {
            return Err(ClientError::Unexpected(format!("{answer:?}")));
        };
        let view = *view;
        entries.extend(view.tasks);
        request = request.or(view.request);
        match view.next_offset {
            Some(next) if limit.is_none_or(|l| entries.len() < l) => offset = next,
            _ => {
                return Ok(Shown {
                    summary: view.workflow,
                    entries,
                    request,
                });
            }
        }
    }
}

/// The value answering a change to a workflow: in full (with its steps) when it has at
/// most [`INLINE_STEPS`], else its summary.
pub fn changed_workflow(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    summary: &WorkflowSummary,
    head: Span,
) -> Result<Value, LabeledError> {
    if summary.steps + summary.compensations > INLINE_STEPS {
        return Ok(workflow_summary(summary, head));
    }
    let shown =
        read_steps(plugin, engine, summary.id, 0, None).map_err(|e| labeled(e, head, &[]))?;
    Ok(workflow_detail(
        &shown.summary,
        &shown.entries,
        shown.request.as_ref(),
        head,
    ))
}

/// `orch workflow show`
pub struct WorkflowShow;

impl SimplePluginCommand for WorkflowShow {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow show"
    }

    fn description(&self) -> &str {
        "Show a workflow: its status, its steps counted by status, each step with its task and status, and its compensations."
    }

    fn extra_description(&self) -> &str {
        "The steps are read from the daemon in pages; `--offset` and `--limit` show a window of them (steps first, then compensations, numbered from 0), which keeps the answer small for a workflow of many thousand steps."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The workflow's id.")
            .named(
                "offset",
                SyntaxShape::Int,
                "Skip this many steps (default 0).",
                Some('o'),
            )
            .named(
                "limit",
                SyntaxShape::Int,
                "List at most this many steps (default: all).",
                Some('n'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    #[allow(deprecated, reason = "nu-plugin marks dynamic completion experimental")]
    fn get_dynamic_completion(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        _call: nu_plugin::DynamicCompletionCall,
        arg_type: nu_protocol::engine::ArgType,
        _experimental: nu_protocol::engine::ExperimentalMarker,
    ) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
        crate::completions::id_argument(
            plugin,
            engine,
            crate::completions::Named::Workflow,
            &arg_type,
        )
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch workflow show 12",
                description: "Show workflow 12",
                result: None,
            },
            Example {
                example: "orch workflow show 12 | get step_list | where status != succeeded",
                description: "Its steps that did not succeed",
                result: None,
            },
            Example {
                example: "orch workflow show 12 --offset 5000 --limit 1000 | get step_list",
                description: "Steps 5000 to 5999 of a big workflow",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = args::task_id(id_arg)?;
        let offset = match args::flag::<i64>(call, "offset")? {
            None => 0,
            Some(o) => u64::try_from(o).map_err(|_| {
                LabeledError::new("invalid offset").with_label(
                    "the offset must not be negative",
                    call.get_flag_span("offset").unwrap_or(call.head),
                )
            })?,
        };
        let limit = args::limit_flag(call)?;
        let shown = read_steps(plugin, engine, id, offset, limit)
            .map_err(|e| labeled(e, call.head, &[("id", id_arg.span)]))?;
        Ok(workflow_detail(
            &shown.summary,
            &shown.entries,
            shown.request.as_ref(),
            call.head,
        ))
    }
}

/// The workflow a change answers with, shown as [`changed_workflow`] does.
fn changed(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    answer: Response,
    head: Span,
) -> Result<Value, LabeledError> {
    match answer {
        Response::WorkflowSummary(summary) => changed_workflow(plugin, engine, &summary, head),
        other => Err(unexpected(other, head)),
    }
}

/// What the commands that change a workflow say of their answer.
const CHANGED: &str = "Answers with the workflow and its steps; a workflow of more than 1000 steps is shown by its summary (see `orch workflow show --offset --limit` for its steps).";

/// `orch workflow cancel`
pub const CANCEL: ById = ById {
    name: "orch workflow cancel",
    description: "Cancel a workflow: its waiting steps are cancelled and its running ones stopped.",
    extra_description: CHANGED,
    names: "workflow",
    request: |id| Request::WorkflowCancel { id },
    examples: &[("orch workflow cancel 12", "Cancel workflow 12")],
    answer: changed,
};

/// `orch workflow rollback`
pub const ROLLBACK: ById = ById {
    name: "orch workflow rollback",
    description: "Roll back a finished workflow: compensate its completed steps with their rollback scripts, in reverse dependency order.",
    extra_description: CHANGED,
    names: "workflow",
    request: |id| Request::WorkflowRollback { id },
    examples: &[("orch workflow rollback 12", "Undo what workflow 12 created")],
    answer: changed,
};

#[test]
fn test_examples() {
    super::examples::test_examples(&WorkflowShow);
    super::examples::test_examples(&CANCEL);
    super::examples::test_examples(&ROLLBACK);
}
