//! Test environments: containers on the local engine in which taskservs are installed
//! with their own scripts, probed for readiness by the daemon, and tested.
//!
//! One container client per layer: the daemon creates, starts, probes, inspects and
//! removes containers through the Docker API ([`engine`], bollard); the taskserv scripts
//! it runs on a node are Nushell, and reach the node's container through the `local`
//! provider (the engine's CLI), exactly as in a workflow. What the two share (names,
//! labels, the engine) is decided here, in [`contract`], and handed to the provider.
//!
//! - [`admission`]: a creation request checked, recorded and built;
//! - [`plan`]: a request's topology, and each node's taskservs, image and limits;
//! - [`stages`]: the state machine (typed transitions, what a request may do when);
//! - [`setup`]: containers created, then started: installs, probes, checks;
//! - [`containers`]: the network and containers on the engine;
//! - [`scripts`]: a node's install or test scripts, each in its own `nu`;
//! - [`probe`]: readiness probes and the topology's checks;
//! - [`run`]: the tests of an environment; [`delete`]: its deletion;
//! - [`diagnostics`]: what a failure saves; [`recovery`]: after a restart, and the time
//!   to live; [`topologies`]: the templates in `nushell-modules/topologies/`;
//! - [`keeper`]: where the records are committed (the leader's engine, from any node).
//!
//! In a cluster, an environment lives on one node's container engine (its `node`): the
//! leader places a creation on a live node labelled `docker` ([`place`]) and sends that
//! node the requests about it; that node does the work, keeps the log, re-arms the time
//! to live and recovers it after a restart, and has the leader commit its records.
//!
//! Durability: an environment's record is committed (through the engine's group
//! committer, with the audit record of the request) before its containers are created,
//! after every stage, and as `deleting` before anything of it is removed.

mod admission;
mod containers;
mod contract;
mod delete;
mod diagnostics;
pub mod engine;
pub mod keeper;
pub mod place;
mod plan;
mod probe;
mod recovery;
mod run;
mod scripts;
mod setup;
mod stages;
pub mod topologies;

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use orch_protocol::{Actor, DeleteReason, EnvFilter, EnvId, ErrorKind, ErrorReply, TestEnv};

use crate::audit::AuditRecord;
use contract::Naming;
use keeper::Keeper;
use recovery::Recovery;
use stages::Transition;

/// What the service is configured with.
pub struct TestEnvConfig {
    /// The extensions (taskservs, the local provider, topologies).
    pub modules_dir: PathBuf,
    /// The `nu` that runs taskserv scripts.
    pub nu_binary: PathBuf,
    /// Where each environment's log is written (`env-<id>.log`).
    pub logs_dir: PathBuf,
    /// The daemon's data directory (its instance id lives there).
    pub data_dir: PathBuf,
    /// How many environments may exist at once (not deleted).
    pub max_envs: usize,
    /// The time to live of an environment whose request gives none.
    pub default_ttl: Duration,
    /// This node's name, in a cluster.
    pub node: Option<String>,
}

/// The test environment service, shared by the handlers.
pub struct TestEnvService {
    config: TestEnvConfig,
    /// Where records are committed (changes once when a standby starts to lead).
    keeper: std::sync::RwLock<Keeper>,
    naming: Naming,
    envs: Mutex<HashMap<EnvId, TestEnv>>,
    busy: Mutex<HashSet<EnvId>>,
    /// Held while a creation checks the limit and records its environment.
    admission: tokio::sync::Mutex<()>,
    /// Where the recovery of what a previous run left is.
    recovery: tokio::sync::watch::Sender<Recovery>,
}

