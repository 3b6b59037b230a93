//! `orch send <id> [text]`: write to the standard input of a running task submitted with
//! `--stdin` (a line, by default), or close it (`--eof`).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{MAX_INPUT_BYTES, Request};

use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::task_row;

/// `orch send`
pub struct Send;

impl SimplePluginCommand for Send {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch send"
    }

    fn description(&self) -> &str {
        "Write a line to the standard input of a running task submitted with --stdin, or close it (--eof)."
    }

    fn extra_description(&self) -> &str {
        "The text goes with a line break unless --raw; at most 64 KiB at once. The request is audited (its size, not what it says) before it is written. A task that reads nothing holds 16 inputs; later ones are dropped, with a line in its log."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![(Type::Nothing, Type::record())])
            .required("id", SyntaxShape::Int, "The running task's id.")
            .optional("text", SyntaxShape::String, "What to write.")
            .switch(
                "raw",
                "Write the text as it is, without a line break.",
                None,
            )
            .switch(
                "eof",
                "Close the task's standard input (after the text, if any).",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            ("orch send 42 yes", "Answer a prompt of task 42"),
            (
                "orch send 42 --eof",
                "End its input (a task reading until the end goes on)",
            ),
            (
                "orch send 42 (open answers.txt) --raw --eof",
                "Write a file's text as it is, then end the input",
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
        match &arg_type {
            nu_protocol::engine::ArgType::Positional(0) => {
                let task = crate::completions::Named::Task;
                crate::completions::ids(plugin, engine, task)
            }
            _ => None,
        }
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let id: Spanned<i64> = call.req(0)?;
        let text: Option<Spanned<String>> = call.opt(1)?;
        let eof = call.has_flag("eof")?;
        if text.is_none() && !eof {
            return Err(LabeledError::new("nothing to send").with_label(
                "give the text to write, or --eof to close the input",
                call.head,
            ));
        }
        let raw = call.has_flag("raw")?;
        let (data, span) = match text {
            Some(text) if raw => (text.item, text.span),
            Some(text) => (text.item + "\n", text.span),
            None => (String::new(), call.head),
        };
        if data.len() > MAX_INPUT_BYTES {
            return Err(LabeledError::new("too much input at once").with_label(
                format!(
                    "{} bytes; at most {MAX_INPUT_BYTES} go at once: send it in parts",
                    data.len()
                ),
                span,
            ));
        }
        let task_id = u64::try_from(id.item).map_err(|_| {
            LabeledError::new("not a task id").with_label("a task id is not negative", id.span)
        })?;
        let request = Request::SendInput {
            id: task_id,
            data,
            eof,
        };
        let task = plugin
            .call(engine, &request)
            .map_err(|e| labeled(e, call.head, &[("id", id.span), ("data", span)]))
            .and_then(|answer| expect_task(answer, call.head))?;
        Ok(task_row(&task, call.head))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Send);
}
