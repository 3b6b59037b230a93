//! The socket adapter: accepts connections, checks the peer and the handshake, reads
//! request frames and hands each to [`dispatch`], which runs its operation
//! ([`crate::ops`]) and sends the answer as frames ([`streams`] for the long-lived ones).

pub mod connection;
mod dispatch;
pub use dispatch::check_access;
pub mod forwarded;
pub mod limits;
mod streams;

use std::sync::Arc;

use orch_protocol::{ErrorKind, ErrorReply, Hello, PROTOCOL_VERSION, Request, Response, Welcome};
use tokio::net::{UnixListener, UnixStream};

pub use connection::Connection;
use connection::{Patience, RecvError};
use limits::Limits;

use crate::ops::Context;
use crate::policy::{Role, socket_role};

/// Accepts connections until `ctx.shutdown` is cancelled, at most
/// `--max-socket-connections` at once: past it a client is refused with an error naming
/// the cap.
pub async fn serve(listener: UnixListener, ctx: Arc<Context>) {
    let until = ctx.shutdown.clone();
    serve_until(&listener, ctx, until).await;
}

/// Like [`serve`], on a listener that stays open, until `until` is cancelled (a standby
/// serves until it leads).
pub async fn serve_until(
    listener: &UnixListener,
    ctx: Arc<Context>,
    until: tokio_util::sync::CancellationToken,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(
        ctx.limits.max_socket_connections,
    ));
    limits::accept_until(
        listener,
        until,
        slots,
        "socket",
        |stream| serve_connection(stream, ctx.clone()),
        |stream| refuse(stream, &ctx.limits),
    )
    .await;
}

/// Answers a client over the connection cap with an `unavailable` error frame.
fn refuse(stream: UnixStream, limits: &Arc<Limits>) {
    let reply = ErrorReply::new(
        ErrorKind::Unavailable,
        format!(
            "the daemon already serves its limit of {} socket connections (--max-socket-connections); try again later",
            limits.max_socket_connections
        ),
    );
    if let Ok(frame) = orch_protocol::frame::encode(&Response::Error(reply)) {
        limits.refuse(stream, "socket", frame);
    }
}

async fn serve_connection(stream: UnixStream, mut ctx: Arc<Context>) {
    let Some(mut conn) = open_connection(stream, &ctx.grants, &ctx.limits).await else {
        return;
    };
    while let Some(request) = next_request(&mut conn).await {
        // A connection a standby accepted is served by the leader's context once the
        // node leads.
        if ctx.standby && ctx.successor.get().is_none() && leads(&ctx) {
            // Elected, its engine still starting: the leader's context comes in a moment.
            for _ in 0..500 {
                if ctx.successor.get().is_some() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
        if let Some(next) = ctx.successor.get() {
            ctx = next.clone();
        }
        let result = match request {
            Ok(request) => dispatch::dispatch(&ctx, &mut conn, request).await,
            Err(reply) => conn.send(&Response::Error(reply)).await,
        };
        if result.is_err() {
            return;
        }
    }
}

/// Whether the node of a standby's context has been elected.
fn leads(ctx: &Context) -> bool {
    ctx.cluster
        .as_ref()
        .is_some_and(|m| matches!(m.part(), crate::cluster::membership::Part::Leading { .. }))
}

/// The client's next request (or the error to answer it with); `None` when the
/// connection is to close (the client left, was idle too long, or broke the framing, which
/// it was told).
pub(crate) async fn next_request(conn: &mut Connection) -> Option<Result<Request, ErrorReply>> {
    let idle = conn.limits().idle_timeout;
    let frame = match conn.recv(Patience::Idle(idle)).await {
        Ok(frame) => frame,
        Err(RecvError::Closed | RecvError::Idle) => return None,
        Err(RecvError::Refused(reply)) => {
            // The frame boundary is lost (oversized, slow or no room): answer and close.
            let _ = conn.send(&Response::Error(reply)).await;
            return None;
        }
    };
    Some(parse_request(&frame.body))
}

/// Checks a new client (its peer uid against the owner and `grants`) and its handshake;
/// the connection, ready for requests, or `None` once the client was told why not.
pub(crate) async fn open_connection(
    stream: UnixStream,
    grants: &std::collections::HashMap<u32, Role>,
    limits: &Arc<Limits>,
) -> Option<Connection> {
    let peer_uid = stream.peer_cred().map(|c| c.uid()).ok();
    let actor = orch_protocol::Actor {
        uid: peer_uid.unwrap_or(u32::MAX),
        interface: "socket".into(),
    };
    let role = socket_role(peer_uid, grants);
    let mut conn = Connection::new(stream, actor, role.unwrap_or(Role::Viewer), limits.clone());
    if role.is_none() {
        let reply = ErrorReply::new(
            ErrorKind::PermissionDenied,
            format!(
                "permission denied: uid {} is not the daemon's owner (uid {}) and was not granted access (--allow-user)",
                peer_uid.map_or("unknown".into(), |u| u.to_string()),
                crate::socket::owner_uid()
            ),
        );
        let _ = conn.send(&Response::Error(reply)).await;
        return None;
    }
    handshake(&mut conn).await.then_some(conn)
}

/// Reads the client's [`Hello`] and answers; false when the connection must close.
async fn handshake(conn: &mut Connection) -> bool {
    let deadline = tokio::time::Instant::now() + conn.limits().handshake_timeout;
    let hello = match conn.recv(Patience::Until(deadline)).await {
        Ok(frame) => parse_hello(&frame.body),
        Err(RecvError::Refused(reply)) => Err(reply),
        Err(RecvError::Closed | RecvError::Idle) => return false,
    };
    let reply = match hello {
        Ok(hello) if hello.protocol == PROTOCOL_VERSION => {
            tracing::debug!(client = %hello.client, "client connected");
            let welcome = Welcome {
                protocol: PROTOCOL_VERSION,
                daemon_version: env!("CARGO_PKG_VERSION").to_string(),
                pid: std::process::id(),
            };
            return conn.send_json(&welcome).await.is_ok();
        }
        Ok(hello) => ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "protocol version mismatch: the client ({}) speaks protocol {}, this daemon (provisioning-orchestrator {}) speaks protocol {}; use matching versions of the plugin and the daemon",
                hello.client,
                hello.protocol,
                env!("CARGO_PKG_VERSION"),
                PROTOCOL_VERSION
            ),
        ),
        Err(reply) => reply,
    };
    let _ = conn.send(&Response::Error(reply)).await;
    false
}

/// The client's [`Hello`], or the error naming what is wrong with it.
pub fn parse_hello(body: &[u8]) -> Result<Hello, ErrorReply> {
    serde_json::from_slice::<Hello>(body).map_err(|e| {
        ErrorReply::new(
            ErrorKind::BadRequest,
            format!("expected a handshake ({{\"protocol\": N, \"client\": NAME}}): {e}"),
        )
    })
}

/// A request frame's body as a [`Request`], or a `bad_request` error naming the problem.
pub fn parse_request(body: &[u8]) -> Result<Request, ErrorReply> {
    serde_json::from_slice::<Request>(body)
        .map_err(|e| ErrorReply::new(ErrorKind::BadRequest, format!("invalid request: {e}")))
}
