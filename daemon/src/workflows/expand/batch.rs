//! Batch workflows: one step per operation. Code operations (`nu`, `script`, `command`)
//! run as given; server and taskserv operations act on the workflow's infra through its
//! providers and taskservs.

use std::path::{Path, PathBuf};

use orch_protocol::{
    BatchRequest, Operation, OperationType, RunOptions, TaskKind, TaskSpec, TaskservInfo,
    WorkflowKind,
};
use serde_json::{Value, json};

use super::steps::{as_plan, merge, nu_step, provider_module};
use super::{Sources, empty_draft, place};
use crate::workflows::infra::{Infra, Server};
use crate::workflows::taskservs::{self, install_order, script};
use crate::workflows::{Draft, DraftStep, ExpandError, checks, snippets};

/// The steps of a batch request.
pub fn expand(r: &BatchRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let w = &r.workflow;
    checks::batch(w)?;
    let place = place(&r.workspace, sources);
    let base_dir = r
        .base_dir
        .clone()
        .unwrap_or_else(|| place.workspace.to_path_buf());
    let infra = match &r.infra {
        Some(name) => Some(Infra::load(place, name, r.settings.as_deref())?),
        None => None,
    };
    let run = RunOptions {
        priority: w.priority,
        parallel_limit: w.parallel_limit,
        rollback_enabled: w.rollback_enabled,
        group: w.group.clone(),
        ..RunOptions::default()
    };
    let mut draft = empty_draft(w.name.clone(), WorkflowKind::Batch, &run);
    for op in &w.operations {
        let step = operation(op, infra.as_ref(), &base_dir, sources)
            .map_err(|e| e.within(format!("operation `{}`", op.id)))?;
        draft.steps.push(step);
    }
    Ok(draft)
}

/// The step of one operation.
fn operation(
    op: &Operation,
    infra: Option<&Infra>,
    base_dir: &Path,
    sources: &Sources,
) -> Result<DraftStep, ExpandError> {
    let timeout_ms = match &op.timeout {
        None => None,
        Some(t) => Some(
            humantime::parse_duration(t)
                .map_err(|e| {
                    ExpandError::Invalid(format!("`timeout` `{t}` is not a duration: {e}"))
                })?
                .as_millis() as u64,
        ),
    };
    let missing = |what: &str| {
        ExpandError::Invalid(format!(
            "a `{}` operation needs {what}",
            op.op_type.as_str()
        ))
    };
    let (kind, description) = match op.op_type {
        OperationType::ServerCreate | OperationType::ServerBatch => {
            return infra_operation(op, Acts::CreateServers, infra, timeout_ms, sources);
        }
        OperationType::TaskservCreate | OperationType::TaskservBatch => {
            return infra_operation(op, Acts::InstallTaskserv, infra, timeout_ms, sources);
        }
        OperationType::Nu => {
            let code = op.nu.clone().ok_or_else(|| missing("`nu` (the code)"))?;
            (TaskKind::Nu { code }, format!("nu code ({})", op.id))
        }
        OperationType::Script => {
            let script = op
                .script
                .as_deref()
                .ok_or_else(|| missing("`script` (a .nu file)"))?;
            let path = script_path(base_dir, script)?;
            let description = format!("nu {}", path.display());
            (TaskKind::NuFile { path }, description)
        }
        OperationType::Command => {
            let (program, args) = op
                .command
                .split_first()
                .ok_or_else(|| missing("`command` (a program and its arguments)"))?;
            let spec = TaskSpec::command(program.clone(), args.to_vec());
            let description = spec.describe();
            (spec.kind, description)
        }
    };
    Ok(code_operation(op, kind, description, base_dir, timeout_ms))
}

/// A `nu`, `script` or `command` operation running `kind` in `base_dir`, with its own
/// compensation (both on a node with the operation's labels).
fn code_operation(
    op: &Operation,
    kind: TaskKind,
    description: String,
    base_dir: &Path,
    timeout_ms: Option<u64>,
) -> DraftStep {
    let in_base_dir = |kind: TaskKind| {
        let mut spec = TaskSpec::command("nu", Vec::new());
        spec.kind = kind;
        spec.params = op.params.clone();
        spec.cwd = Some(base_dir.to_path_buf());
        spec.on = op.on.clone();
        spec
    };
    let mut spec = in_base_dir(kind);
    spec.retries = op.retries;
    spec.timeout_ms = timeout_ms;
    DraftStep {
        id: op.id.clone(),
        description,
        spec,
        rollback: op
            .rollback
            .clone()
            .map(|code| in_base_dir(TaskKind::Nu { code })),
        dependencies: op.dependencies.clone(),
        soft_dependencies: op.soft_dependencies.clone(),
        fill_workflow_id: false,
    }
}

