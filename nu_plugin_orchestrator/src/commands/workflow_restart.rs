//! `orch workflow restart <id> --from <step>`: a finished workflow run again from one of
//! its steps, as a new workflow (the steps before it taken as done).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response};

use super::args;
use super::workflow_show::changed_workflow;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};

/// `orch workflow restart`
pub struct WorkflowRestart;

impl SimplePluginCommand for WorkflowRestart {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow restart"
    }

    fn description(&self) -> &str {
        "Run a finished workflow again from one of its steps: a new workflow of that step and of every step that depends on it, the steps before it taken as done."
    }

    fn extra_description(&self) -> &str {
        "Each step left out that a restarted step needs must have succeeded; a workflow still running, or rolled back (its completed steps undone), is refused. The new workflow runs the same commands, parameters and compensations; its rollback undoes only what its own steps did. Answers with the new workflow and its steps."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The finished workflow's id.")
            .required_named(
                "from",
                SyntaxShape::String,
                "The step to start from (it and every step after it run again).",
                Some('f'),
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
                example: "orch workflow restart 12 --from deploy",
                description: "Run workflow 12 again from its step `deploy`",
                result: None,
            },
            Example {
                example: "orch workflow show 12 | get step_list | where status == failed | first | orch workflow restart 12 --from $in.step",
                description: "Restart it from its first failed step",
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
        let step: Spanned<String> = call.get_flag("from")?.ok_or_else(|| {
            LabeledError::new("no step").with_label("--from STEP is required", call.head)
        })?;
        if step.item.trim().is_empty() {
            return Err(LabeledError::new("no step")
                .with_label("the step to start from has no name", step.span));
        }
        let spans = [("id", id_arg.span), ("step", step.span)];
        let answer = plugin
            .call(
                engine,
                &Request::WorkflowRestart {
                    id,
                    step: step.item.clone(),
                },
            )
            .map_err(|e| labeled(e, call.head, &spans))?;
        match answer {
            Response::WorkflowSummary(summary) => {
                changed_workflow(plugin, engine, &summary, call.head)
            }
            other => Err(unexpected(other, call.head)),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&WorkflowRestart);
}
