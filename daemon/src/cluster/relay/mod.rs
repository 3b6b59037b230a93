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
//! - [`forward`]: a node's side that asks (a standby's changes), and waits for the
//!   answer; [`logs`]: a log another node keeps; [`envs`]: test environments on another
//!   node's engine (the leader's requests, the node's commits);
//! - [`answer`]: the side that answers (the leader, or the node asked for a log).
//!
//! The same way, a node asks another for the log of an attempt that node ran (it keeps
//! it in its data directory): [`Relay::remote_log`], answered by the other node's
//! [`Relay::serve_node`]; a followed log is read again every second until the task ends.

mod answer;
mod envs;
mod forward;
mod logs;

pub use logs::RemoteLog;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::Membership;
use crate::store::PostgresStore;

/// How long a request may wait for a leader to take it before it is withdrawn.
pub const UNTAKEN_LIMIT: Duration = Duration::from_secs(30);
/// How long a request for another node may wait for it to take it (a live node takes
/// it at once).
const NODE_UNTAKEN_LIMIT: Duration = Duration::from_secs(10);

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
}
