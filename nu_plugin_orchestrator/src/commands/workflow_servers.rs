//! `orch workflow submit servers`: create servers of an infra (and their taskservs).

use nu_protocol::SyntaxShape;
use orch_protocol::{ServersRequest, WorkflowRequest};

use super::workflow_args::OnInfra;

/// `orch workflow submit servers`
pub const SERVERS: OnInfra = OnInfra {
    name: "orch workflow submit servers",
    description: "Create servers of an infra with their providers, then install the taskservs its settings list for them.",
    first: None,
    arguments: |signature| {
        signature.rest(
            "servers",
            SyntaxShape::String,
            "Hostnames from the infra's settings (all of them when none is given).",
        )
    },
    examples: &[
        (
            "orch workflow submit servers web-01 web-02 --infra production --wait",
            "Create two servers of infra `production` and wait for them",
        ),
        (
            "orch workflow submit servers --infra production --check | get waves",
            "What creating every server of the infra would run, wave by wave",
        ),
    ],
    request: |call, target, run| {
        Ok(WorkflowRequest::Servers(ServersRequest {
            target,
            servers: call.rest(0)?,
            run,
        }))
    },
};

#[test]
fn test_examples() {
    super::examples::test_examples(&SERVERS);
}
