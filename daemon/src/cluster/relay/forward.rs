//! The asking side: a request written for the leader or another node, and the wait for
//! its answer (or for why none will come); a standby forwards its client's changes this
//! way (socket and HTTP). What else is asked this way is in [`super::logs`] (the logs
//! another node keeps) and [`super::envs`] (test environments on another node).

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, ErrorKind, ErrorReply, Request, Response};
use tokio::sync::watch;

use super::{NODE_UNTAKEN_LIMIT, Relay, UNTAKEN_LIMIT};
use crate::cluster::blocking;
use crate::cluster::wakeups::Wakeups;
use crate::policy::{Role, Submitter};
use crate::server::Connection;
use crate::store::{ForwardedRequest, PostgresStore, RequestState};

/// How often a standby reads its request's state when no wake-up comes (and the
/// listening connection works).
const REPLY_POLL: Duration = Duration::from_secs(1);
/// How often it reads it with no listening connection.
const REPLY_POLL_UNHEARD: Duration = Duration::from_millis(100);
/// How long a request for another node (a log's read) may take in all.
const NODE_ANSWER_LIMIT: Duration = Duration::from_secs(60);
/// How often the leader checks that the node working on a test environment is up.
const NODE_UP_CHECK: Duration = Duration::from_secs(2);

/// How long an asking node waits for another node's answer once it took the request.
#[derive(Clone, Copy)]
pub(super) enum Patience {
    /// At most [`NODE_ANSWER_LIMIT`] in all (a read of what it keeps).
    Read,
    /// As long as the node is up (a test environment's work takes what it takes).
    WhileUp,
}

/// Why a forwarded request got no answer.
pub enum NoAnswer {
    /// It was withdrawn before anyone took it: nothing was done.
    NothingDone(ErrorReply),
    /// It was taken, or may have been: whether it was carried out is unknown.
    Unknown(ErrorReply),
}

impl From<NoAnswer> for ErrorReply {
    fn from(no_answer: NoAnswer) -> ErrorReply {
        match no_answer {
            NoAnswer::NothingDone(reply) | NoAnswer::Unknown(reply) => reply,
        }
    }
}

impl Relay {
    /// Forwards `request` from `conn`'s client to the leader and sends it the answer.
    /// An `Err` means the connection is gone.
    pub async fn forward(
        self: &Arc<Self>,
        conn: &mut Connection,
        request: &Request,
    ) -> std::io::Result<()> {
        match self.exchange(conn, request, None).await {
            Some(Ok(frames)) => conn.send_frames(&frames).await,
            Some(Err(reply)) => conn.send(&Response::Error(reply)).await,
            None => Ok(()),
        }
    }

    /// Forwards `request` (an HTTP request, as [`crate::http::forwarded`] encodes it)
    /// from `actor`, who has `role`, to the leader and waits for its answer.
    pub async fn forward_bytes(
        self: &Arc<Self>,
        actor: &Actor,
        role: Role,
        request: Vec<u8>,
    ) -> Result<Vec<u8>, ErrorReply> {
        Ok(self
            .ask(None, actor, role, request, Patience::WhileUp)
            .await?)
    }

    /// Sends `request` from `actor`, who has `role`, to node `to` (the leader when
    /// `None`) and waits for the answer with `patience`. A caller that leaves drops this
    /// future: the request is then withdrawn unless taken.
    pub(super) async fn ask(
        self: &Arc<Self>,
        to: Option<&str>,
        actor: &Actor,
        role: Role,
        request: Vec<u8>,
        patience: Patience,
    ) -> Result<Vec<u8>, NoAnswer> {
        let row = ForwardedRequest {
            from_node: self.membership.name().to_string(),
            to_node: to.map(str::to_string),
            actor: serde_json::to_string(actor).unwrap_or_default(),
            role: role.as_str().to_string(),
            owner: false,
            request,
        };
        let id = self.send(row, to).await.map_err(NoAnswer::NothingDone)?;
        let mut withdraw = WithdrawOnDrop {
            store: self.store.clone(),
            id: Some(id),
        };
        let answer = self.answer_to(id, to, patience).await;
        withdraw.id = None;
        answer
    }

    /// Writes `row` for node `to` (the leader when `None`); its id.
    async fn send(&self, row: ForwardedRequest, to: Option<&str>) -> Result<u64, ErrorReply> {
        let store = self.store.clone();
        blocking(move || store.forward_request(&row))
            .await
            .map_err(|e| {
                ErrorReply::new(
                    ErrorKind::Unavailable,
                    format!(
                        "node {} cannot forward the request to {}: {e}",
                        self.membership.name(),
                        to.map_or_else(|| "the leader".to_string(), |n| format!("node {n}"))
                    ),
                )
            })
    }

