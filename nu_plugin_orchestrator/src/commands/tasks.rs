//! `orch tasks`: list tasks, newest first, fetched a page at a time (each page starts
//! below the last id of the one before) and streamed as rows: the first rows come at once
//! however many tasks match, and neither side holds the whole list.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, ListStream, PipelineData, Signals, Signature, Span,
    SyntaxShape, Type, Value,
};
use orch_protocol::{Client, ClientError, Request, Task, TaskFilter};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{expect_tasks, labeled, whole};
use crate::convert::task_row;

/// How many tasks one page asks for.
const PAGE: usize = 1000;

/// `orch tasks`
pub struct Tasks;

impl PluginCommand for Tasks {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch tasks"
    }

    fn description(&self) -> &str {
        "List tasks, newest first, as a table."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .named(
                "status",
                SyntaxShape::Any,
                "Only tasks in this status (or list of statuses): blocked, delayed, queued, running, retry_waiting, succeeded, failed, cancelled, dependency_failed.",
                Some('s'),
            )
            .named("label", SyntaxShape::String, "Only tasks with this label.", Some('l'))
            .named("limit", SyntaxShape::Int, "At most this many tasks.", Some('n'))
            .named(
                "before",
                SyntaxShape::Int,
                "Only tasks with a smaller id (a cursor: the last id of a page).",
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
        match &arg_type {
            nu_protocol::engine::ArgType::Flag(flag) if flag == "status" => {
                Some(crate::completions::task_statuses())
            }
            _ => crate::completions::flag_value(plugin, engine, &arg_type),
        }
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch tasks",
                description: "Every task",
                result: None,
            },
            Example {
                example: "orch tasks --status [failed dependency_failed] --limit 20",
                description: "The 20 newest tasks that did not succeed",
                result: None,
            },
            Example {
                example: "orch tasks --label deploy | where duration > 1min",
                description: "Slow tasks labelled deploy",
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
        let before: Option<i64> = call.get_flag("before")?;
        let before = before
            .map(|b| u64::try_from(b).map_err(|_| negative_cursor(call)))
            .transpose()?;
        let filter = TaskFilter {
            status: args::statuses(call.get_flag_value("status"))?,
            label: call.get_flag("label")?,
            limit: None,
            before,
        };
        let head = call.head;
        let client = plugin.connect(engine).map_err(|e| labeled(e, head, &[]))?;
        let mut pages = Pages {
            client,
            filter,
            left: args::limit_flag(call)?.unwrap_or(usize::MAX),
            page: Vec::new().into_iter(),
            last: false,
            signals: engine.signals().clone(),
            head,
        };
        pages.fetch().map_err(|e| labeled(e, head, &[]))?;
        let signals = engine.signals().clone();
        Ok(PipelineData::list_stream(
            ListStream::new(pages, head, signals),
            None,
        ))
    }
}

fn negative_cursor(call: &EvaluatedCall) -> LabeledError {
    LabeledError::new("invalid cursor").with_label(
        "`--before` must not be negative",
        call.get_flag_span("before").unwrap_or(call.head),
    )
}

/// The rows of `orch tasks`, a page at a time over the command's own connection.
struct Pages {
    client: Client,
    filter: TaskFilter,
    /// How many rows the limit still allows.
    left: usize,
    page: std::vec::IntoIter<Task>,
    /// The page held is the last one.
    last: bool,
    signals: Signals,
    head: Span,
}

impl Pages {
    /// Asks for the next page (below the last id seen).
    fn fetch(&mut self) -> Result<(), ClientError> {
        let size = self.left.min(PAGE);
        self.filter.limit = Some(size);
        let request = Request::List {
            filter: self.filter.clone(),
        };
        let signals = self.signals.clone();
        let interrupted = move || signals.interrupted();
        let answer = self.client.call_interruptible(&request, &interrupted)?;
        let answer = whole(&mut self.client, answer, &interrupted)?;
        let tasks =
            expect_tasks(answer, self.head).map_err(|e| ClientError::Unexpected(e.to_string()))?;
        self.last = tasks.len() < size;
        self.left -= tasks.len();
        if let Some(oldest) = tasks.last() {
            self.filter.before = Some(oldest.id);
        }
        self.page = tasks.into_iter();
        Ok(())
    }
}

impl Iterator for Pages {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(task) = self.page.next() {
                return Some(task_row(&task, self.head));
            }
            if self.last || self.left == 0 {
                return None;
            }
            if let Err(e) = self.fetch() {
                self.last = true;
                let error = labeled(e, self.head, &[]);
                return Some(Value::error(error.into(), self.head));
            }
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Tasks);
}
