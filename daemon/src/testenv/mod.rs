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
//! after every stage, and as `deleting` before anything of it is removed. Every container
//! and network carries the environment's id and this daemon instance's id as labels. At
//! start the daemon stops the scripts a previous run left (environment markers), re-arms
//! every time to live, and then, in the background while requests are served, finishes
//! the deletions a crash interrupted, deletes the environments that were being set up or
//! tested, and removes what carries its labels but belongs to no live environment,
//! retrying until the engine answers; requests that need the engine are refused with the
//! engine's problem until then.

pub mod engine;
mod lifecycle;
pub mod topologies;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use orch_protocol::{Actor, DeleteReason, EnvId, EnvState, ErrorKind, ErrorReply, TestEnv};

/// The first pause before recovery tries the engine again; it doubles up to the next.
const RECOVERY_FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest pause between two recovery attempts.
const RECOVERY_MAX_RETRY: Duration = Duration::from_secs(5);
/// How long a request waits for the first recovery attempt's outcome.
const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(2);

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
    /// Where the recovery of what a previous run left is.
    recovery: tokio::sync::watch::Sender<Recovery>,
}

/// Where the recovery at start is.
#[derive(Clone)]
enum Recovery {
    /// Its first attempt runs.
    Running,
    /// An attempt failed for this reason; it is retried.
    Waiting(String),
    /// Done: requests may use the engine.
    Done,
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
            recovery: tokio::sync::watch::Sender::new(Recovery::Running),
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

    fn set_recovery(&self, recovery: Recovery) {
        self.recovery.send_replace(recovery);
    }

    /// The engine for a client's request: refused with the engine's problem while what a
    /// previous run left is not recovered yet (after waiting at most [`FIRST_ATTEMPT_WAIT`]
    /// for the first attempt, so that a request right after start hears its outcome).
    async fn engine_for_request(&self) -> Result<ContainerEngine, ErrorReply> {
        let mut state = self.recovery.subscribe();
        let _ = tokio::time::timeout(
            FIRST_ATTEMPT_WAIT,
            state.wait_for(|r| !matches!(r, Recovery::Running)),
        )
        .await;
        let current = state.borrow().clone();
        let pending = match &current {
            Recovery::Done => None,
            Recovery::Running => Some(format!(
                "container engine not answering ({}) yet: the test environments of the previous run are being recovered; retry in a moment",
                engine::target()
            )),
            Recovery::Waiting(problem) => Some(format!(
                "{problem}; test environments are unavailable until it answers (the daemon keeps trying)"
            )),
        };
        if let Some(message) = pending {
            return Err(ErrorReply::new(ErrorKind::Unavailable, message));
        }
        ContainerEngine::connect()
            .await
            .map_err(|e| ErrorReply::new(ErrorKind::Unavailable, e))
    }

    /// After a restart: the scripts a previous run left are stopped and every time to
    /// live is re-armed at once; the rest of the recovery (which needs the engine) runs in
    /// the background, so requests are served meanwhile.
    pub fn recover(self: &Arc<Self>) {
        let stopped = crate::orphans::kill_test_env_scripts(&self.config.data_dir);
        if stopped > 0 {
            tracing::warn!(
                stopped,
                "stopped test-environment scripts left by the previous run"
            );
        }
        let mut doomed = Vec::new();
        for env in self.list() {
            match recovery_reason(&env) {
                Some(reason) => doomed.push((env.id, reason)),
                None if matches!(env.state, EnvState::Deleted { .. }) => {}
                None => self.arm_ttl(env.id, env.expires_at),
            }
        }
        let service = self.clone();
        tokio::spawn(async move { service.recover_until_done(doomed).await });
    }

