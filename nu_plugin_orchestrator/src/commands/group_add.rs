//! `orch group add <name>`: create a group, with its own parallel limit.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::QueueChange;

use super::queue_change::send;
use crate::OrchestratorPlugin;

/// `orch group add`
pub struct GroupAdd;

impl SimplePluginCommand for GroupAdd {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch group add"
    }

    fn description(&self) -> &str {
        "Create a group of tasks, with its own parallel limit on top of the daemon's slots."
    }

    fn extra_description(&self) -> &str {
        "Tasks and workflows join it with `--group NAME`. A name has letters, digits, '_', '-' and '.'. The answer is the queue's controls."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The group's name.")
            .named(
                "parallel",
                SyntaxShape::Int,
                "How many of its tasks may run at once (default, or 0: as many as the nodes have slots).",
                Some('p'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch group add deploy --parallel 2",
                description: "A group that runs at most two of its tasks at once",
                result: None,
            },
            Example {
                example: "orch group add deploy; orch submit --group deploy ./deploy.sh",
                description: "Run a task in it",
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
        let name: Spanned<String> = call.req(0)?;
        let parallel = super::parallel::limit_flag(call, "parallel")?;
        let change = QueueChange::AddGroup {
            name: name.item,
            parallel,
        };
        send(plugin, engine, call, change, &[("name", name.span)])
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&GroupAdd);
}
