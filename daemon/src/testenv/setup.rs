//! Setting an environment up: its containers are created (then, as the request asks,
//! it is started, tested and deleted), and starting it installs every node's taskservs
//! (nodes in parallel), probes them and runs the topology's checks. Each stage is
//! committed before it acts.

use std::sync::Arc;

use futures_util::future::join_all;
use orch_protocol::{DeleteReason, EnvRequest, EnvStage, EnvState, TestEnv};

use super::diagnostics::{last_line, root_cause};
use super::engine::ContainerEngine;
use super::scripts::Purpose;
use super::stages::Transition;
use super::{TestEnvService, plan, probe};
use crate::extensions::Registry;

impl TestEnvService {
    /// Names and creates the network and containers of a recorded environment, then
    /// starts it (and tests and deletes it) as the request asks.
    pub(super) async fn build(
        self: &Arc<Self>,
        mut env: TestEnv,
        engine: &ContainerEngine,
        request: &EnvRequest,
    ) -> TestEnv {
        env.network = self.naming.network(env.id);
        for node in &mut env.nodes {
            node.container = self.naming.container(env.id, &node.name);
        }
        env = match self.save(env.clone(), None).await {
            Ok(env) => env,
            Err(_) => return env,
        };
        if let Err(error) = self.create_objects(&env, engine).await {
            env = self.fail(env, engine, error, String::new()).await;
        } else if !(request.auto_start || request.auto_cleanup) {
            return self.advance(env, Transition::Created).await;
        } else {
            env = self.start(env, engine).await;
        }
        if request.auto_cleanup {
            if matches!(env.state, EnvState::Ready { .. }) {
                env = self.test(env, engine).await;
            }
            let id = env.id;
            return match self
                .remove(env.clone(), engine, DeleteReason::AutoCleanup, None)
                .await
            {
                Ok(env) => env,
                Err(_) => self.get(id).unwrap_or(env),
            };
        }
        env
    }

    /// Starts the containers, installs every node's taskservs (nodes in parallel), probes
    /// them and runs the topology's checks: ready, or failed with diagnostics.
    pub(super) async fn start(
        self: &Arc<Self>,
        mut env: TestEnv,
        engine: &ContainerEngine,
    ) -> TestEnv {
        env = self.enter(env, EnvStage::Starting).await;
        if let Err(error) = self.start_containers(&env, engine).await {
            return self.fail(env, engine, error, String::new()).await;
        }
        env = self.enter(env, EnvStage::Installing).await;
        // Read once for the whole start: every node's installs and probes use it.
        let registry = Registry::load(&self.config.modules_dir);
        let installs = env
            .nodes
            .iter()
            .map(|node| self.run_scripts(&registry, &env, engine, node, Purpose::Install));
        let outcomes = join_all(installs).await;
        let failure = env.nodes.iter().zip(outcomes).find_map(|(node, outcomes)| {
            let failed = outcomes.into_iter().find(|o| o.exit_code != 0)?;
            let error = format!(
                "node {}: installing {} failed (exit code {}): {}",
                node.name,
                failed.taskserv,
                failed.exit_code,
                root_cause(&failed.output)
            );
            Some((error, failed.output))
        });
        if let Some((error, output)) = failure {
            return self.fail(env, engine, error, output).await;
        }
        env = self.enter(env, EnvStage::Probing).await;
        let topology = plan::topology(&env.request.env);
        env.probes =
            probe::nodes_then_checks(&registry, engine, &env.nodes, &topology.checks).await;
        self.log(
            env.id,
            &format!(
                "probes: {}",
                serde_json::to_string_pretty(&env.probes).unwrap_or_default()
            ),
        );
        if let Some(bad) = env.probes.iter().find(|p| !p.ok) {
            let error = format!(
                "node {}: {} is not ready: `{}` gave: {}",
                bad.node,
                bad.taskserv,
                bad.command,
                last_line(&bad.output)
            );
            return self.fail(env, engine, error, String::new()).await;
        }
        self.advance(env, Transition::Ready).await
    }

    /// Records the setup stage an environment enters.
    async fn enter(&self, env: TestEnv, stage: EnvStage) -> TestEnv {
        self.log(env.id, &format!("stage: {stage}"));
        self.advance(env, Transition::Enter(stage)).await
    }
}
