//! `orch workflow submit servers`: create servers of an infra (and their taskservs).

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{ServersRequest, WorkflowRequest};

use super::workflow_args::{self, InfraArgs, RunArgs};
use crate::OrchestratorPlugin;

/// `orch workflow submit servers`
pub struct SubmitServers;

impl SimplePluginCommand for SubmitServers {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow submit servers"
    }

    fn description(&self) -> &str {
        "Create servers of an infra with their providers, then install the taskservs its settings list for them."
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .rest(
                "servers",
                SyntaxShape::String,
                "Hostnames from the infra's settings (all of them when none is given).",
            )
            .category(Category::Custom("orchestrator".into()));
        workflow_args::run_flags(workflow_args::infra_flags(signature))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch workflow submit servers web-01 web-02 --infra production --wait",
                description: "Create two servers of infra `production` and wait for them",
                result: None,
            },
            Example {
                example: "orch workflow submit servers --infra production --check | get waves",
                description: "What creating every server of the infra would run, wave by wave",
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
        let request = WorkflowRequest::Servers(ServersRequest {
            target: orch_protocol::InfraTarget {
                infra: infra.required_infra(call)?,
                settings: infra.settings,
                workspace: Some(infra.workspace),
            },
            servers: call.rest(0)?,
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
    crate::commands::test_examples(&SubmitServers);
}
