//! `orch schedule list` and `orch schedule next <name>`: the schedules, and a schedule's
//! upcoming times.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{MAX_UPCOMING, Request, Response, ScheduleView};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::schedule_values::schedule_row;

/// `orch schedule list`
pub struct ScheduleList;

/// `orch schedule next`
pub struct ScheduleNext;

/// Every schedule, with `upcoming` times of each.
fn schedules(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    upcoming: u32,
) -> Result<Vec<ScheduleView>, LabeledError> {
    let request = Request::Schedules {
        upcoming: Some(upcoming),
    };
    match plugin.call(engine, &request) {
        Ok(Response::Schedules { schedules }) => Ok(schedules),
        Ok(other) => Err(unexpected(other, call.head)),
        Err(e) => Err(labeled(e, call.head, &[])),
    }
}

/// The count flag `name` (default `default`), between 1 and [`MAX_UPCOMING`].
fn count(call: &EvaluatedCall, name: &str, default: u32) -> Result<u32, LabeledError> {
    let Some(n) = call.get_flag::<Spanned<i64>>(name)? else {
        return Ok(default);
    };
    u32::try_from(n.item)
        .ok()
        .filter(|n| (1..=MAX_UPCOMING).contains(n))
        .ok_or_else(|| {
            LabeledError::new(format!("invalid --{name}")).with_label(
                format!("between 1 and {MAX_UPCOMING}, not {}", n.item),
                n.span,
            )
        })
}

impl SimplePluginCommand for ScheduleList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch schedule list"
    }

    fn description(&self) -> &str {
        "The schedules: pattern, time zone, what each run submits, next run, runs so far and the last one (with what it submitted, or why nothing)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::table())
            .named(
                "upcoming",
                SyntaxShape::Int,
                "How many upcoming times each row lists (default 1, at most 100).",
                Some('u'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch schedule list",
                description: "Every schedule",
                result: None,
            },
            Example {
                example: "orch schedule list | where last_error != null",
                description: "The schedules whose last run submitted nothing",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let upcoming = count(call, "upcoming", 1)?;
        let rows = schedules(plugin, engine, call, upcoming)?
            .into_iter()
            .map(|view| schedule_row(view, call.head))
            .collect();
        Ok(Value::list(rows, call.head))
    }
}

impl SimplePluginCommand for ScheduleNext {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch schedule next"
    }

    fn description(&self) -> &str {
        "A schedule's next times, as datetimes (first the next run)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_type(Type::Nothing, Type::list(Type::Date))
            .required("name", SyntaxShape::String, "The schedule's name.")
            .named(
                "count",
                SyntaxShape::Int,
                "How many (default 5, at most 100).",
                Some('c'),
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch schedule next backup --count 3",
            description: "When the backup runs next, three times",
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
        super::schedule_change::complete_names(plugin, engine, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let name: Spanned<String> = call.req(0)?;
        let count = count(call, "count", 5)?;
        let found = schedules(plugin, engine, call, count)?
            .into_iter()
            .find(|view| view.schedule.spec.name == name.item)
            .ok_or_else(|| {
                LabeledError::new("not found").with_label(
                    format!(
                        "no schedule {:?} (`orch schedule list` shows them)",
                        name.item
                    ),
                    name.span,
                )
            })?;
        let times = found
            .upcoming
            .into_iter()
            .map(|at| Value::date(at.fixed_offset(), call.head))
            .collect();
        Ok(Value::list(times, call.head))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&ScheduleList);
    super::examples::test_examples(&ScheduleNext);
}
