//! The asking side: a standby forwards its client's change to the leader, a node asks
//! another for a log it keeps, the leader sends a node the requests about a test
//! environment on its container engine, and that node has the leader commit its
//! records; each waits for the answer (or for why none will come).

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, EnvId, ErrorKind, ErrorReply, Request, Response, TaskId, TestEnv};
use tokio::sync::watch;

use super::{NODE_UNTAKEN_LIMIT, Relay, UNTAKEN_LIMIT};
use crate::cluster::blocking;
use crate::cluster::wakeups::Wakeups;
use crate::ops::Context;
use crate::policy::{Role, Submitter};
use crate::server::Connection;
use crate::server::forwarded::split_frames;
use crate::store::{ForwardedRequest, PostgresStore, RequestState};
use crate::testenv::keeper::{self, EnvCommit};

/// How often a standby reads its request's state when no wake-up comes (and the
/// listening connection works).
const REPLY_POLL: Duration = Duration::from_secs(1);
/// How often it reads it with no listening connection.
const REPLY_POLL_UNHEARD: Duration = Duration::from_millis(100);
/// How long a request for another node (a log's read) may take in all.
const NODE_ANSWER_LIMIT: Duration = Duration::from_secs(60);
/// How often the leader checks that the node working on a test environment is up.
const NODE_UP_CHECK: Duration = Duration::from_secs(2);
/// How often a followed log of another node is read again.
const REMOTE_LOG_POLL: Duration = Duration::from_secs(1);
/// The largest text sent in one `log` frame.
const LOG_CHUNK: usize = 64 * 1024;

/// A log another node keeps.
#[derive(Clone, Copy)]
pub enum RemoteLog {
    /// Task `id`'s, of the attempt that node ran.
    Task(TaskId),
    /// Test environment `id`'s: its containers' logs, then its own.
    Env(EnvId),
}

/// How long an asking node waits for another node's answer once it took the request.
#[derive(Clone, Copy)]
enum Patience {
    /// At most [`NODE_ANSWER_LIMIT`] in all (a read of what it keeps).
    Read,
    /// As long as the node is up (a test environment's work takes what it takes).
    WhileUp,
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

