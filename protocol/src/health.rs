//! What the daemon says about itself when asked whether it is alive.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::state::TaskStatus;

/// The daemon's answer to `Health`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HealthReport {
    /// The daemon's version.
    pub version: String,
    /// The wire protocol version.
    pub protocol: u32,
    /// The daemon's process id.
    pub pid: u32,
    /// When the daemon started.
    pub started_at: DateTime<Utc>,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The socket it listens on.
    pub socket: PathBuf,
    /// The store backend (`redb`).
    pub storage: String,
    /// How many tasks may run at once.
    pub parallel_limit: usize,
    /// How many tasks are in each state.
    pub counts: BTreeMap<TaskStatus, u64>,
    /// What the daemon removes by itself, and what it has removed of the event log.
    #[serde(default)]
    pub retention: RetentionReport,
    /// The node and its cluster, on a shared PostgreSQL store (none on redb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::NodeHealth>,
}

/// The daemon's retention policy (`--retain-finished`, `--retain-label`,
/// `--retain-events`): each a duration such as `30days`, or `never`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RetentionReport {
    /// How long finished tasks and workflows (with their logs) are kept.
    pub finished: String,
    /// Per-label retentions of finished tasks, overriding `finished`.
    pub labels: BTreeMap<String, String>,
    /// How long events are kept.
    pub events: String,
    /// Events up to this sequence number were removed (0: none); a watch from before it
    /// is refused.
    pub events_removed_through: u64,
}

impl Default for RetentionReport {
    fn default() -> Self {
        RetentionReport {
            finished: "never".into(),
            labels: BTreeMap::new(),
            events: "never".into(),
            events_removed_through: 0,
        }
    }
}
