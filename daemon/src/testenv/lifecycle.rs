//! An environment's life: create (record, network, containers), start (install each
//! node's taskservs with their scripts, probe them, run the topology's checks), run the
//! tests, delete. Each stage is committed before it acts.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use orch_protocol::{
    Actor, DeleteReason, Diagnostics, EnvId, EnvNode, EnvRequest, EnvSpec, EnvStage, EnvState,
    ErrorKind, ErrorReply, NodeDiagnostics, ProbeResult, TestEnv, TestResult, Topology,
    TopologyNode,
};
use serde_json::{Value, json};

use super::engine::{ContainerEngine, ContainerSpec, DAEMON_LABEL, ENV_LABEL, ROLE_LABEL};
use super::{TestEnvService, topologies};
use crate::audit::AuditRecord;
use crate::extensions::Registry;
use crate::workflows::{install_order, snippets};

/// The image of a node when nothing else names one.
const BASE_IMAGE: &str = "localhost/provisioning-base:bookworm";
/// The longest time to live accepted: a week.
const MAX_TTL_MS: u64 = 7 * 24 * 3600 * 1000;
/// How long one taskserv script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long a probe is retried when its taskserv names no timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

impl TestEnvService {
    pub(super) async fn create_env(
        self: &Arc<Self>,
        actor: Actor,
        request: EnvRequest,
    ) -> Result<TestEnv, ErrorReply> {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let admitted = self.admit(&request).await;
        let (env, engine) = match admitted {
            Ok(ok) => ok,
            Err(error) => {
                self.audit_refusal(actor, "test_env_create", params, &error)
                    .await;
                return Err(error);
            }
        };
        // The limit is counted again, and the environment recorded and claimed, under one
        // lock: two creations at once cannot both take the last place.
        let admission = self.admission.lock().await;
        if let Err(error) = self.check_limit() {
            drop(admission);
            self.audit_refusal(actor, "test_env_create", params, &error)
                .await;
            return Err(error);
        }
        let record = AuditRecord::new(actor, "test_env_create", params, Ok("accepted".into()));
        let env = self.save(env, Some(record)).await?;
        self.claim(env.id);
        drop(admission);
        let env = self.build(env, &engine, &request).await;
        self.release(env.id);
        if !matches!(env.state, EnvState::Deleted { .. }) {
            self.arm_ttl(env.id, env.expires_at);
        }
        Ok(env)
    }

    /// Checks a request (names, limits, engine, images) and drafts its record.
    async fn admit(&self, request: &EnvRequest) -> Result<(TestEnv, ContainerEngine), ErrorReply> {
        let bad = |message: String| ErrorReply::field(ErrorKind::BadRequest, "env", message);
        let registry = Registry::load(&self.config.modules_dir);
        let (name, kind, topology) = describe(&request.env);
        if let EnvSpec::Cluster { name, topology } = &request.env {
            topologies::plain_name("name", name)?;
            topologies::plain_name("topology.name", &topology.name)?;
        }
        topologies::check(&topology).map_err(bad)?;
        topologies::check_taskservs(&topology, &registry).map_err(bad)?;
        let ttl_ms = request
            .ttl_ms
            .unwrap_or(self.config.default_ttl.as_millis() as u64);
        if ttl_ms == 0 || ttl_ms > MAX_TTL_MS {
            return Err(ErrorReply::field(
                ErrorKind::BadRequest,
                "ttl",
                "the time to live must be positive and at most 7 days",
            ));
        }
        self.check_limit()?;
        check_resources(request.resources.as_ref())?;
        for node in &topology.nodes {
            check_resources(node.resources.as_ref())?;
        }
        let engine = self.engine_for_request().await?;
        let mut nodes = Vec::new();
        for node in &topology.nodes {
            nodes.push(self.plan_node(node, request, &registry).map_err(bad)?);
        }
        for image in nodes
            .iter()
            .map(|n| n.image.clone())
            .collect::<std::collections::BTreeSet<_>>()
        {
            engine.ensure_image(&image).await.map_err(bad)?;
        }
        let now = Utc::now();
        let env = TestEnv {
            id: 0,
            name,
            kind: kind.to_string(),
            request: request.clone(),
            created_at: now,
            expires_at: now + chrono::Duration::milliseconds(ttl_ms as i64),
            network: String::new(),
            nodes,
            state: EnvState::Starting {
                since: now,
                stage: EnvStage::Creating,
            },
            probes: Vec::new(),
            results: Vec::new(),
            diagnostics: None,
        };
        Ok((env, engine))
    }

