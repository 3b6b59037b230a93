//! Test environments: containers on the local engine (Docker API through bollard) in
//! which taskservs are installed with their own scripts, probed for readiness by the
//! daemon, and tested.
//!
//! - [`engine`]: the container engine (connection, containers, networks, exec, logs).
//! - [`topologies`]: the topology templates in `nushell-modules/topologies/`.
//! - [`lifecycle`]: create, start (install, probe, check), run tests, delete.
//!
//! Durability: an environment's record is committed (through the engine's group
//! committer, with the audit record of the request) before its containers are created,
//! and after every stage. Every container and network carries the environment's id and
//! this daemon instance's id as labels; at start the daemon removes what carries its
//! labels but belongs to no live environment, deletes the environments that were being
//! set up or tested when it stopped, and re-arms every time to live.

pub mod engine;
mod lifecycle;
pub mod topologies;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use orch_protocol::{Actor, DeleteReason, EnvId, EnvState, ErrorKind, ErrorReply, TestEnv};

use crate::audit::AuditRecord;
use crate::engine::{Command, EngineHandle};
use engine::{ContainerEngine, DAEMON_LABEL, ENV_LABEL};

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
}

/// The test environment service, shared by the handlers.
pub struct TestEnvService {
    config: TestEnvConfig,
    engine: EngineHandle,
    instance: String,
    envs: Mutex<HashMap<EnvId, TestEnv>>,
    busy: Mutex<HashSet<EnvId>>,
    /// Held while a creation checks the limit and records its environment.
    admission: tokio::sync::Mutex<()>,
}

impl TestEnvService {
    /// The service over the stored environments.
    pub fn new(
        config: TestEnvConfig,
        engine: EngineHandle,
        stored: Vec<TestEnv>,
    ) -> std::io::Result<Arc<TestEnvService>> {
        let instance = instance_id(&config.data_dir)?;
        Ok(Arc::new(TestEnvService {
            config,
            engine,
            instance,
            envs: Mutex::new(stored.into_iter().map(|e| (e.id, e)).collect()),
            busy: Mutex::new(HashSet::new()),
            admission: tokio::sync::Mutex::new(()),
        }))
    }

    /// Every environment, newest first.
    pub fn list(&self) -> Vec<TestEnv> {
        let mut envs: Vec<TestEnv> = self.lock_envs().values().cloned().collect();
        envs.sort_by_key(|e| std::cmp::Reverse(e.id));
        envs
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

    /// The prefix of environment `id`'s container and network names (and its infra name
    /// for the local provider): unique across daemons on one engine.
    fn prefix(&self, id: EnvId) -> String {
        format!(
            "testenv-{}-{id}",
            &self.instance[..8.min(self.instance.len())]
        )
    }

    /// Whether the daemon is working on environment `id` now.
    pub fn is_busy(&self, id: EnvId) -> bool {
        self.lock_busy().contains(&id)
    }

    /// Creates an environment (see [`lifecycle`]); the work runs in its own task, so a
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

    /// Commits `env` (a new one gets its id) with the audit record of the request.
    async fn save(&self, env: TestEnv, audit: Option<AuditRecord>) -> Result<TestEnv, ErrorReply> {
        let saved = self
            .engine
            .request(|reply| Command::SaveEnv {
                env: Box::new(env),
                audit,
                reply,
            })
            .await?;
        self.lock_envs().insert(saved.id, saved.clone());
        Ok(saved)
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
        let _ = self
            .engine
            .request(|reply| Command::Audit { record, reply })
            .await;
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

    /// After a restart: environments interrupted mid-setup or mid-test are deleted,
    /// expired ones too, leftovers of this instance that belong to no live environment
    /// are removed, and every remaining time to live is re-armed.
    pub async fn recover(self: &Arc<Self>) {
        let live: Vec<TestEnv> = self
            .list()
            .into_iter()
            .filter(|e| !matches!(e.state, EnvState::Deleted { .. }))
            .collect();
        let engine = match ContainerEngine::connect().await {
            Ok(engine) => engine,
            Err(e) => {
                // Interrupted ones expire at once; the expiry retries until the engine
                // answers again.
                for env in &live {
                    let expires = if env.state.is_busy() {
                        Utc::now()
                    } else {
                        env.expires_at
                    };
                    self.arm_ttl(env.id, expires);
                }
                if !live.is_empty() {
                    tracing::warn!(error = %e, "cannot reach the container engine: test environments will be cleaned up when it answers");
                }
                return;
            }
        };
        for env in &live {
            let reason = if env.state.is_busy() {
                Some(DeleteReason::Interrupted)
            } else if env.expires_at <= Utc::now() {
                Some(DeleteReason::Expired)
            } else {
                None
            };
            match reason {
                Some(reason) => {
                    if let Err(e) = self.delete_env(None, env.id, reason).await {
                        tracing::warn!(env = env.id, error = %e, "cannot delete a test environment; retrying");
                        self.arm_ttl(env.id, Utc::now());
                    }
                }
                None => self.arm_ttl(env.id, env.expires_at),
            }
        }
        self.remove_leftovers(&engine).await;
    }

    /// Removes containers and networks of this instance whose environment is not live.
    async fn remove_leftovers(&self, engine: &ContainerEngine) {
        let (containers, networks) = match engine.labelled(DAEMON_LABEL, &self.instance).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for leftover test containers");
                return;
            }
        };
        let live: HashSet<String> = self
            .list()
            .into_iter()
            .filter(|e| !matches!(e.state, EnvState::Deleted { .. }))
            .map(|e| e.id.to_string())
            .collect();
        let orphaned = |labels: &HashMap<String, String>| {
            labels.get(ENV_LABEL).is_none_or(|id| !live.contains(id))
        };
        for (name, _) in containers.iter().filter(|(_, l)| orphaned(l)) {
            tracing::warn!(container = %name, "removing a leftover test container");
            let _ = engine.remove_container(name).await;
        }
        for (name, _) in networks.iter().filter(|(_, l)| orphaned(l)) {
            tracing::warn!(network = %name, "removing a leftover test network");
            let _ = engine.remove_network(name).await;
        }
    }

    /// Deletes environment `id` when its time to live ends (later if it is busy then).
    fn arm_ttl(self: &Arc<Self>, id: EnvId, expires_at: chrono::DateTime<Utc>) {
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                let wait = (expires_at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
                let live = service
                    .get(id)
                    .is_ok_and(|e| !matches!(e.state, EnvState::Deleted { .. }));
                if !live {
                    return;
                }
                if service.is_busy(id) {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
                match service.delete_env(None, id, DeleteReason::Expired).await {
                    Ok(_) => return,
                    Err(e) => {
                        tracing::warn!(env = id, error = %e, "cannot delete an expired test environment");
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    }
                }
            }
        });
    }
}

/// This daemon instance's id: random at the first start, kept in the data directory.
fn instance_id(data_dir: &Path) -> std::io::Result<String> {
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
