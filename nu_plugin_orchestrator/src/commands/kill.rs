//! `orch kill <id>... [--signal SIG]`: send a signal to running tasks' processes, or
//! (without `--signal`) stop them as `orch cancel` does.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Value};
use orch_protocol::{Request, TaskSignal};

use super::by_id::{for_each_id, taking_ids};
use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::task_row;

/// `orch kill`
pub struct Kill;

impl Kill {
    /// The `--signal` flag's signal, if given (its error labelled at the value).
    fn signal(call: &EvaluatedCall) -> Result<Option<TaskSignal>, LabeledError> {
        let Some(text) = call.get_flag::<Spanned<String>>("signal")? else {
            return Ok(None);
        };
        text.item.parse::<TaskSignal>().map(Some).map_err(|e| {
            LabeledError::new("not a signal for a task").with_label(e.to_string(), text.span)
        })
    }
}

impl SimplePluginCommand for Kill {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch kill"
    }

    fn description(&self) -> &str {
        "Send a signal to running tasks' process groups (--signal), or stop them as `orch cancel` does."
    }

    fn extra_description(&self) -> &str {
        "With --signal, what becomes of the task is up to it: one that handles the signal runs on, one that dies of it fails (or is retried). The request is audited before the signal goes. Without --signal, the task is cancelled: its process group gets SIGTERM, then SIGKILL."
    }

    fn signature(&self) -> Signature {
        taking_ids(Signature::build(self.name()), "task")
            .named(
                "signal",
                SyntaxShape::String,
                "The signal, by name with or without SIG: HUP, INT, QUIT, KILL, USR1, USR2, ALRM, TERM, WINCH.",
                Some('s'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            ("orch kill 42 --signal HUP", "Ask task 42 to reload"),
            (
                "orch tasks --status running --label web | orch kill --signal USR1",
                "Send SIGUSR1 to every running task labelled web",
            ),
            ("orch kill 42", "Stop task 42 (a cancel)"),
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
        use crate::completions::{Named, id_argument, words};
        match &arg_type {
            nu_protocol::engine::ArgType::Flag(flag) if flag == "signal" => {
                let listed: Vec<(&str, &str)> = TaskSignal::ALL
                    .iter()
                    .map(|s| (s.name(), s.purpose()))
                    .collect();
                Some(words(&listed))
            }
            _ => id_argument(plugin, engine, Named::Task, &arg_type),
        }
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let signal = Kill::signal(call)?;
        for_each_id(call, input, "task", |id, span| {
            let request = match signal {
                Some(signal) => Request::SignalTask { id, signal },
                None => Request::Cancel { id },
            };
            let task = plugin
                .call(engine, &request)
                .map_err(|e| labeled(e, call.head, &[("id", span)]))
                .and_then(|answer| expect_task(answer, call.head))?;
            Ok(task_row(&task, call.head))
        })
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Kill);
}
