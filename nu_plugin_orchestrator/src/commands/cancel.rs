//! `orch cancel <id>`: stop a task.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::Request;

use crate::OrchestratorPlugin;
use crate::convert::task_row;

/// `orch cancel`
pub struct Cancel;

impl SimplePluginCommand for Cancel {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch cancel"
    }

    fn description(&self) -> &str {
        "Cancel a task. A running one has its whole process group stopped (SIGTERM, then SIGKILL); tasks that depend on it become dependency_failed."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, "The task's id.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch cancel 42",
            description: "Cancel task 42",
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
        let task = super::request_for_task(plugin, engine, call, |id| Request::Cancel { id })?;
        Ok(task_row(&task, call.head))
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&Cancel);
}
