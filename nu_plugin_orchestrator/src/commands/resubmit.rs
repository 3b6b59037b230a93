//! `orch resubmit <id>...`: submit a copy of tasks as new tasks (pueue's `restart`; `orch
//! retry` runs a task again in place).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Span, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response, TaskSpec};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{expect_tasks, labeled, unexpected};
use crate::convert::task_row;

/// `orch resubmit`
pub struct Resubmit;

impl SimplePluginCommand for Resubmit {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch resubmit"
    }

    fn description(&self) -> &str {
        "Submit a copy of each task (its command, settings, parameters, group and dependencies) as a new task, in one durable step; the originals stay as they are."
    }

    fn extra_description(&self) -> &str {
        "A task of any status may be copied, but not a workflow's step (retry or roll back its workflow instead). A start time (`--at`/`--delay`) is not copied: the copy is queued now. `orch retry` runs a failed task again in place instead."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::Any),
                (Type::list(Type::Any), Type::list(Type::record())),
                (Type::record(), Type::list(Type::record())),
                (Type::Int, Type::list(Type::record())),
            ])
            .rest(
                "ids",
                SyntaxShape::Int,
                "The tasks' ids; without one, the ids come from the pipeline (ids, or records with an `id` column).",
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            ("orch resubmit 42", "Run a copy of task 42"),
            (
                "orch tasks --label nightly --status succeeded --limit 1 | orch resubmit",
                "Run last night's job once more, as a new task",
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
        crate::completions::id_argument(plugin, engine, crate::completions::Named::Task, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let named = call.rest::<nu_protocol::Spanned<i64>>(0)?.len();
        let mut ids = args::ids_of_call(call, 0, input)?;
        if ids.is_empty() {
            return Err(LabeledError::new("no task id").with_label(
                "give one or more ids, or pipe in tasks (records with an `id` column)",
                call.head,
            ));
        }
        let mut seen = std::collections::HashSet::new();
        ids.retain(|(id, _)| seen.insert(*id));
        let mut specs = Vec::with_capacity(ids.len());
        for (id, span) in &ids {
            specs.push(copy_of(plugin, engine, call.head, *id, *span)?);
        }
        let tasks = match plugin.call(
            engine,
            &Request::Submit {
                tasks: specs,
                stashed: false,
            },
        ) {
            Ok(answer) => expect_tasks(answer, call.head)?,
            Err(e) => return Err(labeled(e, call.head, &[])),
        };
        let mut rows: Vec<Value> = tasks.iter().map(|t| task_row(t, call.head)).collect();
        if named == 1 {
            return Ok(rows.remove(0));
        }
        Ok(Value::list(rows, call.head))
    }
}

/// The spec of task `id`, to submit again (`span`: where its id was given).
fn copy_of(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    head: Span,
    id: u64,
    span: Span,
) -> Result<TaskSpec, LabeledError> {
    let task = match plugin.call(engine, &Request::Get { id }) {
        Ok(Response::Task { task }) => *task,
        Ok(other) => return Err(unexpected(other, head)),
        Err(e) => return Err(labeled(e, head, &[("id", span)])),
    };
    if let Some(step) = &task.spec.workflow {
        return Err(LabeledError::new("a workflow's step").with_label(
            format!(
                "task {id} is step `{}` of workflow {}: retry or roll back the workflow instead",
                step.step, step.workflow
            ),
            span,
        ));
    }
    let mut spec = task.spec;
    spec.not_before = None;
    Ok(spec)
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Resubmit);
}