    /// Refuses a creation when `--max-test-envs` environments exist.
    fn check_limit(&self) -> Result<(), ErrorReply> {
        let existing = self
            .list()
            .iter()
            .filter(|e| !matches!(e.state, EnvState::Deleted { .. }))
            .count();
        if existing >= self.config.max_envs {
            return Err(ErrorReply::new(
                ErrorKind::Conflict,
                format!(
                    "{existing} test environments exist and the limit is {} (--max-test-envs): delete one first",
                    self.config.max_envs
                ),
            ));
        }
        Ok(())
    }

    /// A node's install order, image and limits.
    fn plan_node(
        &self,
        node: &TopologyNode,
        request: &EnvRequest,
        registry: &Registry,
    ) -> Result<EnvNode, String> {
        let order = install_order(&node.taskservs, registry)?;
        let configured = order.iter().find_map(|t| t.image.clone());
        let image = request
            .image
            .clone()
            .or_else(|| node.image.clone())
            .or(configured)
            .or_else(|| {
                std::env::var("PROVISIONING_BASE_IMAGE")
                    .ok()
                    .filter(|i| !i.is_empty())
            })
            .unwrap_or_else(|| BASE_IMAGE.to_string());
        Ok(EnvNode {
            name: node.name.clone(),
            role: node.role.clone(),
            taskservs: order.iter().map(|t| t.name.clone()).collect(),
            container: String::new(),
            image,
            resources: node.resources.clone().or_else(|| request.resources.clone()),
        })
    }

