//! Dynamic completions of the arguments that name something (nu asks the plugin as the
//! user types): task, workflow and test environment ids (the unfinished ones first, each
//! with its status and what it is as the description), and task statuses.

use nu_plugin::EngineInterface;
use nu_protocol::DynamicSuggestion;
use nu_protocol::engine::ArgType;
use orch_protocol::{Request, Response, TaskFilter, TaskStatus};

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
            let Ok(Response::Envs { envs }) = plugin.call(engine, &Request::Envs) else {
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
