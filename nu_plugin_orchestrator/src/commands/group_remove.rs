//! `orch group remove <name>`: remove a group; its tasks run in the default group.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::QueueChange;

use super::queue_change::{complete_groups, send};
use crate::OrchestratorPlugin;

/// `orch group remove`
pub struct GroupRemove;

impl SimplePluginCommand for GroupRemove {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch group remove"
    }

    fn description(&self) -> &str {
        "Remove a group. Its waiting and running tasks go on in the default group (its limit and pause apply to them from then on)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The group's name.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch group remove deploy",
            description: "Remove the group deploy",
            result: None,
        }]
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
        match arg_type {
            nu_protocol::engine::ArgType::Positional(0) => complete_groups(plugin, engine),
            _ => None,
        }
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let name: Spanned<String> = call.req(0)?;
        let change = QueueChange::RemoveGroup { name: name.item };
        send(plugin, engine, call, change, &[("name", name.span)])
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&GroupRemove);
}
