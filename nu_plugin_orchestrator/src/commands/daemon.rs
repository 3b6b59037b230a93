//! `orch daemon`: the daemon sub-commands' help.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};

use crate::OrchestratorPlugin;

/// `orch daemon`
pub struct Daemon;

impl SimplePluginCommand for Daemon {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch daemon"
    }

    fn description(&self) -> &str {
        "Start, stop and inspect the orchestrator daemon."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::String)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch daemon",
            description: "List the daemon commands",
            result: None,
        }]
    }

    fn run(
        &self,
        _plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        Ok(Value::string(engine.get_help()?, call.head))
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&Daemon);
}
