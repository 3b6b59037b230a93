//! Dynamic completions of the arguments that name something (nu asks the plugin as the
//! user types): task ids, the unfinished ones first, each with its status and command.

use nu_plugin::EngineInterface;
use nu_protocol::DynamicSuggestion;
use nu_protocol::engine::ArgType;
use orch_protocol::{Request, Response, TaskFilter};

use crate::OrchestratorPlugin;

/// How many tasks are offered at most.
const OFFERED: usize = 50;

/// The suggestions for `arg_type` of a command whose positional arguments are task ids:
/// [`task_ids`] for those, nothing of its own for a flag's value.
pub fn task_id_argument(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    arg_type: &ArgType,
) -> Option<Vec<DynamicSuggestion>> {
    match arg_type {
        ArgType::Positional(_) => task_ids(plugin, engine),
        ArgType::Flag(_) => None,
    }
}

/// The ids of the newest tasks, unfinished first, as suggestions (`None` when the
/// daemon cannot be asked: nu then offers nothing).
pub fn task_ids(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
) -> Option<Vec<DynamicSuggestion>> {
    let filter = TaskFilter {
        status: Vec::new(),
        label: None,
        limit: Some(OFFERED),
        before: None,
    };
    let Ok(Response::Tasks { mut tasks, .. }) = plugin.call(engine, &Request::List { filter })
    else {
        return None;
    };
    // Unfinished first; newest first within each.
    tasks.sort_by_key(|t| (t.state.status().is_final(), std::cmp::Reverse(t.id)));
    let suggestions = tasks
        .into_iter()
        .map(|task| DynamicSuggestion {
            value: task.id.to_string(),
            description: Some(format!(
                "{}: {}",
                task.state.status().as_str(),
                task.spec.describe()
            )),
            append_whitespace: true,
            ..DynamicSuggestion::default()
        })
        .collect();
    Some(suggestions)
}
