//! `orch submit`: add a task (or, from a list of records, many tasks at once).

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Signature, SyntaxShape, Type, Value,
};
use orch_protocol::Request;

use super::task_draft::TaskDraft;
use crate::OrchestratorPlugin;
use crate::connection::{expect_tasks, labeled};
use crate::convert::task_row;

/// `orch submit`
pub struct Submit;

impl PluginCommand for Submit {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch submit"
    }

    fn description(&self) -> &str {
        "Queue a task: a program with its arguments, or Nushell code run by the real `nu`."
    }

    fn extra_description(&self) -> &str {
        r#"The program runs directly, without a shell, in the current directory. Pipe in a record to submit one task, or a list of records to submit many in one durable step; each record takes the same settings as the flags (command, nu, script, priority, retries, backoff, max_backoff, timeout, after, label, group, on, params, cwd, env, stdin), and the flags give defaults for every record.

A task reports progress by printing a JSON line such as {"progress": 40, "message": "installing"} on its standard output."#
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::list(Type::Any), Type::table()),
                (Type::record(), Type::record()),
                (Type::Any, Type::record()),
            ])
            .rest(
                "command",
                SyntaxShape::Any,
                "The program and its arguments (a list works too: [sh -c 'exit 3']).",
            )
            .named(
                "nu",
                SyntaxShape::String,
                "Nushell code to run; `$params` holds --params.",
                Some('n'),
            )
            .named(
                "script",
                SyntaxShape::Filepath,
                "A Nushell script file to run (`$env.ORCH_PARAMS` holds --params as JSON).",
                None,
            )
            .named(
                "priority",
                SyntaxShape::Int,
                "Higher runs first (default 0).",
                Some('p'),
            )
            .named(
                "retries",
                SyntaxShape::Int,
                "How often a failed attempt is retried (default 0).",
                Some('r'),
            )
            .named(
                "backoff",
                SyntaxShape::Duration,
                "Delay before the first retry, doubling each time, with jitter (default 1sec).",
                None,
            )
            .named(
                "max-backoff",
                SyntaxShape::Duration,
                "Longest delay between retries (default 1min).",
                None,
            )
            .named(
                "timeout",
                SyntaxShape::Duration,
                "Kill an attempt (its whole process group) after this long.",
                Some('t'),
            )
            .named(
                "at",
                SyntaxShape::DateTime,
                "Start it no earlier than this time (a datetime; its time zone is kept: 2026-12-24T03:00:00+01:00). Until then, once nothing else holds it back, it is `delayed`.",
                None,
            )
            .named(
                "delay",
                SyntaxShape::Duration,
                "Start it no earlier than this long from now (--at now + delay, by this machine's clock).",
                Some('d'),
            )
            .named(
                "after",
                SyntaxShape::Any,
                "Task id(s) that must succeed first.",
                Some('a'),
            )
            .named(
                "label",
                SyntaxShape::String,
                "A label to find the task by.",
                Some('l'),
            )
            .named(
                "group",
                SyntaxShape::String,
                "The group it runs in (default: default): the group's parallel limit and pause apply to it (`orch group list`).",
                Some('g'),
            )
            .named(
                "on",
                SyntaxShape::Any,
                "Node label(s) the node that runs it must have, all of them: docker, or [docker region=eu] (not the task's --label).",
                None,
            )
            .named(
                "params",
                SyntaxShape::Any,
                "Structured parameters handed to the task.",
                None,
            )
            .named(
                "cwd",
                SyntaxShape::Directory,
                "Working directory (default: the current directory).",
                None,
            )
            .named(
                "env",
                SyntaxShape::Record(Default::default()),
                "Extra environment variables.",
                None,
            )
            .switch(
                "wait",
                "Return the tasks once they are final, not once they are queued (Ctrl-C stops waiting; the tasks go on).",
                Some('w'),
            )
            .switch(
                "stash",
                "Submit it stashed: held, not started until `orch enqueue` releases it (`orch edit` can change it meanwhile).",
                Some('s'),
            )
            .switch(
                "stdin",
                "Give it a standard input that `orch send` writes to (otherwise it reads /dev/null).",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
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
        crate::completions::flag_value(plugin, engine, &arg_type)
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch submit echo hello",
                description: "Run a program",
                result: None,
            },
            Example {
                example: "orch submit [sh -c 'exit 3'] --retries 2 --backoff 500ms",
                description: "Retry a flaky command twice, waiting 250-500ms then 500ms-1s",
                result: None,
            },
            Example {
                example: "orch submit --nu 'print $\"installing ($params.taskserv)\"' --params {taskserv: postgres} --timeout 10min",
                description: "Run Nushell code with structured parameters and a timeout",
                result: None,
            },
            Example {
                example: "orch submit --wait true | get status",
                description: "Run a program and return once it has finished",
                result: None,
            },
            Example {
                example: "let db = (orch submit --label db --nu 'sleep 1sec'); orch submit --after $db.id --label app echo ready",
                description: "Start one task after another succeeded",
                result: None,
            },
            Example {
                example: "orch submit --on [docker region=eu] docker ps",
                description: "Run on a node labelled both docker and region=eu",
                result: None,
            },
            Example {
                example: "orch submit --delay 10min --label nightly ./backup.sh",
                description: "Start a backup in ten minutes (delayed until then; the wait survives a restart)",
                result: None,
            },
            Example {
                example: "orch submit --at ('2026-12-24 03:00' | into datetime) ./backup.sh",
                description: "Start it no earlier than 3am on the 24th (local time)",
                result: None,
            },
            Example {
                example: "orch submit --stash ./deploy.sh",
                description: "Submit it held; `orch enqueue` lets it run",
                result: None,
            },
            Example {
                example: "1..100 | each {|i| {command: [echo $i], priority: ($i mod 3)} } | orch submit",
                description: "Submit a hundred tasks in one durable step",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let stashed = call.has_flag("stash")?;
        if stashed && call.has_flag("wait")? {
            let span = call.get_flag_span("wait").unwrap_or(call.head);
            return Err(LabeledError::new("--wait with --stash").with_label(
                "a stashed task does not start until `orch enqueue` releases it, so this would wait for ever",
                span,
            ));
        }
        let defaults = TaskDraft::from_flags(call, &cwd)?;
        let input = input.into_value(call.head)?;
        let (specs, batch, spans) = match input {
            Value::Record { .. } => {
                let mut draft = defaults.clone();
                draft.apply_record(&input, &cwd)?;
                let spec = draft.finish(input.span())?;
                (vec![spec], false, defaults.field_spans())
            }
            Value::List { vals, .. } => {
                let mut specs = Vec::with_capacity(vals.len());
                for item in &vals {
                    let mut draft = defaults.clone();
                    draft.apply_record(item, &cwd)?;
                    specs.push(draft.finish(item.span())?);
                }
                (specs, true, defaults.field_spans())
            }
            // Other input (such as the item `each` hands its closure) is not a task:
            // the arguments say what to run.
            _ => {
                let spec = defaults.clone().finish(call.head)?;
                (vec![spec], false, defaults.field_spans())
            }
        };
        if specs.is_empty() {
            return Ok(PipelineData::value(Value::list(vec![], call.head), None));
        }
        let answer = plugin
            .call(
                engine,
                &Request::Submit {
                    tasks: specs,
                    stashed,
                },
            )
            .map_err(|e| labeled(e, call.head, &spans))?;
        let mut tasks = expect_tasks(answer, call.head)?;
        if call.has_flag("wait")? {
            // The same connection: the wait is one more round trip, not a new command.
            let ids: Vec<_> = tasks.iter().map(|t| t.id).collect();
            let _display = crate::progress::Display::start(engine, &ids);
            let answer = plugin
                .call(engine, &Request::Wait { ids })
                .map_err(|e| labeled(e, call.head, &[]))?;
            tasks = expect_tasks(answer, call.head)?;
        }
        let rows: Vec<Value> = tasks.iter().map(|t| task_row(t, call.head)).collect();
        let value = if batch {
            Value::list(rows, call.head)
        } else {
            rows.into_iter().next().unwrap_or(Value::nothing(call.head))
        };
        Ok(PipelineData::value(value, None))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Submit);
}
