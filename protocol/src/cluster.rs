//! What a daemon on a shared PostgreSQL store says about its cluster: the nodes (their
//! heartbeats and settings), which one leads, and under which term.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The answer to `Cluster`: every node the store knows, the leader and its term.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClusterView {
    /// The node that answered.
    pub answered_by: String,
    /// The node holding the leadership, and since when (none before the first election).
    pub leader: Option<Leadership>,
    /// Every node registered in the store, by name.
    pub nodes: Vec<NodeInfo>,
}

/// Who leads the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Leadership {
    /// The leader's node name.
    pub node: String,
    /// The leadership's term: one more at each takeover; every write of the scheduler
    /// is fenced by it.
    pub term: u64,
    /// When this term began.
    pub since: DateTime<Utc>,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NodeInfo {
    /// Its name (`--node`).
    pub name: String,
    /// Whether it leads, stands by, or is down.
    pub role: NodeRole,
    /// The host it runs on.
    pub host: String,
    /// Its daemon's process id on that host.
    pub pid: u32,
    /// Its socket, on that host.
    pub socket: String,
    /// Its HTTP address, when it serves one.
    pub http: Option<String>,
    /// How many tasks it may run at once (`--parallel`).
    pub parallel: u32,
    /// Its labels (`--label`).
    pub labels: Vec<String>,
    /// Its daemon's version.
    pub version: String,
    /// When its daemon started.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// When its lease ends unless it renews it.
    pub lease_until: DateTime<Utc>,
}

/// A node's part in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NodeRole {
    /// It holds the leadership: it runs the scheduler and the tasks.
    Leader,
    /// Alive, ready to take over.
    Standby,
    /// Its lease ran out (stopped, killed, or cut off).
    Down,
}

impl NodeRole {
    /// The role as shown (`leader`, `standby`, `down`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeRole::Leader => "leader",
            NodeRole::Standby => "standby",
            NodeRole::Down => "down",
        }
    }
}

/// A node's own view, in its health report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NodeHealth {
    /// The node's name.
    pub node: String,
    /// Its role now (`leader` or `standby`).
    pub role: NodeRole,
    /// The leader (itself or another), if there is one.
    pub leader: Option<Leadership>,
    /// How many nodes are alive (their lease runs).
    pub nodes_up: u32,
}