impl TestEnvService {
    /// The service over the stored environments, committing through `keeper`.
    pub fn new(
        config: TestEnvConfig,
        keeper: Keeper,
        stored: Vec<TestEnv>,
    ) -> std::io::Result<Arc<TestEnvService>> {
        let naming = Naming::new(instance_id(&config.data_dir)?);
        Ok(Arc::new(TestEnvService {
            config,
            keeper: std::sync::RwLock::new(keeper),
            naming,
            envs: Mutex::new(stored.into_iter().map(|e| (e.id, e)).collect()),
            busy: Mutex::new(HashSet::new()),
            admission: tokio::sync::Mutex::new(()),
            recovery: tokio::sync::watch::Sender::new(Recovery::Running),
        }))
    }

    /// As a standby that now leads: commits with `engine`, and knows every stored
    /// environment. Its own it keeps as it has them (it may have changed one since the
    /// read); one of its own it did not have (committed by a leader that died before
    /// answering) is recovered as after a restart.
    pub fn lead(self: &Arc<Self>, engine: crate::engine::EngineHandle, stored: Vec<TestEnv>) {
        *self.keeper.write().unwrap_or_else(|p| p.into_inner()) = Keeper::Engine(engine);
        let mut adopted = Vec::new();
        {
            let mut envs = self.lock_envs();
            for env in stored {
                let own = env.node.is_some() && env.node == self.config.node;
                if own && envs.contains_key(&env.id) {
                    continue;
                }
                if own {
                    adopted.push(env.clone());
                }
                envs.insert(env.id, env);
            }
        }
        for env in adopted {
            self.rearm(&env);
        }
    }

    /// This node's name in a cluster.
    pub fn node(&self) -> Option<&str> {
        self.config.node.as_deref()
    }

    /// Whether `env` is on this daemon's container engine (an environment of no node
    /// is the leader's: recorded before nodes were, or by a single daemon).
    pub fn is_mine(&self, env: &TestEnv) -> bool {
        match &env.node {
            Some(node) => Some(node) == self.config.node.as_ref(),
            None => matches!(self.keeper(), Keeper::Engine(_)),
        }
    }

    /// The environments `filter` passes, newest first, at most its limit.
    pub fn list(&self, filter: &EnvFilter) -> Vec<TestEnv> {
        let limit = filter.limit.unwrap_or(EnvFilter::DEFAULT_LIMIT);
        let envs = self.lock_envs();
        let mut ids: Vec<EnvId> = envs
            .values()
            .filter(|e| filter.passes(e))
            .map(|e| e.id)
            .collect();
        ids.sort_unstable_by_key(|id| std::cmp::Reverse(*id));
        ids.into_iter()
            .take(limit)
            .filter_map(|id| envs.get(&id).cloned())
            .collect()
    }

    /// The environments that are not deleted, newest first (bounded by how many may
    /// exist at once, with those being deleted).
    pub fn alive(&self) -> Vec<TestEnv> {
        let alive = EnvFilter {
            alive: true,
            limit: Some(usize::MAX),
            before: None,
        };
        self.list(&alive)
    }

    /// How many environments are in each status.
    pub fn counts(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for env in self.lock_envs().values() {
            *counts.entry(env.state.status()).or_insert(0) += 1;
        }
        counts
    }

    /// One environment.
    pub fn get(&self, id: EnvId) -> Result<TestEnv, ErrorReply> {
        self.lock_envs()
            .get(&id)
            .cloned()
            .ok_or_else(|| no_such_env(id))
    }

    /// Where environment `id`'s log is.
    pub fn log_path(&self, id: EnvId) -> PathBuf {
        self.config.logs_dir.join(format!("env-{id}.log"))
    }

    /// Whether the daemon is working on environment `id` now.
    pub fn is_busy(&self, id: EnvId) -> bool {
        self.lock_busy().contains(&id)
    }

    /// Creates an environment (see [`admission`]); the work runs in its own task, so a
    /// client that hangs up does not leave it half done.
    pub async fn create(
        self: &Arc<Self>,
        actor: Actor,
        request: orch_protocol::EnvRequest,
    ) -> Result<TestEnv, ErrorReply> {
        let service = self.clone();
        join(tokio::spawn(async move {
            service.create_env(actor, request).await
        }))
        .await
    }

