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
}
