//! Deleting an environment, on a client's request or the daemon's own (time to live,
//! recovery): `deleting` is committed (with the audit record) before anything is
//! removed, and `deleted` once its containers and network are gone; a crash in between
//! leaves `deleting`, which the next start finishes.

use std::sync::Arc;

use orch_protocol::{Actor, DeleteReason, EnvId, EnvState, ErrorKind, ErrorReply, TestEnv};
use serde_json::json;

use super::TestEnvService;
use super::engine::ContainerEngine;
use super::stages::{self, Transition};
use crate::audit::AuditRecord;

impl TestEnvService {
    /// Deletes environment `id` for `reason`: a client's request (`actor`) or the
    /// daemon's own (`None`).
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
    pub(super) fn still_there(&self, id: EnvId, seen: TestEnv) -> Result<TestEnv, ErrorReply> {
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

    /// Records the deletion as started (`deleting`, with `audit`), removes the containers
    /// and the network, then records it as done.
    pub(super) async fn remove(
        &self,
        mut env: TestEnv,
        engine: &ContainerEngine,
        reason: DeleteReason,
        audit: Option<AuditRecord>,
    ) -> Result<TestEnv, ErrorReply> {
        stages::apply(&mut env, Transition::Deleting(reason)).map_err(internal)?;
        self.log(env.id, &format!("deleting ({reason:?})"));
        let mut env = self.save(env, audit).await?;
        self.remove_objects(&env, engine)
            .await
            .map_err(|e| ErrorReply::new(ErrorKind::Unavailable, e))?;
        stages::apply(&mut env, Transition::Deleted).map_err(internal)?;
        self.log(env.id, &format!("deleted ({reason:?})"));
        self.save(env, None).await
    }
}

fn internal(error: stages::InvalidTransition) -> ErrorReply {
    ErrorReply::new(ErrorKind::Internal, error.to_string())
}
