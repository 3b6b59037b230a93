//! The application layer: every operation the daemon offers, once, for both interfaces.
//!
//! [`OPERATIONS`] is the one table of them (name, socket request, role needed, HTTP
//! routes with their OpenAPI summary and schemas): the socket dispatcher's role check, the
//! HTTP router and its role check, and the OpenAPI document are all derived from it.
//! The functions in the area modules do the work and return domain values (a task, a
//! page of a workflow, a stream of events) or an [`AppError`]; the socket adapter
//! (`server/`) encodes them as frames, the HTTP adapter (`http/`) as JSON with a status.

pub mod audit;
pub mod daemon;
pub mod envs;
mod error;
pub mod logs;
pub mod notify;
mod operation;
pub mod queue;
mod request_kind;
pub mod schedules;
mod table;
pub mod tasks;
pub mod watch;
pub mod workflow_submit;
pub mod workflows;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::engine::EngineHandle;
use crate::events::EventBus;
use crate::policy::Role;
use crate::server::limits::Limits;
use crate::store::Store;
pub use error::{AppError, AppErrorKind};
pub use operation::{Answer, Method, Operation, Route, RouteId};
pub use request_kind::RequestKind;
pub use table::{OPERATIONS, for_request, routes};

/// What every operation may use.
pub struct Context {
    /// Committed state, for reads.
    pub store: Arc<dyn Store>,
    /// The audit log's archived segments: compaction, export, the whole log's check.
    pub audit: Arc<crate::audit::archive::Archive>,
    /// The engine, for changes.
    pub engine: EngineHandle,
    /// Committed events.
    pub bus: EventBus,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The socket path.
    pub socket: PathBuf,
    /// Where task logs are.
    pub logs_dir: PathBuf,
    /// How many tasks may run at once.
    pub parallel_limit: usize,
    /// Where the extensions (`providers/`, `taskservs/`, `clusters/`) are read from.
    pub modules_dir: PathBuf,
    /// The workspace whose infras workflows use when a request names none.
    pub workspace: PathBuf,
    /// Test environments.
    pub testenvs: Arc<crate::testenv::TestEnvService>,
    /// Other local users allowed on the socket, with their roles (`--allow-user`).
    pub grants: HashMap<u32, Role>,
    /// Timeouts, connection caps and the budget of buffered request bytes.
    pub limits: Arc<Limits>,
    /// When the daemon started.
    pub started_at: DateTime<Utc>,
    /// What the daemon removes by itself (`--retain-finished` and the like).
    pub retention: Arc<crate::retention::Policy>,
    /// Cancelled to stop the daemon.
    pub shutdown: CancellationToken,
    /// This node of its cluster (`--storage-type postgres`); none on redb.
    pub cluster: Option<Arc<crate::cluster::Membership>>,
    /// Forwarding through the store (a node of a cluster): a standby's changes are
    /// carried out by the leader, and the logs another node keeps are read from it.
    pub relay: Option<Arc<crate::cluster::relay::Relay>>,
    /// True on a standby node of a cluster: only the operations a standby serves
    /// ([`Operation::served_on_standby`]) are run; those it forwards
    /// ([`Operation::forwarded`]) go to the leader, the others are refused naming it.
    pub standby: bool,
    /// The context that serves once this one no longer does (a standby's, once its node
    /// leads): the connections this one accepted go on with it.
    pub successor: std::sync::OnceLock<Arc<Context>>,
    /// Set (before `shutdown` is cancelled) when the stop leaves running attempts to
    /// the supervisor.
    pub leave_running: std::sync::atomic::AtomicBool,
}

impl Context {
    /// Whether the stop asked for leaves running attempts to the supervisor (`orch
    /// daemon stop --leave-running`, a restart, an upgrade).
    pub fn leaves_running(&self) -> bool {
        self.leave_running.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The refusal of an operation a standby does not serve: unavailable here, with the
    /// leader to ask (its name, term and socket).
    pub fn not_leader(&self) -> orch_protocol::ErrorReply {
        let (node, leader, socket) = match &self.cluster {
            Some(m) => (
                m.name().to_string(),
                m.leader_summary(),
                m.leader_socket_here(),
            ),
            None => ("this node".into(), "no node leads".into(), None),
        };
        let mut reply = orch_protocol::ErrorReply::new(
            orch_protocol::ErrorKind::Unavailable,
            format!(
                "node {node} is a standby of its cluster: it serves reads (tasks, workflows, events, the audit log), health and the cluster, not this request; {leader}. Ask the leader"
            ),
        );
        reply.leader_socket = socket;
        reply
    }
}