    /// Creates the network and containers of a recorded environment, then starts it
    /// (and tests and deletes it) as the request asks.
    async fn build(
        self: &Arc<Self>,
        mut env: TestEnv,
        engine: &ContainerEngine,
        request: &EnvRequest,
    ) -> TestEnv {
        let prefix = self.prefix(env.id);
        env.network = format!("{prefix}-net");
        for node in &mut env.nodes {
            node.container = format!("{prefix}-{}", node.name);
        }
        env = match self.save(env.clone(), None).await {
            Ok(env) => env,
            Err(_) => return env,
        };
        if let Err(error) = self.create_containers(&env, engine).await {
            env = self
                .fail(env, engine, EnvStage::Creating, error, String::new())
                .await;
        } else if !(request.auto_start || request.auto_cleanup) {
            env.state = EnvState::Created { at: Utc::now() };
            return self.save(env.clone(), None).await.unwrap_or(env);
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

    async fn create_containers(
        &self,
        env: &TestEnv,
        engine: &ContainerEngine,
    ) -> Result<(), String> {
        let labels = |role: Option<&str>, node: Option<&str>| {
            let mut labels = HashMap::from([
                (ENV_LABEL.to_string(), env.id.to_string()),
                (DAEMON_LABEL.to_string(), self.instance.clone()),
                ("provisioning.infra".to_string(), self.prefix(env.id)),
                ("provisioning.provider".to_string(), "local".to_string()),
            ]);
            if let Some(role) = role {
                labels.insert(ROLE_LABEL.to_string(), role.to_string());
            }
            if let Some(node) = node {
                labels.insert("provisioning.server".to_string(), node.to_string());
            }
            labels
        };
        engine
            .create_network(&env.network, labels(None, None))
            .await?;
        for node in &env.nodes {
            let spec = ContainerSpec {
                name: &node.container,
                hostname: &node.name,
                image: &node.image,
                network: &env.network,
                labels: labels(Some(&node.role), Some(&node.name)),
                resources: node.resources.as_ref(),
            };
            engine.create_container(&spec).await?;
        }
        Ok(())
    }

    /// Starts the containers, installs every node's taskservs (nodes in parallel), probes
    /// them and runs the topology's checks: ready, or failed with diagnostics.
    async fn start(self: &Arc<Self>, mut env: TestEnv, engine: &ContainerEngine) -> TestEnv {
        env = self.stage(env, EnvStage::Starting).await;
        for node in &env.nodes {
            if let Err(error) = engine.start(&node.container).await {
                return self
                    .fail(env, engine, EnvStage::Starting, error, String::new())
                    .await;
            }
        }
        env = self.stage(env, EnvStage::Installing).await;
        // Read once for the whole start: every node's installs and probes use it.
        let registry = Registry::load(&self.config.modules_dir);
        let installs = env
            .nodes
            .iter()
            .map(|node| self.run_scripts(&registry, &env, engine, node, "install"));
        for (node, outcome) in env
            .nodes
            .clone()
            .iter()
            .zip(futures_util::future::join_all(installs).await)
        {
            if let Some(failed) = outcome.into_iter().find(|o| o.exit_code != 0) {
                let error = format!(
                    "node {}: installing {} failed (exit code {}): {}",
                    node.name,
                    failed.taskserv,
                    failed.exit_code,
                    root_cause(&failed.output)
                );
                return self
                    .fail(env, engine, EnvStage::Installing, error, failed.output)
                    .await;
            }
        }
        env = self.stage(env, EnvStage::Probing).await;
        let probes = env
            .nodes
            .iter()
            .map(|node| self.probe_node(&registry, engine, node));
        env.probes = futures_util::future::join_all(probes).await.concat();
        for check in &topology_of(&env.request.env).checks {
            let container = &env
                .nodes
                .iter()
                .find(|n| n.name == check.node)
                .expect("checked")
                .container;
            let result = probe(
                engine,
                container,
                &check.node,
                "cluster",
                &check.command,
                check.expect.as_deref(),
                PROBE_TIMEOUT,
            )
            .await;
            env.probes.push(result);
            if !env.probes.last().expect("pushed").ok {
                break;
            }
        }
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
            return self
                .fail(env, engine, EnvStage::Probing, error, String::new())
                .await;
        }
        env.state = EnvState::Ready { at: Utc::now() };
        self.save(env.clone(), None).await.unwrap_or(env)
    }

    /// Runs each node's taskserv tests: ready with the results, or failed with them and
    /// diagnostics.
    async fn test(self: &Arc<Self>, mut env: TestEnv, engine: &ContainerEngine) -> TestEnv {
        env.state = EnvState::Testing { since: Utc::now() };
        env = self.save(env.clone(), None).await.unwrap_or(env);
        let snapshot = &env;
        let registry = &Registry::load(&self.config.modules_dir);
        let runs = snapshot.nodes.iter().map(|node| async move {
            (
                node.name.clone(),
                self.run_scripts(registry, snapshot, engine, node, "test")
                    .await,
            )
        });
        let mut results = Vec::new();
        for (node, outcomes) in futures_util::future::join_all(runs).await {
            for outcome in outcomes {
                results.push(TestResult {
                    node: node.clone(),
                    taskserv: outcome.taskserv,
                    passed: outcome.exit_code == 0,
                    exit_code: outcome.exit_code,
                    output: outcome.output,
                    duration_ms: outcome.duration_ms,
                });
            }
        }
        env.results = results;
        let failed: Vec<&TestResult> = env.results.iter().filter(|r| !r.passed).collect();
        let Some(first) = failed.first() else {
            env.state = EnvState::Ready { at: Utc::now() };
            return self.save(env.clone(), None).await.unwrap_or(env);
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
        let output = env
            .results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.output.clone())
            .collect::<Vec<_>>()
            .join("\n");
        self.fail(env, engine, EnvStage::Tests, error, output).await
    }

    pub(super) async fn run_env(
        self: &Arc<Self>,
        actor: Actor,
        id: EnvId,
    ) -> Result<TestEnv, ErrorReply> {
        let params = json!({ "id": id });
        let env = self.get(id)?;
        let refusal = match &env.state {
            EnvState::Deleted { .. } => Some(format!("test environment {id} is deleted")),
            EnvState::Deleting { .. } => Some(format!("test environment {id} is being deleted")),
            EnvState::Failed { stage, .. } if *stage != EnvStage::Tests => Some(format!(
                "test environment {id} failed while {stage}: delete it and create another"
            )),
            _ if !self.claim(id) => Some(format!(
                "test environment {id} is busy ({})",
                env.state.status()
            )),
            _ => None,
        };
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
            // Tests run on a ready environment, or again after failed tests; a start that
            // just failed keeps its error and diagnostics.
            let testable = match &env.state {
                EnvState::Ready { .. } => true,
                EnvState::Failed { stage, .. } => *stage == EnvStage::Tests,
                _ => false,
            };
            if testable {
                env = self.test(env, &engine).await;
            }
            Ok(env)
        }
        .await;
        self.release(id);
        result
    }

