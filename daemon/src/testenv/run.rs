//! Running an environment's tests: a created environment is started first, then each
//! node's taskserv `test.nu` runs on it (nodes in parallel), one result per test.

use std::sync::Arc;

use futures_util::future::join_all;
use orch_protocol::{Actor, EnvId, EnvState, ErrorKind, ErrorReply, TestEnv, TestResult};
use serde_json::json;

use super::TestEnvService;
use super::diagnostics::root_cause;
use super::engine::ContainerEngine;
use super::scripts::Purpose;
use super::stages::{self, Transition};
use crate::audit::AuditRecord;
use crate::extensions::Registry;

impl TestEnvService {
    /// Starts (if it is only created) and tests environment `id`, on a client's request.
    pub(super) async fn run_env(
        self: &Arc<Self>,
        actor: Actor,
        id: EnvId,
    ) -> Result<TestEnv, ErrorReply> {
        let params = json!({ "id": id });
        let env = self.get(id)?;
        let refusal = stages::run_refusal(id, &env.state).or_else(|| {
            (!self.claim(id))
                .then(|| format!("test environment {id} is busy ({})", env.state.status()))
        });
        if let Some(message) = refusal {
            let error = ErrorReply::field(ErrorKind::Conflict, "id", message);
            self.audit_refusal(actor, "test_env_run", params, &error)
                .await;
            return Err(error);
        }
        let result = async {
            let engine = self.engine_for_request().await?;
            // The recovery after a restart may have deleted it meanwhile.
            let env = self.still_there(id, env)?;
            let record = AuditRecord::new(
                actor,
                "test_env_run",
                params,
                Ok(format!("tests of environment {id} started")),
            );
            let mut env = self.save(env, Some(record)).await?;
            if matches!(env.state, EnvState::Created { .. }) {
                env = self.start(env, &engine).await;
            }
            if stages::testable(&env.state) {
                env = self.test(env, &engine).await;
            }
            Ok(env)
        }
        .await;
        self.release(id);
        result
    }

    /// Runs each node's taskserv tests: ready with the results, or failed with them and
    /// diagnostics.
    pub(super) async fn test(self: &Arc<Self>, env: TestEnv, engine: &ContainerEngine) -> TestEnv {
        let mut env = self.advance(env, Transition::Testing).await;
        let snapshot = &env;
        let registry = &Registry::load(&self.config.modules_dir);
        let runs = snapshot.nodes.iter().map(|node| async move {
            let outcomes = self
                .run_scripts(registry, snapshot, engine, node, Purpose::Test)
                .await;
            outcomes.into_iter().map(|outcome| TestResult {
                node: node.name.clone(),
                taskserv: outcome.taskserv,
                passed: outcome.exit_code == 0,
                exit_code: outcome.exit_code,
                output: outcome.output,
                duration_ms: outcome.duration_ms,
            })
        });
        env.results = join_all(runs).await.into_iter().flatten().collect();
        let failed: Vec<&TestResult> = env.results.iter().filter(|r| !r.passed).collect();
        let Some(first) = failed.first() else {
            return self.advance(env, Transition::Ready).await;
        };
        let error = format!(
            "{} of {} tests failed ({}); node {}: {} test (exit code {}): {}",
            failed.len(),
            env.results.len(),
            failed
                .iter()
                .map(|r| format!("{} on {}", r.taskserv, r.node))
                .collect::<Vec<_>>()
                .join(", "),
            first.node,
            first.taskserv,
            first.exit_code,
            root_cause(&first.output)
        );
        let output = failed
            .iter()
            .map(|r| r.output.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        self.fail(env, engine, error, output).await
    }
}
