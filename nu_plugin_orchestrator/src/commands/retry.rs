//! `orch retry <id>`: run a failed or cancelled task again.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::Request;

use crate::OrchestratorPlugin;
use crate::convert::task_row;

/// `orch retry`
pub struct Retry;

impl SimplePluginCommand for Retry {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch retry"
    }

    fn description(&self) -> &str {
        "Queue a failed, cancelled or dependency_failed task again, with a fresh retry budget; tasks that failed because of it wait for it again."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The task's id.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch retry 42",
            description: "Run task 42 again with a fresh retry budget",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let task = super::request_for_task(plugin, engine, call, |id| Request::Retry { id })?;
        Ok(task_row(&task, call.head))
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&Retry);
}