    pub(super) async fn delete_env(
        self: &Arc<Self>,
        actor: Option<Actor>,
        id: EnvId,
        reason: DeleteReason,
    ) -> Result<TestEnv, ErrorReply> {
        let params = json!({ "id": id });
        let env = self.get(id)?;
        let refusal = match &env.state {
            EnvState::Deleted { .. } => Some(format!("test environment {id} is already deleted")),
            _ if reason != DeleteReason::Interrupted && !self.claim(id) => Some(format!(
                "test environment {id} is busy ({}); delete it once that is over",
                env.state.status()
            )),
            _ => None,
        };
        if let Some(message) = refusal {
            let error = ErrorReply::field(ErrorKind::Conflict, "id", message);
            if let Some(actor) = actor {
                self.audit_refusal(actor, "test_env_delete", params, &error)
                    .await;
            }
            return Err(error);
        }
        let result = async {
            // A client's request waits for the recovery; the daemon's own (recovery, time
            // to live) go straight to the engine.
            let (engine, env) = match actor {
                Some(_) => {
                    let engine = self.engine_for_request().await?;
                    (engine, self.still_there(id, env)?)
                }
                None => {
                    let engine = ContainerEngine::connect()
                        .await
                        .map_err(|e| ErrorReply::new(ErrorKind::Unavailable, e))?;
                    (engine, env)
                }
            };
            let actor = actor.unwrap_or(Actor {
                uid: crate::socket::owner_uid(),
                interface: "daemon".into(),
            });
            let record = AuditRecord::new(
                actor,
                "test_env_delete",
                json!({"id": id, "reason": reason}),
                Ok(format!("deleting environment {id}")),
            );
            self.remove(env, &engine, reason, Some(record)).await
        }
        .await;
        // The recovery deletes interrupted environments without claiming them (nothing
        // else may run on them), so it has no claim to release: a client's stays.
        if reason != DeleteReason::Interrupted {
            self.release(id);
        }
        result
    }

    /// `env` as it is now, unless it was deleted since `seen` was read: by the recovery
    /// after a restart, which a request waits for.
    fn still_there(&self, id: EnvId, seen: TestEnv) -> Result<TestEnv, ErrorReply> {
        let now = self.get(id).unwrap_or(seen);
        match &now.state {
            EnvState::Deleted { .. } => Err(ErrorReply::field(
                ErrorKind::Conflict,
                "id",
                format!(
                    "test environment {id} was deleted meanwhile (by the recovery after a restart)"
                ),
            )),
            _ => Ok(now),
        }
    }

