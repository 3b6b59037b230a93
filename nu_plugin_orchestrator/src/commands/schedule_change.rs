//! `orch schedule pause|resume|remove <name>`.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{Request, Response, ScheduleChange};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::schedule_values::schedule_record;

/// A command that changes one schedule.
pub struct ChangeSchedule {
    name: &'static str,
    description: &'static str,
    change: ScheduleChange,
    example: (&'static str, &'static str),
}

/// `orch schedule pause`
pub const PAUSE: ChangeSchedule = ChangeSchedule {
    name: "orch schedule pause",
    description: "Pause a schedule: it submits nothing until resumed (durable).",
    change: ScheduleChange::Pause,
    example: ("orch schedule pause backup", "No backups until resumed"),
};

/// `orch schedule resume`
pub const RESUME: ChangeSchedule = ChangeSchedule {
    name: "orch schedule resume",
    description: "Resume a paused schedule; the times missed meanwhile follow its catch-up policy.",
    change: ScheduleChange::Resume,
    example: ("orch schedule resume backup", "Back up again"),
};

/// `orch schedule remove`
pub const REMOVE: ChangeSchedule = ChangeSchedule {
    name: "orch schedule remove",
    description: "Remove a schedule (the tasks and workflows it submitted stay); the answer is the schedule as it was.",
    change: ScheduleChange::Remove,
    example: ("orch schedule remove backup", "No more backups"),
};

/// The completions of a schedule's name (the first argument).
pub fn complete_names(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    arg_type: &nu_protocol::engine::ArgType,
) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
    if !matches!(arg_type, nu_protocol::engine::ArgType::Positional(0)) {
        return None;
    }
    let request = Request::Schedules { upcoming: Some(1) };
    let Ok(Response::Schedules { schedules }) = plugin.call(engine, &request) else {
        return None;
    };
    let described: Vec<(String, String)> = schedules
        .into_iter()
        .map(|view| {
            let s = view.schedule;
            let paused = if s.paused { ", paused" } else { "" };
            let text = format!("{} {}{paused}", s.spec.cron, s.spec.timezone_name());
            (s.spec.name, text)
        })
        .collect();
    let pairs: Vec<(&str, &str)> = described
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    Some(crate::completions::words(&pairs))
}

impl SimplePluginCommand for ChangeSchedule {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::record())
            .required("name", SyntaxShape::String, "The schedule's name.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: self.example.0,
            description: self.example.1,
            result: None,
        }]
    }

    #[allow(deprecated, reason = "nu-plugin marks dynamic completion experimental")]
    fn get_dynamic_completion(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        _call: nu_plugin::DynamicCompletionCall,
        arg_type: nu_protocol::engine::ArgType,
        _experimental: nu_protocol::engine::ExperimentalMarker,
    ) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
        complete_names(plugin, engine, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let name: Spanned<String> = call.req(0)?;
        let request = Request::ScheduleChange {
            name: name.item,
            change: self.change,
        };
        match plugin.call(engine, &request) {
            Ok(Response::Schedule(schedule)) => Ok(schedule_record(*schedule, call.head)),
            Ok(other) => Err(unexpected(other, call.head)),
            Err(e) => Err(labeled(e, call.head, &[("name", name.span)])),
        }
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&PAUSE);
    super::examples::test_examples(&RESUME);
    super::examples::test_examples(&REMOVE);
}
