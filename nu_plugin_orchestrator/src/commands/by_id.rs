//! The shape of the commands about one thing named by its id (a task, a workflow, a test
//! environment): one request built from the id, and its answer shown. A daemon error
//! about the id points at the id argument.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, Signature, Span, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{Request, Response};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};
use crate::convert::{task_detail, task_row};

/// What a command by id shows of the daemon's answer.
pub type Answer =
    fn(&OrchestratorPlugin, &EngineInterface, Response, Span) -> Result<Value, LabeledError>;

/// A command that sends one request about the thing its `id` argument names.
pub struct ById {
    /// The command's name.
    pub name: &'static str,
    /// What it does, in one paragraph.
    pub description: &'static str,
    /// More about it (empty: nothing more).
    pub extra_description: &'static str,
    /// What the id names (`task`), for the argument's help.
    pub names: &'static str,
    /// The request about that id.
    pub request: fn(u64) -> Request,
    /// Its examples: the command line and what it does.
    pub examples: &'static [(&'static str, &'static str)],
    /// The answer as the command's value.
    pub answer: Answer,
}

impl SimplePluginCommand for ById {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn extra_description(&self) -> &str {
        self.extra_description
    }

    fn signature(&self) -> Signature {
        taking_ids(Signature::build(self.name), self.names)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(self.examples)
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
        let named = crate::completions::Named::from_word(self.names)?;
        crate::completions::id_argument(plugin, engine, named, &arg_type)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        for_each_id(call, input, self.names, |id, span| {
            let answer = plugin
                .call(engine, &(self.request)(id))
                .map_err(|e| labeled(e, call.head, &[("id", span)]))?;
            (self.answer)(plugin, engine, answer, call.head)
        })
    }
}

/// `signature` with the input and rest argument of a command on ids of `names` (`task`):
/// ids as arguments, or ids (or records with an `id`) from the pipeline.
pub fn taking_ids(signature: Signature, names: &str) -> Signature {
    signature
        .input_output_types(vec![
            (Type::Nothing, Type::Any),
            (Type::list(Type::Any), Type::list(Type::record())),
            (Type::record(), Type::list(Type::record())),
            (Type::Int, Type::list(Type::record())),
        ])
        .rest(
            "ids",
            SyntaxShape::Int,
            format!(
                "The {names}'s id; several give a list. Without one, the ids come from the pipeline (ids, or records with an `id` column)."
            ),
        )
}

/// Runs `each` on every id the call names (arguments, else the pipeline; each id once, in
/// order, stopping at the first error, which says which ids were done): one id named as
/// an argument gives its value, several give a list.
pub fn for_each_id(
    call: &EvaluatedCall,
    input: &Value,
    names: &str,
    mut each: impl FnMut(u64, Span) -> Result<Value, LabeledError>,
) -> Result<Value, LabeledError> {
    let named = call.rest::<Spanned<i64>>(0)?.len();
    let mut ids = args::ids_of_call(call, 0, input)?;
    if ids.is_empty() {
        return Err(LabeledError::new(format!("no {names} id")).with_label(
            format!("give one or more ids, or pipe in {names}s (records with an `id` column)"),
            call.head,
        ));
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|(id, _)| seen.insert(*id));
    let mut answers = Vec::with_capacity(ids.len());
    for (id, span) in &ids {
        let answer = each(*id, *span).map_err(|e| done_before(e, names, &ids[..answers.len()]))?;
        answers.push(answer);
    }
    if named == 1 {
        return Ok(answers.remove(0));
    }
    Ok(Value::list(answers, call.head))
}

/// `error`, saying which ids were already done when it came (a command on several ids
/// stops at the first that fails).
fn done_before(error: LabeledError, names: &str, done: &[(u64, Span)]) -> LabeledError {
    if done.is_empty() {
        return error;
    }
    let ids: Vec<String> = done.iter().map(|(id, _)| id.to_string()).collect();
    error.with_help(format!(
        "stopped there: the {names}s before it ({}) were done",
        ids.join(", ")
    ))
}

/// A task answer as its `orch tasks` row.
pub fn task_as_row(
    _: &OrchestratorPlugin,
    _: &EngineInterface,
    answer: Response,
    head: Span,
) -> Result<Value, LabeledError> {
    Ok(task_row(&expect_task(answer, head)?, head))
}

/// A task answer in full.
pub fn task_in_full(
    _: &OrchestratorPlugin,
    _: &EngineInterface,
    answer: Response,
    head: Span,
) -> Result<Value, LabeledError> {
    Ok(task_detail(&expect_task(answer, head)?, head))
}