    /// Records the deletion as started (`deleting`, with the request's audit record),
    /// removes the containers and the network, then records it as done. A crash in between
    /// leaves `deleting`, which the next start finishes.
    async fn remove(
        &self,
        mut env: TestEnv,
        engine: &ContainerEngine,
        reason: DeleteReason,
        audit: Option<AuditRecord>,
    ) -> Result<TestEnv, ErrorReply> {
        let failure = env.state.failure();
        env.state = EnvState::Deleting {
            since: Utc::now(),
            reason,
            failure: failure.clone(),
        };
        self.log(env.id, &format!("deleting ({reason:?})"));
        let mut env = self.save(env, audit).await?;
        let mut errors = Vec::new();
        for node in &env.nodes {
            let container = if node.container.is_empty() {
                format!("{}-{}", self.prefix(env.id), node.name)
            } else {
                node.container.clone()
            };
            if let Err(e) = engine.remove_container(&container).await {
                errors.push(e);
            }
        }
        let network = if env.network.is_empty() {
            format!("{}-net", self.prefix(env.id))
        } else {
            env.network.clone()
        };
        if let Err(e) = engine.remove_network(&network).await {
            errors.push(e);
        }
        if !errors.is_empty() {
            return Err(ErrorReply::new(ErrorKind::Unavailable, errors.join("; ")));
        }
        env.state = EnvState::Deleted {
            at: Utc::now(),
            reason,
            failure,
        };
        self.log(env.id, &format!("deleted ({reason:?})"));
        self.save(env, None).await
    }

    /// Records the stage an environment is in.
    async fn stage(&self, mut env: TestEnv, stage: EnvStage) -> TestEnv {
        env.state = EnvState::Starting {
            since: Utc::now(),
            stage,
        };
        self.log(env.id, &format!("stage: {stage}"));
        self.save(env.clone(), None).await.unwrap_or(env)
    }

    /// Records a failure with its diagnostics: each container's inspect output and log,
    /// the probes, and the output of what failed.
    async fn fail(
        &self,
        mut env: TestEnv,
        engine: &ContainerEngine,
        stage: EnvStage,
        error: String,
        output: String,
    ) -> TestEnv {
        self.log(env.id, &format!("failed while {stage}: {error}"));
        let mut nodes = Vec::new();
        for node in &env.nodes {
            nodes.push(NodeDiagnostics {
                node: node.name.clone(),
                inspect: engine.inspect(&node.container).await,
                logs: engine.logs(&node.container).await,
            });
        }
        env.diagnostics = Some(Diagnostics {
            nodes,
            probes: env.probes.clone(),
            output,
        });
        env.state = EnvState::Failed {
            at: Utc::now(),
            stage,
            error,
        };
        self.save(env.clone(), None).await.unwrap_or(env)
    }

