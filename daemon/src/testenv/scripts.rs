//! Taskserv scripts on a node: each `install.nu` or `test.nu` runs in its own `nu`, as a
//! workflow step runs it (the same generated code, `$params` the step context), with
//! commands going to the node's container through the `local` provider's `server-exec`.
//! The daemon hands the provider the container (in the server record) and the engine
//! (`DOCKER_HOST`), and marks the process with the environment for the orphan sweep.

use std::time::{Duration, Instant};

use orch_protocol::{EnvNode, EnvSpec, TestEnv};
use serde_json::{Value, json};

use super::TestEnvService;
use super::engine::ContainerEngine;
use crate::extensions::Registry;
use crate::nu_command::{NuCommand, Owner, Program};
use crate::workflows::{install_order, snippets};

/// How long one taskserv script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Which script of its taskservs a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `install`: in install order, stopping at the first failure.
    Install,
    /// `test`: every one.
    Test,
}

impl Purpose {
    /// The script's key in a taskserv manifest's `[scripts]`.
    pub fn script(self) -> &'static str {
        match self {
            Purpose::Install => "install",
            Purpose::Test => "test",
        }
    }
}

/// How one taskserv script run ended.
pub struct ScriptOutcome {
    /// The taskserv.
    pub taskserv: String,
    /// Its exit code (-1: it did not end on its own).
    pub exit_code: i32,
    /// What it printed (standard output, then standard error).
    pub output: String,
    /// How long it ran.
    pub duration_ms: u64,
}

impl ScriptOutcome {
    /// A run that could not start.
    fn refused(taskserv: &str, why: String) -> ScriptOutcome {
        ScriptOutcome {
            taskserv: taskserv.into(),
            exit_code: 1,
            output: why,
            duration_ms: 0,
        }
    }
}

impl TestEnvService {
    /// Runs the `purpose` script of each of a node's taskservs that has one, in install
    /// order; an install stops at the first failure.
    pub(super) async fn run_scripts(
        &self,
        registry: &Registry,
        env: &TestEnv,
        engine: &ContainerEngine,
        node: &EnvNode,
        purpose: Purpose,
    ) -> Vec<ScriptOutcome> {
        let provider = match registry.provider(super::contract::PROVIDER) {
            Ok(p) => p.dir.join(&p.module),
            Err(e) => return vec![ScriptOutcome::refused("local provider", e)],
        };
        let Ok(order) = install_order(&node.taskservs, registry) else {
            return vec![ScriptOutcome::refused(
                &node.taskservs.join(","),
                "its taskservs changed since it was created".into(),
            )];
        };
        let server = self.naming.server(env.id, node);
        let mut outcomes = Vec::new();
        for taskserv in &order {
            let Some(script) = taskserv.scripts.get(purpose.script()) else {
                continue;
            };
            let script = taskserv.dir.join(script);
            let plan = [(taskserv.name.clone(), vec![script.as_path()])];
            let code = snippets::run_taskserv_scripts(&provider, &plan);
            let ctx = json!({
                "step": format!("testenv:{}:{}:{}:{}", env.id, node.name, purpose.script(), taskserv.name),
                "infra": {"name": self.naming.prefix(env.id), "dir": self.config.data_dir, "settings": {}},
                "server": server, "servers": [server],
                "taskservs": {taskserv.name.clone(): {"name": taskserv.name, "version": taskserv.version, "dir": taskserv.dir}},
                "cluster": cluster_context(env),
            });
            let started = Instant::now();
            let name = format!("{}-{}-{}", node.name, taskserv.name, purpose.script());
            let (exit, output) = self.nu(env.id, &name, &code, &ctx, engine).await;
            self.log(
                env.id,
                &format!(
                    "[{}] {} {} (exit {exit}, {:.1}s)\n{output}",
                    node.name,
                    purpose.script(),
                    taskserv.name,
                    started.elapsed().as_secs_f64()
                ),
            );
            outcomes.push(ScriptOutcome {
                taskserv: taskserv.name.clone(),
                exit_code: exit,
                output,
                duration_ms: started.elapsed().as_millis() as u64,
            });
            if exit != 0 && purpose == Purpose::Install {
                break;
            }
        }
        outcomes
    }

    /// Runs Nushell `code` (the run `name`d, unique in the environment) for environment
    /// `id` with `ctx` as `$params`; (exit code, standard output and error).
    async fn nu(
        &self,
        id: orch_protocol::EnvId,
        name: &str,
        code: &str,
        ctx: &Value,
        engine: &ContainerEngine,
    ) -> (i32, String) {
        let params_file = crate::nu_command::params_dir(&self.config.data_dir)
            .join(format!("env-{id}-{name}.json"));
        let built = NuCommand::new(
            &self.config.nu_binary,
            Program::Snippet(code),
            Owner::TestEnv(id),
            &self.config.data_dir,
        )
        .env("DOCKER_HOST", engine.docker_host())
        .env("PROVISIONING_MODULES", &self.config.modules_dir)
        .build(ctx, &params_file);
        let (mut command, _params_file) = match built {
            Ok(built) => built,
            Err(e) => return (-1, format!("cannot write {}: {e}", params_file.display())),
        };
        command.kill_on_drop(true);
        match tokio::time::timeout(SCRIPT_TIMEOUT, command.output()).await {
            Err(_) => (-1, format!("timed out after {}s", SCRIPT_TIMEOUT.as_secs())),
            Ok(Err(e)) => (
                -1,
                format!("cannot run {}: {e}", self.config.nu_binary.display()),
            ),
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                (out.status.code().unwrap_or(-1), text)
            }
        }
    }
}

/// `ctx.cluster` for a cluster environment (null otherwise).
fn cluster_context(env: &TestEnv) -> Value {
    let EnvSpec::Cluster { topology, .. } = &env.request.env else {
        return Value::Null;
    };
    let nodes: Vec<Value> = env
        .nodes
        .iter()
        .map(|n| json!({"hostname": n.name, "role": n.role, "taskservs": n.taskservs}))
        .collect();
    json!({"name": env.name, "definition": topology.name, "nodes": nodes})
}
