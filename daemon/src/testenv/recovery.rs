//! Recovery after a restart, and the deletions the daemon does on its own. At start the
//! scripts a previous run left are stopped (their markers) and every time to live is
//! re-armed at once; then, in the background while requests are served, the deletions a
//! crash interrupted are finished, the environments that were being set up or tested are
//! deleted, and what carries this instance's label but belongs to no live environment is
//! removed, retrying until the engine answers. Until then, requests that need the engine
//! are refused with its problem.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use orch_protocol::{DeleteReason, EnvId, EnvState, ErrorKind, ErrorReply, TestEnv};

use super::TestEnvService;
use super::contract::{DAEMON_LABEL, ENV_LABEL};
use super::engine::{self, ContainerEngine};

/// The first pause before recovery tries the engine again; it doubles up to the next.
const RECOVERY_FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest pause between two recovery attempts.
const RECOVERY_MAX_RETRY: Duration = Duration::from_secs(5);
/// How long a request waits for the first recovery attempt's outcome.
const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(2);

/// Where the recovery at start is.
#[derive(Clone)]
pub(super) enum Recovery {
    /// Its first attempt runs.
    Running,
    /// An attempt failed for this reason; it is retried.
    Waiting(String),
    /// Done: requests may use the engine.
    Done,
}

impl TestEnvService {
    fn set_recovery(&self, recovery: Recovery) {
        self.recovery.send_replace(recovery);
    }

    /// The engine for a client's request: refused with the engine's problem while what a
    /// previous run left is not recovered yet (after waiting at most [`FIRST_ATTEMPT_WAIT`]
    /// for the first attempt, so that a request right after start hears its outcome).
    pub(super) async fn engine_for_request(&self) -> Result<ContainerEngine, ErrorReply> {
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
        // Another node's environments are that node's to recover.
        for env in self.alive().into_iter().filter(|e| self.is_mine(e)) {
            match recovery_reason(&env, Utc::now()) {
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
        let (containers, networks) = engine
            .labelled(DAEMON_LABEL, self.naming.instance())
            .await?;
        let live: HashSet<String> = self.alive().into_iter().map(|e| e.id.to_string()).collect();
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

    /// Re-arms `env`, found after the recovery at start (a standby that starts to lead
    /// learns of it): deleted now when recovery would delete it, else at its time to live.
    pub(super) fn rearm(self: &Arc<Self>, env: &TestEnv) {
        match recovery_reason(env, Utc::now()) {
            Some(reason) => self.arm_deletion(env.id, Utc::now(), reason),
            None if matches!(env.state, EnvState::Deleted { .. }) => {}
            None => self.arm_ttl(env.id, env.expires_at),
        }
    }

    /// Deletes environment `id` when its time to live ends (later if it is busy then).
    pub(super) fn arm_ttl(self: &Arc<Self>, id: EnvId, expires_at: DateTime<Utc>) {
        self.arm_deletion(id, expires_at, DeleteReason::Expired);
    }

    /// Deletes environment `id` for `reason` at `at` (later if it is busy then), retrying
    /// until the engine removes it.
    pub(super) fn arm_deletion(
        self: &Arc<Self>,
        id: EnvId,
        due: chrono::DateTime<Utc>,
        reason: DeleteReason,
    ) {
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

/// Why recovery deletes `env` at `now`: a deletion it was in, an interruption of its
/// setup or tests, or its time to live; `None` when it stays (or is already deleted).
fn recovery_reason(env: &TestEnv, now: DateTime<Utc>) -> Option<DeleteReason> {
    match &env.state {
        EnvState::Deleted { .. } => None,
        EnvState::Deleting { reason, .. } => Some(*reason),
        state if state.is_busy() => Some(DeleteReason::Interrupted),
        _ if env.expires_at <= now => Some(DeleteReason::Expired),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use orch_protocol::EnvStage;

    fn env(state: EnvState, expires_in: chrono::Duration) -> TestEnv {
        let mut env = crate::store::conformance::test_env(1);
        env.expires_at = env.created_at + expires_in;
        env.state = state;
        env
    }

    #[test]
    fn recovery_finishes_deletions_and_deletes_what_was_interrupted_or_expired() {
        let now = Utc::now();
        let hour = chrono::Duration::hours(1);
        let reason = |state, expires_in| recovery_reason(&env(state, expires_in), now);
        let deleting = EnvState::Deleting {
            since: now,
            reason: DeleteReason::AutoCleanup,
            failure: None,
        };
        assert_eq!(reason(deleting, hour), Some(DeleteReason::AutoCleanup));
        let installing = EnvState::Starting {
            since: now,
            stage: EnvStage::Installing,
        };
        assert_eq!(reason(installing, hour), Some(DeleteReason::Interrupted));
        assert_eq!(
            reason(EnvState::Testing { since: now }, hour),
            Some(DeleteReason::Interrupted)
        );
        assert_eq!(
            reason(EnvState::Ready { at: now }, -hour),
            Some(DeleteReason::Expired)
        );
        assert_eq!(reason(EnvState::Ready { at: now }, hour), None, "re-armed");
        let deleted = EnvState::Deleted {
            at: now,
            reason: DeleteReason::Requested,
            failure: None,
        };
        assert_eq!(reason(deleted, -hour), None);
    }
}
