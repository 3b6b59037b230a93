//! `orch workflow submit taskserv`: install a taskserv (with what it depends on and its
//! add-ons) on servers of an infra.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{TaskservRequest, WorkflowRequest};

use super::workflow_args::{self, InfraArgs, RunArgs};
use crate::OrchestratorPlugin;

/// `orch workflow submit taskserv`
pub struct SubmitTaskserv;

impl SimplePluginCommand for SubmitTaskserv {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow submit taskserv"
    }

    fn description(&self) -> &str {
        "Install a taskserv on servers of an infra: its dependencies first, its add-ons after it (kubernetes brings containerd before and cilium after)."
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required(
                "taskserv",
                SyntaxShape::String,
                "The taskserv (`orch extensions taskservs`).",
            )
            .named(
                "servers",
                SyntaxShape::List(Box::new(SyntaxShape::String)),
                "Hostnames from the infra's settings (default: all of them).",
                Some('s'),
            )
            .category(Category::Custom("orchestrator".into()));
        workflow_args::run_flags(workflow_args::infra_flags(signature))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch workflow submit taskserv kubernetes --infra my-project --check | get waves",
                description: "The install waves of kubernetes on every server of the infra",
                result: None,
            },
            Example {
                example: "orch workflow submit taskserv redis --infra my-project --servers [web-01] --wait",
                description: "Install redis on web-01 and wait until it is done",
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
        let infra = InfraArgs::read(engine, call)?;
        let run = RunArgs::read(call)?;
        let request = WorkflowRequest::Taskserv(TaskservRequest {
            target: orch_protocol::InfraTarget {
                infra: infra.required_infra(call)?,
                settings: infra.settings,
                workspace: Some(infra.workspace),
            },
            taskserv: call.req(0)?,
            servers: super::flag(call, "servers")?.unwrap_or_default(),
            run: orch_protocol::RunOptions {
                check_mode: run.check_mode,
                wait: run.wait,
                priority: run.priority,
                parallel_limit: run.parallel_limit,
                rollback_enabled: run.rollback_enabled,
            },
        });
        workflow_args::submit(plugin, engine, call, request)
    }
}

#[test]
fn test_examples() {
    crate::commands::test_examples(&SubmitTaskserv);
}
