//! `orch test env create single|server|cluster`: a test environment in containers.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Spanned, SyntaxShape, Type, Value};
use orch_protocol::{EnvRequest, EnvSpec, Request, Resources, Response, Topology};

use super::args;
use crate::OrchestratorPlugin;
use crate::connection::{labeled, unexpected};
use crate::testenv_values;

/// `orch test env create`
pub struct TestEnvCreate;

impl SimplePluginCommand for TestEnvCreate {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch test env create"
    }

    fn description(&self) -> &str {
        "Create a test environment: `single` (one taskserv in one container), `server` (several taskservs in one container, in dependency order) or `cluster` (a topology's nodes on a network of their own)."
    }

    fn extra_description(&self) -> &str {
        "With --auto-start the taskservs are installed and probed until ready; with --auto-cleanup the tests run and the environment is deleted afterwards (its results and diagnostics stay). Returns once the environment is settled; an environment that failed (set up or tests) is an error naming the stage, the node and the cause (`orch test env show ID` has its diagnostics)."
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::Nothing, Type::record()),
                (Type::record(), Type::record()),
            ])
            .required("kind", SyntaxShape::String, "single, server or cluster.")
            .required("name", SyntaxShape::String, "The taskserv (single), the server's name (server) or the cluster's name (cluster).")
            .optional("taskservs", SyntaxShape::List(Box::new(SyntaxShape::String)), "The server's taskservs (server).")
            .named("topology", SyntaxShape::String, "A topology template by name (cluster; or pipe a topology record in).", Some('t'))
            .switch("auto-start", "Install the taskservs and wait until they are ready.", Some('s'))
            .switch("auto-cleanup", "Also run the tests, then delete the environment.", Some('c'))
            .named("ttl", SyntaxShape::Duration, "Delete it after this long (default: the daemon's, 1h).", None)
            .named("cpus", SyntaxShape::Number, "CPU limit per node.", None)
            .named("memory", SyntaxShape::Filesize, "Memory limit per node.", None)
            .named("image", SyntaxShape::String, "The image of every node.", None)
            .category(Category::Custom("orchestrator".into()))
    }

    #[allow(deprecated, reason = "nu-plugin marks dynamic completion experimental")]
    fn get_dynamic_completion(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: nu_plugin::DynamicCompletionCall,
        arg_type: nu_protocol::engine::ArgType,
        _experimental: nu_protocol::engine::ExperimentalMarker,
    ) -> Option<Vec<nu_protocol::DynamicSuggestion>> {
        use crate::completions::{Names, names};
        match &arg_type {
            nu_protocol::engine::ArgType::Positional(0) => names(plugin, engine, Names::EnvKinds),
            nu_protocol::engine::ArgType::Positional(1) => {
                let kind = call.call.positional_nth(0).and_then(|e| e.as_string());
                let single = kind.is_none_or(|k| k == "single");
                single.then(|| names(plugin, engine, Names::Taskservs))?
            }
            _ => crate::completions::flag_value(plugin, engine, &arg_type),
        }
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch test env create single postgres --auto-start --auto-cleanup | get results",
                description: "Install postgres in a container, test it, delete the container",
                result: None,
            },
            Example {
                example: "orch test env create server web-01 [containerd etcd] --auto-start",
                description: "A server with two taskservs, ready for `orch test env run`",
                result: None,
            },
            Example {
                example: "orch test topology show etcd_cluster | orch test env create cluster etcd --auto-start",
                description: "A three-member etcd cluster from its topology template",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: &Value,
    ) -> Result<Value, LabeledError> {
        let kind: Spanned<String> = call.req(0)?;
        let name: String = call.req(1)?;
        let env = match kind.item.as_str() {
            "single" => EnvSpec::Single { taskserv: name },
            "server" => EnvSpec::Server {
                name,
                taskservs: call.opt(2)?.unwrap_or_default(),
            },
            "cluster" => EnvSpec::Cluster {
                name,
                topology: topology(plugin, engine, call, input)?,
            },
            other => {
                return Err(LabeledError::new("unknown environment kind").with_label(
                    format!("`{other}` is not a kind: use single, server or cluster"),
                    kind.span,
                ));
            }
        };
        let request = EnvRequest {
            env,
            auto_start: call.has_flag("auto-start")?,
            auto_cleanup: call.has_flag("auto-cleanup")?,
            ttl_ms: match args::flag::<Value>(call, "ttl")? {
                Some(v) => Some((v.as_duration()?.max(0) / 1_000_000) as u64),
                None => None,
            },
            resources: resources(call)?,
            image: args::flag(call, "image")?,
        };
        let shown = crate::progress::Source::NewEnv {
            name: request.env.name().to_string(),
            since: chrono::Utc::now(),
        };
        let _display = crate::progress::Display::beside(engine, shown);
        let answer = plugin
            .call(engine, &Request::EnvCreate { env: request })
            .map_err(|e| {
                let spans = [
                    ("ttl", call.get_flag_span("ttl").unwrap_or(call.head)),
                    ("env", call.head),
                ];
                labeled(e, call.head, &spans)
            })?;
        match answer {
            Response::Env(env) => testenv_values::env_or_failure(&env, call.head),
            other => Err(unexpected(other, call.head)),
        }
    }
}

/// The topology: piped in, or a template named by `--topology`.
fn topology(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    input: &Value,
) -> Result<Topology, LabeledError> {
    if let Value::Record { .. } = input {
        return serde_json::from_value(crate::typed::untyped(input)?).map_err(|e| {
            LabeledError::new("invalid topology")
                .with_label(format!("not a topology: {e}"), input.span())
        });
    }
    let Some(name) = args::flag::<Spanned<String>>(call, "topology")? else {
        return Err(LabeledError::new("no topology").with_label(
            "a cluster needs a topology: pipe one in (orch test topology show NAME) or pass --topology NAME",
            call.head,
        ));
    };
    super::test_topology_show::find(plugin, engine, call, &name)
}

fn resources(call: &EvaluatedCall) -> Result<Option<Resources>, LabeledError> {
    let cpus: Option<f64> = args::flag(call, "cpus")?;
    let memory = match args::flag::<Value>(call, "memory")? {
        Some(v) => Some((v.as_filesize()?.get().max(0) as u64).div_ceil(1024 * 1024)),
        None => None,
    };
    if cpus.is_some_and(|c| c <= 0.0) {
        return Err(LabeledError::new("invalid cpus").with_label(
            "the CPU limit must be positive",
            call.get_flag_span("cpus").unwrap_or(call.head),
        ));
    }
    Ok((cpus.is_some() || memory.is_some()).then_some(Resources {
        cpus,
        memory_mb: memory,
    }))
}

#[test]
fn test_examples() {
    super::examples::test_examples(&TestEnvCreate);
}
