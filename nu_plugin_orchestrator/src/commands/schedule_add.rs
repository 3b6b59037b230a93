//! `orch schedule add <name> <cron> [command...]`: submit a task (or a workflow) at the
//! times of a cron pattern, in a time zone.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, Signature, Span, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{CatchUp, Request, Response, ScheduleSpec, ScheduledWork, WorkflowRequest};

use super::task_draft::TaskDraft;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::schedule_values::schedule_record;

/// `orch schedule add`
pub struct ScheduleAdd;

impl SimplePluginCommand for ScheduleAdd {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch schedule add"
    }

    fn description(&self) -> &str {
        "Submit a task, or a workflow, at the times of a cron pattern, in a time zone. Durable: a restart keeps it; times missed while the daemon was down follow --catch-up."
    }

    fn extra_description(&self) -> &str {
        r#"The pattern has 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; L, W and # work as in croner ('0 3 * * MON-FRI', '0 0 L * *', '*/30 * * * * *'). It is read in --tz (an IANA name; default UTC): '0 3 * * *' with --tz Europe/Berlin runs at 03:00 Berlin time, summer and winter; a fixed time skipped by a DST change runs once after the gap, and a time repeated runs once.

The task takes the flags of `orch submit` (a command, --nu or --script, and --priority, --retries, --timeout, --label, --group, --on, --params, --env, --cwd), or a task record from the pipeline; with --workflow, a workflow request record instead ({kind: servers, infra: lab} as `orch workflow submit` sends it), expanded from the workspace at each run.

--catch-up says what becomes of the times missed while the daemon was down or the schedule paused: skip (none runs; the default), once (one run for all of them), all (each, the first 100)."#
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::record()),
                (Type::record(), Type::record()),
            ])
            .required("name", SyntaxShape::String, "The schedule's name.")
            .required(
                "cron",
                SyntaxShape::String,
                "The cron pattern (5 fields, or 6 with seconds first).",
            )
            .rest(
                "command",
                SyntaxShape::Any,
                "The program and its arguments to run.",
            )
            .named(
                "tz",
                SyntaxShape::String,
                "The IANA time zone the pattern is read in (default UTC).",
                None,
            )
            .named(
                "catch-up",
                SyntaxShape::String,
                "skip, once or all: what becomes of missed times (default skip).",
                None,
            )
            .named(
                "workflow",
                SyntaxShape::Record(Default::default()),
                "A workflow request to submit instead of a task ({kind: servers, infra: lab}).",
                Some('w'),
            )
            .named("nu", SyntaxShape::String, "Nushell code to run.", Some('n'))
            .named(
                "script",
                SyntaxShape::Filepath,
                "A Nushell script file to run.",
                None,
            )
            .named(
                "priority",
                SyntaxShape::Int,
                "Higher runs first.",
                Some('p'),
            )
            .named(
                "retries",
                SyntaxShape::Int,
                "Retries of a failed attempt.",
                Some('r'),
            )
            .named(
                "timeout",
                SyntaxShape::Duration,
                "Kill an attempt after this long.",
                Some('t'),
            )
            .named("label", SyntaxShape::String, "Each run's label.", Some('l'))
            .named(
                "group",
                SyntaxShape::String,
                "The group each run runs in.",
                Some('g'),
            )
            .named(
                "on",
                SyntaxShape::Any,
                "Node label(s) the node must have.",
                None,
            )
            .named(
                "params",
                SyntaxShape::Any,
                "Parameters handed to the task.",
                None,
            )
            .named(
                "env",
                SyntaxShape::Record(Default::default()),
                "Extra environment variables.",
                None,
            )
            .named("cwd", SyntaxShape::Filepath, "Working directory.", None)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch schedule add backup '0 3 * * *' --tz Europe/Berlin --label backup ./backup.sh",
                description: "Back up at 03:00 Berlin time every day",
                result: None,
            },
            Example {
                example: "orch schedule add report '0 9 * * MON' --catch-up once --nu 'print (date now)'",
                description: "Every Monday at 09:00 UTC; one run makes up for those missed",
                result: None,
            },
            Example {
                example: "orch schedule add servers '0 */6 * * *' --workflow {kind: servers, infra: lab}",
                description: "Create the lab's servers every six hours",
                result: None,
            },
            Example {
                example: "{command: [echo tick], label: ticks} | orch schedule add ticks '*/10 * * * * *'",
                description: "A task record every ten seconds",
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
        match &arg_type {
            nu_protocol::engine::ArgType::Flag(flag) if flag == "catch-up" => {
                Some(crate::completions::words(&[
                    ("skip", "missed times do not run"),
                    ("once", "one run for all missed times"),
                    ("all", "each missed time runs (up to 100)"),
                ]))
            }
            _ => crate::completions::flag_value(plugin, engine, &arg_type),
        }
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let name: Spanned<String> = call.req(0)?;
        let cron: Spanned<String> = call.req(1)?;
        let timezone: Option<Spanned<String>> = call.get_flag("tz")?;
        let catch_up = catch_up(call)?;
        let (work, mut spans) = work(engine, call, input)?;
        spans.extend([("name", name.span), ("cron", cron.span)]);
        if let Some(tz) = &timezone {
            spans.push(("timezone", tz.span));
        }
        let spec = ScheduleSpec {
            name: name.item,
            cron: cron.item,
            timezone: timezone.map(|tz| tz.item),
            catch_up,
            work,
        };
        match plugin.call(engine, &Request::ScheduleAdd { schedule: spec }) {
            Ok(Response::Schedule(schedule)) => Ok(schedule_record(*schedule, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &spans)),
        }
    }
}