    /// Starts (if needed) and tests environment `id`.
    pub async fn run(self: &Arc<Self>, actor: Actor, id: EnvId) -> Result<TestEnv, ErrorReply> {
        let service = self.clone();
        join(tokio::spawn(
            async move { service.run_env(actor, id).await },
        ))
        .await
    }

    /// Deletes environment `id`.
    pub async fn delete(self: &Arc<Self>, actor: Actor, id: EnvId) -> Result<TestEnv, ErrorReply> {
        let service = self.clone();
        join(tokio::spawn(async move {
            service
                .delete_env(Some(actor), id, DeleteReason::Requested)
                .await
        }))
        .await
    }

    /// Commits `env` (a new one gets its id) with the audit record of the request; a
    /// record as it was committed last is not written again (only the audit record is), so
    /// that each `env` event says something changed.
    async fn save(&self, env: TestEnv, audit: Option<AuditRecord>) -> Result<TestEnv, ErrorReply> {
        if env.id != 0 && self.lock_envs().get(&env.id) == Some(&env) {
            self.keeper().commit(None, audit).await?;
            return Ok(env);
        }
        let saved = self
            .keeper()
            .commit(Some(env), audit)
            .await?
            .ok_or_else(|| {
                ErrorReply::new(
                    ErrorKind::Internal,
                    "a test environment's commit returned no record",
                )
            })?;
        self.remember(saved.clone());
        Ok(saved)
    }

    /// Who commits the records now.
    fn keeper(&self) -> Keeper {
        self.keeper
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Keeps `env` as committed.
    fn remember(&self, env: TestEnv) {
        self.lock_envs().insert(env.id, env);
    }

    /// Moves `env` on by `transition` and commits it. When the commit fails (the daemon
    /// is stopping then) the changed `env` is returned all the same, as before; a
    /// transition its state does not allow is a bug: logged, and `env` left unchanged.
    async fn advance(&self, mut env: TestEnv, transition: Transition) -> TestEnv {
        if let Err(error) = stages::apply(&mut env, transition) {
            tracing::error!(env = env.id, %error, "a test environment's state was not changed");
            return env;
        }
        self.save(env.clone(), None).await.unwrap_or(env)
    }

    /// Records a refused request in the audit log.
    async fn audit_refusal(
        &self,
        actor: Actor,
        action: &'static str,
        params: serde_json::Value,
        error: &ErrorReply,
    ) {
        let record = AuditRecord::new(actor, action, params, Err(error.message.clone()));
        let _ = self.keeper().commit(None, Some(record)).await;
    }

    /// Appends a line to environment `id`'s log.
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

    /// Marks `id` busy; `false` when it already was.
    fn claim(&self, id: EnvId) -> bool {
        self.lock_busy().insert(id)
    }

    fn release(&self, id: EnvId) {
        self.lock_busy().remove(&id);
    }

    fn lock_envs(&self) -> std::sync::MutexGuard<'_, HashMap<EnvId, TestEnv>> {
        self.envs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_busy(&self) -> std::sync::MutexGuard<'_, HashSet<EnvId>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// This daemon instance's id: random at the first start, kept in the data directory.
pub fn instance_id(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("instance-id");
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim().to_string();
        if !id.is_empty() {
            return Ok(id);
        }
    }
    let id = format!("{:016x}", fastrand::u64(..));
    crate::files::write_atomically(&path, id.as_bytes(), 0o600)?;
    Ok(id)
}

async fn join(
    handle: tokio::task::JoinHandle<Result<TestEnv, ErrorReply>>,
) -> Result<TestEnv, ErrorReply> {
    handle
        .await
        .unwrap_or_else(|e| Err(ErrorReply::new(ErrorKind::Internal, e.to_string())))
}

fn no_such_env(id: EnvId) -> ErrorReply {
    ErrorReply::field(
        ErrorKind::NotFound,
        "id",
        format!("there is no test environment {id}"),
    )
}
