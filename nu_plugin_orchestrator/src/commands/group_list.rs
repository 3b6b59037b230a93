//! `orch group list`: the queue's groups, with their limits, pauses and running tasks.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::queue_values::{groups_table, queue_record};

/// `orch group list`
pub struct GroupList;

impl SimplePluginCommand for GroupList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch group list"
    }

    fn description(&self) -> &str {
        "The queue's groups: each one's parallel limit (nothing: as many as the nodes have slots), whether it is paused, and how many of its tasks run now."
    }

    fn extra_description(&self) -> &str {
        "Every task runs in a group: the one `orch submit --group` names, else `default`. With --all, a record that also says whether the whole queue is paused (`orch pause`)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::table()),
                (Type::Nothing, Type::record()),
            ])
            .switch(
                "all",
                "A record: whether the whole queue is paused, and the groups.",
                Some('a'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch group list",
                description: "The groups",
                result: None,
            },
            Example {
                example: "orch group list | where paused",
                description: "The paused groups",
                result: None,
            },
            Example {
                example: "(orch group list --all).paused",
                description: "Whether the whole queue is paused",
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
        let all = call.has_flag("all")?;
        match plugin.call(engine, &Request::Queue) {
            Ok(Response::Queue(view)) if all => Ok(queue_record(view, call.head)),
            Ok(Response::Queue(view)) => Ok(groups_table(view, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&GroupList);
}
