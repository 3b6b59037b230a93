//! What the `orch workflow submit ...` commands share: the infra flags (also read by
//! `batch` and `orch workflow plan`), and the shape of the commands on an infra
//! (`servers`, `taskserv`, `cluster`): their own arguments, then the infra and run flags,
//! one request, and its answer as Nushell values.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{
    InfraTarget, Request, Response, RunOptions, WorkflowRequest, WorkflowSubmitted,
};

use super::args;
use super::workflow_show::changed_workflow;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::workflow_values;

/// Adds the infra flags (`--infra`, `--settings`, `--workspace`).
pub fn infra_flags(signature: Signature) -> Signature {
    signature
        .named(
            "infra",
            SyntaxShape::String,
            "The infra: a plain name (a directory infra/<name> or <name> in the workspace).",
            Some('i'),
        )
        .named(
            "settings",
            SyntaxShape::String,
            "The settings file, relative to the infra directory (default: settings.toml, .yaml, .yml or .json).",
            None,
        )
        .named(
            "workspace",
            SyntaxShape::Directory,
            "The workspace holding the infras (default: $env.PROVISIONING_WORKSPACE, else the current directory).",
            None,
        )
}

/// Adds the run flags (`--check`, `--wait`, `--priority`, `--parallel-limit`, `--rollback`).
fn run_flags(signature: Signature) -> Signature {
    signature
        .switch(
            "check",
            "Plan only (check mode): return the waves that would run, run nothing.",
            Some('c'),
        )
        .switch("wait", "Return once the workflow has finished.", Some('w'))
        .named(
            "priority",
            SyntaxShape::Int,
            "Queue priority of its steps (higher first).",
            Some('p'),
        )
        .named(
            "parallel-limit",
            SyntaxShape::Int,
            "How many of its steps may run at once.",
            Some('l'),
        )
        .switch(
            "rollback",
            "When a step fails, compensate the completed steps (rollback scripts).",
            Some('r'),
        )
        .named(
            "group",
            SyntaxShape::String,
            "The group its steps run in (`orch group list`; default: default).",
            Some('g'),
        )
}

/// The infra flags' values.
pub struct InfraArgs {
    /// `--infra`.
    pub infra: Option<String>,
    /// `--settings`.
    pub settings: Option<String>,
    /// `--workspace`, else `$env.PROVISIONING_WORKSPACE`, else the current directory.
    pub workspace: PathBuf,
}

impl InfraArgs {
    /// Reads the infra flags.
    pub fn read(engine: &EngineInterface, call: &EvaluatedCall) -> Result<InfraArgs, LabeledError> {
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let workspace = match args::flag::<String>(call, "workspace")? {
            Some(dir) => cwd.join(dir),
            None => match engine.get_env_var("PROVISIONING_WORKSPACE")? {
                Some(Value::String { val, .. }) if !val.is_empty() => cwd.join(val),
                _ => cwd,
            },
        };
        Ok(InfraArgs {
            infra: args::flag(call, "infra")?,
            settings: args::flag(call, "settings")?,
            workspace,
        })
    }

    /// Where the request acts: `--infra` is needed.
    fn target(self, call: &EvaluatedCall) -> Result<InfraTarget, LabeledError> {
        let infra = self.infra.ok_or_else(|| {
            LabeledError::new("missing --infra")
                .with_label("this workflow needs an infra: pass --infra NAME", call.head)
        })?;
        Ok(InfraTarget {
            infra,
            settings: self.settings,
            workspace: Some(self.workspace),
        })
    }
}

/// The run flags' values.
fn run_options(call: &EvaluatedCall) -> Result<RunOptions, LabeledError> {
    let priority = match args::flag::<i64>(call, "priority")? {
        None => 0,
        Some(p) => i32::try_from(p).map_err(|_| {
            LabeledError::new("invalid priority").with_label(
                "the priority must fit in 32 bits",
                call.get_flag_span("priority").unwrap_or(call.head),
            )
        })?,
    };
    let parallel_limit = match args::flag::<i64>(call, "parallel-limit")? {
        None => None,
        Some(l) => Some(u32::try_from(l).ok().filter(|l| *l > 0).ok_or_else(|| {
            LabeledError::new("invalid parallel limit").with_label(
                "the limit must be a positive number",
                call.get_flag_span("parallel-limit").unwrap_or(call.head),
            )
        })?),
    };
    Ok(RunOptions {
        check_mode: call.has_flag("check")?,
        wait: call.has_flag("wait")?,
        priority,
        parallel_limit,
        rollback_enabled: call.has_flag("rollback")?,
        group: args::flag(call, "group")?,
    })
}

