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
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::record())
            .required("id", SyntaxShape::Int, format!("The {}'s id.", self.names))
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        super::help::examples(self.examples)
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = args::task_id(id_arg)?;
        let answer = plugin
            .call(engine, &(self.request)(id))
            .map_err(|e| labeled(e, call.head, &[("id", id_arg.span)]))?;
        (self.answer)(plugin, engine, answer, call.head)
    }
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