    /// Forwards `request` from `conn`'s client to node `to` (the leader when `None`) and
    /// waits for the answer: its frames, or why none came; `None` once the client left
    /// (the request is then withdrawn unless already taken: a taken one is carried out,
    /// and its unread answer removed later).
    pub(super) async fn exchange(
        self: &Arc<Self>,
        conn: &mut Connection,
        request: &Request,
        to: Option<&str>,
    ) -> Option<Result<Vec<u8>, ErrorReply>> {
        let row = match self.row(conn, request, to) {
            Ok(row) => row,
            Err(reply) => return Some(Err(reply)),
        };
        let id = match self.send(row, to).await {
            Ok(id) => id,
            Err(reply) => return Some(Err(reply)),
        };
        tokio::select! {
            answer = self.answer_to(id, to, Patience::Read) => Some(answer.map_err(ErrorReply::from)),
            () = conn.closed() => {
                let store = self.store.clone();
                let _ = blocking(move || store.withdraw_request(id)).await;
                None
            }
        }
    }

    /// The row that forwards `request` from `conn`'s client to node `to` (the leader
    /// when `None`).
    fn row(
        &self,
        conn: &Connection,
        request: &Request,
        to: Option<&str>,
    ) -> Result<ForwardedRequest, ErrorReply> {
        let encode = |e: serde_json::Error| {
            ErrorReply::new(
                ErrorKind::Internal,
                format!("cannot forward the request: {e}"),
            )
        };
        Ok(ForwardedRequest {
            from_node: self.membership.name().to_string(),
            to_node: to.map(str::to_string),
            actor: serde_json::to_string(&conn.actor).map_err(encode)?,
            role: conn.role.as_str().to_string(),
            owner: conn.submitter == Submitter::Owner,
            request: serde_json::to_vec(request).map_err(encode)?,
        })
    }

