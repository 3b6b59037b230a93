//! What the commands that change the queue's controls share (`orch group add/remove`,
//! `orch parallel`, `orch pause`, `orch resume`): the change sent, and its answer shown
//! as the queue's controls. A daemon error about a field points at the argument that
//! gave it.

use nu_plugin::{EngineInterface, EvaluatedCall};
use nu_protocol::{LabeledError, Span, Value};
use orch_protocol::{QueueChange, Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::queue_values::queue_record;

/// Sends `change`; `fields` maps the request's fields to the arguments that gave them.
pub fn send(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    change: QueueChange,
    fields: &[(&str, Span)],
) -> Result<Value, LabeledError> {
    match plugin.call(engine, &Request::QueueChange { change }) {
        Ok(Response::Queue(view)) => Ok(queue_record(view, call.head)),
        Ok(other) => Err(unexpected(other, call.head)),
        Err(e) => Err(labeled(e, call.head, fields)),
    }
}

/// The value of `--group` and where it was given, if it was.
pub fn group_flag(call: &EvaluatedCall) -> Result<Option<(String, Span)>, LabeledError> {
    let group: Option<String> = call.get_flag("group")?;
    let span = call.get_flag_span("group").unwrap_or(call.head);
    Ok(group.map(|g| (g, span)))
}

/// The completions of a group-naming flag or argument.
pub fn complete_groups(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
    crate::completions::names(plugin, engine, crate::completions::Names::Groups)
}