    /// Sends `log`, kept by node `node` (which ran the task's last attempt, or holds
    /// the environment), to `conn`'s client as `log` frames then `stream_end`; with
    /// `follow`, reads it again every second until the task is final (the environment
    /// not at work). An `Err` means the connection is gone.
    pub async fn remote_log(
        self: &Arc<Self>,
        ctx: &Context,
        conn: &mut Connection,
        node: &str,
        log: RemoteLog,
        follow: bool,
    ) -> std::io::Result<()> {
        let request = match log {
            RemoteLog::Task(id) => Request::Logs { id, follow: false },
            RemoteLog::Env(id) => Request::EnvLogs { id, follow: false },
        };
        let mut sent = 0;
        let mut first = true;
        loop {
            // Read before the log, so that the last read has all of the final output.
            let last = !follow || finished(ctx, log);
            let parts = match self.exchange(conn, &request, Some(node)).await {
                Some(Ok(frames)) => log_parts(&frames),
                Some(Err(reply)) => Err(reply),
                None => return Ok(()),
            };
            let (containers, text) = match parts {
                Ok(parts) => parts,
                Err(reply) => return conn.send(&Response::Error(reply)).await,
            };
            // An environment's containers' logs come first, once.
            if std::mem::take(&mut first) {
                for text in containers {
                    conn.send(&Response::Log { text }).await?;
                }
            }
            // A character cut by the read shows as U+FFFD: held back until it is whole.
            let ready = match text.strip_suffix('\u{FFFD}') {
                Some(whole) if !last => whole,
                _ => text.as_str(),
            };
            // Only what was not sent yet (a log is only appended to).
            if let Some(new) = ready.get(sent..) {
                for chunk in chunks(new) {
                    conn.send(&Response::Log {
                        text: chunk.to_string(),
                    })
                    .await?;
                }
                sent = ready.len();
            }
            if last {
                return conn.send(&Response::StreamEnd).await;
            }
            tokio::select! {
                () = tokio::time::sleep(REMOTE_LOG_POLL) => {}
                () = conn.closed() => return Ok(()),
                () = ctx.shutdown.cancelled() => return conn.send(&Response::StreamEnd).await,
            }
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
        self.ask(None, actor, role, request, Patience::WhileUp)
            .await
    }

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
            .await?;
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

    /// Environment `id`'s own log (its containers' logs left out), kept by node `node`,
    /// asked for by `actor`, who has `role`.
    pub async fn remote_log_text(
        self: &Arc<Self>,
        node: &str,
        actor: &Actor,
        role: Role,
        id: EnvId,
    ) -> Result<String, ErrorReply> {
        let request = serde_json::to_vec(&Request::EnvLogs { id, follow: false })
            .map_err(|e| ErrorReply::new(ErrorKind::Internal, e.to_string()))?;
        let frames = self
            .ask(Some(node), actor, role, request, Patience::Read)
            .await?;
        Ok(log_parts(&frames)?.1)
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
        let answer = self
            .ask(
                None,
                &actor,
                Role::Admin,
                commit.encode(),
                Patience::WhileUp,
            )
            .await?;
        keeper::parse_answer(&answer)
    }

    /// Sends `request` from `actor`, who has `role`, to node `to` (the leader when
    /// `None`) and waits for the answer with `patience`. A caller that leaves drops this
    /// future: the request is then withdrawn unless taken.
    async fn ask(
        self: &Arc<Self>,
        to: Option<&str>,
        actor: &Actor,
        role: Role,
        request: Vec<u8>,
        patience: Patience,
    ) -> Result<Vec<u8>, ErrorReply> {
        let row = ForwardedRequest {
            from_node: self.membership.name().to_string(),
            to_node: to.map(str::to_string),
            actor: serde_json::to_string(actor).unwrap_or_default(),
            role: role.as_str().to_string(),
            owner: false,
            request,
        };
        let id = self.send(row, to).await?;
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
    async fn exchange(
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
            answer = self.answer_to(id, to, Patience::Read) => Some(answer),
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
    ) -> Result<Vec<u8>, ErrorReply> {
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
            if let Some(node) = to.filter(|_| up_checked.elapsed() >= NODE_UP_CHECK) {
                up_checked = tokio::time::Instant::now();
                if let Some(reply) = self.gone(id, node).await {
                    return Err(reply);
                }
            }
            if to.is_some()
                && matches!(patience, Patience::Read)
                && started.elapsed() >= NODE_ANSWER_LIMIT
            {
                self.forget(id).await;
                return Err(ErrorReply::new(
                    ErrorKind::Unavailable,
                    format!(
                        "node {} took the request but did not answer within {}s (it died, or is cut off)",
                        to.unwrap_or_default(),
                        NODE_ANSWER_LIMIT.as_secs()
                    ),
                ));
            }
            let store = self.store.clone();
            match blocking(move || store.request_state(id)).await {
                Ok(RequestState::Answered(frames)) => {
                    self.forget(id).await;
                    return Ok(frames);
                }
                Ok(RequestState::Taken {
                    term,
                    leading: false,
                }) => {
                    self.forget(id).await;
                    return Err(self.outcome_unknown(term));
                }
                Ok(RequestState::Missing) => {
                    return Err(ErrorReply::new(
                        ErrorKind::Internal,
                        "the forwarded request was removed before it was answered; its outcome is unknown (see orch tasks, orch audit)",
                    ));
                }
                Ok(RequestState::Waiting) if tokio::time::Instant::now() >= untaken_until => {
                    if let Some(reply) = self.withdraw(id, to, limit).await {
                        return Err(reply);
                    }
                }
                Ok(RequestState::Waiting | RequestState::Taken { .. }) => {}
                Err(e) => {
                    tracing::warn!(request = id, error = %e, "cannot read a forwarded request's state; trying again");
                }
            }
            wakeups.next().await;
        }
    }

    /// Withdraws request `id` for node `to` (the leader when `None`), not taken within
    /// `limit`: the refusal, or `None` when it was taken meanwhile (its answer is to be
    /// awaited).
    async fn withdraw(&self, id: u64, to: Option<&str>, limit: Duration) -> Option<ErrorReply> {
        let store = self.store.clone();
        let message = match to {
            None => format!(
                "node {} is a standby and no leader took the request within {}s ({}); nothing was done",
                self.membership.name(),
                limit.as_secs(),
                self.membership.leader_summary()
            ),
            Some(node) => format!(
                "node {node} did not take the request within {}s (it is down, or cut off from the database); what is on it (the logs of the attempts it ran, its test environments) cannot be reached until it is back",
                limit.as_secs()
            ),
        };
        match blocking(move || store.withdraw_request(id)).await {
            Ok(true) => Some(ErrorReply::new(ErrorKind::Unavailable, message)),
            Ok(false) => None,
            Err(e) => {
                tracing::warn!(request = id, error = %e, "cannot withdraw a forwarded request");
                None
            }
        }
    }

    /// The error for request `id` to node `node` when that node is down (its lease ran
    /// out): its outcome is unknown.
    async fn gone(&self, id: u64, node: &str) -> Option<ErrorReply> {
        let membership = self.membership.clone();
        let view = blocking(move || membership.view()).await.ok()?;
        let up = view
            .nodes
            .iter()
            .any(|n| n.name == node && n.role != orch_protocol::NodeRole::Down);
        if up {
            return None;
        }
        self.forget(id).await;
        Some(ErrorReply::new(
            ErrorKind::Unavailable,
            format!(
                "node {node} is down (its lease ran out) and did not answer; the outcome of the request is unknown until it is back (see orch test env list)"
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

/// Whether `log`'s writer is done: the task final, the environment not at work.
fn finished(ctx: &Context, log: RemoteLog) -> bool {
    match log {
        RemoteLog::Task(id) => {
            crate::ops::tasks::get(ctx, id).is_ok_and(|t| t.state.status().is_final())
        }
        RemoteLog::Env(id) => ctx.testenvs.get(id).is_ok_and(|e| !e.state.is_busy()),
    }
}

/// A log's answer (`log` frames then `stream_end`): the containers' logs an
/// environment's log starts with, and the text after them; or its error.
fn log_parts(frames: &[u8]) -> Result<(Vec<String>, String), ErrorReply> {
    let malformed = |problem: String| {
        ErrorReply::new(
            ErrorKind::Internal,
            format!("another node's answer to a log's request is not well formed: {problem}"),
        )
    };
    let (mut containers, mut text) = (Vec::new(), String::new());
    for body in split_frames(frames).map_err(malformed)? {
        match serde_json::from_slice::<Response>(body).map_err(|e| malformed(e.to_string()))? {
            Response::Log { text: part }
                if text.is_empty() && part.starts_with(crate::ops::logs::CONTAINER_LOG) =>
            {
                containers.push(part);
            }
            Response::Log { text: part } => text.push_str(&part),
            Response::StreamEnd => return Ok((containers, text)),
            Response::Error(reply) => return Err(reply),
            other => return Err(malformed(format!("an unexpected answer {other:?}"))),
        }
    }
    Err(malformed("no stream_end".into()))
}

/// `text` in pieces of at most [`LOG_CHUNK`] bytes, cut at character boundaries.
fn chunks(mut text: &str) -> impl Iterator<Item = &str> {
    std::iter::from_fn(move || {
        if text.is_empty() {
            return None;
        }
        let mut end = text.len().min(LOG_CHUNK);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, rest) = text.split_at(end);
        text = rest;
        Some(piece)
    })
}
