//! What the `orch workflow submit ...` commands share: the infra and run flags, and
//! sending a request with its answer as Nushell values.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall};
use nu_protocol::{LabeledError, Signature, SyntaxShape, Value};
use orch_protocol::{Request, Response, WorkflowRequest, WorkflowSubmitted};

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
pub fn run_flags(signature: Signature) -> Signature {
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
        let workspace = match super::flag::<String>(call, "workspace")? {
            Some(dir) => cwd.join(dir),
            None => match engine.get_env_var("PROVISIONING_WORKSPACE")? {
                Some(Value::String { val, .. }) if !val.is_empty() => cwd.join(val),
                _ => cwd,
            },
        };
        Ok(InfraArgs {
            infra: super::flag(call, "infra")?,
            settings: super::flag(call, "settings")?,
            workspace,
        })
    }

    /// `--infra`, which this command needs.
    pub fn required_infra(&self, call: &EvaluatedCall) -> Result<String, LabeledError> {
        self.infra.clone().ok_or_else(|| {
            LabeledError::new("missing --infra")
                .with_label("this workflow needs an infra: pass --infra NAME", call.head)
        })
    }
}

/// The run flags' values.
pub struct RunArgs {
    /// `--check`.
    pub check_mode: bool,
    /// `--wait`.
    pub wait: bool,
    /// `--priority`.
    pub priority: i32,
    /// `--parallel-limit`.
    pub parallel_limit: Option<u32>,
    /// `--rollback`.
    pub rollback_enabled: bool,
}

impl RunArgs {
    /// Reads the run flags.
    pub fn read(call: &EvaluatedCall) -> Result<RunArgs, LabeledError> {
        let priority = match super::flag::<i64>(call, "priority")? {
            None => 0,
            Some(p) => i32::try_from(p).map_err(|_| {
                LabeledError::new("invalid priority").with_label(
                    "the priority must fit in 32 bits",
                    call.get_flag_span("priority").unwrap_or(call.head),
                )
            })?,
        };
        let parallel_limit = match super::flag::<i64>(call, "parallel-limit")? {
            None => None,
            Some(l) => Some(u32::try_from(l).ok().filter(|l| *l > 0).ok_or_else(|| {
                LabeledError::new("invalid parallel limit").with_label(
                    "the limit must be a positive number",
                    call.get_flag_span("parallel-limit").unwrap_or(call.head),
                )
            })?),
        };
        Ok(RunArgs {
            check_mode: call.has_flag("check")?,
            wait: call.has_flag("wait")?,
            priority,
            parallel_limit,
            rollback_enabled: call.has_flag("rollback")?,
        })
    }
}

/// Submits `request`; returns the plan (check mode) or the workflow (in full when it is
/// small, else its summary).
pub fn submit(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    request: WorkflowRequest,
) -> Result<Value, LabeledError> {
    let answer = plugin
        .call(engine, &Request::WorkflowSubmit { workflow: request })
        .map_err(|e| labeled(e, call.head, &[]))?;
    match answer {
        Response::WorkflowSubmitted(outcome) => match *outcome {
            WorkflowSubmitted::Planned(plan) => Ok(workflow_values::plan(&plan, call.head)),
            WorkflowSubmitted::Created(summary) => {
                changed_workflow(plugin, engine, &summary, call.head)
            }
        },
        other => Err(unexpected(other, call.head)),
    }
}
