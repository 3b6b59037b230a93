//! Turning a workflow request into steps: reading the infra, resolving providers and
//! taskservs (with their dependencies and add-ons), and writing each step's task.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use orch_protocol::{
    BatchRequest, ClusterRequest, Operation, ServersRequest, TaskKind, TaskSpec, TaskservInfo,
    TaskservRequest, WorkflowKind, WorkflowRequest,
};
use serde_json::{Value, json};

use super::infra::{Infra, Place, Server};
use super::{Draft, DraftStep, MAX_STEPS};
use super::{secrets, snippets};
use crate::extensions::Registry;

/// How long a generated provider or taskserv step may run.
const STEP_TIMEOUT_MS: u64 = 30 * 60 * 1000;

/// What expansion reads besides the request.
pub struct Sources<'a> {
    /// The extensions.
    pub registry: &'a Registry,
    /// The workspace used when the request names none.
    pub workspace: &'a Path,
    /// The daemon's data directory (never an infra, nor a script's directory).
    pub data_dir: &'a Path,
}

/// Expands a request into its steps (not yet ordered or checked for cycles). The number
/// of steps is computed, and checked against [`MAX_STEPS`], before any step is built.
pub fn expand(request: &WorkflowRequest, sources: &Sources) -> Result<Draft, String> {
    let mut draft = match request {
        WorkflowRequest::Servers(r) => servers(r, sources)?,
        WorkflowRequest::Taskserv(r) => taskserv(r, sources)?,
        WorkflowRequest::Cluster(r) => cluster(r, sources)?,
        WorkflowRequest::Batch(r) => batch(r, sources)?,
    };
    draft.request = serde_json::to_value(request).expect("requests serialize");
    Ok(draft)
}

/// Where the request's infra is looked up: its workspace (already confined to the
/// daemon's when the submitter may not choose) or the daemon's.
fn place<'a>(given: &'a Option<PathBuf>, sources: &'a Sources) -> Place<'a> {
    Place {
        workspace: given.as_deref().unwrap_or(sources.workspace),
        data_dir: sources.data_dir,
    }
}

/// Refuses a workflow of more than [`MAX_STEPS`] steps before its steps are built.
fn check_step_count(what: &str, count: Option<usize>) -> Result<(), String> {
    match count {
        Some(n) if n <= MAX_STEPS => Ok(()),
        Some(n) => Err(format!(
            "{what} would have {n} steps; the limit is {MAX_STEPS}"
        )),
        None => Err(format!("{what} would have more than {MAX_STEPS} steps")),
    }
}

fn empty_draft(name: String, kind: WorkflowKind) -> Draft {
    Draft {
        name,
        kind,
        request: Value::Null,
        priority: 0,
        parallel_limit: None,
        rollback_enabled: false,
        steps: Vec::new(),
    }
}

/// A generated Nushell step of `infra` running `code` with the context `ctx`. The
/// context's secrets become references into the infra's settings file, which the step
/// resolves when it runs (see [`secrets`]; only steps with references carry that code).
fn nu_step(code: String, mut ctx: Value, infra: &Infra, sources: &Sources) -> TaskSpec {
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
        sources.registry.modules_dir.display().to_string(),
    );
    // The local provider drives the engine the daemon found (when it was given none).
    if let Some(host) = crate::testenv::engine::usual_socket() {
        spec.env.insert("DOCKER_HOST".into(), host);
    }
    spec
}

/// The provider module of every server in `servers`, which must share one provider.
fn provider_module(
    servers: &[&Server],
    override_provider: Option<&str>,
    registry: &Registry,
    what: &str,
) -> Result<PathBuf, String> {
    let mut names: BTreeSet<&str> = servers.iter().map(|s| s.provider.as_str()).collect();
    if let Some(p) = override_provider {
        names = BTreeSet::from([p]);
    }
    if names.len() > 1 {
        let list: Vec<&str> = names.into_iter().collect();
        return Err(format!(
            "{what} mixes providers ({}): split it into one per provider",
            list.join(", ")
        ));
    }
    let name = names.into_iter().next().unwrap_or("local");
    let provider = registry.provider(name)?;
    Ok(provider.dir.join(&provider.module))
}

/// Server records, with the provider overridden when asked.
fn server_records(servers: &[&Server], provider: Option<&str>) -> Vec<Value> {
    servers
        .iter()
        .map(|s| {
            let mut record = s.record.clone();
            if let (Some(p), Some(map)) = (provider, record.as_object_mut()) {
                map.insert("provider".into(), json!(p));
            }
            record
        })
        .collect()
}

