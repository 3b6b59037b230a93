//! `orch workflow list`: workflows, newest first.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::workflow_values::workflow_row;

/// `orch workflow list`
pub struct WorkflowList;

impl SimplePluginCommand for WorkflowList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow list"
    }

    fn description(&self) -> &str {
        "List workflows, newest first, with their status and step counts (summaries: `orch workflow show` lists the steps)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .named(
                "limit",
                SyntaxShape::Int,
                "At most this many (default 100, at most 1000).",
                Some('n'),
            )
            .named(
                "before",
                SyntaxShape::Int,
                "Only workflows with a smaller id (the page after one that ended there).",
                Some('b'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch workflow list | where status == failed",
                description: "The workflows that failed",
                result: None,
            },
            Example {
                example: "orch workflow list --limit 50 --before 1200",
                description: "The 50 workflows before workflow 1200",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let limit = args::limit_flag(call)?;
        let before = match args::flag::<i64>(call, "before")? {
            None => None,
            Some(b) => Some(u64::try_from(b).map_err(|_| {
                LabeledError::new("invalid cursor").with_label(
                    "a workflow id is not negative",
                    call.get_flag_span("before").unwrap_or(call.head),
                )
            })?),
        };
        let answer = plugin
            .call(engine, &Request::Workflows { limit, before })
            .map_err(|e| labeled(e, call.head, &[]))?;
        match answer {
            Response::Workflows { workflows, .. } => Ok(Value::list(
                workflows
                    .iter()
                    .map(|w| workflow_row(w, call.head))
                    .collect(),
                call.head,
            )),
            other => Err(unexpected(other, call.head)),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&WorkflowList);
}
