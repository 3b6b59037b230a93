//! `taskserv create`: one taskserv (with its dependencies and add-ons) installed on each
//! selected server.

use orch_protocol::{TaskservRequest, WorkflowKind};
use serde_json::Value;

use super::steps::install_steps;
use super::{Sources, empty_draft, load_infra};
use crate::workflows::taskservs::install_order;
use crate::workflows::{Draft, ExpandError, checks};

/// The steps of a taskserv request.
pub fn expand(r: &TaskservRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let infra = load_infra(&r.target, sources)?;
    let selected = infra.select(&r.servers)?;
    let order = install_order(
        std::slice::from_ref(&r.taskserv),
        sources.extensions.registry(),
    )?;
    let name = format!("taskserv create {} on {}", r.taskserv, infra.name);
    checks::step_count(&name, selected.len().checked_mul(order.len()))?;
    let mut draft = empty_draft(name, WorkflowKind::Taskserv, &r.run);
    for server in selected {
        draft.steps.extend(install_steps(
            server,
            &order,
            &infra,
            None,
            true,
            &Value::Null,
            sources,
        )?);
    }
    Ok(draft)
}
