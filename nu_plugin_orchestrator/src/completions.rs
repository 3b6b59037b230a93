//! Dynamic completions of the arguments that name something (nu asks the plugin as the
//! user types): task, workflow and test environment ids (the unfinished ones first, each
//! with its status and what it is as the description), and task statuses.

use nu_plugin::EngineInterface;
use nu_protocol::DynamicSuggestion;
use nu_protocol::engine::ArgType;
use orch_protocol::{EnvFilter, Request, Response, TaskFilter, TaskStatus};

use crate::OrchestratorPlugin;

/// How many ids are offered at most.
const OFFERED: usize = 50;

/// What the ids of a command's positional arguments name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// Tasks.
    Task,
    /// Workflows.
    Workflow,
    /// Test environments.
    Environment,
}

impl Named {
    /// What `names` (a by-id command's word for its ids) names, if ids of it complete.
    pub fn from_word(names: &str) -> Option<Named> {
        match names {
            "task" => Some(Named::Task),
            "workflow" => Some(Named::Workflow),
            "environment" => Some(Named::Environment),
            _ => None,
        }
    }
}

/// The suggestions for `arg_type` of a command whose positional arguments are ids of
/// `named`: [`ids`] for those, nothing of its own for a flag's value.
pub fn id_argument(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    named: Named,
    arg_type: &ArgType,
) -> Option<Vec<DynamicSuggestion>> {
    match arg_type {
        ArgType::Positional(_) => ids(plugin, engine, named),
        ArgType::Flag(_) => None,
    }
}

/// The newest ids of `named`, unfinished first, as suggestions (`None` when the daemon
/// cannot be asked: nu then offers nothing).
pub fn ids(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    named: Named,
) -> Option<Vec<DynamicSuggestion>> {
    // (id, finished, description) of each.
    let mut offered: Vec<(u64, bool, String)> = match named {
        Named::Task => {
            let filter = TaskFilter {
                status: Vec::new(),
                label: None,
                limit: Some(OFFERED),
                before: None,
            };
            let Ok(Response::Tasks { tasks, .. }) = plugin.call(engine, &Request::List { filter })
            else {
                return None;
            };
            tasks
                .into_iter()
                .map(|t| {
                    let status = t.state.status();
                    let what = format!("{}: {}", status.as_str(), t.spec.describe());
                    (t.id, status.is_final(), what)
                })
                .collect()
        }
        Named::Workflow => {
            let request = Request::Workflows {
                limit: Some(OFFERED),
                before: None,
            };
            let Ok(Response::Workflows { workflows, .. }) = plugin.call(engine, &request) else {
                return None;
            };
            workflows
                .into_iter()
                .map(|w| {
                    let status = w.state.status();
                    (
                        w.id,
                        status.is_final(),
                        format!("{}: {}", status.as_str(), w.name),
                    )
                })
                .collect()
        }
        Named::Environment => {
            let Ok(Response::Envs { envs }) = plugin.call(
                engine,
                &Request::Envs {
                    filter: EnvFilter::default(),
                },
            ) else {
                return None;
            };
            envs.into_iter()
                .map(|e| {
                    let status = e.state.status();
                    let what = format!("{status}: {} {}", e.kind, e.name);
                    (e.id, status == "deleted", what)
                })
                .collect()
        }
    };
    // Unfinished first; newest first within each.
    offered.sort_by_key(|(id, finished, _)| (*finished, std::cmp::Reverse(*id)));
    offered.truncate(OFFERED);
    let suggestions = offered
        .into_iter()
        .map(|(id, _, description)| DynamicSuggestion {
            value: id.to_string(),
            description: Some(description),
            append_whitespace: true,
            ..DynamicSuggestion::default()
        })
        .collect();
    Some(suggestions)
}

/// The task statuses, for a `--status` flag's value.
pub fn task_statuses() -> Vec<DynamicSuggestion> {
    TaskStatus::ALL
        .into_iter()
        .map(|status| DynamicSuggestion {
            value: status.as_str().to_string(),
            append_whitespace: true,
            ..DynamicSuggestion::default()
        })
        .collect()
}

/// Fixed words, each with what it means.
pub fn words(listed: &[(&str, &str)]) -> Vec<DynamicSuggestion> {
    listed
        .iter()
        .map(|(value, description)| DynamicSuggestion {
            value: value.to_string(),
            description: Some(description.to_string()),
            append_whitespace: true,
            ..DynamicSuggestion::default()
        })
        .collect()
}

/// What a named argument's value names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// Taskservs (the daemon's extensions).
    Taskservs,
    /// Cluster definitions.
    Clusters,
    /// Providers.
    Providers,
    /// Topology templates.
    Topologies,
    /// The labels of recent tasks.
    Labels,
    /// The infras of the workspace (`--workspace`, `$env.PROVISIONING_WORKSPACE`, else
    /// the current directory).
    Infras,
    /// The kinds of test environments.
    EnvKinds,
    /// The queue's groups.
    Groups,
}

/// How many recent tasks the labels are read from.
const LABELS_FROM: usize = 500;

