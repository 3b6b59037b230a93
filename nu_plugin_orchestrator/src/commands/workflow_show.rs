//! `orch workflow show <id>`, `orch workflow cancel <id>` and `orch workflow rollback
//! <id>`: one workflow in full, after the change asked for.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::workflow_values::workflow_detail;

/// A command that sends one request about a workflow and shows it.
pub struct WorkflowById {
    name: &'static str,
    description: &'static str,
    request: fn(u64) -> Request,
    examples: &'static [(&'static str, &'static str)],
}

/// `orch workflow show`
pub const SHOW: WorkflowById = WorkflowById {
    name: "orch workflow show",
    description: "Show a workflow: its status, each step with its task and status, and its compensations.",
    request: |id| Request::Workflow { id },
    examples: &[
        ("orch workflow show 12", "Show workflow 12"),
        (
            "orch workflow show 12 | get step_list | where status != succeeded",
            "Its steps that did not succeed",
        ),
    ],
};

/// `orch workflow cancel`
pub const CANCEL: WorkflowById = WorkflowById {
    name: "orch workflow cancel",
    description: "Cancel a workflow: its waiting steps are cancelled and its running ones stopped.",
    request: |id| Request::WorkflowCancel { id },
    examples: &[("orch workflow cancel 12", "Cancel workflow 12")],
};

/// `orch workflow rollback`
pub const ROLLBACK: WorkflowById = WorkflowById {
    name: "orch workflow rollback",
    description: "Roll back a finished workflow: compensate its completed steps with their rollback scripts, in reverse dependency order.",
    request: |id| Request::WorkflowRollback { id },
    examples: &[("orch workflow rollback 12", "Undo what workflow 12 created")],
};

impl SimplePluginCommand for WorkflowById {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The workflow's id.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        self.examples
            .iter()
            .map(|(example, description)| Example {
                example,
                description,
                result: None,
            })
            .collect()
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = super::task_id(id_arg)?;
        let answer = plugin
            .call(engine, &(self.request)(id))
            .map_err(|e| labeled(e, call.head, &[("id", id_arg.span)]))?;
        match answer {
            Response::Workflow(view) => Ok(workflow_detail(&view, call.head)),
            other => Err(unexpected(other, call.head)),
        }
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&SHOW);
    crate::commands::test_examples(&CANCEL);
    crate::commands::test_examples(&ROLLBACK);
}
