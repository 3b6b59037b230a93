//! `orch workflow submit batch`: a batch workflow from a file or a record.

use std::path::PathBuf;

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};

use super::batch_file;
use super::workflow_args::{self, InfraArgs};
use crate::OrchestratorPlugin;

/// `orch workflow submit batch`
pub struct SubmitBatch;

impl SimplePluginCommand for SubmitBatch {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow submit batch"
    }

    fn description(&self) -> &str {
        "Submit a batch workflow: operations with hard and soft dependencies, a parallel limit and optional rollback, from a TOML, NUON, JSON or Nickel file, or a record."
    }

    fn extra_description(&self) -> &str {
        "The definition has `name`, `version`, `parallel_limit`, `rollback_enabled`, `priority` and `operations: [{id, type, dependencies, soft_dependencies, ...}]`; types: server_create, server_batch, taskserv_create, taskserv_batch, nu, script, command. A top-level `batch_workflow` wrapper (as in Nickel definitions) is accepted."
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::record()),
                (Type::record(), Type::record()),
            ])
            .optional(
                "file",
                SyntaxShape::Filepath,
                "The workflow file (.toml, .nuon, .json, .ncl).",
            )
            .switch(
                "check",
                "Plan only: return the waves that would run, run nothing.",
                Some('c'),
            )
            .switch("wait", "Return once the workflow has finished.", Some('w'))
            .category(Category::Custom("orchestrator".into()));
        workflow_args::infra_flags(signature)
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
                example: "orch workflow submit batch deploy.toml --infra production --wait",
                description: "Run the batch workflow in deploy.toml on infra production",
                result: None,
            },
            Example {
                example: "{name: demo, operations: [{id: a, type: nu, nu: 'print a'} {id: b, type: nu, nu: 'print b', dependencies: [a]}]} | orch workflow submit batch --check",
                description: "Plan a two-step workflow given as a record",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let infra = InfraArgs::read(engine, call)?;
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let file: Option<Spanned<String>> = call.opt(0)?;
        let loaded = match (&file, input) {
            (Some(file), _) => batch_file::from_file(file, &cwd)?,
            (None, Value::Record { .. }) => batch_file::from_value(input, &cwd)?,
            (None, _) => {
                return Err(LabeledError::new("no workflow")
                    .with_label("give a workflow file, or pipe in a record", call.head));
            }
        };
        let request = loaded.request(infra, call.has_flag("check")?, call.has_flag("wait")?);
        workflow_args::submit(plugin, engine, call, request).map_err(|e| {
            if file.is_some() {
                e.with_help(format!(
                    "the workflow came from {}",
                    file.as_ref().map_or("", |f| f.item.as_str())
                ))
            } else {
                e
            }
        })
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&SubmitBatch);
}
