//! `orch pause` and `orch resume`: of the whole queue, of a group (`--group`), or of
//! running tasks (their ids, as arguments or from the pipeline).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{QueueChange, Request};

use super::args;
use super::queue_change::{complete_groups, group_flag, send};
use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::task_row;

/// `orch pause` or `orch resume`.
pub struct Steer {
    /// True for `orch pause`.
    pause: bool,
}

/// `orch pause`
pub const PAUSE: Steer = Steer { pause: true };

/// `orch resume`
pub const RESUME: Steer = Steer { pause: false };

impl Steer {
    /// The change for the queue (no group) or a group.
    fn change(&self, group: Option<String>, wait: bool) -> QueueChange {
        if self.pause {
            QueueChange::Pause { group, wait }
        } else {
            QueueChange::Resume { group }
        }
    }

    /// The request about one running task.
    fn request(&self, id: u64) -> Request {
        if self.pause {
            Request::PauseTask { id }
        } else {
            Request::ResumeTask { id }
        }
    }

    /// Pauses or resumes each task of `ids`, in order; their rows.
    fn tasks(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        ids: &[(u64, nu_protocol::Span)],
    ) -> Result<Vec<Value>, LabeledError> {
        let mut rows = Vec::with_capacity(ids.len());
        for (id, span) in ids {
            let task = plugin
                .call(engine, &self.request(*id))
                .map_err(|e| labeled(e, call.head, &[("id", *span)]))
                .and_then(|answer| expect_task(answer, call.head))?;
            rows.push(task_row(&task, call.head));
        }
        Ok(rows)
    }
}

impl SimplePluginCommand for Steer {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        if self.pause {
            "orch pause"
        } else {
            "orch resume"
        }
    }

    fn description(&self) -> &str {
        if self.pause {
            "Pause the whole queue, a group (--group), or running tasks (their ids): no task of a paused queue or group starts, and its running tasks are stopped with SIGSTOP unless --wait lets them finish."
        } else {
            "Resume the whole queue, a group (--group), or paused tasks (their ids): waiting tasks start again, and paused ones continue (SIGCONT)."
        }
    }

    fn extra_description(&self) -> &str {
        if self.pause {
            "A pause is durable: a restarted daemon keeps it. A paused task's timeout keeps counting. Pausing the queue and pausing a group are separate: `orch resume` resumes the queue (and every paused task), `orch resume --group NAME` a group (and its paused tasks). With ids (or task records piped in), the answer is their rows; otherwise the queue's controls."
        } else {
            "With ids (or task records piped in), the answer is their rows; otherwise the queue's controls."
        }
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::Any),
                (Type::list(Type::Any), Type::list(Type::record())),
                (Type::record(), Type::list(Type::record())),
                (Type::Int, Type::list(Type::record())),
            ])
            .rest(
                "ids",
                SyntaxShape::Int,
                "Running tasks' ids (none, and nothing piped in: the queue or the group).",
            )
            .named(
                "group",
                SyntaxShape::String,
                "A group rather than the whole queue.",
                Some('g'),
            )
            .category(Category::Custom("orchestrator".into()));
        if self.pause {
            signature.switch(
                "wait",
                "Let the running tasks finish (only new starts are held).",
                Some('w'),
            )
        } else {
            signature
        }
    }

    fn examples(&self) -> Vec<Example<'_>> {
        let listed: &'static [(&'static str, &'static str)] = if self.pause {
            &[
                (
                    "orch pause",
                    "Pause everything: nothing starts, running tasks are stopped",
                ),
                (
                    "orch pause --group deploy --wait",
                    "Start no more deploys; let the running ones finish",
                ),
                (
                    "orch pause 42",
                    "Stop task 42's processes until it is resumed",
                ),
                (
                    "orch tasks --status running --label db | orch pause",
                    "Pause every running task labelled db",
                ),
            ]
        } else {
            &[
                ("orch resume", "Resume the queue and every paused task"),
                ("orch resume --group deploy", "Resume the group deploy"),
                ("orch resume 42", "Continue task 42"),
            ]
        };
        super::help::examples(listed)
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
            nu_protocol::engine::ArgType::Positional(_) => {
                crate::completions::ids(plugin, engine, crate::completions::Named::Task)
            }
            _ => None,
        }
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let named = call.rest::<Spanned<i64>>(0)?.len();
        let mut ids = args::ids_of_call(call, 0, input)?;
        let group = group_flag(call)?;
        let wait = self.pause && call.has_flag("wait")?;
        if ids.is_empty() {
            let fields: Vec<(&str, nu_protocol::Span)> =
                group.iter().map(|(_, span)| ("group", *span)).collect();
            let change = self.change(group.map(|(g, _)| g), wait);
            return send(plugin, engine, call, change, &fields);
        }
        if let Some((_, span)) = group {
            return Err(LabeledError::new("tasks and a group")
                .with_label("--group here", span)
                .with_help("give task ids or a group, not both"));
        }
        if wait {
            let span = call.get_flag_span("wait").unwrap_or(call.head);
            return Err(LabeledError::new("--wait with tasks").with_label(
                "--wait lets a paused queue's or group's running tasks finish; it means nothing for a task",
                span,
            ));
        }
        let mut seen = std::collections::HashSet::new();
        ids.retain(|(id, _)| seen.insert(*id));
        let mut rows = self.tasks(plugin, engine, call, &ids)?;
        if named == 1 {
            return Ok(rows.remove(0));
        }
        Ok(Value::list(rows, call.head))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&PAUSE);
    super::examples::test_examples(&RESUME);
}
