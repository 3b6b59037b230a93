//! Where a test environment's records (and the audit records of its requests) are
//! committed: by the engine on a single daemon and on the leader of a cluster; on
//! another node of a cluster, whose container engine holds the environment, they are
//! sent to the leader through the store ([`crate::cluster::relay`]) and committed by
//! it under its term, so that the leader alone writes and the audit chain stays one.
//!
//! The leader commits a node's record only for that node's own environments
//! ([`TestEnvService::commit_from`]), and only the audit actions of test environments.

use std::sync::Arc;

use orch_protocol::{Actor, ErrorKind, ErrorReply, TestEnv};
use serde::{Deserialize, Serialize};

use super::TestEnvService;
use crate::audit::AuditRecord;
use crate::cluster::relay::Relay;
use crate::engine::{Command, EngineHandle};

/// Who commits the records.
#[derive(Clone)]
pub enum Keeper {
    /// This daemon's engine (a single daemon, or the leader).
    Engine(EngineHandle),
    /// The leader, through the store (another node of a cluster).
    Leader(Arc<Relay>),
}

/// The audit actions of test environments: the only ones a node may have the leader
/// record.
const ACTIONS: [&str; 3] = ["test_env_create", "test_env_run", "test_env_delete"];

/// A commit a node sends the leader: a record, an audit record, or both.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvCommit {
    /// The record (id 0 for a new one).
    pub env: Option<Box<TestEnv>>,
    /// The audit record of the request (its parameters already redacted).
    pub audit: Option<SentAudit>,
}

/// An audit record, as sent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentAudit {
    actor: Actor,
    action: String,
    params: serde_json::Value,
    ok: bool,
    outcome: String,
}

/// The envelope that tells a commit from a forwarded client request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope {
    env_commit: EnvCommit,
}

/// [`Envelope`], to send.
#[derive(Serialize)]
struct EnvelopeRef<'a> {
    env_commit: &'a EnvCommit,
}

impl EnvCommit {
    /// `env` and `audit` as a node sends them.
    pub fn new(env: Option<TestEnv>, audit: Option<AuditRecord>) -> EnvCommit {
        EnvCommit {
            env: env.map(Box::new),
            audit: audit.map(|a| SentAudit {
                actor: a.actor,
                action: a.action.to_string(),
                params: a.params,
                ok: a.ok,
                outcome: a.outcome,
            }),
        }
    }

    /// The bytes of its forwarded request.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&EnvelopeRef { env_commit: self }).unwrap_or_default()
    }

    /// The commit in a forwarded request's bytes, if they hold one.
    pub fn parse(bytes: &[u8]) -> Option<EnvCommit> {
        serde_json::from_slice::<Envelope>(bytes)
            .ok()
            .map(|e| e.env_commit)
    }
}

/// The bytes of the leader's answer to a commit.
pub fn encode_answer(answer: &Result<Option<TestEnv>, ErrorReply>) -> Vec<u8> {
    serde_json::to_vec(answer).unwrap_or_default()
}

/// The leader's answer to a commit, from its bytes.
pub fn parse_answer(bytes: &[u8]) -> Result<Option<TestEnv>, ErrorReply> {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        Err(ErrorReply::new(
            ErrorKind::Internal,
            format!("the leader's answer to a test environment's commit is not well formed: {e}"),
        ))
    })
}

impl Keeper {
    /// Commits `env` (when given) and `audit`; the record as committed (a new one with
    /// its id).
    pub async fn commit(
        &self,
        env: Option<TestEnv>,
        audit: Option<AuditRecord>,
    ) -> Result<Option<TestEnv>, ErrorReply> {
        match self {
            Keeper::Engine(engine) => match env {
                Some(env) => engine
                    .request(|reply| Command::SaveEnv {
                        env: Box::new(env),
                        audit,
                        reply,
                    })
                    .await
                    .map(Some),
                None => {
                    let Some(record) = audit else { return Ok(None) };
                    engine
                        .request(|reply| Command::Audit { record, reply })
                        .await?;
                    Ok(None)
                }
            },
            Keeper::Leader(relay) => relay.commit_env(EnvCommit::new(env, audit)).await,
        }
    }
}

