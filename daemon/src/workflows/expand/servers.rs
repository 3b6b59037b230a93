//! `servers create`: each selected server's creation, then the taskservs its settings
//! list for it.

use orch_protocol::{ServersRequest, WorkflowKind};
use serde_json::Value;

use super::steps::{create_step, install_steps};
use super::{Sources, empty_draft, load_infra};
use crate::workflows::taskservs::install_order;
use crate::workflows::{Draft, ExpandError, checks};

/// The steps of a servers request.
pub fn expand(r: &ServersRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let infra = load_infra(&r.target, sources)?;
    let selected = infra.select(&r.servers)?;
    let orders = selected
        .iter()
        .map(|server| {
            install_order(&server.taskservs, sources.extensions.registry())
                .map_err(|e| e.within(format!("server `{}`", server.hostname)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = format!("servers create {}", infra.name);
    checks::step_count(&name, checks::created_servers(&orders))?;
    let mut draft = empty_draft(name, WorkflowKind::Servers, &r.run);
    for (server, order) in selected.into_iter().zip(orders) {
        let create = create_step(server, &infra, sources)?;
        let create_id = create.id.clone();
        draft.steps.push(create);
        draft.steps.extend(install_steps(
            server,
            &order,
            &infra,
            Some(&create_id),
            true,
            &Value::Null,
            sources,
        )?);
    }
    Ok(draft)
}
