//! A node while another leads: it serves the reads of the shared store (tasks, workflows,
//! events and watches, the audit log), its health, the cluster and its own stop, on its
//! socket and its HTTP port, through the same operations as the leader; the changes its
//! socket clients ask are forwarded to the leader ([`super::relay`]), and every other
//! request is refused as unavailable, naming the leader and its socket
//! ([`crate::ops::Context::not_leader`]). Its event bus is fed from the store's event log,
//! read at each wake-up the leader's commits send (LISTEN/NOTIFY), and polled as a
//! fallback, so that watches and waits on a standby follow the leader's work. The same
//! listeners then serve the daemon in full once the node leads.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;

use super::Membership;
use super::wakeups::Wakeups;
use crate::events::EventBus;
use crate::ops::Context;
use crate::store::Store;

/// How often a standby reads the events the leader committed with no wake-ups (the
/// listening connection failed).
const EVENT_POLL: Duration = Duration::from_millis(200);

/// How often it reads them anyway while wake-ups come (a missed one costs at most this).
const EVENT_POLL_LISTENING: Duration = Duration::from_secs(5);

/// The largest number of events read at a time.
const EVENT_PAGE: usize = 1000;

/// Serves `ctx` (a standby's context) on `socket` and on `http` (its router and listener)
/// until the node leads (its term) or the daemon stops (`None`).
pub async fn serve(
    ctx: Arc<Context>,
    membership: &Arc<Membership>,
    socket: &UnixListener,
    http: Option<(&TcpListener, axum::Router)>,
) -> Option<u64> {
    let leading = CancellationToken::new();
    let done = leading.clone();
    let (waiting, stop) = (membership.clone(), ctx.shutdown.clone());
    let elected = tokio::spawn(async move {
        let term = waiting.until_leading(&stop).await;
        done.cancel();
        term
    });
    let wakeups = Wakeups::new(
        membership.event_wakeups(),
        EVENT_POLL_LISTENING,
        EVENT_POLL,
        "the leader's commits",
    );
    let events = tokio::spawn(follow_events(
        ctx.store.clone(),
        ctx.bus.clone(),
        wakeups,
        leading.clone(),
    ));
    let on_http = async {
        if let Some((listener, app)) = http {
            crate::http::serve_until(listener, app, ctx.limits.clone(), leading.clone()).await;
        }
    };
    tokio::join!(
        crate::server::serve_until(socket, ctx.clone(), leading.clone()),
        on_http
    );
    let _ = events.await;
    elected.await.ok().flatten()
}

/// Publishes on `bus` the events the store gains, from its last one now, until `stop`:
/// at each of `wakeups`, and at its poll interval.
async fn follow_events(
    store: Arc<dyn Store>,
    bus: EventBus,
    mut wakeups: Wakeups,
    stop: CancellationToken,
) {
    let mut last = match store.last_event_seq() {
        Ok(seq) => seq,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the event log: a standby's watches see no new events");
            return;
        }
    };
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = wakeups.next() => {}
        }
        loop {
            let read = tokio::task::block_in_place(|| store.events_after(last, EVENT_PAGE));
            match read {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    let full = events.len() >= EVENT_PAGE;
                    last = events.last().map_or(last, |e| e.seq);
                    bus.publish(events);
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the event log; trying again");
                    break;
                }
            }
        }
    }
}