impl TestEnvService {
    /// As the leader, commits what node `node` sent: records of its own environments
    /// only, and audit records of test environments' actions only.
    pub async fn commit_from(
        &self,
        node: &str,
        commit: EnvCommit,
    ) -> Result<Option<TestEnv>, ErrorReply> {
        let audit = commit.audit.map(|sent| recorded(node, sent)).transpose()?;
        if let Some(env) = &commit.env {
            let known = (env.id != 0).then(|| self.get(env.id).ok()).flatten();
            if !owns(node, env, known.as_ref()) {
                return Err(ErrorReply::new(
                    ErrorKind::PermissionDenied,
                    format!(
                        "node {node} sent the record of test environment {}, which is not its own",
                        env.id
                    ),
                ));
            }
        }
        let keeper = self.keeper();
        let Keeper::Engine(_) = keeper else {
            return Err(ErrorReply::new(
                ErrorKind::Unavailable,
                "this node does not lead (any more): the commit is to be sent to the leader",
            ));
        };
        let saved = keeper.commit(commit.env.map(|e| *e), audit).await?;
        if let Some(env) = &saved {
            self.remember(env.clone());
        }
        Ok(saved)
    }
}

/// The audit record node `node` sent, when it is of a test environment's action.
fn recorded(node: &str, sent: SentAudit) -> Result<AuditRecord, ErrorReply> {
    let Some(action) = ACTIONS.into_iter().find(|a| *a == sent.action) else {
        return Err(ErrorReply::new(
            ErrorKind::PermissionDenied,
            format!(
                "node {node} asked to record the action {:?}, which is not a test environment's",
                sent.action
            ),
        ));
    };
    Ok(AuditRecord {
        actor: sent.actor,
        action: action.into(),
        params: sent.params,
        ok: sent.ok,
        outcome: sent.outcome,
    })
}

/// Whether node `node` may commit `env`: an environment on its engine, new or `known`
/// (as the leader has it) to be on it.
fn owns(node: &str, env: &TestEnv, known: Option<&TestEnv>) -> bool {
    let recorded = match known {
        Some(known) => known.node.as_deref(),
        // Only the leader numbers environments: an id it does not know is not one.
        None if env.id != 0 => return false,
        None => env.node.as_deref(),
    };
    env.node.as_deref() == Some(node) && recorded == Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_on(id: u64, node: Option<&str>) -> TestEnv {
        let mut env = crate::store::conformance::test_env(id);
        env.node = node.map(str::to_string);
        env
    }

    #[test]
    fn a_node_commits_only_the_environments_on_its_engine() {
        let mine = env_on(0, Some("n3"));
        assert!(owns("n3", &mine, None), "a new one of its own");
        assert!(!owns("n2", &mine, None), "another node's");
        assert!(!owns("n3", &env_on(0, None), None), "the leader's");
        let known = env_on(4, Some("n1"));
        assert!(
            !owns("n3", &env_on(4, Some("n3")), Some(&known)),
            "one the leader has on another node, claimed"
        );
        assert!(owns("n1", &env_on(4, Some("n1")), Some(&known)));
        assert!(
            !owns("n3", &env_on(9, Some("n3")), None),
            "an id the leader never gave"
        );
    }

    #[test]
    fn a_commit_is_told_from_a_client_request_and_back() {
        let record = AuditRecord::new(
            Actor {
                uid: 1,
                interface: "socket".into(),
            },
            "test_env_create",
            serde_json::json!({"token": "s3cret"}),
            Ok("accepted".into()),
        );
        let bytes = EnvCommit::new(Some(env_on(0, Some("n3"))), Some(record)).encode();
        let commit = EnvCommit::parse(&bytes).expect("a commit");
        assert_eq!(commit.env.unwrap().node.as_deref(), Some("n3"));
        let sent = commit.audit.unwrap();
        assert_eq!(
            sent.params["token"],
            crate::audit::REDACTED,
            "redacted by the node"
        );
        assert_eq!(recorded("n3", sent).unwrap().action, "test_env_create");
        let forged = SentAudit {
            actor: Actor {
                uid: 0,
                interface: "socket".into(),
            },
            action: "submit".into(),
            params: serde_json::Value::Null,
            ok: true,
            outcome: String::new(),
        };
        let refused = recorded("n3", forged).unwrap_err();
        assert!(refused.message.contains("\"submit\""), "{refused:?}");
        let request = serde_json::to_vec(&orch_protocol::Request::EnvRun { id: 1 }).unwrap();
        assert!(EnvCommit::parse(&request).is_none());
        assert!(serde_json::from_slice::<orch_protocol::Request>(&bytes).is_err());
        assert!(
            EnvCommit::parse(br#"{"env_commit": {"env": null, "audit": null}, "x": 1}"#).is_none()
        );
        let answer: Result<Option<TestEnv>, ErrorReply> = Ok(Some(env_on(7, Some("n3"))));
        assert_eq!(
            parse_answer(&encode_answer(&answer)).unwrap().unwrap().id,
            7
        );
        assert_eq!(
            parse_answer(b"nonsense").unwrap_err().kind,
            ErrorKind::Internal
        );
    }
}
