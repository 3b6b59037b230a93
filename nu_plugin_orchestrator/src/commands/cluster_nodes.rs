//! `orch cluster nodes`: the daemons sharing the store, which one leads, and their leases.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::convert;

/// `orch cluster nodes`
pub struct ClusterNodes;

impl SimplePluginCommand for ClusterNodes {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch cluster nodes"
    }

    fn description(&self) -> &str {
        "The nodes of the daemon's cluster (daemons on one PostgreSQL store): role, lease, capacity, labels."
    }

    fn extra_description(&self) -> &str {
        "One row per node the store knows: `leader` (runs the scheduler and the tasks), `standby` (alive, ready to take over) or `down` (its lease ran out). Any node answers. A daemon on redb has no cluster and says so."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch cluster nodes",
                description: "Every node, with its role and lease",
                result: None,
            },
            Example {
                example: "orch cluster nodes | where role == leader | get 0.name",
                description: "The leader's name",
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
        match plugin.call(engine, &Request::Cluster) {
            Ok(Response::Cluster(view)) => Ok(convert::cluster_nodes(&view, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&ClusterNodes);
}
