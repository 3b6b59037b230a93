//! `orch logs <id>...`: a task's output (a stream of text), or several tasks' (a table of
//! their ids and logs).

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    ByteStream, ByteStreamType, Category, Example, LabeledError, PipelineData, ShellError, Signals,
    Signature, Span, Spanned, SyntaxShape, Type, Value, record,
};
use orch_protocol::{Client, ClientError, Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::completions::Named;
use crate::connection::labeled;

/// `orch logs`
pub struct Logs;

impl PluginCommand for Logs {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch logs"
    }

    fn description(&self) -> &str {
        "A task's output (standard output and error, every attempt), optionally followed while it runs."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::Any),
                (Type::list(Type::Any), Type::table()),
                (Type::record(), Type::table()),
                (Type::Int, Type::table()),
            ])
            .rest(
                "ids",
                SyntaxShape::Int,
                "The task's id (its output as text); several give a table of ids and logs. Without one, the ids come from the pipeline (ids, or records with an `id` column).",
            )
            .switch(
                "follow",
                "Keep streaming new output until the task is final (one task only).",
                Some('f'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch logs 42",
                description: "The output of task 42",
                result: None,
            },
            Example {
                example: "orch logs 42 --follow | lines | each {|l| $\"[42] ($l)\" }",
                description: "Follow task 42's output line by line",
                result: None,
            },
            Example {
                example: "orch tasks --status failed | orch logs | where log =~ 'timeout'",
                description: "The failed tasks whose output mentions a timeout (a table of id and log)",
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
        let named: Vec<Spanned<i64>> = call.rest(0)?;
        let follow = call.has_flag("follow")?;
        // One id named: its output as a stream of text, as it comes.
        if let [id_arg] = named[..] {
            let id = args::task_id(id_arg)?;
            return stream_log(
                plugin,
                engine,
                call,
                &Request::Logs { id, follow },
                id_arg.span,
            );
        }
        let ids = ids_of(call, &named, input)?;
        if follow {
            return Err(LabeledError::new("--follow follows one task")
                .with_label(format!("{} tasks given", ids.len()), call.head)
                .with_help("give one id to follow its output, or leave out --follow for a table of the logs"));
        }
        let mut rows = Vec::with_capacity(ids.len());
        for (id, span) in ids {
            let request = Request::Logs { id, follow: false };
            let log = stream_log(plugin, engine, call, &request, span)?
                .into_value(call.head)
                .map_err(|e| LabeledError::from(e).with_label("reading the log", span))?;
            let id = Value::int(i64::try_from(id).unwrap_or(i64::MAX), call.head);
            rows.push(Value::record(
                record! { "id" => id, "log" => log },
                call.head,
            ));
        }
        Ok(PipelineData::Value(Value::list(rows, call.head), None))
    }
}

/// The tasks named (`named`), else piped in (`input`): each once, in the order given,
/// with the span to point at.
fn ids_of(
    call: &EvaluatedCall,
    named: &[Spanned<i64>],
    input: PipelineData,
) -> Result<Vec<(u64, Span)>, LabeledError> {
    let mut ids = Vec::new();
    for arg in named {
        ids.push((args::task_id(*arg)?, arg.span));
    }
    if ids.is_empty() {
        let value = input.into_value(call.head)?;
        let mut piped = Vec::new();
        args::ids_from_value(&value, &mut piped)?;
        ids.extend(piped.into_iter().map(|id| (id, value.span())));
    }
    if ids.is_empty() {
        return Err(LabeledError::new("no task id").with_label(
            "give one or more ids, or pipe in tasks (records with an `id` column)",
            call.head,
        ));
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|(id, _)| seen.insert(*id));
    Ok(ids)
}

/// Sends a log request and streams its chunks as a string byte stream; errors about the
/// id point at `id_span`.
pub fn stream_log(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    request: &Request,
    id_span: Span,
) -> Result<PipelineData, LabeledError> {
    let signals = engine.signals().clone();
    let ask = |mut client: Client| {
        client.send(request)?;
        let first = client.next(&|| signals.interrupted())?;
        Ok::<_, ClientError>((client, first))
    };
    let here = crate::connection::socket_path(engine);
    let connected = plugin.connect(engine).and_then(ask);
    // A node of a cluster that did not run the task names the one that did (and keeps
    // its log): asked once, when it is on this host.
    let (client, first) = match connected {
        Err(ClientError::Daemon(reply)) => match &reply.leader_socket {
            Some(there) if *there != here && there.exists() => {
                plugin.connect_to(there).and_then(ask)
            }
            _ => Err(ClientError::Daemon(reply)),
        },
        other => other,
    }
    .map_err(|e| labeled(e, call.head, &[("id", id_span)]))?;
    let chunks = Chunks {
        client,
        signals: signals.clone(),
        first: Some(first),
        head: call.head,
        done: false,
    };
    let stream = ByteStream::from_result_iter(chunks, call.head, signals, ByteStreamType::String);
    Ok(PipelineData::byte_stream(stream, None))
}

/// The log's chunks, until the daemon ends the stream or Ctrl-C.
struct Chunks {
    client: Client,
    signals: Signals,
    first: Option<Response>,
    head: Span,
    done: bool,
}

impl Iterator for Chunks {
    type Item = Result<Vec<u8>, ShellError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let response = match self.first.take() {
            Some(first) => Ok(first),
            None => {
                let signals = self.signals.clone();
                self.client.next(&|| signals.interrupted())
            }
        };
        match response {
            Ok(Response::Log { text }) => Some(Ok(text.into_bytes())),
            Ok(_) => None,
            Err(e) if e.is_interrupted() => None,
            Err(e) => {
                // Report a broken connection once, then end the stream.
                self.done = true;
                Some(Err(labeled(e, self.head, &[]).into()))
            }
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Logs);
}
