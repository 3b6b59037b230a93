//! `orch task <id>`: one task in full.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::Request;

use crate::OrchestratorPlugin;
use crate::convert::task_detail;

/// `orch task`
pub struct TaskCommand;

impl SimplePluginCommand for TaskCommand {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch task"
    }

    fn description(&self) -> &str {
        "Show one task: its settings, state, progress and every attempt."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The task's id.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch task 42",
                description: "Show task 42",
                result: None,
            },
            Example {
                example: "orch task 42 | get attempt_history",
                description: "Every attempt of task 42, with outcomes and durations",
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
        let task = super::request_for_task(plugin, engine, call, |id| Request::Get { id })?;
        Ok(task_detail(&task, call.head))
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&TaskCommand);
}
