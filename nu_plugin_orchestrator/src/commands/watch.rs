//! `orch watch`: a live stream of events.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, ListStream, PipelineData, Signals, Signature, Span, Spanned,
    SyntaxShape, Type, Value,
};
use orch_protocol::{Client, Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::labeled;
use crate::convert;
use crate::progress::{LiveError, Source, TaskPoll};

/// `orch watch`
pub struct Watch;

impl PluginCommand for Watch {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch watch"
    }

    fn description(&self) -> &str {
        "Stream the orchestrator's events as they happen (submitted, started, progress, succeeded, failed, ...)."
    }

    fn extra_description(&self) -> &str {
        "The stream runs until Ctrl-C, with --task until that task is final, with --workflow until that workflow is final. Use `first N` to stop after N events. With --live, a compact view replaces the events on a terminal: the counts and a bar per running task with its progress and message, redrawn until Ctrl-C (or the end of --task or --workflow), then cleared."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::list(Type::record()))
            .named(
                "task",
                SyntaxShape::Int,
                "Only this task's events, from its submission until it is final (or a test environment's, until it is deleted; with --live, a task only).",
                Some('t'),
            )
            .named(
                "workflow",
                SyntaxShape::Int,
                "Only the events of this workflow and its steps, until the workflow is final.",
                Some('w'),
            )
            .named(
                "since",
                SyntaxShape::Int,
                "Replay logged events after this sequence number first.",
                Some('s'),
            )
            .switch("all", "Replay the whole event log first.", Some('a'))
            .switch(
                "live",
                "Instead of events, a compact live view on the terminal: counts and a bar per running task (of the queue, --task or --workflow), until Ctrl-C or the end.",
                Some('l'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch watch",
                description: "Follow everything that happens",
                result: None,
            },
            Example {
                example: "orch watch --task 42 | select at event details",
                description: "Follow task 42 until it is final",
                result: None,
            },
            Example {
                example: "orch watch --task 31 | get details.state.status",
                description: "Follow test environment 31 through its stages until it is deleted",
                result: None,
            },
            Example {
                example: "orch watch --workflow 12 | select at task event details",
                description: "Follow workflow 12 and its steps until it is final",
                result: None,
            },
            Example {
                example: "orch watch --live",
                description: "Watch the queue's counts and running tasks until Ctrl-C",
                result: None,
            },
            Example {
                example: "orch watch --live --workflow 12",
                description: "Watch workflow 12's steps run until it is final",
                result: None,
            },
            Example {
                example: "orch watch --all | where event == failed | first 5",
                description: "The first five failures in the log, waiting for more if needed",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let task_arg: Option<Spanned<i64>> = call.get_flag("task")?;
        let task = task_arg.map(args::task_id).transpose()?;
        let workflow_arg: Option<Spanned<i64>> = call.get_flag("workflow")?;
        let workflow = workflow_arg.map(args::task_id).transpose()?;
        if call.has_flag("live")? {
            return live(plugin, engine, call, task_arg, workflow_arg);
        }
        let since = match call.get_flag::<Spanned<i64>>("since")? {
            Some(seq) => Some(args::task_id(seq)?),
            None if call.has_flag("all")? => Some(0),
            None => None,
        };
        let mut client = plugin
            .connect(engine)
            .map_err(|e| labeled(e, call.head, &[]))?;
        let mut field_spans: Vec<(&str, Span)> = task_arg.iter().map(|t| ("id", t.span)).collect();
        field_spans.extend(workflow_arg.iter().map(|w| ("workflow", w.span)));
        client
            .send(&Request::Watch {
                since,
                task,
                workflow,
            })
            .map_err(|e| labeled(e, call.head, &[]))?;
        let signals = engine.signals().clone();
        // The first item tells whether the daemon accepted the watch.
        let first = client
            .next(&|| signals.interrupted())
            .map_err(|e| labeled(e, call.head, &field_spans))?;
        let events = Events {
            client,
            signals: signals.clone(),
            first: Some(first),
            head: call.head,
            done: false,
        };
        Ok(PipelineData::list_stream(
            ListStream::new(events, call.head, signals),
            None,
        ))
    }
}

/// `orch watch --live`: the compact view of the queue, a task or a workflow, drawn until
/// Ctrl-C or its end; nothing is returned.
fn live(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    task: Option<Spanned<i64>>,
    workflow: Option<Spanned<i64>>,
) -> Result<PipelineData, LabeledError> {
    for replay in ["since", "all"] {
        if let Some(span) = call.get_flag_span(replay) {
            return Err(LabeledError::new("--live shows what runs now").with_label(
                format!("--{replay} replays the event log: leave out --live for it"),
                span,
            ));
        }
    }
    let (source, fields) = match (task, workflow) {
        (Some(t), Some(w)) => {
            return Err(LabeledError::new("one thing to watch")
                .with_label("--task here", t.span)
                .with_label("and --workflow here: give one of them", w.span));
        }
        (Some(t), None) => {
            // An unknown task is an error now, not a display waiting for ever.
            let id = args::task_id(t)?;
            if let Err(e) = plugin.call(engine, &Request::Get { id }) {
                if plugin.call(engine, &Request::Env { id }).is_ok() {
                    return Err(LabeledError::new("--live draws tasks").with_label(
                        format!(
                            "{id} is a test environment: leave out --live to follow its events"
                        ),
                        t.span,
                    ));
                }
                return Err(labeled(e, call.head, &[("id", t.span)]));
            }
            (Source::Tasks(TaskPoll::new(&[id])), vec![("id", t.span)])
        }
        (None, Some(w)) => (
            Source::Workflow(args::task_id(w)?),
            vec![("id", w.span), ("workflow", w.span)],
        ),
        (None, None) => (Source::Queue, Vec::new()),
    };
    let live_span = call.get_flag_span("live").unwrap_or(call.head);
    match crate::progress::live(engine, source) {
        Ok(_) => Ok(PipelineData::empty()),
        Err(LiveError::NoTerminal) => Err(LabeledError::new("--live draws on a terminal")
            .with_label(
                "standard error is not a terminal here (or $env.config.plugins.orchestrator.progress is false): leave out --live for the event stream",
                live_span,
            )),
        Err(LiveError::Daemon(e)) => Err(labeled(e, call.head, &fields)),
    }
}

/// The event stream: reads items until the daemon ends it, the connection breaks, or
/// Ctrl-C.
struct Events {
    client: Client,
    signals: Signals,
    first: Option<Response>,
    head: Span,
    done: bool,
}

impl Iterator for Events {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        if self.done {
            return None;
        }
        let response = match self.first.take() {
            Some(first) => first,
            None => {
                let signals = self.signals.clone();
                match self.client.next(&|| signals.interrupted()) {
                    Ok(response) => response,
                    Err(e) if e.is_interrupted() => return None,
                    Err(e) => {
                        // Report a broken connection once, then end the stream.
                        self.done = true;
                        let err = labeled(e, self.head, &[]);
                        return Some(Value::error(err.into(), self.head));
                    }
                }
            }
        };
        match response {
            Response::Event { event } => Some(convert::event(&event, self.head)),
            _ => None,
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Watch);
}