/// `script` resolved in `base_dir`: a relative path without `..` whose canonical form is a
/// file inside `base_dir` (one message for "missing" and "outside").
fn script_path(base_dir: &Path, script: &Path) -> Result<PathBuf, ExpandError> {
    use std::path::Component;
    let refused = || {
        ExpandError::Unknown(format!(
            "`script`: `{}` is not a file inside the workflow's directory",
            script.display()
        ))
    };
    if !script
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ExpandError::Invalid(format!(
            "`script`: `{}` must be a relative path inside the workflow's directory (no `..`, not absolute)",
            script.display()
        )));
    }
    let root = base_dir.canonicalize().map_err(|_| refused())?;
    let path = root.join(script).canonicalize().map_err(|_| refused())?;
    if path.starts_with(&root) && path.is_file() {
        Ok(path)
    } else {
        Err(refused())
    }
}

/// What a server or taskserv operation does on its servers.
#[derive(Clone, Copy)]
enum Acts {
    /// Creates them (compensated by deleting them).
    CreateServers,
    /// Installs the operation's taskserv on them (compensated by its rollback scripts).
    InstallTaskserv,
}

/// A server or taskserv operation of a batch: one step over all its servers.
fn infra_operation(
    op: &Operation,
    acts: Acts,
    infra: Option<&Infra>,
    timeout_ms: Option<u64>,
    sources: &Sources,
) -> Result<DraftStep, ExpandError> {
    let infra = infra.ok_or_else(|| {
        ExpandError::Invalid(format!(
            "a `{}` operation needs the workflow's `infra`",
            op.op_type.as_str()
        ))
    })?;
    let servers = infra.select(&op.servers)?;
    let module = provider_module(
        &servers,
        op.provider.as_deref(),
        sources.extensions.registry(),
        "the operation",
    )?;
    let records = server_records(&servers, op.provider.as_deref());
    let hosts: Vec<&str> = servers.iter().map(|s| s.hostname.as_str()).collect();
    let mut ctx =
        json!({"step": op.id, "infra": infra.context(), "servers": records, "params": op.params});
    let (code, rollback_code, description) = match acts {
        Acts::CreateServers => (
            snippets::create_servers(&module),
            Some(snippets::delete_servers(&module)),
            format!("create servers {}", hosts.join(", ")),
        ),
        Acts::InstallTaskserv => {
            let name = op.taskserv.as_ref().ok_or_else(|| {
                ExpandError::Invalid("a taskserv operation needs `taskserv`".into())
            })?;
            let order = install_order(std::slice::from_ref(name), sources.extensions.registry())?;
            merge(&mut ctx, &json!({"taskservs": taskservs::context(&order)}));
            let (install, rollback) = taskserv_scripts(&module, &order);
            let names: Vec<&str> = order.iter().map(|t| t.name.as_str()).collect();
            (
                install,
                rollback,
                format!("install {} on {}", names.join(", "), hosts.join(", ")),
            )
        }
    };
    // The step and its compensation run on a node with the operation's labels.
    let on_labelled_node = |mut spec: TaskSpec| {
        spec.on = op.on.clone();
        spec
    };
    let mut spec = on_labelled_node(nu_step(code, ctx.clone(), infra, sources));
    spec.retries = op.retries;
    if timeout_ms.is_some() {
        spec.timeout_ms = timeout_ms;
    }
    Ok(DraftStep {
        id: op.id.clone(),
        description,
        rollback: rollback_code.map(|code| on_labelled_node(nu_step(code, ctx, infra, sources))),
        spec,
        dependencies: op.dependencies.clone(),
        soft_dependencies: op.soft_dependencies.clone(),
        fill_workflow_id: true,
    })
}

/// The code installing the taskservs of `order` (each checked after its install), and
/// the code rolling them back in reverse order (none when none has a rollback script).
fn taskserv_scripts(module: &Path, order: &[&TaskservInfo]) -> (String, Option<String>) {
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
    (
        snippets::install_taskservs(module, &as_plan(&install)),
        (!rollback.is_empty()).then(|| snippets::rollback_taskservs(module, &as_plan(&rollback))),
    )
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