/// `create:<host>` with its compensation `delete-server`.
fn create_step(server: &Server, infra: &Infra, sources: &Sources) -> Result<DraftStep, String> {
    let module = provider_module(&[server], None, sources.registry, "a server")?;
    let ctx = json!({
        "step": format!("create:{}", server.hostname),
        "infra": infra.context(),
        "server": server.record,
        "servers": [server.record],
    });
    let id = format!("create:{}", server.hostname);
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

/// Every taskserv `requested` brings, in install order: dependencies first, add-ons
/// after what they extend.
pub fn install_order<'r>(
    requested: &[String],
    registry: &'r Registry,
) -> Result<Vec<&'r TaskservInfo>, String> {
    let mut needed: BTreeMap<String, &TaskservInfo> = BTreeMap::new();
    let mut stack: Vec<String> = requested.to_vec();
    while let Some(name) = stack.pop() {
        if needed.contains_key(&name) {
            continue;
        }
        let t = registry.taskserv(&name)?;
        stack.extend(t.dependencies.iter().cloned());
        stack.extend(t.addons.iter().cloned());
        needed.insert(name, t);
    }
    // Depth-first post-order over "must come before" edges.
    let before = |t: &TaskservInfo| -> Vec<String> {
        let mut b = t.dependencies.clone();
        b.extend(
            needed
                .values()
                .filter(|o| o.addons.contains(&t.name))
                .map(|o| o.name.clone()),
        );
        b
    };
    let mut order: Vec<&TaskservInfo> = Vec::new();
    let mut state: BTreeMap<String, bool> = BTreeMap::new(); // false: visiting, true: done
    fn visit<'r>(
        t: &'r TaskservInfo,
        needed: &BTreeMap<String, &'r TaskservInfo>,
        before: &dyn Fn(&TaskservInfo) -> Vec<String>,
        state: &mut BTreeMap<String, bool>,
        order: &mut Vec<&'r TaskservInfo>,
        path: &mut Vec<String>,
    ) -> Result<(), String> {
        match state.get(&t.name) {
            Some(true) => return Ok(()),
            Some(false) => {
                path.push(t.name.clone());
                let start = path.iter().position(|p| *p == t.name).unwrap_or(0);
                return Err(format!(
                    "the taskservs' dependencies form a cycle: {}",
                    path[start..].join(" → ")
                ));
            }
            None => {}
        }
        state.insert(t.name.clone(), false);
        path.push(t.name.clone());
        for b in before(t) {
            visit(needed[&b], needed, before, state, order, path)?;
        }
        path.pop();
        state.insert(t.name.clone(), true);
        order.push(t);
        Ok(())
    }
    for t in needed.values() {
        visit(t, &needed, &before, &mut state, &mut order, &mut Vec::new())?;
    }
    Ok(order)
}

/// `ctx.taskservs`: every taskserv of `order` by name.
fn taskservs_context(order: &[&TaskservInfo]) -> Value {
    Value::Object(
        order
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    json!({"name": t.name, "version": t.version, "dir": t.dir}),
                )
            })
            .collect(),
    )
}

fn script(t: &TaskservInfo, purpose: &str) -> Option<PathBuf> {
    t.scripts.get(purpose).map(|f| t.dir.join(f))
}

