//! The answering side: the leader takes the requests forwarded to it under its term, and
//! each node those addressed to it (logs), and answers each as if its client were
//! connected here.

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Actor, ErrorKind, ErrorReply, Request};
use tokio_util::sync::CancellationToken;

use super::{NODE_UNTAKEN_LIMIT, Relay, UNTAKEN_LIMIT};
use crate::cluster::Membership;
use crate::cluster::blocking;
use crate::cluster::membership::Part;
use crate::cluster::wakeups::Wakeups;
use crate::ops::Context;
use crate::policy::{Role, Submitter};
use crate::server::forwarded::{answer, error_frames};
use crate::store::{ForwardedRequest, PostgresStore};
use crate::testenv::keeper::{self, EnvCommit};

/// How often the leader (and each node, for its own) looks for requests when no wake-up
/// comes: a fallback only, while the listening connection works.
const REQUEST_POLL: Duration = Duration::from_secs(5);
/// How often it looks with no listening connection.
const REQUEST_POLL_UNHEARD: Duration = Duration::from_millis(100);
/// How many times the leader tries to write an answer.
const ANSWER_TRIES: u32 = 5;
/// How often the leader removes the requests nobody will read.
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// The most requests the leader takes at once.
const TAKE_AT_ONCE: usize = 64;

impl Relay {
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
    if let Some(commit) = EnvCommit::parse(&request.request) {
        if request.to_node.is_some() {
            return bad("a test environment's commit, for a node");
        }
        let answer = ctx.testenvs.commit_from(&request.from_node, commit).await;
        return keeper::encode_answer(&answer);
    }
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
    // A node answers only the reads of what it keeps itself and the requests about the
    // test environments on its engine (which the leader placed there); the leader only
    // what a standby forwards (a node of another version may send others).
    let for_this_node = request.to_node.is_some();
    let placed = for_this_node
        && matches!(
            parsed,
            Request::EnvCreate { .. }
                | Request::EnvRun { .. }
                | Request::EnvDelete { .. }
                | Request::EnvLogs { follow: false, .. }
        );
    let expected = if for_this_node {
        placed || matches!(parsed, Request::Logs { follow: false, .. })
    } else {
        crate::ops::for_request(crate::ops::RequestKind::of(&parsed)).forwarded()
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
    answer(ctx, actor, (role, submitter), placed, &request.request).await
}
