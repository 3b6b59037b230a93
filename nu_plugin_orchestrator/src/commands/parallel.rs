//! `orch parallel <limit> [--group NAME]`: set a group's parallel limit at run time.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::QueueChange;

use super::queue_change::{complete_groups, group_flag, send};
use crate::OrchestratorPlugin;

/// `orch parallel`
pub struct Parallel;

impl SimplePluginCommand for Parallel {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch parallel"
    }

    fn description(&self) -> &str {
        "Set how many tasks of a group (default: the default group) may run at once, from now on."
    }

    fn extra_description(&self) -> &str {
        "0 lifts the group's own limit: its tasks then run as the nodes have slots (the daemon's --parallel). A raised limit starts waiting tasks at once; a lowered one lets running tasks finish. The answer is the queue's controls."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required(
                "limit",
                SyntaxShape::Int,
                "How many may run at once (0: no limit of its own).",
            )
            .named(
                "group",
                SyntaxShape::String,
                "The group (default: default).",
                Some('g'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch parallel 4",
                description: "At most four tasks of the default group at once",
                result: None,
            },
            Example {
                example: "orch parallel 1 --group deploy",
                description: "One deploy at a time",
                result: None,
            },
        ]
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
            nu_protocol::engine::ArgType::Flag(flag) if flag == "group" => {
                complete_groups(plugin, engine)
            }
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
        let limit: Spanned<i64> = call.req(0)?;
        let limit = to_limit(limit)?;
        let group = group_flag(call)?;
        let mut fields = Vec::new();
        if let Some((_, span)) = &group {
            fields.push(("group", *span));
        }
        let change = QueueChange::Parallel {
            group: group.map(|(g, _)| g),
            limit,
        };
        send(plugin, engine, call, change, &fields)
    }
}

/// A limit given as an int: 0 and up, within 32 bits.
fn to_limit(limit: Spanned<i64>) -> Result<u32, LabeledError> {
    u32::try_from(limit.item).map_err(|_| {
        LabeledError::new("invalid limit").with_label(
            format!(
                "a limit is between 0 (none of its own) and {}, not {}",
                u32::MAX,
                limit.item
            ),
            limit.span,
        )
    })
}

/// The value of the limit flag `name`, if given (0 counts as none).
pub fn limit_flag(call: &EvaluatedCall, name: &str) -> Result<Option<u32>, LabeledError> {
    let Some(limit) = call.get_flag::<i64>(name)? else {
        return Ok(None);
    };
    let span = call.get_flag_span(name).unwrap_or(call.head);
    let limit = to_limit(Spanned { item: limit, span })?;
    Ok((limit > 0).then_some(limit))
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Parallel);
}
