//! What a node answers while another node leads: `health` (with its part in the
//! cluster), `cluster` (every node and the leader) and `shutdown` on the socket; every
//! other request, and every HTTP request, is refused as unavailable, naming the leader to
//! ask instead. The same listeners then serve the daemon in full once the node leads.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use orch_protocol::{ErrorKind, ErrorReply, HealthReport, PROTOCOL_VERSION, Request, Response};
use tokio::net::{TcpListener, UnixListener};

use tokio_util::sync::CancellationToken;

use super::Membership;
use crate::policy::Role;
use crate::server::Connection;
use crate::server::limits::Limits;
use crate::store::Store;

/// What a standby node answers with.
pub struct Standby {
    /// The node.
    pub membership: Arc<Membership>,
    /// The shared store (counts for the health report).
    pub store: Arc<dyn Store>,
    /// Connection limits.
    pub limits: Arc<Limits>,
    /// Other local users allowed on the socket (`--allow-user`).
    pub grants: HashMap<u32, Role>,
    /// The retention policy, for the health report.
    pub retention: Arc<crate::retention::Policy>,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The socket.
    pub socket: PathBuf,
    /// `--parallel`.
    pub parallel_limit: usize,
    /// When the daemon started.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Cancelled to stop the daemon (a `shutdown` request, a signal).
    pub shutdown: CancellationToken,
}

impl Standby {
    /// Answers on `socket` (and `http`) until the node leads (its term) or the daemon
    /// stops (`None`).
    pub async fn serve(
        self: Arc<Self>,
        socket: &UnixListener,
        http: Option<&TcpListener>,
    ) -> Option<u64> {
        let leading = CancellationToken::new();
        let done = leading.clone();
        let standby = self.clone();
        let elected = tokio::spawn(async move {
            let term = standby.membership.until_leading(&standby.shutdown).await;
            done.cancel();
            term
        });
        let slots = || {
            Arc::new(tokio::sync::Semaphore::new(
                self.limits.max_socket_connections,
            ))
        };
        let on_socket = crate::server::limits::accept_until(
            socket,
            leading.clone(),
            slots(),
            "socket",
            |stream| self.clone().answer(stream),
            drop,
        );
        let on_http = async {
            if let Some(http) = http {
                let standby = self.clone();
                let app = axum::Router::new().fallback(move || {
                    let reply = standby.refusal();
                    std::future::ready(crate::http::error::ApiError::from(reply))
                });
                crate::http::serve_until(http, app, self.limits.clone(), leading.clone()).await;
            }
        };
        tokio::join!(on_socket, on_http);
        elected.await.ok().flatten()
    }

    /// Serves one socket client.
    async fn answer(self: Arc<Self>, stream: tokio::net::UnixStream) {
        let Some(mut conn) =
            crate::server::open_connection(stream, &self.grants, &self.limits).await
        else {
            return;
        };
        while let Some(request) = crate::server::next_request(&mut conn).await {
            let sent = match request {
                Ok(request) => self.respond(&mut conn, request).await,
                Err(reply) => conn.send(&Response::Error(reply)).await,
            };
            if sent.is_err() {
                return;
            }
        }
    }

    /// Answers one request.
    async fn respond(&self, conn: &mut Connection, request: Request) -> std::io::Result<()> {
        if let Err(reply) = crate::server::check_access(conn, &request) {
            return conn.send(&Response::Error(reply)).await;
        }
        let answer = match request {
            Request::Health => self.health().map(Response::Health),
            Request::Cluster => self
                .membership
                .view()
                .map(Response::Cluster)
                .map_err(|e| ErrorReply::new(ErrorKind::Internal, e.to_string())),
            Request::Shutdown | Request::Handover => {
                tracing::info!(
                    uid = conn.actor.uid,
                    "shutdown requested by a client (standby)"
                );
                let sent = conn.send(&Response::ShuttingDown).await;
                self.shutdown.cancel();
                return sent;
            }
            _ => Err(self.refusal()),
        };
        match answer {
            Ok(response) => conn.send(&response).await,
            Err(reply) => conn.send(&Response::Error(reply)).await,
        }
    }

    /// The node's health report.
    fn health(&self) -> Result<HealthReport, ErrorReply> {
        let internal =
            |e: crate::store::StoreError| ErrorReply::new(ErrorKind::Internal, e.to_string());
        let counts = self.store.count_by_status().map_err(internal)?;
        let removed = self.store.events_removed_through().map_err(internal)?;
        Ok(HealthReport {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: PROTOCOL_VERSION,
            pid: std::process::id(),
            started_at: self.started_at,
            data_dir: self.data_dir.clone(),
            socket: self.socket.clone(),
            storage: self.store.backend_name().to_string(),
            parallel_limit: self.parallel_limit,
            counts: counts.into_iter().collect(),
            retention: self.retention.report(removed),
            cluster: Some(self.membership.health().map_err(internal)?),
        })
    }

    /// Why a request other than health and cluster is refused here.
    fn refusal(&self) -> ErrorReply {
        ErrorReply::new(
            ErrorKind::Unavailable,
            format!(
                "node {} is a standby of its cluster: it answers only health and cluster requests; {}. Ask the leader",
                self.membership.name(),
                self.membership.leader_summary()
            ),
        )
    }
}