/// Steps `install:<t>@<host>` for each taskserv of `order` on `server`, after `after`
/// (the server's creation, when the workflow creates it). With `check` the check script
/// runs in the same step right after the install.
fn install_steps(
    server: &Server,
    order: &[&TaskservInfo],
    infra: &Infra,
    after: Option<&str>,
    with_check: bool,
    extra_ctx: &Value,
    sources: &Sources,
) -> Result<Vec<DraftStep>, String> {
    let module = provider_module(&[server], None, sources.registry, "a server")?;
    let mut steps = Vec::new();
    for t in order {
        let id = format!("install:{}@{}", t.name, server.hostname);
        let mut ctx = json!({
            "step": id,
            "infra": infra.context(),
            "server": server.record,
            "servers": [server.record],
            "taskservs": taskservs_context(order),
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

fn merge(ctx: &mut Value, extra: &Value) {
    if let (Some(map), Some(extra)) = (ctx.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            map.insert(k.clone(), v.clone());
        }
    }
}

fn servers(r: &ServersRequest, sources: &Sources) -> Result<Draft, String> {
    let infra = Infra::load(
        place(&r.workspace, sources),
        &r.infra,
        r.settings.as_deref(),
    )?;
    let selected = infra.select(&r.servers)?;
    let orders = selected
        .iter()
        .map(|server| {
            install_order(&server.taskservs, sources.registry)
                .map_err(|e| format!("server `{}`: {e}", server.hostname))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let count = orders
        .iter()
        .try_fold(0usize, |n, order| n.checked_add(1 + order.len()));
    check_step_count(&format!("servers create {}", infra.name), count)?;
    let mut draft = empty_draft(
        format!("servers create {}", infra.name),
        WorkflowKind::Servers,
    );
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
    draft.priority = r.priority;
    draft.parallel_limit = r.parallel_limit;
    draft.rollback_enabled = r.rollback_enabled;
    Ok(draft)
}

fn taskserv(r: &TaskservRequest, sources: &Sources) -> Result<Draft, String> {
    let infra = Infra::load(
        place(&r.workspace, sources),
        &r.infra,
        r.settings.as_deref(),
    )?;
    let selected = infra.select(&r.servers)?;
    let order = install_order(std::slice::from_ref(&r.taskserv), sources.registry)?;
    check_step_count(
        &format!("taskserv create {} on {}", r.taskserv, infra.name),
        selected.len().checked_mul(order.len()),
    )?;
    let mut draft = empty_draft(
        format!("taskserv create {} on {}", r.taskserv, infra.name),
        WorkflowKind::Taskserv,
    );
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
    draft.priority = r.priority;
    draft.parallel_limit = r.parallel_limit;
    draft.rollback_enabled = r.rollback_enabled;
    Ok(draft)
}

fn cluster(r: &ClusterRequest, sources: &Sources) -> Result<Draft, String> {
    let infra = Infra::load(
        place(&r.workspace, sources),
        &r.infra,
        r.settings.as_deref(),
    )?;
    let definition = sources.registry.cluster(&r.cluster)?;
    let provider = r
        .provider
        .clone()
        .or_else(|| infra.provider.clone())
        .ok_or_else(|| {
            format!(
                "cluster `{}`: no provider given and infra `{}` sets no default `provider`",
                r.cluster, infra.name
            )
        })?;
    sources.registry.provider(&provider)?;
    let nodes: Vec<Server> = definition
        .nodes
        .iter()
        .map(|n| Server {
            hostname: n.hostname.clone(),
            provider: provider.clone(),
            taskservs: n.taskservs.clone(),
            record: json!({
                "hostname": n.hostname, "role": n.role, "taskservs": n.taskservs,
                "provider": provider, "infra": infra.name,
            }),
        })
        .collect();
    let cluster_ctx = json!({
        "cluster": {"name": definition.name, "definition": definition.name,
                    "nodes": nodes.iter().map(|n| &n.record).collect::<Vec<_>>()},
        "node_servers": nodes.iter().map(|n| (n.hostname.clone(), n.record.clone()))
            .collect::<serde_json::Map<_, _>>(),
    });
    let mut draft = empty_draft(
        format!("cluster create {} on {}", definition.name, infra.name),
        WorkflowKind::Cluster,
    );
    // Checks and setup wait for every node to exist and every install to be done.
    let mut creates = Vec::new();
    let mut installs = Vec::new();
    let mut checks = Vec::new();
    for node in &nodes {
        let mut create = create_step(node, &infra, sources)?;
        merge(&mut create.spec.params, &cluster_ctx);
        if let Some(rollback) = &mut create.rollback {
            merge(&mut rollback.params, &cluster_ctx);
        }
        let create_id = create.id.clone();
        creates.push(create_id.clone());
        draft.steps.push(create);
        let order = install_order(&node.taskservs, sources.registry)?;
        let steps = install_steps(
            node,
            &order,
            &infra,
            Some(&create_id),
            false,
            &cluster_ctx,
            sources,
        )?;
        for t in &order {
            if script(t, "check").is_some() {
                checks.push((node, *t));
            }
        }
        installs.extend(steps.iter().map(|s| s.id.clone()));
        draft.steps.extend(steps);
    }
    // Members of a cluster become healthy together: checks run once every install is done.
    let module = provider_module(
        &nodes.iter().collect::<Vec<_>>(),
        None,
        sources.registry,
        "the cluster",
    )?;
    let mut check_ids = Vec::new();
    for (node, t) in checks {
        let id = format!("check:{}@{}", t.name, node.hostname);
        let mut ctx = json!({"step": id, "infra": infra.context(), "server": node.record,
                              "servers": [node.record], "taskservs": taskservs_context(&[t])});
        merge(&mut ctx, &cluster_ctx);
        let check = script(t, "check").expect("filtered above");
        let plan = [(t.name.clone(), vec![check.as_path()])];
        draft.steps.push(DraftStep {
            description: format!("check {} on {}", t.name, node.hostname),
            spec: nu_step(
                snippets::run_taskserv_scripts(&module, &plan),
                ctx,
                &infra,
                sources,
            ),
            rollback: None,
            dependencies: creates.iter().chain(&installs).cloned().collect(),
            soft_dependencies: Vec::new(),
            id: id.clone(),
            fill_workflow_id: true,
        });
        check_ids.push(id);
    }
    if let Some(setup) = &definition.setup {
        let id = format!("setup:{}", definition.name);
        let mut ctx = json!({"step": id, "infra": infra.context()});
        merge(&mut ctx, &cluster_ctx);
        let code = snippets::cluster_setup(&module, &definition.dir.join(setup));
        draft.steps.push(DraftStep {
            description: format!("set up cluster {}", definition.name),
            spec: nu_step(code, ctx, &infra, sources),
            rollback: None,
            dependencies: creates
                .into_iter()
                .chain(installs)
                .chain(check_ids)
                .collect(),
            soft_dependencies: Vec::new(),
            id,
            fill_workflow_id: true,
        });
    }
    draft.priority = r.priority;
    draft.parallel_limit = r.parallel_limit;
    draft.rollback_enabled = r.rollback_enabled;
    Ok(draft)
}

fn batch(r: &BatchRequest, sources: &Sources) -> Result<Draft, String> {
    let w = &r.workflow;
    if w.name.trim().is_empty() {
        return Err("`name` is empty".into());
    }
    if w.operations.is_empty() {
        return Err(format!("workflow `{}` has no operations", w.name));
    }
    check_step_count(&format!("workflow `{}`", w.name), Some(w.operations.len()))?;
    let place = place(&r.workspace, sources);
    let base_dir = r
        .base_dir
        .clone()
        .unwrap_or_else(|| place.workspace.to_path_buf());
    let infra = match &r.infra {
        Some(name) => Some(Infra::load(place, name, r.settings.as_deref())?),
        None => None,
    };
    let mut draft = empty_draft(w.name.clone(), WorkflowKind::Batch);
    for op in &w.operations {
        let step = operation(op, infra.as_ref(), &base_dir, sources)
            .map_err(|e| format!("operation `{}`: {e}", op.id))?;
        draft.steps.push(step);
    }
    draft.priority = w.priority;
    draft.parallel_limit = w.parallel_limit;
    draft.rollback_enabled = w.rollback_enabled;
    Ok(draft)
}

/// Script lists as the borrowed form the snippets take.
fn as_plan<'t>(
    plan: &'t [(&'t TaskservInfo, Vec<PathBuf>)],
) -> Vec<(&'t TaskservInfo, Vec<&'t Path>)> {
    plan.iter()
        .map(|(t, s)| (*t, s.iter().map(PathBuf::as_path).collect()))
        .collect()
}

/// The operation types a batch accepts.
const OPERATION_TYPES: &str =
    "server_create, server_batch, taskserv_create, taskserv_batch, nu, script, command";

fn operation(
    op: &Operation,
    infra: Option<&Infra>,
    base_dir: &Path,
    sources: &Sources,
) -> Result<DraftStep, String> {
    let timeout_ms = match &op.timeout {
        None => None,
        Some(t) => Some(
            humantime::parse_duration(t)
                .map_err(|e| format!("`timeout` `{t}` is not a duration: {e}"))?
                .as_millis() as u64,
        ),
    };
    let rollback_code = |rollback: &Option<String>| {
        rollback.as_ref().map(|code| {
            let mut spec = TaskSpec::command("nu", Vec::new());
            spec.kind = TaskKind::Nu { code: code.clone() };
            spec.params = op.params.clone();
            spec.cwd = Some(base_dir.to_path_buf());
            spec
        })
    };
    let (mut spec, rollback, description) = match op.op_type.as_str() {
        "nu" => {
            let code = op
                .nu
                .clone()
                .ok_or("a `nu` operation needs `nu` (the code)")?;
            let mut spec = TaskSpec::command("nu", Vec::new());
            spec.kind = TaskKind::Nu { code };
            (
                spec,
                rollback_code(&op.rollback),
                format!("nu code ({})", op.id),
            )
        }
        "script" => {
            let script = op
                .script
                .as_deref()
                .ok_or("a `script` operation needs `script` (a .nu file)")?;
            let path = script_path(base_dir, script)?;
            let mut spec = TaskSpec::command("nu", Vec::new());
            spec.kind = TaskKind::NuFile { path: path.clone() };
            (
                spec,
                rollback_code(&op.rollback),
                format!("nu {}", path.display()),
            )
        }
        "command" => {
            let (program, args) = op
                .command
                .split_first()
                .ok_or("a `command` operation needs `command` (a program and its arguments)")?;
            let spec = TaskSpec::command(program.clone(), args.to_vec());
            let description = spec.describe();
            (spec, rollback_code(&op.rollback), description)
        }
        "server_create" | "server_batch" | "taskserv_create" | "taskserv_batch" => {
            return infra_operation(op, infra, timeout_ms, sources);
        }
        other => {
            return Err(format!(
                "unknown operation type `{other}` (known: {OPERATION_TYPES})"
            ));
        }
    };
    spec.params = op.params.clone();
    spec.cwd = Some(base_dir.to_path_buf());
    spec.retries = op.retries;
    spec.timeout_ms = timeout_ms;
    Ok(DraftStep {
        id: op.id.clone(),
        description,
        spec,
        rollback,
        dependencies: op.dependencies.clone(),
        soft_dependencies: op.soft_dependencies.clone(),
        fill_workflow_id: false,
    })
}

/// `script` resolved in `base_dir`: a relative path without `..` whose canonical form is a
/// file inside `base_dir` (one message for "missing" and "outside").
fn script_path(base_dir: &Path, script: &Path) -> Result<PathBuf, String> {
    use std::path::Component;
    let refused = || {
        format!(
            "`script`: `{}` is not a file inside the workflow's directory",
            script.display()
        )
    };
    if !script
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "`script`: `{}` must be a relative path inside the workflow's directory (no `..`, not absolute)",
            script.display()
        ));
    }
    let root = base_dir.canonicalize().map_err(|_| refused())?;
    let path = root.join(script).canonicalize().map_err(|_| refused())?;
    if path.starts_with(&root) && path.is_file() {
        Ok(path)
    } else {
        Err(refused())
    }
}

