//! `orch workflow plan`: what a workflow would run, wave by wave, without running it.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response, WorkflowRequest};

use super::batch_file;
use super::workflow_args::{self, InfraArgs};
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::json::value_to_json;
use crate::workflow_values;

/// `orch workflow plan`
pub struct WorkflowPlan;

impl SimplePluginCommand for WorkflowPlan {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow plan"
    }

    fn description(&self) -> &str {
        "Plan a workflow without running it: the waves of steps that would run in parallel under its limits, and the waves of its rollback."
    }

    fn extra_description(&self) -> &str {
        "Give a batch workflow file, or pipe in a request record with a `kind` (servers, taskserv, cluster, batch) and that kind's fields, as `orch workflow submit` would send it."
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::record()),
                (Type::record(), Type::record()),
            ])
            .optional(
                "file",
                SyntaxShape::Filepath,
                "A batch workflow file (.toml, .nuon, .json, .ncl).",
            )
            .category(Category::Custom("orchestrator".into()));
        workflow_args::infra_flags(signature)
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
        crate::completions::flag_value(plugin, engine, &arg_type)
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch workflow plan deploy.toml | get waves",
                description: "The waves of a batch workflow",
                result: None,
            },
            Example {
                example: "{kind: taskserv, infra: my-project, taskserv: kubernetes} | orch workflow plan",
                description: "The plan of installing kubernetes on every server of an infra",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let infra = InfraArgs::read(engine, call)?;
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let file: Option<Spanned<String>> = call.opt(0)?;
        let request = match (&file, input) {
            (Some(file), _) => batch_file::from_file(file, &cwd)?.request(infra, true, false),
            (None, Value::Record { .. }) => request_from_record(input, &infra)?,
            (None, _) => {
                return Err(LabeledError::new("nothing to plan").with_label(
                    "give a batch workflow file, or pipe in a request record",
                    call.head,
                ));
            }
        };
        let answer = plugin
            .call(engine, &Request::WorkflowPlan { workflow: request })
            .map_err(|e| labeled(e, call.head, &[]))?;
        match answer {
            Response::Plan(plan) => Ok(workflow_values::plan(&plan, call.head)),
            other => Err(unexpected(other, call.head)),
        }
    }
}

/// A request record (with `kind`), its workspace filled in when it has none.
fn request_from_record(input: &Value, infra: &InfraArgs) -> Result<WorkflowRequest, LabeledError> {
    let mut json = value_to_json(input)?;
    if let Some(map) = json.as_object_mut() {
        map.entry("workspace")
            .or_insert_with(|| infra.workspace.display().to_string().into());
    }
    serde_json::from_value(json).map_err(|e| {
        LabeledError::new("invalid workflow request")
            .with_label(format!("not a workflow request: {e}"), input.span())
    })
}

#[test]
fn test_examples() {
    super::examples::test_examples(&WorkflowPlan);
}