    /// Runs `purpose` (install, test) of each of a node's taskservs that has it, in
    /// order; an install stops at the first failure.
    async fn run_scripts(
        &self,
        registry: &Registry,
        env: &TestEnv,
        engine: &ContainerEngine,
        node: &EnvNode,
        purpose: &str,
    ) -> Vec<ScriptOutcome> {
        let provider = match registry.provider("local") {
            Ok(p) => p.dir.join(&p.module),
            Err(e) => return vec![ScriptOutcome::refused("local provider", e)],
        };
        let Ok(order) = install_order(&node.taskservs, registry) else {
            return vec![ScriptOutcome::refused(
                &node.taskservs.join(","),
                "its taskservs changed since it was created".into(),
            )];
        };
        let infra = self.prefix(env.id);
        let server =
            json!({"hostname": node.name, "role": node.role, "provider": "local", "infra": infra});
        let mut outcomes = Vec::new();
        for taskserv in &order {
            let Some(script) = taskserv.scripts.get(purpose).map(|f| taskserv.dir.join(f)) else {
                continue;
            };
            let plan = [(taskserv.name.clone(), vec![script.as_path()])];
            let code = snippets::run_taskserv_scripts(&provider, &plan);
            let ctx = json!({
                "step": format!("testenv:{}:{}:{purpose}:{}", env.id, node.name, taskserv.name),
                "infra": {"name": self.prefix(env.id), "dir": self.config.data_dir, "settings": {}},
                "server": server, "servers": [server],
                "taskservs": {taskserv.name.clone(): {"name": taskserv.name, "version": taskserv.version, "dir": taskserv.dir}},
                "cluster": cluster_context(env),
            });
            let started = Instant::now();
            let (exit, output) = self.nu(env.id, &code, &ctx, engine).await;
            self.log(
                env.id,
                &format!(
                    "[{}] {purpose} {} (exit {exit}, {:.1}s)\n{output}",
                    node.name,
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
            if exit != 0 && purpose == "install" {
                break;
            }
        }
        outcomes
    }

    /// Runs Nushell `code` for environment `id` with `ctx` as `$params`; (exit code,
    /// standard output and error). The process and what it starts carry the markers that
    /// let the next start stop them after a crash (`orphans`), in a process group of their
    /// own.
    async fn nu(
        &self,
        id: EnvId,
        code: &str,
        ctx: &Value,
        engine: &ContainerEngine,
    ) -> (i32, String) {
        let script = format!("let params = ($env.ORCH_PARAMS | from json)\n{code}");
        let mut command = tokio::process::Command::new(&self.config.nu_binary);
        command
            .arg("--no-config-file")
            .arg("-c")
            .arg(script)
            .env("ORCH_PARAMS", ctx.to_string())
            .env("DOCKER_HOST", format!("unix://{}", engine.socket.display()))
            .env("PROVISIONING_MODULES", &self.config.modules_dir)
            .env(crate::orphans::DATA_DIR_ENV, &self.config.data_dir)
            .env(crate::orphans::TEST_ENV_ENV, id.to_string())
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        crate::files::restore_umask(&mut command);
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

    /// Every probe of a node's taskservs.
    async fn probe_node(
        &self,
        registry: &Registry,
        engine: &ContainerEngine,
        node: &EnvNode,
    ) -> Vec<ProbeResult> {
        let mut results = Vec::new();
        for name in &node.taskservs {
            let Some(spec) = registry.taskserv(name).ok().and_then(|t| t.probe.clone()) else {
                continue;
            };
            let timeout = spec
                .timeout
                .as_deref()
                .and_then(|t| humantime::parse_duration(t).ok())
                .unwrap_or(PROBE_TIMEOUT);
            results.push(
                probe(
                    engine,
                    &node.container,
                    &node.name,
                    name,
                    &spec.command,
                    spec.expect.as_deref(),
                    timeout,
                )
                .await,
            );
        }
        results
    }

    /// Appends to environment `id`'s log.
    fn log(&self, id: EnvId, text: &str) {
        let line = format!("{} {text}\n", Utc::now().format("%H:%M:%S%.3f"));
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(id))
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// Refuses limits no engine would honour.
fn check_resources(resources: Option<&orch_protocol::Resources>) -> Result<(), ErrorReply> {
    let Some(resources) = resources else {
        return Ok(());
    };
    let bad = |message: &str| {
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            "resources",
            message,
        ))
    };
    if resources
        .cpus
        .is_some_and(|c| !c.is_finite() || c <= 0.0 || c > 1024.0)
    {
        return bad("`cpus` must be a positive number of CPUs (at most 1024)");
    }
    if resources
        .memory_mb
        .is_some_and(|m| !(6..=4 * 1024 * 1024).contains(&m))
    {
        return bad("`memory_mb` must be between 6 MiB and 4 TiB");
    }
    Ok(())
}

/// How one taskserv script run ended.
struct ScriptOutcome {
    taskserv: String,
    exit_code: i32,
    output: String,
    duration_ms: u64,
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

/// Runs a probe until it passes or `timeout` passes (every 500 ms).
async fn probe(
    engine: &ContainerEngine,
    container: &str,
    node: &str,
    taskserv: &str,
    command: &str,
    expect: Option<&str>,
    timeout: Duration,
) -> ProbeResult {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let (ok, output) = match engine
            .exec(container, command, Duration::from_secs(30))
            .await
        {
            Ok((code, output)) => (
                code == 0 && expect.is_none_or(|e| output.contains(e)),
                output,
            ),
            Err(e) => (false, e),
        };
        if ok || started.elapsed() >= timeout {
            return ProbeResult {
                node: node.into(),
                taskserv: taskserv.into(),
                command: command.into(),
                ok,
                output,
                attempts,
                duration_ms: started.elapsed().as_millis() as u64,
            };
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The environment's name, kind and nodes as a topology.
fn describe(spec: &EnvSpec) -> (String, &'static str, Topology) {
    match spec {
        EnvSpec::Single { taskserv } => (
            taskserv.clone(),
            "single",
            single_topology(taskserv, std::slice::from_ref(taskserv)),
        ),
        EnvSpec::Server { name, taskservs } => {
            (name.clone(), "server", single_topology(name, taskservs))
        }
        EnvSpec::Cluster { name, topology } => (name.clone(), "cluster", topology.clone()),
    }
}

fn single_topology(name: &str, taskservs: &[String]) -> Topology {
    Topology {
        name: name.into(),
        description: String::new(),
        cluster_type: String::new(),
        needs_network: false,
        nodes: vec![TopologyNode {
            name: name.into(),
            role: "server".into(),
            taskservs: taskservs.to_vec(),
            resources: None,
            image: None,
        }],
        checks: Vec::new(),
    }
}

fn topology_of(spec: &EnvSpec) -> Topology {
    describe(spec).2
}

/// `ctx.cluster` for a cluster environment (null otherwise).
fn cluster_context(env: &TestEnv) -> Value {
    if env.kind != "cluster" {
        return Value::Null;
    }
    let nodes: Vec<Value> = env
        .nodes
        .iter()
        .map(|n| json!({"hostname": n.name, "role": n.role, "taskservs": n.taskservs}))
        .collect();
    json!({"name": env.name, "definition": topology_of(&env.request.env).name, "nodes": nodes})
}

/// The root cause a script's output gives: the message of the last Nushell error in it
/// (the line after its `Error:` header and the `|` lines under it, joined into one line),
/// else its last line that is not part of an error's frame.
fn root_cause(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let message = lines
        .iter()
        .rposition(|l| l.starts_with("Error:"))
        .and_then(|header| {
            let start = header
                + 1
                + lines[header + 1..]
                    .iter()
                    .position(|l| !l.trim().is_empty())?;
            let first = lines[start].trim_start();
            let first = first
                .strip_prefix("x ")
                .or_else(|| first.strip_prefix("× "))?;
            let mut parts = vec![first.trim()];
            for line in &lines[start + 1..] {
                let line = line.trim_start();
                match line.strip_prefix('|').or_else(|| line.strip_prefix('│')) {
                    Some(rest) => parts.push(rest.trim()),
                    None => break,
                }
            }
            Some(parts.join(" ").trim().to_string())
        });
    match message {
        Some(message) if !message.is_empty() => message,
        _ => lines
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| l.chars().any(char::is_alphanumeric) && !is_frame(l))
            .unwrap_or("")
            .to_string(),
    }
}

/// Whether a line is part of the frame Nushell draws around an error's source.
fn is_frame(line: &str) -> bool {
    line.starts_with(",-[")
        || line.starts_with("╭─[")
        || line.starts_with('`')
        || line.starts_with('╰')
        || line.starts_with(':')
        || line.chars().next().is_some_and(|c| c.is_ascii_digit()) && line.contains(" | ")
}

fn last_line(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}