    /// Retries [`Self::recover_once`] (pausing longer each time, up to a few seconds) until
    /// it succeeds; meanwhile requests that need the engine are refused with its problem.
    async fn recover_until_done(self: Arc<Self>, mut doomed: Vec<(EnvId, DeleteReason)>) {
        let mut pause = RECOVERY_FIRST_RETRY;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.recover_once(&mut doomed).await {
                Ok(()) => {
                    self.set_recovery(Recovery::Done);
                    tracing::info!(attempts, "test environments recovered");
                    return;
                }
                Err(problem) => {
                    if attempts == 1 {
                        tracing::warn!(%problem, "cannot recover test environments yet; retrying until the container engine answers");
                    }
                    self.set_recovery(Recovery::Waiting(problem));
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RECOVERY_MAX_RETRY);
                }
            }
        }
    }

    /// One attempt, once the engine answers: deletes the environments in `doomed` (one the
    /// engine will not remove yet is retried in the background), then the leftovers of this
    /// instance.
    async fn recover_once(
        self: &Arc<Self>,
        doomed: &mut Vec<(EnvId, DeleteReason)>,
    ) -> Result<(), String> {
        let engine = ContainerEngine::connect().await?;
        for (id, reason) in std::mem::take(doomed) {
            let deleted = self
                .get(id)
                .is_ok_and(|e| matches!(e.state, EnvState::Deleted { .. }));
            if deleted {
                continue;
            }
            if let Err(e) = self.delete_env(None, id, reason).await {
                // One environment the engine will not remove must not keep the others,
                // or new requests, waiting: its deletion goes on in the background.
                tracing::warn!(env = id, problem = %e.message, "cannot finish deleting a test environment yet; retrying");
                self.arm_deletion(id, Utc::now(), reason);
            }
        }
        if let Err(problem) = self.remove_leftovers(&engine).await {
            tracing::warn!(%problem, "some leftover test containers or networks could not be removed");
        }
        Ok(())
    }

    /// Removes containers and networks of this instance whose environment is not live.
    async fn remove_leftovers(&self, engine: &ContainerEngine) -> Result<(), String> {
        let (containers, networks) = engine.labelled(DAEMON_LABEL, &self.instance).await?;
        let live: HashSet<String> = self
            .list()
            .into_iter()
            .filter(|e| !matches!(e.state, EnvState::Deleted { .. }))
            .map(|e| e.id.to_string())
            .collect();
        let orphaned = |labels: &HashMap<String, String>| {
            labels.get(ENV_LABEL).is_none_or(|id| !live.contains(id))
        };
        let mut errors = Vec::new();
        for (name, _) in containers.iter().filter(|(_, l)| orphaned(l)) {
            tracing::warn!(container = %name, "removing a leftover test container");
            errors.extend(engine.remove_container(name).await.err());
        }
        for (name, _) in networks.iter().filter(|(_, l)| orphaned(l)) {
            tracing::warn!(network = %name, "removing a leftover test network");
            errors.extend(engine.remove_network(name).await.err());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    /// Deletes environment `id` when its time to live ends (later if it is busy then).
    fn arm_ttl(self: &Arc<Self>, id: EnvId, expires_at: chrono::DateTime<Utc>) {
        self.arm_deletion(id, expires_at, DeleteReason::Expired);
    }

    /// Deletes environment `id` for `reason` at `at` (later if it is busy then), retrying
    /// until the engine removes it.
    fn arm_deletion(self: &Arc<Self>, id: EnvId, due: chrono::DateTime<Utc>, reason: DeleteReason) {
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                let wait = (due - Utc::now()).to_std().unwrap_or(Duration::ZERO);
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
                match service.delete_env(None, id, reason).await {
                    Ok(_) => return,
                    Err(e) => {
                        tracing::warn!(env = id, error = %e, ?reason, "cannot delete a test environment");
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    }
                }
            }
        });
    }
}

/// Why recovery deletes `env`: a deletion it was in, an interruption of its setup or
/// tests, or its time to live; `None` when it stays (or is already deleted).
fn recovery_reason(env: &TestEnv) -> Option<DeleteReason> {
    match &env.state {
        EnvState::Deleted { .. } => None,
        EnvState::Deleting { reason, .. } => Some(*reason),
        state if state.is_busy() => Some(DeleteReason::Interrupted),
        _ if env.expires_at <= Utc::now() => Some(DeleteReason::Expired),
        _ => None,
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
