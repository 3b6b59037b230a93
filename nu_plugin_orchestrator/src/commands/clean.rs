//! `orch clean`: remove finished tasks and their logs.

use std::time::Duration;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value, record};
use orch_protocol::{CleanFilter, MAX_CLEAN_BATCH, Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};

/// `orch clean`
pub struct Clean;

impl SimplePluginCommand for Clean {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch clean"
    }

    fn description(&self) -> &str {
        "Remove finished tasks (succeeded, failed, cancelled, dependency_failed) and their logs from the store; with --workflows, finished workflows too."
    }

    fn extra_description(&self) -> &str {
        "A finished task that a kept task depends on stays (retrying the kept task needs it). Workflow steps go only with their workflow (--workflows), as one unit, once the workflow and all its tasks are final. The removal is made in batches of at most 10,000 records, each one durable commit with its audit entry. The event log and the audit log keep their history (see the daemon's --retain-events for the former)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .named(
                "older-than",
                SyntaxShape::Duration,
                "Only tasks that finished at least this long ago.",
                Some('o'),
            )
            .named(
                "status",
                SyntaxShape::Any,
                "Only tasks in this final status (or list of them).",
                Some('s'),
            )
            .named(
                "label",
                SyntaxShape::String,
                "Only tasks with this label (and workflows with a task of it).",
                Some('l'),
            )
            .switch(
                "workflows",
                "Also remove finished workflows with their steps, compensations and logs.",
                Some('w'),
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
                example: "orch clean",
                description: "Remove every finished task",
                result: None,
            },
            Example {
                example: "orch clean --older-than 7day --status succeeded",
                description: "Remove tasks that succeeded more than a week ago",
                result: None,
            },
            Example {
                example: "orch clean --workflows --older-than 30day",
                description: "Remove tasks and whole workflows that finished more than 30 days ago",
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
        let head = call.head;
        let older_than = match call.get_flag::<Value>("older-than")? {
            Some(v) => {
                let nanos = v.as_duration()?;
                let age = u64::try_from(nanos).map_err(|_| {
                    LabeledError::new("invalid age")
                        .with_label("the age must not be negative", v.span())
                })?;
                Some(Duration::from_nanos(age).as_millis() as u64)
            }
            None => None,
        };
        let filter = CleanFilter {
            older_than_ms: older_than,
            status: args::statuses(call.get_flag_value("status"))?,
            label: call.get_flag("label")?,
            workflows: call.has_flag("workflows")?,
            limit: Some(MAX_CLEAN_BATCH),
        };
        let status_span = call.get_flag_span("status").unwrap_or(head);
        let (mut ids, mut workflows) = (Vec::new(), Vec::new());
        // One batch per request, until a batch is not full.
        loop {
            let request = Request::Clean {
                filter: filter.clone(),
            };
            let (batch, batch_workflows) = match plugin.call(engine, &request) {
                Ok(Response::Removed { ids, workflows }) => (ids, workflows),
                Ok(other) => return Err(unexpected(other, head)),
                Err(e) => return Err(labeled(e, head, &[("status", status_span)])),
            };
            let full = batch.len() + batch_workflows.len() >= MAX_CLEAN_BATCH;
            ids.extend(batch);
            workflows.extend(batch_workflows);
            if !full {
                break;
            }
        }
        let ints = |ids: &[u64]| ids.iter().map(|id| Value::int(*id as i64, head)).collect();
        Ok(Value::record(
            record! {
                "removed" => Value::int(ids.len() as i64, head),
                "ids" => Value::list(ints(&ids), head),
                "workflows" => Value::list(ints(&workflows), head),
            },
            head,
        ))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Clean);
}