/// `--catch-up`'s value.
fn catch_up(call: &EvaluatedCall) -> Result<CatchUp, LabeledError> {
    let Some(value) = call.get_flag::<Spanned<String>>("catch-up")? else {
        return Ok(CatchUp::default());
    };
    match value.item.as_str() {
        "skip" => Ok(CatchUp::Skip),
        "once" => Ok(CatchUp::Once),
        "all" => Ok(CatchUp::All),
        other => Err(LabeledError::new("invalid catch-up policy")
            .with_label(format!("{other:?}: give skip, once or all"), value.span)),
    }
}

/// The request's fields, each with the argument that gave it.
type FieldSpans = Vec<(&'static str, Span)>;

/// What each run submits: the workflow of `--workflow`, else the task of the flags (and
/// of a record piped in); with the request fields' spans.
fn work(
    engine: &EngineInterface,
    call: &EvaluatedCall,
    input: &Value,
) -> Result<(ScheduledWork, FieldSpans), LabeledError> {
    if let Some(workflow) = call.get_flag_value("workflow") {
        let span = workflow.span();
        let task_flags = [
            "nu", "script", "priority", "retries", "timeout", "label", "group", "on", "params",
            "env", "cwd",
        ];
        let task_given = call.positional.len() > 2
            || matches!(input, Value::Record { .. })
            || task_flags.iter().any(|f| call.get_flag_span(f).is_some());
        if task_given {
            return Err(LabeledError::new("a workflow and a task").with_label(
                "--workflow here: give a workflow or a task (a command, task flags or a piped record), not both",
                span,
            ));
        }
        let json = crate::json::value_to_json(&workflow)?;
        let request: WorkflowRequest = serde_json::from_value(json).map_err(|e| {
            LabeledError::new("invalid workflow request").with_label(e.to_string(), span)
        })?;
        let work = ScheduledWork::Workflow {
            workflow: Box::new(request),
        };
        return Ok((work, vec![("work", span)]));
    }
    let cwd = PathBuf::from(engine.get_current_dir()?);
    let mut draft = TaskDraft::from_call(call, &cwd, 2)?;
    if matches!(input, Value::Record { .. }) {
        draft.apply_record(input, &cwd)?;
    }
    let spans = draft.field_spans();
    let task = draft.finish(call.head)?;
    let work = ScheduledWork::Task {
        task: Box::new(task),
    };
    Ok((work, spans))
}

#[test]
fn test_examples() {
    super::examples::test_examples(&ScheduleAdd);
}
