//! What the daemon did lately, minute by minute: the overview's throughput and its
//! failures of the last hour (`GET /activity`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The last hour of activity, a minute at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Activity {
    /// Since when the counts are complete: an hour ago, or later when the daemon has not
    /// seen the whole hour (it started since, or the hour held more events than it reads
    /// back at start).
    pub counted_since: DateTime<Utc>,
    /// The minutes, oldest first, the current one last (60 of them).
    pub minutes: Vec<ActivityMinute>,
    /// Tasks that failed for good in the minutes listed.
    pub failed_last_hour: u64,
    /// Tasks that succeeded in the minutes listed.
    pub succeeded_last_hour: u64,
}

/// One minute's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ActivityMinute {
    /// The minute's start.
    pub at: DateTime<Utc>,
    /// Tasks submitted.
    pub submitted: u64,
    /// Tasks that succeeded.
    pub succeeded: u64,
    /// Tasks that failed for good.
    pub failed: u64,
}
