//! The pieces steps are made of, shared by every kind of workflow: a generated Nushell
//! step on an infra, the provider module of a set of servers, a server's creation, and a
//! server's taskserv installs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use orch_protocol::{TaskKind, TaskSpec, TaskservInfo};
use serde_json::{Value, json};

use super::Sources;
use crate::extensions::Registry;
use crate::workflows::infra::{Infra, Server};
use crate::workflows::taskservs::{self, script};
use crate::workflows::{DraftStep, ExpandError, secrets, snippets};

/// How long a generated provider or taskserv step may run.
const STEP_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// A generated Nushell step of `infra` running `code` with the context `ctx`. The
/// context's secrets become references into the infra's settings file, which the step
/// resolves when it runs (see [`secrets`]; only steps with references carry that code).
pub fn nu_step(code: String, mut ctx: Value, infra: &Infra, sources: &Sources) -> TaskSpec {
    let has_secrets = secrets::reference(&mut ctx, &infra.settings);
    if let Some(context) = ctx.get_mut("infra").and_then(Value::as_object_mut) {
        context.insert("settings_file".into(), json!(infra.settings_file));
    }
    let code = if has_secrets {
        format!("{}{code}", secrets::RESOLVE_NU)
    } else {
        code
    };
    let mut spec = TaskSpec::command("nu", Vec::new());
    spec.kind = TaskKind::Nu { code };
    spec.params = ctx;
    spec.cwd = Some(infra.dir.clone());
    spec.timeout_ms = Some(STEP_TIMEOUT_MS);
    spec.env.insert(
        "PROVISIONING_MODULES".into(),
        sources.extensions.modules_dir().display().to_string(),
    );
    spec
}

/// The provider module of every server in `servers`, which must share one provider.
pub fn provider_module(
    servers: &[&Server],
    override_provider: Option<&str>,
    registry: &Registry,
    what: &str,
) -> Result<PathBuf, ExpandError> {
    let mut names: BTreeSet<&str> = servers.iter().map(|s| s.provider.as_str()).collect();
    if let Some(p) = override_provider {
        names = BTreeSet::from([p]);
    }
    if names.len() > 1 {
        let list: Vec<&str> = names.into_iter().collect();
        return Err(ExpandError::Invalid(format!(
            "{what} mixes providers ({}): split it into one per provider",
            list.join(", ")
        )));
    }
    let name = names.into_iter().next().unwrap_or("local");
    let provider = registry.provider(name).map_err(ExpandError::Unknown)?;
    Ok(provider.dir.join(&provider.module))
}

/// Adds the fields of `extra` to the record `ctx`.
pub fn merge(ctx: &mut Value, extra: &Value) {
    if let (Some(map), Some(extra)) = (ctx.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            map.insert(k.clone(), v.clone());
        }
    }
}

/// `create:<host>` with its compensation `delete-server`.
pub fn create_step(
    server: &Server,
    infra: &Infra,
    sources: &Sources,
) -> Result<DraftStep, ExpandError> {
    let module = provider_module(&[server], None, sources.extensions.registry(), "a server")?;
    let id = format!("create:{}", server.hostname);
    let ctx = json!({
        "step": id,
        "infra": infra.context(),
        "server": server.record,
        "servers": [server.record],
    });
    Ok(DraftStep {
        description: format!("create server {} ({})", server.hostname, server.provider),
        spec: nu_step(
            snippets::create_servers(&module),
            ctx.clone(),
            infra,
            sources,
        ),
        rollback: Some(nu_step(
            snippets::delete_servers(&module),
            ctx,
            infra,
            sources,
        )),
        dependencies: Vec::new(),
        soft_dependencies: Vec::new(),
        id,
        fill_workflow_id: true,
    })
}

/// Steps `install:<t>@<host>` for each taskserv of `order` on `server`, after `after`
/// (the server's creation, when the workflow creates it). With `with_check` the check
/// script runs in the same step right after the install.
pub fn install_steps(
    server: &Server,
    order: &[&TaskservInfo],
    infra: &Infra,
    after: Option<&str>,
    with_check: bool,
    extra_ctx: &Value,
    sources: &Sources,
) -> Result<Vec<DraftStep>, ExpandError> {
    let module = provider_module(&[server], None, sources.extensions.registry(), "a server")?;
    let mut steps = Vec::new();
    for t in order {
        let id = format!("install:{}@{}", t.name, server.hostname);
        let mut ctx = json!({
            "step": id,
            "infra": infra.context(),
            "server": server.record,
            "servers": [server.record],
            "taskservs": taskservs::context(order),
        });
        merge(&mut ctx, extra_ctx);
        let mut scripts = vec![script(t, "install").expect("install is required")];
        if with_check {
            scripts.extend(script(t, "check"));
        }
        let plan = [(*t, scripts.iter().map(PathBuf::as_path).collect())];
        let rollback = script(t, "rollback").map(|r| {
            let plan = [(*t, vec![r.as_path()])];
            nu_step(
                snippets::rollback_taskservs(&module, &plan),
                ctx.clone(),
                infra,
                sources,
            )
        });
        let mut dependencies: Vec<String> = after.map(str::to_string).into_iter().collect();
        dependencies.extend(
            order
                .iter()
                .filter(|o| t.dependencies.contains(&o.name) || o.addons.contains(&t.name))
                .map(|o| format!("install:{}@{}", o.name, server.hostname)),
        );
        steps.push(DraftStep {
            description: format!("install {} {} on {}", t.name, t.version, server.hostname),
            spec: nu_step(
                snippets::install_taskservs(&module, &plan),
                ctx,
                infra,
                sources,
            ),
            rollback,
            dependencies,
            soft_dependencies: Vec::new(),
            id,
            fill_workflow_id: true,
        });
    }
    Ok(steps)
}

/// Script lists as the borrowed form the snippets take.
pub fn as_plan<'t>(
    plan: &'t [(&'t TaskservInfo, Vec<PathBuf>)],
) -> Vec<(&'t TaskservInfo, Vec<&'t Path>)> {
    plan.iter()
        .map(|(t, s)| (*t, s.iter().map(PathBuf::as_path).collect()))
        .collect()
}
