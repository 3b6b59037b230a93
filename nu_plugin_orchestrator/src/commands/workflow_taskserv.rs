//! `orch workflow submit taskserv`: install a taskserv (with what it depends on and its
//! add-ons) on servers of an infra.

use nu_protocol::SyntaxShape;
use orch_protocol::{TaskservRequest, WorkflowRequest};

use super::args;
use super::workflow_args::OnInfra;

/// `orch workflow submit taskserv`
pub const TASKSERV: OnInfra = OnInfra {
    name: "orch workflow submit taskserv",
    description: "Install a taskserv on servers of an infra: its dependencies first, its add-ons after it (kubernetes brings containerd before and cilium after).",
    first: Some(crate::completions::Names::Taskservs),
    arguments: |signature| {
        signature
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
    },
    examples: &[
        (
            "orch workflow submit taskserv kubernetes --infra my-project --check | get waves",
            "The install waves of kubernetes on every server of the infra",
        ),
        (
            "orch workflow submit taskserv redis --infra my-project --servers [web-01] --wait",
            "Install redis on web-01 and wait until it is done",
        ),
    ],
    request: |call, target, run| {
        Ok(WorkflowRequest::Taskserv(TaskservRequest {
            target,
            taskserv: call.req(0)?,
            servers: args::flag(call, "servers")?.unwrap_or_default(),
            run,
        }))
    },
};

#[test]
fn test_examples() {
    super::examples::test_examples(&TASKSERV);
}
