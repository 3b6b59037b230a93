//! `orch workflow submit cluster`: create a cluster from a cluster definition.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, SyntaxShape, Type, Value};
use orch_protocol::{ClusterRequest, WorkflowRequest};

use super::workflow_args::{self, InfraArgs, RunArgs};
use crate::OrchestratorPlugin;

/// `orch workflow submit cluster`
pub struct SubmitCluster;

impl SimplePluginCommand for SubmitCluster {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch workflow submit cluster"
    }

    fn description(&self) -> &str {
        "Create a cluster from a cluster definition: its nodes as servers, their taskservs, the checks once every member is installed, and its setup."
    }

    fn signature(&self) -> Signature {
        let signature = Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::record())
            .required(
                "cluster",
                SyntaxShape::String,
                "The cluster definition (`orch extensions clusters`).",
            )
            .named(
                "provider",
                SyntaxShape::String,
                "The provider of its nodes (default: the infra's).",
                None,
            )
            .category(Category::Custom("orchestrator".into()));
        workflow_args::run_flags(workflow_args::infra_flags(signature))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch workflow submit cluster etcd-cluster --infra lab --rollback --wait",
            description: "Create a three-member etcd cluster, rolled back if a step fails",
            result: None,
        }]
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
        let request = WorkflowRequest::Cluster(ClusterRequest {
            target: orch_protocol::InfraTarget {
                infra: infra.required_infra(call)?,
                settings: infra.settings,
                workspace: Some(infra.workspace),
            },
            cluster: call.req(0)?,
            provider: super::flag(call, "provider")?,
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
    crate::commands::test_examples(&SubmitCluster);
}
