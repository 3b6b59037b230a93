//! `orch health`: is the daemon alive, and what is it doing.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::convert;

/// `orch health`
pub struct Health;

impl SimplePluginCommand for Health {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch health"
    }

    fn description(&self) -> &str {
        "Ask the daemon whether it is healthy: version, uptime, store and task counts."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch health",
                description: "Check the daemon",
                result: None,
            },
            Example {
                example: "orch health | get tasks.queued",
                description: "How many tasks wait in the queue",
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
        match plugin.call(engine, &Request::Health) {
            Ok(Response::Health(report)) => Ok(convert::health(&report, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Health);
}
