//! Changes asked of a standby, carried out by the leader, wherever its host: the standby
//! forwards its client's request through the shared store (`cluster_requests`), the
//! leader takes it under its term, answers it as if the client were connected to it
//! ([`crate::server::forwarded`]), and the standby passes the answer on.
//!
//! No channel between daemons is opened: the nodes already trust each other through the
//! database (any of them may write what the leader reads), so a forwarded request needs
//! no credential of its own. The leader carries out only the operations a standby
//! forwards, with the role the standby gave its client (from its own `--allow-user`),
//! as the owner's only when the client is the leader's owner on the leader's host, and
//! records the change in the audit log as the client's, forwarded by the standby's node
//! (`socket via node NAME`).
//!
//! At most once: a request is taken by one term before it is acted on, and never by
//! another. A request taken by a leader that then lost its leadership without
//! answering gets an error saying its outcome is unknown; one that no leader took
//! within [`UNTAKEN_LIMIT`] is withdrawn, with an error saying nothing was done.
//!
//! The same way, a node asks another for the log of an attempt that node ran (it keeps
//! it in its data directory): [`Relay::remote_log`], answered by the other node's
//! [`Relay::serve_node`]; a followed log is read again every second until the task ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use orch_protocol::{Actor, ErrorKind, ErrorReply, Request, Response, TaskId};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::membership::Part;
use super::wakeups::Wakeups;
use super::{Membership, blocking};
use crate::ops::Context;
use crate::policy::{Role, Submitter};
use crate::server::Connection;
use crate::server::forwarded::{answer, error_frames, split_frames};
use crate::store::{ForwardedRequest, PostgresStore, RequestState};

/// How often a standby reads its request's state when no wake-up comes (and the
/// listening connection works).
const REPLY_POLL: Duration = Duration::from_secs(1);
/// How often it reads it with no listening connection.
const REPLY_POLL_UNHEARD: Duration = Duration::from_millis(100);
/// How often the leader (and each node, for its own) looks for requests when no wake-up
/// comes: a fallback only, while the listening connection works.
const REQUEST_POLL: Duration = Duration::from_secs(5);
/// How often it looks with no listening connection.
const REQUEST_POLL_UNHEARD: Duration = Duration::from_millis(100);
/// How long a request may wait for a leader to take it before it is withdrawn.
pub const UNTAKEN_LIMIT: Duration = Duration::from_secs(30);
/// How long a request for another node may wait for it to take it (a live node takes
/// it at once).
const NODE_UNTAKEN_LIMIT: Duration = Duration::from_secs(10);
/// How long a request for another node (a log's read) may take in all.
const NODE_ANSWER_LIMIT: Duration = Duration::from_secs(60);
/// How many times the leader tries to write an answer.
const ANSWER_TRIES: u32 = 5;
/// How often a followed log of another node is read again.
const REMOTE_LOG_POLL: Duration = Duration::from_secs(1);
/// The largest text sent in one `log` frame.
const LOG_CHUNK: usize = 64 * 1024;
/// How often the leader removes the requests nobody will read.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// The most requests the leader takes at once.
const TAKE_AT_ONCE: usize = 64;

/// A node's side of forwarding: a standby's forwards, the leader's answers.
pub struct Relay {
    store: Arc<PostgresStore>,
    membership: Arc<Membership>,
    /// Wake-ups when the leader answers (opened at the first forward, again once lost).
    replies: Mutex<Option<watch::Receiver<u64>>>,
}

impl Relay {
    /// The relay of `membership`'s node on `store`.
    pub fn new(store: Arc<PostgresStore>, membership: Arc<Membership>) -> Arc<Relay> {
        Arc::new(Relay {
            store,
            membership,
            replies: Mutex::new(None),
        })
    }

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

