//! `orch wait <id>...`: block until tasks are final.

use std::time::{Duration, Instant};

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Signature, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{ClientError, Request};

use super::args;
use crate::OrchestratorPlugin;
use crate::completions::Named;
use crate::connection::{expect_tasks, labeled, whole};
use crate::convert::task_row;

/// `orch wait`
pub struct Wait;

impl PluginCommand for Wait {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch wait"
    }

    fn description(&self) -> &str {
        "Wait until tasks reach a final state (succeeded, failed, cancelled or dependency_failed) and return them. Ctrl-C stops waiting."
    }

    fn extra_description(&self) -> &str {
        "On a terminal, a live display shows the counts and a bar per running task (its progress and message) while it waits, and is cleared at the end; `$env.config.plugins.orchestrator.progress = false` turns it off."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::table()),
                (Type::Any, Type::table()),
            ])
            .rest(
                "ids",
                SyntaxShape::Int,
                "The tasks to wait for (or pipe in tasks or ids).",
            )
            .named(
                "timeout",
                SyntaxShape::Duration,
                "Give up after this long.",
                Some('t'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch wait 1 2 3",
                description: "Wait for three tasks",
                result: None,
            },
            Example {
                example: "orch submit sleep 1 | orch wait | get 0.status",
                description: "Submit a task and wait for it",
                result: None,
            },
            Example {
                example: "orch tasks --status running | orch wait --timeout 5min",
                description: "Wait up to five minutes for everything that runs now",
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
        crate::completions::id_argument(plugin, engine, Named::Task, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let mut ids = Vec::new();
        for arg in call.rest::<Spanned<i64>>(0)? {
            ids.push(args::task_id(arg)?);
        }
        args::ids_from_value(&input.into_value(call.head)?, &mut ids)?;
        // Each task once, in the order first given (one row per task in the answer).
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        if ids.is_empty() {
            return Err(LabeledError::new("no tasks to wait for")
                .with_label("give task ids, or pipe in tasks", call.head));
        }
        let timeout = match call.get_flag::<Value>("timeout")? {
            Some(v) => Some(Duration::from_nanos(v.as_duration()?.max(0) as u64)),
            None => None,
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut client = plugin
            .connect(engine)
            .map_err(|e| labeled(e, call.head, &[]))?;
        let _display = crate::progress::Display::start(engine, &ids);
        let signals = engine.signals().clone();
        let expired = || deadline.is_some_and(|d| Instant::now() >= d);
        let stop = || signals.interrupted() || expired();
        let answer = client
            .call_interruptible(&Request::Wait { ids }, &stop)
            .and_then(|first| whole(&mut client, first, &stop));
        let answer = match answer {
            Err(e) if e.is_interrupted() && expired() => {
                return Err(LabeledError::new("timed out").with_label(
                    "the tasks were not all finished when the timeout passed",
                    call.get_flag_span("timeout").unwrap_or(call.head),
                ));
            }
            Err(ClientError::Daemon(reply)) => {
                return Err(labeled(ClientError::Daemon(reply), call.head, &[]));
            }
            other => other.map_err(|e| labeled(e, call.head, &[]))?,
        };
        let rows = expect_tasks(answer, call.head)?
            .iter()
            .map(|t| task_row(t, call.head))
            .collect();
        Ok(PipelineData::value(Value::list(rows, call.head), None))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Wait);
}