    /// Waits for the answer to request `id`, for node `to` (the leader when `None`, up to
    /// its term's end) with `patience`: its frames, or why none will come. The row is
    /// removed once read.
    async fn answer_to(
        self: &Arc<Self>,
        id: u64,
        to: Option<&str>,
        patience: Patience,
    ) -> Result<Vec<u8>, NoAnswer> {
        let mut wakeups = Wakeups::new(
            self.reply_wakeups().await,
            REPLY_POLL,
            REPLY_POLL_UNHEARD,
            "the leader's answers",
        );
        let limit = if to.is_some() {
            NODE_UNTAKEN_LIMIT
        } else {
            UNTAKEN_LIMIT
        };
        let started = tokio::time::Instant::now();
        let untaken_until = started + limit;
        let mut up_checked = started;
        loop {
            let store = self.store.clone();
            let state = match blocking(move || store.request_state(id)).await {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(request = id, error = %e, "cannot read a forwarded request's state; trying again");
                    wakeups.next().await;
                    continue;
                }
            };
            let taken = match state {
                RequestState::Answered(frames) => {
                    self.forget(id).await;
                    return Ok(frames);
                }
                RequestState::Taken {
                    term,
                    leading: false,
                } => {
                    self.forget(id).await;
                    return Err(NoAnswer::Unknown(self.outcome_unknown(term)));
                }
                RequestState::Missing => {
                    return Err(NoAnswer::Unknown(ErrorReply::new(
                        ErrorKind::Internal,
                        "the forwarded request was removed before it was answered; its outcome is unknown (see orch tasks, orch audit)",
                    )));
                }
                RequestState::Waiting if tokio::time::Instant::now() >= untaken_until => {
                    if self.withdraw(id).await {
                        return Err(NoAnswer::NothingDone(self.untaken(to, limit)));
                    }
                    true
                }
                RequestState::Waiting => false,
                RequestState::Taken { .. } => true,
            };
            if let Some(node) = to {
                let due = up_checked.elapsed() >= NODE_UP_CHECK;
                if due {
                    up_checked = tokio::time::Instant::now();
                }
                if due && self.node_down(node).await {
                    return Err(self.node_gone(id, node, taken).await);
                }
                if taken
                    && matches!(patience, Patience::Read)
                    && started.elapsed() >= NODE_ANSWER_LIMIT
                {
                    self.forget(id).await;
                    return Err(NoAnswer::Unknown(ErrorReply::new(
                        ErrorKind::Unavailable,
                        format!(
                            "node {node} took the request but did not answer within {}s (it died, or is cut off)",
                            NODE_ANSWER_LIMIT.as_secs()
                        ),
                    )));
                }
            }
            wakeups.next().await;
        }
    }

    /// Withdraws request `id`, not taken yet: false when it was taken meanwhile (its
    /// answer is to be awaited) or cannot be withdrawn now.
    async fn withdraw(&self, id: u64) -> bool {
        let store = self.store.clone();
        blocking(move || store.withdraw_request(id))
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(request = id, error = %e, "cannot withdraw a forwarded request");
                false
            })
    }

    /// The refusal of a request for node `to` (the leader when `None`) that no one took
    /// within `limit`.
    fn untaken(&self, to: Option<&str>, limit: Duration) -> ErrorReply {
        let message = match to {
            None => format!(
                "node {} is a standby and no leader took the request within {}s ({}); nothing was done",
                self.membership.name(),
                limit.as_secs(),
                self.membership.leader_summary()
            ),
            Some(node) => format!(
                "node {node} did not take the request within {}s (it is down, or cut off from the database); nothing was done; what is on it (the logs of the attempts it ran, its test environments) cannot be reached until it is back",
                limit.as_secs()
            ),
        };
        ErrorReply::new(ErrorKind::Unavailable, message)
    }

    /// Whether node `node` is down (its lease ran out).
    async fn node_down(&self, node: &str) -> bool {
        let membership = self.membership.clone();
        let Ok(view) = blocking(move || membership.view()).await else {
            return false;
        };
        !view
            .nodes
            .iter()
            .any(|n| n.name == node && n.role != orch_protocol::NodeRole::Down)
    }

    /// Why request `id` to node `node`, which is down, got no answer: nothing was done
    /// when it can still be withdrawn (`taken` false and no one took it since), else its
    /// outcome is unknown.
    async fn node_gone(&self, id: u64, node: &str, taken: bool) -> NoAnswer {
        let down = format!("node {node} is down (its lease ran out)");
        if !taken && self.withdraw(id).await {
            return NoAnswer::NothingDone(ErrorReply::new(
                ErrorKind::Unavailable,
                format!(
                    "{down}; nothing was done; what is on it cannot be reached until it is back"
                ),
            ));
        }
        self.forget(id).await;
        NoAnswer::Unknown(ErrorReply::new(
            ErrorKind::Unavailable,
            format!(
                "{down} and did not answer; the outcome of the request is unknown until it is back (see orch test env list)"
            ),
        ))
    }

    /// The error for a request taken by term `term`, which lost its leadership first.
    fn outcome_unknown(&self, term: u64) -> ErrorReply {
        ErrorReply::new(
            ErrorKind::Unavailable,
            format!(
                "the leader of term {term} took the request and lost its leadership before answering; its outcome is unknown (see orch tasks, orch audit); {}",
                self.membership.leader_summary()
            ),
        )
    }

    /// Removes request `id`'s row.
    async fn forget(&self, id: u64) {
        let store = self.store.clone();
        if let Err(e) = blocking(move || store.forget_request(id)).await {
            tracing::debug!(request = id, error = %e, "cannot remove a forwarded request");
        }
    }

    /// A receiver of the answers' wake-ups, shared by the node's forwards (opened again
    /// once closed), off the runtime's threads.
    async fn reply_wakeups(
        self: &Arc<Self>,
    ) -> Result<watch::Receiver<u64>, crate::store::StoreError> {
        let relay = self.clone();
        blocking(move || relay.open_reply_wakeups()).await
    }

    /// See [`Relay::reply_wakeups`].
    fn open_reply_wakeups(&self) -> Result<watch::Receiver<u64>, crate::store::StoreError> {
        let mut slot = self
            .replies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(wakeups) = slot.as_ref().filter(|w| w.has_changed().is_ok()) {
            let mut wakeups = wakeups.clone();
            wakeups.mark_unchanged();
            return Ok(wakeups);
        }
        let wakeups = self.store.reply_wakeups()?;
        *slot = Some(wakeups.clone());
        Ok(wakeups)
    }
}

/// Withdraws a forwarded request whose client left before its answer (when dropped with
/// an `id`).
struct WithdrawOnDrop {
    store: Arc<PostgresStore>,
    id: Option<u64>,
}

impl Drop for WithdrawOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || store.withdraw_request(id));
        }
    }
}