    /// Sends task `id`'s log, kept by node `node` (which ran its last attempt), to
    /// `conn`'s client as `log` frames then `stream_end`; with `follow`, reads it again
    /// every second until the task is final. An `Err` means the connection is gone.
    pub async fn remote_log(
        self: &Arc<Self>,
        ctx: &Context,
        conn: &mut Connection,
        node: &str,
        id: TaskId,
        follow: bool,
    ) -> std::io::Result<()> {
        let request = Request::Logs { id, follow: false };
        let mut sent = 0;
        loop {
            // Read before the log, so that the last read has all of a final task's output.
            let last = !follow
                || crate::ops::tasks::get(ctx, id).is_ok_and(|t| t.state.status().is_final());
            let text = match self.exchange(conn, &request, Some(node)).await {
                Some(Ok(frames)) => log_text(&frames),
                Some(Err(reply)) => Err(reply),
                None => return Ok(()),
            };
            let text = match text {
                Ok(text) => text,
                Err(reply) => return conn.send(&Response::Error(reply)).await,
            };
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
        let row = ForwardedRequest {
            from_node: self.membership.name().to_string(),
            to_node: None,
            actor: serde_json::to_string(actor).unwrap_or_default(),
            role: role.as_str().to_string(),
            owner: false,
            request,
        };
        let id = self.send(row, None).await?;
        // A client that leaves drops this future: its request is withdrawn unless taken.
        let mut withdraw = WithdrawOnDrop {
            store: self.store.clone(),
            id: Some(id),
        };
        let answer = self.answer_to(id, None).await;
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
            answer = self.answer_to(id, to) => Some(answer),
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

    /// Waits for the answer to request `id`, for node `to` (the leader when `None`): its
    /// frames, or why none will come. The row is removed once read.
    async fn answer_to(self: &Arc<Self>, id: u64, to: Option<&str>) -> Result<Vec<u8>, ErrorReply> {
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
        loop {
            if to.is_some() && started.elapsed() >= NODE_ANSWER_LIMIT {
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
                "node {node} did not take the request within {}s (it is down, or cut off from the database); what it keeps (the logs of the attempts it ran) cannot be read until it is back",
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

    /// As the leader (its `ctx`), takes and answers the requests forwarded to the
    /// leader until `stop` or the node no longer leads.
    pub fn serve(self: &Arc<Self>, ctx: Arc<Context>, stop: CancellationToken) {
        let Part::Leading { term } = self.membership.part() else {
            return;
        };
        let relay = self.clone();
        tokio::spawn(async move { relay.serve_loop(ctx, Some(term), stop).await });
    }

    /// Takes and answers the requests forwarded to this node (the logs it keeps) with
    /// `ctx`, until `stop`, whatever the node's part.
    pub fn serve_node(self: &Arc<Self>, ctx: Arc<Context>, stop: CancellationToken) {
        let relay = self.clone();
        tokio::spawn(async move { relay.serve_loop(ctx, None, stop).await });
    }

    /// Takes and answers the requests for the leader's `term`, or for this node (`None`).
    async fn serve_loop(
        self: Arc<Self>,
        ctx: Arc<Context>,
        term: Option<u64>,
        stop: CancellationToken,
    ) {
        let store = self.store.clone();
        let mut wakeups = Wakeups::new(
            blocking(move || store.request_wakeups()).await,
            REQUEST_POLL,
            REQUEST_POLL_UNHEARD,
            "forwarded requests",
        );
        let slots = Slots {
            free: Arc::new(tokio::sync::Semaphore::new(
                ctx.limits.max_socket_connections,
            )),
            freed: Arc::new(tokio::sync::Notify::new()),
            http: term.map(|_| crate::http::forwarded::router(ctx.clone())),
        };
        let mut swept = tokio::time::Instant::now() - SWEEP_EVERY;
        let serving = || match term {
            Some(term) => self.membership.part() == (Part::Leading { term }),
            None => self.membership.part() != Part::StoodDown,
        };
        while !stop.is_cancelled() && serving() {
            if let Some(term) = term.filter(|_| swept.elapsed() >= SWEEP_EVERY) {
                swept = tokio::time::Instant::now();
                let store = self.store.clone();
                if let Err(e) =
                    blocking(move || store.sweep_requests(term, 2 * UNTAKEN_LIMIT)).await
                {
                    tracing::debug!(error = %e, "cannot remove stale forwarded requests");
                }
            }
            self.take_and_answer(&ctx, term, &slots).await;
            tokio::select! {
                () = stop.cancelled() => return,
                () = wakeups.next() => {}
                // Requests may have waited for a slot.
                () = slots.freed.notified() => {}
            }
        }
    }

    /// Takes as many waiting requests for the leader's `term` (for this node: `None`) as
    /// there are free `slots` and answers each in a task of its own; again while a full
    /// batch came.
    async fn take_and_answer(&self, ctx: &Arc<Context>, term: Option<u64>, slots: &Slots) {
        loop {
            // A slot for each request before it is taken: a taken one is always answered.
            let mut permits: Vec<_> =
                std::iter::from_fn(|| slots.free.clone().try_acquire_owned().ok())
                    .take(TAKE_AT_ONCE)
                    .collect();
            let room = permits.len();
            if room == 0 {
                return;
            }
            let (store, instance) = (self.store.clone(), self.membership.instance().to_string());
            let node = self.membership.name().to_string();
            let taken = blocking(move || match term {
                Some(term) => store.take_requests(term, &instance, room, UNTAKEN_LIMIT),
                None => store.take_node_requests(&node, &instance, room, NODE_UNTAKEN_LIMIT),
            });
            let taken = match taken.await {
                Ok(taken) => taken,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot take forwarded requests");
                    return;
                }
            };
            let full = taken.len() == room;
            for ((id, request), permit) in taken.into_iter().zip(permits.drain(..)) {
                let (ctx, store) = (ctx.clone(), self.store.clone());
                let (membership, freed) = (self.membership.clone(), slots.freed.clone());
                let http = slots.http.clone();
                tokio::spawn(async move {
                    // A panic while answering is answered too.
                    let answering =
                        async move { answer_one(&ctx, &membership, http.as_ref(), request).await };
                    let frames = tokio::spawn(answering).await.unwrap_or_else(|e| {
                        error_frames(ErrorReply::new(
                            ErrorKind::Internal,
                            format!("answering the forwarded request failed: {e}"),
                        ))
                    });
                    write_answer(&store, id, term.unwrap_or(0), frames).await;
                    drop(permit);
                    freed.notify_one();
                });
            }
            if !full {
                return;
            }
        }
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

/// The leader's (or a node's) slots for answering forwarded requests.
struct Slots {
    /// One permit per request being answered.
    free: Arc<tokio::sync::Semaphore>,
    /// Notified when a request's answer is written (its permit is free again).
    freed: Arc<tokio::sync::Notify>,
    /// The leader's router of the forwarded HTTP routes (none for a node's requests).
    http: Option<axum::Router>,
}

/// Writes `frames` as the answer to request `id`, taken by `term`, trying again a few
/// times (the forwarding node waits for it).
async fn write_answer(store: &Arc<PostgresStore>, id: u64, term: u64, frames: Vec<u8>) {
    let frames = Arc::new(frames);
    for attempt in 1..=ANSWER_TRIES {
        let (store, frames) = (store.clone(), frames.clone());
        match blocking(move || store.answer_request(id, term, frames.to_vec())).await {
            Ok(true) => return,
            Ok(false) => {
                return tracing::debug!(request = id, "a forwarded request's client left");
            }
            Err(e) if attempt == ANSWER_TRIES => {
                tracing::warn!(request = id, error = %e, "cannot answer a forwarded request");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
        }
    }
}

/// The answer to `request`, as `membership`'s node (the leader has its router of the
/// forwarded HTTP routes, `http`).
async fn answer_one(
    ctx: &Context,
    membership: &Arc<Membership>,
    http: Option<&axum::Router>,
    request: ForwardedRequest,
) -> Vec<u8> {
    let bad = |what: &str| {
        error_frames(ErrorReply::new(
            ErrorKind::BadRequest,
            format!("node {} forwarded a request with {what}", request.from_node),
        ))
    };
    let Ok(mut actor) = serde_json::from_str::<Actor>(&request.actor) else {
        return bad("an unreadable actor");
    };
    let Some(role) = Role::from_name(&request.role) else {
        return bad("an unknown role");
    };
    if let Some(forwarded) = crate::http::forwarded::parse(&request.request) {
        let Some(router) = http.filter(|_| request.to_node.is_none()) else {
            return bad("an HTTP request, for a node");
        };
        actor.interface = format!("{} via node {}", actor.interface, request.from_node);
        return crate::http::forwarded::answer(router, forwarded, actor, role).await;
    }
    let Ok(parsed) = serde_json::from_slice::<Request>(&request.request) else {
        return bad("an unreadable request");
    };
    // A node answers only the reads of what it keeps itself; the leader only what a
    // standby forwards (a node of another version may send others).
    let expected = match request.to_node {
        Some(_) => matches!(parsed, Request::Logs { follow: false, .. }),
        None => crate::ops::for_request(crate::ops::RequestKind::of(&parsed)).forwarded(),
    };
    if !expected {
        return bad("a request that is not forwarded");
    }
    // The owner's rights (naming any directory) only for the owner of this daemon on
    // this host: the paths a client names are its host's.
    let from = request.from_node.clone();
    let here = membership.clone();
    let same_host = tokio::task::spawn_blocking(move || here.socket_here(&from, false).is_some())
        .await
        .unwrap_or(false);
    let submitter = if request.owner && same_host && actor.uid == crate::socket::owner_uid() {
        Submitter::Owner
    } else {
        Submitter::Confined
    };
    actor.interface = format!("{} via node {}", actor.interface, request.from_node);
    answer(ctx, actor, role, submitter, &request.request).await
}

/// The text of a log's answer (`log` frames then `stream_end`), or its error.
fn log_text(frames: &[u8]) -> Result<String, ErrorReply> {
    let malformed = |problem: String| {
        ErrorReply::new(
            ErrorKind::Internal,
            format!("another node's answer to a log's request is not well formed: {problem}"),
        )
    };
    let mut text = String::new();
    for body in split_frames(frames).map_err(malformed)? {
        match serde_json::from_slice::<Response>(body).map_err(|e| malformed(e.to_string()))? {
            Response::Log { text: part } => text.push_str(&part),
            Response::StreamEnd => return Ok(text),
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
