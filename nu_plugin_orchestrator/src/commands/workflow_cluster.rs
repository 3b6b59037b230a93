//! `orch workflow submit cluster`: create a cluster from a cluster definition.

use nu_protocol::SyntaxShape;
use orch_protocol::{ClusterRequest, WorkflowRequest};

use super::args;
use super::workflow_args::OnInfra;

/// `orch workflow submit cluster`
pub const CLUSTER: OnInfra = OnInfra {
    name: "orch workflow submit cluster",
    description: "Create a cluster from a cluster definition: its nodes as servers, their taskservs, the checks once every member is installed, and its setup.",
    first: Some(crate::completions::Names::Clusters),
    arguments: |signature| {
        signature
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
    },
    examples: &[(
        "orch workflow submit cluster etcd-cluster --infra lab --rollback --wait",
        "Create a three-member etcd cluster, rolled back if a step fails",
    )],
    request: |call, target, run| {
        Ok(WorkflowRequest::Cluster(ClusterRequest {
            target,
            cluster: call.req(0)?,
            provider: args::flag(call, "provider")?,
            run,
        }))
    },
};

#[test]
fn test_examples() {
    super::examples::test_examples(&CLUSTER);
}
