//! `cluster create`: a cluster definition's nodes created as servers, their taskservs
//! installed, then the members' checks once every install is done, then the setup.

use orch_protocol::{ClusterInfo, ClusterRequest, TaskservInfo, WorkflowKind};
use serde_json::{Value, json};

use super::steps::{create_step, install_steps, merge, nu_step, provider_module};
use super::{Sources, empty_draft, load_infra};
use crate::workflows::infra::{Infra, Server};
use crate::workflows::taskservs::{self, install_order, script};
use crate::workflows::{Draft, DraftStep, ExpandError, checks, snippets};

/// The steps of a cluster request.
pub fn expand(r: &ClusterRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let infra = load_infra(&r.target, sources)?;
    let definition = sources
        .extensions
        .registry()
        .cluster(&r.cluster)
        .map_err(ExpandError::Unknown)?;
    let provider = r
        .provider
        .clone()
        .or_else(|| infra.provider.clone())
        .ok_or_else(|| {
            ExpandError::Invalid(format!(
                "cluster `{}`: no provider given and infra `{}` sets no default `provider`",
                r.cluster, infra.name
            ))
        })?;
    sources
        .extensions
        .registry()
        .provider(&provider)
        .map_err(ExpandError::Unknown)?;
    let nodes = nodes(definition, &provider, &infra);
    let orders = nodes
        .iter()
        .map(|node| install_order(&node.taskservs, sources.extensions.registry()))
        .collect::<Result<Vec<_>, _>>()?;
    // Members of a cluster become healthy together: checks run once every install is done.
    let checked: Vec<(&Server, &TaskservInfo)> = nodes
        .iter()
        .zip(&orders)
        .flat_map(|(node, order)| order.iter().map(move |t| (node, *t)))
        .filter(|(_, t)| script(t, "check").is_some())
        .collect();
    let name = format!("cluster create {} on {}", definition.name, infra.name);
    let count = checks::created_servers(&orders)
        .and_then(|n| n.checked_add(checked.len()))
        .and_then(|n| n.checked_add(usize::from(definition.setup.is_some())));
    checks::step_count(&name, count)?;
    let cluster_ctx = json!({
        "cluster": {"name": definition.name, "definition": definition.name,
                    "nodes": nodes.iter().map(|n| &n.record).collect::<Vec<_>>()},
        "node_servers": nodes.iter().map(|n| (n.hostname.clone(), n.record.clone()))
            .collect::<serde_json::Map<_, _>>(),
    });
    let mut draft = empty_draft(name, WorkflowKind::Cluster, &r.run);
    // Checks and setup wait for every node to exist and every install to be done.
    let (mut before_checks, mut installs) = (Vec::new(), Vec::new());
    for (node, order) in nodes.iter().zip(&orders) {
        let mut create = create_step(node, &infra, sources)?;
        merge(&mut create.spec.params, &cluster_ctx);
        if let Some(rollback) = &mut create.rollback {
            merge(&mut rollback.params, &cluster_ctx);
        }
        let create_id = create.id.clone();
        before_checks.push(create_id.clone());
        draft.steps.push(create);
        let steps = install_steps(
            node,
            order,
            &infra,
            Some(&create_id),
            false,
            &cluster_ctx,
            sources,
        )?;
        installs.extend(steps.iter().map(|s| s.id.clone()));
        draft.steps.extend(steps);
    }
    // The creations, then the installs, are the dependencies of the checks and the setup.
    before_checks.extend(installs);
    let module = provider_module(
        &nodes.iter().collect::<Vec<_>>(),
        None,
        sources.extensions.registry(),
        "the cluster",
    )?;
    let on_cluster = Cluster {
        infra: &infra,
        context: &cluster_ctx,
        module: &module,
        sources,
    };
    let mut before_setup = before_checks.clone();
    for (node, t) in checked {
        let check = on_cluster.check(node, t, before_checks.clone());
        before_setup.push(check.id.clone());
        draft.steps.push(check);
    }
    if let Some(setup) = &definition.setup {
        draft
            .steps
            .push(on_cluster.setup(definition, setup, before_setup));
    }
    Ok(draft)
}

/// The definition's nodes as servers of the infra, on `provider`.
fn nodes(definition: &ClusterInfo, provider: &str, infra: &Infra) -> Vec<Server> {
    definition
        .nodes
        .iter()
        .map(|n| Server {
            hostname: n.hostname.clone(),
            provider: provider.to_string(),
            taskservs: n.taskservs.clone(),
            record: json!({
                "hostname": n.hostname, "role": n.role, "taskservs": n.taskservs,
                "provider": provider, "infra": infra.name,
            }),
        })
        .collect()
}

/// What the cluster-wide steps (checks, setup) run with.
struct Cluster<'a> {
    infra: &'a Infra,
    context: &'a Value,
    module: &'a std::path::Path,
    sources: &'a Sources<'a>,
}

impl Cluster<'_> {
    /// `check:<t>@<host>`: `t`'s check script on `node`, after `after`.
    fn check(&self, node: &Server, t: &TaskservInfo, after: Vec<String>) -> DraftStep {
        let id = format!("check:{}@{}", t.name, node.hostname);
        let mut ctx = json!({"step": id, "infra": self.infra.context(), "server": node.record,
                              "servers": [node.record], "taskservs": taskservs::context(&[t])});
        merge(&mut ctx, self.context);
        let check = script(t, "check").expect("only taskservs with a check script");
        let plan = [(t.name.clone(), vec![check.as_path()])];
        DraftStep {
            description: format!("check {} on {}", t.name, node.hostname),
            spec: nu_step(
                snippets::run_taskserv_scripts(self.module, &plan),
                ctx,
                self.infra,
                self.sources,
            ),
            rollback: None,
            dependencies: after,
            soft_dependencies: Vec::new(),
            id,
            fill_workflow_id: true,
        }
    }

    /// `setup:<cluster>`: the definition's setup script, after `after`.
    fn setup(&self, definition: &ClusterInfo, setup: &str, after: Vec<String>) -> DraftStep {
        let id = format!("setup:{}", definition.name);
        let mut ctx = json!({"step": id, "infra": self.infra.context()});
        merge(&mut ctx, self.context);
        let code = snippets::cluster_setup(self.module, &definition.dir.join(setup));
        DraftStep {
            description: format!("set up cluster {}", definition.name),
            spec: nu_step(code, ctx, self.infra, self.sources),
            rollback: None,
            dependencies: after,
            soft_dependencies: Vec::new(),
            id,
            fill_workflow_id: true,
        }
    }
}