/// The request of a workflow on an infra, from the command's own arguments and the
/// infra and run flags.
pub type InfraRequest =
    fn(&EvaluatedCall, InfraTarget, RunOptions) -> Result<WorkflowRequest, LabeledError>;

/// `orch workflow submit <kind>` for a workflow on an infra.
pub struct OnInfra {
    /// The command's name.
    pub name: &'static str,
    /// What it does.
    pub description: &'static str,
    /// Adds the command's own arguments (before the shared flags).
    pub arguments: fn(Signature) -> Signature,
    /// What its first positional argument names, for its completions.
    pub first: Option<crate::completions::Names>,
    /// Its examples: the command line and what it does.
    pub examples: &'static [(&'static str, &'static str)],
    /// Its request.
    pub request: InfraRequest,
}

impl SimplePluginCommand for OnInfra {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn signature(&self) -> Signature {
        let signature =
            Signature::build(self.name).input_output_type(Type::Nothing, Type::record());
        let signature =
            (self.arguments)(signature).category(Category::Custom("orchestrator".into()));
        run_flags(infra_flags(signature))
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
        match &arg_type {
            nu_protocol::engine::ArgType::Positional(0) => {
                crate::completions::names(plugin, engine, self.first?)
            }
            _ => crate::completions::flag_value(plugin, engine, &arg_type),
        }
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(self.examples)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let target = InfraArgs::read(engine, call)?.target(call)?;
        let request = (self.request)(call, target, run_options(call)?)?;
        submit(plugin, engine, call, request)
    }
}

/// Submits `request`; returns the plan (check mode) or the workflow (in full when it is
/// small, else its summary).
pub fn submit(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    mut request: WorkflowRequest,
) -> Result<Value, LabeledError> {
    // On a terminal, a wait shows the workflow's steps as they run: the workflow is
    // created at once and followed here, then read again at its end.
    let shown = request.wait() && !request.check_mode() && crate::progress::wanted(engine);
    if shown {
        request.set_wait(false);
    }
    let answer = plugin
        .call(engine, &Request::WorkflowSubmit { workflow: request })
        .map_err(|e| labeled(e, call.head, &[]))?;
    match answer {
        Response::WorkflowSubmitted(outcome) => match *outcome {
            WorkflowSubmitted::Planned(plan) => Ok(workflow_values::plan(&plan, call.head)),
            WorkflowSubmitted::Created(summary) if shown => {
                follow(plugin, engine, call, summary.id)
            }
            WorkflowSubmitted::Created(summary) => {
                changed_workflow(plugin, engine, &summary, call.head)
            }
        },
        other => Err(unexpected(other, call.head)),
    }
}

/// Draws workflow `id`'s steps until it is final, then answers with it as a wait would
/// have; Ctrl-C stops waiting (the workflow goes on).
fn follow(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    id: orch_protocol::WorkflowId,
) -> Result<Value, LabeledError> {
    let source = crate::progress::Source::Workflow(id);
    crate::progress::follow(engine, source).map_err(|e| labeled(e, call.head, &[]))?;
    if engine.signals().interrupted() {
        let interrupted =
            orch_protocol::ClientError::Frame(orch_protocol::frame::FrameError::Interrupted);
        return Err(labeled(interrupted, call.head, &[]));
    }
    let request = Request::Workflow {
        id,
        offset: 0,
        limit: Some(0),
    };
    match plugin
        .call(engine, &request)
        .map_err(|e| labeled(e, call.head, &[]))?
    {
        Response::Workflow(view) => changed_workflow(plugin, engine, &view.workflow, call.head),
        other => Err(unexpected(other, call.head)),
    }
}
