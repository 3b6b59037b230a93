//! Test environments on another node's container engine: the leader sends that node
//! the requests about them, and the node has the leader commit their records.

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, ErrorKind, ErrorReply, Request, Response, TestEnv};

use super::Relay;
use super::forward::{NoAnswer, Patience};
use crate::cluster::blocking;
use crate::policy::Role;
use crate::server::forwarded::split_frames;
use crate::testenv::keeper::{self, EnvCommit};

/// How many times a node sends a test environment's commit that got no answer.
const COMMIT_TRIES: u32 = 4;
/// The pause before it sends it again.
const COMMIT_PAUSE: Duration = Duration::from_secs(1);

impl Relay {
    /// As the leader, sends node `node` `request` (about a test environment on its
    /// container engine) from `actor`, who has `role`, and waits for its answer as long
    /// as the node is up.
    pub async fn place(
        self: &Arc<Self>,
        node: &str,
        actor: &Actor,
        role: Role,
        request: &Request,
    ) -> Result<Response, ErrorReply> {
        let bytes = serde_json::to_vec(request).map_err(|e| {
            ErrorReply::new(ErrorKind::Internal, format!("cannot send the request: {e}"))
        })?;
        let frames = self
            .ask(Some(node), actor, role, bytes, Patience::WhileUp)
            .await
            .map_err(ErrorReply::from)?;
        let malformed = |problem: String| {
            ErrorReply::new(
                ErrorKind::Internal,
                format!("node {node}'s answer is not well formed: {problem}"),
            )
        };
        match split_frames(&frames).map_err(malformed)?.as_slice() {
            [body] => serde_json::from_slice(body).map_err(|e| malformed(e.to_string())),
            bodies => Err(malformed(format!("{} frames", bodies.len()))),
        }
    }

    /// As a node that is not the leader, has the leader commit `commit` (a record of a
    /// test environment on this node, or an audit record of a request about one).
    pub async fn commit_env(
        self: &Arc<Self>,
        commit: EnvCommit,
    ) -> Result<Option<TestEnv>, ErrorReply> {
        let actor = Actor {
            uid: crate::socket::owner_uid(),
            interface: format!("node {}", self.membership.name()),
        };
        let mut tries = 0;
        loop {
            tries += 1;
            let asked = self
                .ask(
                    None,
                    &actor,
                    Role::Admin,
                    commit.encode(),
                    Patience::WhileUp,
                )
                .await;
            let reply = match asked {
                Ok(answer) => return keeper::parse_answer(&answer),
                Err(NoAnswer::NothingDone(reply)) => reply,
                // An audit record alone is not recorded twice.
                Err(NoAnswer::Unknown(reply)) if commit.env.is_none() => return Err(reply),
                Err(NoAnswer::Unknown(reply)) => {
                    // A new record the lost leader committed is found in the store; a
                    // known one is this node's own, committed again as it is.
                    if let Some(found) = self.committed_draft(&commit).await {
                        return Ok(Some(found));
                    }
                    reply
                }
            };
            if tries == COMMIT_TRIES {
                return Err(reply);
            }
            tracing::warn!(error = %reply.message, "a test environment's commit got no answer; sending it again");
            tokio::time::sleep(COMMIT_PAUSE).await;
        }
    }

    /// The record a leader committed for `commit`'s new environment (id 0) without
    /// answering: this node's environment of the same name created at the same instant.
    async fn committed_draft(&self, commit: &EnvCommit) -> Option<TestEnv> {
        let draft = commit.env.as_deref().filter(|e| e.id == 0)?;
        let (name, created_at) = (draft.name.clone(), draft.created_at);
        let (store, node) = (self.store.clone(), self.membership.name().to_string());
        let mine = blocking(move || store.test_envs_of(&node)).await.ok()?;
        mine.into_iter()
            .find(|e| e.name == name && e.created_at == created_at)
    }
}