/// A server or taskserv operation of a batch: one step over all its servers.
fn infra_operation(
    op: &Operation,
    infra: Option<&Infra>,
    timeout_ms: Option<u64>,
    sources: &Sources,
) -> Result<DraftStep, String> {
    let infra = infra
        .ok_or_else(|| format!("a `{}` operation needs the workflow's `infra`", op.op_type))?;
    let servers = infra.select(&op.servers)?;
    let module = provider_module(
        &servers,
        op.provider.as_deref(),
        sources.registry,
        "the operation",
    )?;
    let records = server_records(&servers, op.provider.as_deref());
    let hosts: Vec<&str> = servers.iter().map(|s| s.hostname.as_str()).collect();
    let mut ctx =
        json!({"step": op.id, "infra": infra.context(), "servers": records, "params": op.params});
    let (code, rollback_code, description) = if op.op_type.starts_with("server") {
        (
            snippets::create_servers(&module),
            Some(snippets::delete_servers(&module)),
            format!("create servers {}", hosts.join(", ")),
        )
    } else {
        let name = op
            .taskserv
            .as_ref()
            .ok_or("a taskserv operation needs `taskserv`")?;
        let order = install_order(std::slice::from_ref(name), sources.registry)?;
        merge(&mut ctx, &json!({"taskservs": taskservs_context(&order)}));
        let install: Vec<(&TaskservInfo, Vec<PathBuf>)> = order
            .iter()
            .map(|t| {
                let mut s = vec![script(t, "install").expect("install is required")];
                s.extend(script(t, "check"));
                (*t, s)
            })
            .collect();
        let rollback: Vec<(&TaskservInfo, Vec<PathBuf>)> = order
            .iter()
            .rev()
            .filter_map(|t| script(t, "rollback").map(|r| (*t, vec![r])))
            .collect();
        let names: Vec<&str> = order.iter().map(|t| t.name.as_str()).collect();
        (
            snippets::install_taskservs(&module, &as_plan(&install)),
            (!rollback.is_empty())
                .then(|| snippets::rollback_taskservs(&module, &as_plan(&rollback))),
            format!("install {} on {}", names.join(", "), hosts.join(", ")),
        )
    };
    let mut spec = nu_step(code, ctx.clone(), infra, sources);
    spec.retries = op.retries;
    if timeout_ms.is_some() {
        spec.timeout_ms = timeout_ms;
    }
    Ok(DraftStep {
        id: op.id.clone(),
        description,
        rollback: rollback_code.map(|code| nu_step(code, ctx, infra, sources)),
        spec,
        dependencies: op.dependencies.clone(),
        soft_dependencies: op.soft_dependencies.clone(),
        fill_workflow_id: true,
    })
}
