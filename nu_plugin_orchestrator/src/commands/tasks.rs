//! `orch tasks`: list tasks, newest first.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, ListStream, PipelineData, Signature, SyntaxShape, Type,
};
use orch_protocol::{Request, TaskFilter};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{expect_tasks, labeled};
use crate::convert::task_row;

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
                "Only tasks in this status (or list of statuses): blocked, queued, running, retry_waiting, succeeded, failed, cancelled, dependency_failed.",
                Some('s'),
            )
            .named("label", SyntaxShape::String, "Only tasks with this label.", Some('l'))
            .named("limit", SyntaxShape::Int, "At most this many tasks.", Some('n'))
            .category(Category::Custom("orchestrator".into()))
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
        let filter = TaskFilter {
            status: args::statuses(call.get_flag_value("status"))?,
            label: call.get_flag("label")?,
            limit: args::limit_flag(call)?,
        };
        let answer = plugin
            .call(engine, &Request::List { filter })
            .map_err(|e| labeled(e, call.head, &[]))?;
        let tasks = expect_tasks(answer, call.head)?;
        let head = call.head;
        let rows = tasks.into_iter().map(move |t| task_row(&t, head));
        Ok(PipelineData::list_stream(
            ListStream::new(rows, head, engine.signals().clone()),
            None,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Tasks);
}
