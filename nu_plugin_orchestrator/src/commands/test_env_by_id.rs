//! `orch test env list`, `show <id>`, `run <id>`, `delete <id>` and `logs <id>`.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand, SimplePluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Signature, Span, Spanned, SyntaxShape, Type,
    Value,
};
use orch_protocol::{EnvFilter, Request, Response, TestEnv};

use super::args;
use super::by_id::ById;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::testenv_values;

/// The environment an answer carries.
fn env_of(answer: Response, head: Span) -> Result<TestEnv, LabeledError> {
    match answer {
        Response::Env(env) => Ok(*env),
        other => Err(unexpected(other, head)),
    }
}

/// An environment answer as a record.
fn shown(
    _: &OrchestratorPlugin,
    _: &EngineInterface,
    answer: Response,
    head: Span,
) -> Result<Value, LabeledError> {
    Ok(testenv_values::env(&env_of(answer, head)?, head))
}

/// An environment answer as a record, or an error when it failed (the command made it
/// fail).
fn shown_or_failure(
    _: &OrchestratorPlugin,
    _: &EngineInterface,
    answer: Response,
    head: Span,
) -> Result<Value, LabeledError> {
    testenv_values::env_or_failure(&env_of(answer, head)?, head)
}

/// `orch test env show`
pub const SHOW: ById = ById {
    name: "orch test env show",
    description: "Show a test environment: status, nodes, probes, test results, diagnostics.",
    extra_description: "",
    names: "environment",
    request: |id| Request::Env { id },
    examples: &[(
        "orch test env show 7 | get nodes",
        "The nodes of environment 7",
    )],
    answer: shown,
};

/// `orch test env run`
pub const RUN: ById = ById {
    name: "orch test env run",
    description: "Run an environment's tests (each taskserv's test script on its node), starting it first if it was only created. A result per test: exit code, output, duration. A failed start or failed tests are an error naming the stage, the node and the cause.",
    extra_description: "",
    names: "environment",
    request: |id| Request::EnvRun { id },
    examples: &[(
        "orch test env run 7 | get results | select node taskserv passed duration_ms",
        "Test environment 7",
    )],
    answer: shown_or_failure,
};

/// `orch test env delete`
pub const DELETE: ById = ById {
    name: "orch test env delete",
    description: "Delete a test environment's containers and network.",
    extra_description: "",
    names: "environment",
    request: |id| Request::EnvDelete { id },
    examples: &[("orch test env delete 7", "Delete environment 7")],
    answer: shown,
};

/// `orch test env list`
pub struct EnvList;

impl SimplePluginCommand for EnvList {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch test env list"
    }

    fn description(&self) -> &str {
        "List test environments, newest first (deleted ones too, with their results)."
    }

    fn signature(&self) -> Signature {
        Signature::build("orch test env list")
            .input_output_type(Type::Nothing, Type::table())
            .switch(
                "alive",
                "Only environments that are not deleted (they still have containers).",
                Some('a'),
            )
            .named("limit", SyntaxShape::Int, "At most this many.", Some('n'))
            .named(
                "before",
                SyntaxShape::Int,
                "Only environments with a smaller id (a cursor: the last id of a page).",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch test env list --alive | select id name status expires",
                description: "The environments that still have containers",
                result: None,
            },
            Example {
                example: "orch test env list --limit 20 --before 300",
                description: "The 20 environments made before environment 300",
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
        let before: Option<Spanned<i64>> = call.get_flag("before")?;
        let before = before
            .map(|b| {
                u64::try_from(b.item).map_err(|_| {
                    LabeledError::new("invalid cursor")
                        .with_label("`--before` must not be negative", b.span)
                })
            })
            .transpose()?;
        let mut filter = EnvFilter {
            before,
            limit: None,
            alive: call.has_flag("alive")?,
        };
        let mut left = args::limit_flag(call)?.unwrap_or(usize::MAX);
        let mut rows = Vec::new();
        // A page at a time (the daemon gives at most a page per answer), until the limit
        // or the oldest environment.
        while left > 0 {
            filter.limit = Some(left.min(EnvFilter::MAX_LIMIT));
            let envs = match plugin
                .call(
                    engine,
                    &Request::Envs {
                        filter: filter.clone(),
                    },
                )
                .map_err(|e| labeled(e, call.head, &[]))?
            {
                Response::Envs { envs } => envs,
                other => return Err(unexpected(other, call.head)),
            };
            let full = envs.len() == filter.limit.unwrap_or(0);
            left -= envs.len();
            filter.before = envs.last().map(|e| e.id);
            rows.extend(
                envs.iter()
                    .map(|e| testenv_values::env_summary(e, call.head)),
            );
            if !full || filter.before.is_none() {
                break;
            }
        }
        Ok(Value::list(rows, call.head))
    }
}

/// `orch test env logs`
pub struct EnvLogs;

impl PluginCommand for EnvLogs {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch test env logs"
    }

    fn description(&self) -> &str {
        "A test environment's logs: each container's log, then the daemon's log of its setup, probes and tests."
    }

    fn signature(&self) -> Signature {
        Signature::build("orch test env logs")
            .input_output_type(Type::Nothing, Type::String)
            .required("id", SyntaxShape::Int, "The environment's id.")
            .switch(
                "follow",
                "Keep streaming while the environment is being set up or tested.",
                Some('f'),
            )
            .category(Category::Custom("orchestrator".into()))
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
        crate::completions::id_argument(
            plugin,
            engine,
            crate::completions::Named::Environment,
            &arg_type,
        )
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch test env logs 7 --follow | lines",
            description: "Follow environment 7's setup",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = args::task_id(id_arg)?;
        let follow = call.has_flag("follow")?;
        super::logs::stream_log(
            plugin,
            engine,
            call,
            &Request::EnvLogs { id, follow },
            id_arg.span,
        )
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&SHOW);
    super::examples::test_examples(&RUN);
    super::examples::test_examples(&DELETE);
    super::examples::test_examples(&EnvList);
    super::examples::test_examples(&EnvLogs);
}
