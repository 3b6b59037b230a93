//! `orch edit <id> [command...]`: change a task that has not started.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, TaskChange};

use super::args;
use super::task_draft::TaskDraft;
use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::task_detail;

/// `orch edit`
pub struct Edit;

impl SimplePluginCommand for Edit {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch edit"
    }

    fn description(&self) -> &str {
        "Change a task that has not started (stashed, queued, blocked or delayed): what it runs, its priority, label, environment, parameters or dependencies."
    }

    fn extra_description(&self) -> &str {
        "Only what is given changes; --env, --params and --after replace the whole value. New dependencies (--after) may block a queued task or release a blocked one; a task can only depend on tasks submitted before it. Stash a task first (`orch stash`) to be sure it does not start while you look at it. Workflow steps are edited through their workflow, not here."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![(Type::Nothing, Type::record())])
            .required("id", SyntaxShape::Int, "The task's id.")
            .rest(
                "command",
                SyntaxShape::Any,
                "A new program and its arguments (a list works too: [sh -c 'exit 3']).",
            )
            .named(
                "nu",
                SyntaxShape::String,
                "New Nushell code to run.",
                Some('n'),
            )
            .named(
                "script",
                SyntaxShape::Filepath,
                "A new Nushell script file to run.",
                None,
            )
            .named("priority", SyntaxShape::Int, "A new priority.", Some('p'))
            .named("label", SyntaxShape::String, "A new label.", Some('l'))
            .switch("no-label", "Remove its label.", None)
            .named(
                "env",
                SyntaxShape::Record(Default::default()),
                "New environment variables (replacing all of them).",
                Some('e'),
            )
            .named(
                "params",
                SyntaxShape::Any,
                "New parameters (replacing them).",
                None,
            )
            .named(
                "after",
                SyntaxShape::Any,
                "The task id(s) that must succeed first, replacing its dependencies ([] for none).",
                Some('a'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(&[
            ("orch edit 42 --priority 10", "Move task 42 up the queue"),
            (
                "orch edit 42 [./deploy.sh --canary]",
                "Run another command instead",
            ),
            (
                "orch edit 42 --after [40 41] --no-label",
                "Make it wait for tasks 40 and 41, and remove its label",
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
        match arg_type {
            nu_protocol::engine::ArgType::Positional(0) => {
                crate::completions::ids(plugin, engine, crate::completions::Named::Task)
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
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = args::task_id(id_arg)?;
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let draft = TaskDraft::from_call(call, &cwd, 1)?;
        let mut fields = draft.field_spans();
        let mut edit = draft.into_edit()?;
        if call.has_flag("no-label")? {
            let span = call.get_flag_span("no-label").unwrap_or(call.head);
            if let Some((_, label)) = fields.iter().find(|(f, _)| *f == "label") {
                return Err(LabeledError::new("a label and no label")
                    .with_label("--label here", *label)
                    .with_label("and --no-label here: give one of them", span));
            }
            edit.label = Some(None);
            fields.push(("label", span));
        }
        fields.push(("id", id_arg.span));
        fields.push(("change", call.head));
        let change = TaskChange::Edit(edit);
        let task = plugin
            .call(engine, &Request::ChangeTask { id, change })
            .map_err(|e| labeled(e, call.head, &fields))
            .and_then(|answer| expect_task(answer, call.head))?;
        Ok(task_detail(&task, call.head))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&Edit);
}
