//! `orch test env list`, `show <id>`, `run <id>`, `delete <id>` and `logs <id>`.

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand, SimplePluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Signature, Spanned, SyntaxShape, Type, Value,
};
use orch_protocol::{Request, Response};

use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::testenv_values;

/// A command that sends one request about an environment and shows it.
pub struct EnvById {
    name: &'static str,
    description: &'static str,
    request: fn(u64) -> Request,
    example: (&'static str, &'static str),
    /// A failed environment in the answer is an error (the command made it fail).
    failure_is_error: bool,
}

/// `orch test env show`
pub const SHOW: EnvById = EnvById {
    name: "orch test env show",
    description: "Show a test environment: status, nodes, probes, test results, diagnostics.",
    request: |id| Request::Env { id },
    example: (
        "orch test env show 7 | get nodes",
        "The nodes of environment 7",
    ),
    failure_is_error: false,
};

/// `orch test env run`
pub const RUN: EnvById = EnvById {
    name: "orch test env run",
    description: "Run an environment's tests (each taskserv's test script on its node), starting it first if it was only created. A result per test: exit code, output, duration. A failed start or failed tests are an error naming the stage, the node and the cause.",
    request: |id| Request::EnvRun { id },
    example: (
        "orch test env run 7 | get results | select node taskserv passed duration_ms",
        "Test environment 7",
    ),
    failure_is_error: true,
};

/// `orch test env delete`
pub const DELETE: EnvById = EnvById {
    name: "orch test env delete",
    description: "Delete a test environment's containers and network.",
    request: |id| Request::EnvDelete { id },
    example: ("orch test env delete 7", "Delete environment 7"),
    failure_is_error: false,
};

impl SimplePluginCommand for EnvById {
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
            .required("id", SyntaxShape::Int, "The environment's id.")
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: self.example.0,
            description: self.example.1,
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        let id_arg: Spanned<i64> = call.req(0)?;
        let id = super::task_id(id_arg)?;
        let answer = plugin
            .call(engine, &(self.request)(id))
            .map_err(|e| labeled(e, call.head, &[("id", id_arg.span)]))?;
        match answer {
            Response::Env(env) if self.failure_is_error => {
                testenv_values::env_or_failure(&env, call.head)
            }
            Response::Env(env) => Ok(testenv_values::env(&env, call.head)),
            other => Err(unexpected(other, call.head)),
        }
    }
}

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
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: "orch test env list | where status != deleted | select id name status expires",
            description: "The environments that still have containers",
            result: None,
        }]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        match plugin
            .call(engine, &Request::Envs)
            .map_err(|e| labeled(e, call.head, &[]))?
        {
            Response::Envs { envs } => Ok(Value::list(
                envs.iter()
                    .map(|e| testenv_values::env(e, call.head))
                    .collect(),
                call.head,
            )),
            other => Err(unexpected(other, call.head)),
        }
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
        let id = super::task_id(id_arg)?;
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
    crate::commands::test_examples(&SHOW);
    crate::commands::test_examples(&RUN);
    crate::commands::test_examples(&DELETE);
    crate::commands::test_examples(&EnvList);
    crate::commands::test_examples(&EnvLogs);
}
