//! `orch`: the command group's help.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};

use crate::OrchestratorPlugin;

/// `orch`
pub struct Orch;

impl SimplePluginCommand for Orch {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch"
    }

    fn description(&self) -> &str {
        "Drive the provisioning orchestrator: a durable task queue and runner."
    }

    fn extra_description(&self) -> &str {
        "Start the daemon with `orch daemon start`, submit work with `orch submit`, and follow it with `orch tasks`, `orch watch` and `orch logs`."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::String)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch",
            description: "List the orchestrator's commands",
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
    crate::commands::test_examples(&Orch);
}