/// The suggestions for `names` (`None` when they cannot be read: nu then offers nothing).
pub fn names(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    names: Names,
) -> Option<Vec<DynamicSuggestion>> {
    let described: Vec<(String, String)> = match names {
        Names::Taskservs | Names::Clusters | Names::Providers => {
            let Ok(Response::Extensions(report)) = plugin.call(engine, &Request::Extensions) else {
                return None;
            };
            match names {
                Names::Taskservs => report
                    .taskservs
                    .into_iter()
                    .map(|t| (t.name, t.description))
                    .collect(),
                Names::Clusters => report
                    .clusters
                    .into_iter()
                    .map(|c| (c.name, c.description))
                    .collect(),
                _ => report
                    .providers
                    .into_iter()
                    .map(|p| (p.name, p.description))
                    .collect(),
            }
        }
        Names::Topologies => {
            let Ok(Response::Topologies(report)) = plugin.call(engine, &Request::Topologies) else {
                return None;
            };
            report
                .topologies
                .into_iter()
                .map(|t| (t.name, t.description))
                .collect()
        }
        Names::Labels => labels(plugin, engine)?,
        Names::Groups => groups(plugin, engine)?,
        Names::Infras => infras(engine)?,
        Names::EnvKinds => [
            ("single", "one taskserv in one container"),
            ("server", "several taskservs in one container"),
            ("cluster", "a topology of several containers"),
        ]
        .into_iter()
        .map(|(k, d)| (k.to_string(), d.to_string()))
        .collect(),
    };
    Some(
        described
            .into_iter()
            .map(|(value, description)| DynamicSuggestion {
                value,
                description: (!description.is_empty()).then_some(description),
                append_whitespace: true,
                ..DynamicSuggestion::default()
            })
            .collect(),
    )
}

/// The labels of the newest tasks, the most recent first, each with how many have it.
fn labels(plugin: &OrchestratorPlugin, engine: &EngineInterface) -> Option<Vec<(String, String)>> {
    let filter = TaskFilter {
        status: Vec::new(),
        label: None,
        limit: Some(LABELS_FROM),
        before: None,
    };
    let Ok(Response::Tasks { tasks, .. }) = plugin.call(engine, &Request::List { filter }) else {
        return None;
    };
    let mut labels: Vec<(String, usize)> = Vec::new();
    for label in tasks.into_iter().filter_map(|t| t.spec.label) {
        match labels.iter_mut().find(|(l, _)| *l == label) {
            Some((_, count)) => *count += 1,
            None => labels.push((label, 1)),
        }
    }
    Some(
        labels
            .into_iter()
            .map(|(label, count)| (label, format!("{count} of the last {LABELS_FROM} tasks")))
            .collect(),
    )
}

/// The queue's groups, each with its limit, pause and running tasks.
fn groups(plugin: &OrchestratorPlugin, engine: &EngineInterface) -> Option<Vec<(String, String)>> {
    let Ok(Response::Queue(view)) = plugin.call(engine, &Request::Queue) else {
        return None;
    };
    let described = view.groups.into_iter().map(|g| {
        let limit = g
            .parallel
            .map_or("no limit".into(), |l| format!("at most {l}"));
        let paused = if g.paused { ", paused" } else { "" };
        let text = format!("{limit}, {} running{paused}", g.running);
        (g.name, text)
    });
    Some(described.collect())
}

/// The settings files an infra directory holds, the first found being used.
const SETTINGS: [&str; 4] = [
    "settings.toml",
    "settings.yaml",
    "settings.yml",
    "settings.json",
];

/// The infras of the workspace: the directories in `infra/`, and those beside it that
/// hold a settings file (as the daemon looks them up).
fn infras(engine: &EngineInterface) -> Option<Vec<(String, String)>> {
    let cwd = std::path::PathBuf::from(engine.get_current_dir().ok()?);
    let workspace = match engine.get_env_var("PROVISIONING_WORKSPACE").ok()? {
        Some(nu_protocol::Value::String { val, .. }) if !val.is_empty() => cwd.join(val),
        _ => cwd,
    };
    let dirs = |dir: &std::path::Path| -> Vec<(String, std::path::PathBuf)> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut found: Vec<_> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .filter(|(name, _)| !name.starts_with('.'))
            .collect();
        found.sort();
        found
    };
    let has_settings = |dir: &std::path::Path| SETTINGS.iter().any(|s| dir.join(s).is_file());
    let mut infras: Vec<(String, String)> = dirs(&workspace.join("infra"))
        .into_iter()
        .map(|(name, _)| (name.clone(), format!("infra/{name}")))
        .collect();
    for (name, path) in dirs(&workspace) {
        if has_settings(&path) && !infras.iter().any(|(n, _)| *n == name) {
            infras.push((name, String::new()));
        }
    }
    Some(infras)
}

/// The suggestions for the value of a flag that names something (`--infra`,
/// `--provider`, `--topology`, `--label`).
pub fn flag_value(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    arg_type: &ArgType,
) -> Option<Vec<DynamicSuggestion>> {
    let ArgType::Flag(flag) = arg_type else {
        return None;
    };
    let named = match flag.as_ref() {
        "infra" => Names::Infras,
        "provider" => Names::Providers,
        "topology" => Names::Topologies,
        "label" => Names::Labels,
        "group" => Names::Groups,
        _ => return None,
    };
    names(plugin, engine, named)
}
