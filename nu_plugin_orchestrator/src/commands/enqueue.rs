//! `orch enqueue <id>... [--at | --delay]`: release stashed tasks.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Value};
use orch_protocol::{Request, TaskChange};

use chrono::{DateTime, Utc};

use super::by_id::{for_each_id, taking_ids};
use super::task_draft::start_time;
use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::task_row;

/// `orch enqueue`
pub struct Enqueue;

impl Enqueue {
    /// The start time `--at` or `--delay` gives, if either (not both).
    fn start_time(call: &EvaluatedCall) -> Result<Option<Spanned<DateTime<Utc>>>, LabeledError> {
        // A flag given `null` (as wrappers forward optional flags) counts as not given.
        let given = |value: Option<Value>| value.filter(|v| !v.is_nothing());
        let at = given(call.get_flag("at")?);
        let delay = given(call.get_flag("delay")?);
        let (name, value) = match (at, delay) {
            (Some(at), Some(delay)) => {
                return Err(LabeledError::new("two start times")
                    .with_label("--at here", at.span())
                    .with_label("and --delay here: give one of them", delay.span()));
            }
            (Some(at), None) => ("at", at),
            (None, Some(delay)) => ("delay", delay),
            (None, None) => return Ok(None),
        };
        let item = start_time(name, &value)?;
        Ok(Some(Spanned {
            item,
            span: value.span(),
        }))
    }
}

impl SimplePluginCommand for Enqueue {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch enqueue"
    }

    fn description(&self) -> &str {
        "Release stashed tasks: each goes to the state a submission would have given it (blocked on its dependencies, delayed until its start time, or queued)."
    }

    fn extra_description(&self) -> &str {
        "--at or --delay gives it a new start time. A task whose dependency did not succeed is refused (it would never run): retry the dependency first, or change its dependencies with `orch edit ID --after [...]`."
    }

    fn signature(&self) -> Signature {
        taking_ids(Signature::build(self.name()), "task")
            .named(
                "at",
                SyntaxShape::DateTime,
                "Start no earlier than this time.",
                None,
            )
            .named(
                "delay",
                SyntaxShape::Duration,
                "Start no earlier than this long from now (by this machine's clock).",
                Some('d'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            ("orch enqueue 42", "Let stashed task 42 run"),
            ("orch enqueue 42 --delay 10min", "Let it run in ten minutes"),
            (
                "orch tasks --status stashed | orch enqueue",
                "Release every stashed task",
            ),
        ])
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
        let named = crate::completions::Named::Task;
        crate::completions::id_argument(plugin, engine, named, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let start = Self::start_time(call)?;
        for_each_id(call, input, "task", |id, span| {
            let change = TaskChange::Enqueue {
                not_before: start.as_ref().map(|s| s.item),
            };
            let mut fields = vec![("id", span)];
            fields.extend(start.as_ref().map(|s| ("not_before", s.span)));
            let answer = plugin
                .call(engine, &Request::ChangeTask { id, change })
                .map_err(|e| labeled(e, call.head, &fields))?;
            Ok(task_row(&expect_task(answer, call.head)?, call.head))
        })
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Enqueue);
}
