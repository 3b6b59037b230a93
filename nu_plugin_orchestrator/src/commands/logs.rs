//! `orch logs <id>`: a task's output.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    ByteStream, ByteStreamType, Category, Example, LabeledError, PipelineData, ShellError, Signals,
    Signature, Span, Spanned, SyntaxShape, Type,
};
use orch_protocol::{Client, ClientError, Request, Response};

use super::args;
use crate::OrchestratorPlugin;
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
            .input_output_type(Type::Nothing, Type::String)
            .required("id", SyntaxShape::Int, "The task's id.")
            .switch(
                "follow",
                "Keep streaming new output until the task is final.",
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
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = args::task_id(id_arg)?;
        let follow = call.has_flag("follow")?;
        stream_log(
            plugin,
            engine,
            call,
            &Request::Logs { id, follow },
            id_arg.span,
        )
    }
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
