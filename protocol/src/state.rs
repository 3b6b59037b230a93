//! Where a task is in its life, and how each of its attempts ended. Every state carries
//! only its own data, so invalid combinations cannot be written down.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::TaskId;

/// Why a task ended in failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The process exited on its own.
    Exited {
        /// Its exit code.
        code: i32,
    },
    /// The process was ended by a signal it did not expect.
    Signalled {
        /// The signal number.
        signal: i32,
    },
    /// The attempt ran past its timeout and its process group was killed.
    TimedOut {
        /// The timeout that was exceeded.
        after_ms: u64,
    },
    /// The process could not be started.
    SpawnFailed {
        /// The operating system's reason.
        error: String,
    },
    /// The daemon stopped (crash or shutdown) while the attempt ran.
    Interrupted,
    /// The attempt was cancelled on request.
    Cancelled,
}

impl AttemptOutcome {
    /// True when the attempt succeeded (exit code 0).
    pub fn is_success(&self) -> bool {
        matches!(self, AttemptOutcome::Exited { code: 0 })
    }

    /// A short human description, such as `exit code 3` or `timed out after 2s`.
    pub fn describe(&self) -> String {
        match self {
            AttemptOutcome::Exited { code } => format!("exit code {code}"),
            AttemptOutcome::Signalled { signal } => format!("killed by signal {signal}"),
            AttemptOutcome::TimedOut { after_ms } => {
                format!("timed out after {}", format_millis(*after_ms))
            }
            AttemptOutcome::SpawnFailed { error } => format!("could not start: {error}"),
            AttemptOutcome::Interrupted => "interrupted: the daemon stopped".to_string(),
            AttemptOutcome::Cancelled => "cancelled".to_string(),
        }
    }
}

/// A duration in milliseconds for people: `300ms`, `1s`, `1.5s`, `90s`.
pub fn format_millis(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let seconds = format!("{:.3}", ms as f64 / 1000.0);
    format!("{}s", seconds.trim_end_matches('0').trim_end_matches('.'))
}

/// One run of a task's process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Attempt {
    /// 1 for the first run.
    pub number: u32,
    /// When the daemon committed the start.
    pub started_at: DateTime<Utc>,
    /// When the outcome was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// How it ended; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AttemptOutcome>,
    /// The node of the cluster that ran it (absent on a single daemon); its log is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// Where a task is in its life. Only the data that belongs to a state is in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for other tasks (`after`) to succeed.
    Blocked {
        /// The dependencies that have not succeeded yet.
        waiting_on: Vec<TaskId>,
    },
    /// Ready but for its start time (`not_before`): queued at `until`.
    Delayed {
        /// When it is queued.
        until: DateTime<Utc>,
    },
    /// Held on request (`orch submit --stash`, `orch stash`): never started until it is
    /// enqueued (`orch enqueue`).
    Stashed {
        /// Since when.
        since: DateTime<Utc>,
    },
    /// Ready, waiting for a free slot.
    Queued {
        /// Since when.
        since: DateTime<Utc>,
    },
    /// An attempt is running.
    Running {
        /// Which attempt (1-based).
        attempt: u32,
        /// When it was committed as started.
        started_at: DateTime<Utc>,
        /// Since when its processes are stopped (SIGSTOP) by a pause, if they are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        paused_at: Option<DateTime<Utc>>,
    },
    /// An attempt failed; the next one is due at `retry_at`.
    RetryWaiting {
        /// The attempt that will run next.
        next_attempt: u32,
        /// When it becomes ready.
        retry_at: DateTime<Utc>,
    },
    /// The last attempt exited with code 0.
    Succeeded {
        /// When it finished.
        finished_at: DateTime<Utc>,
    },
    /// Every allowed attempt failed.
    Failed {
        /// When the last attempt ended.
        finished_at: DateTime<Utc>,
        /// How the last attempt ended.
        reason: AttemptOutcome,
    },
    /// Cancelled on request.
    Cancelled {
        /// When.
        at: DateTime<Utc>,
    },
    /// Not run, because a task it depends on failed or was cancelled.
    DependencyFailed {
        /// When this was decided.
        at: DateTime<Utc>,
        /// The task whose failure caused it.
        dependency: TaskId,
    },
}

impl TaskState {
    /// When the task reached this final state; `None` while it is not final.
    pub fn finished_at(&self) -> Option<DateTime<Utc>> {
        match self {
            TaskState::Succeeded { finished_at } | TaskState::Failed { finished_at, .. } => {
                Some(*finished_at)
            }
            TaskState::Cancelled { at } | TaskState::DependencyFailed { at, .. } => Some(*at),
            _ => None,
        }
    }

    /// The state's name without its data.
    pub fn status(&self) -> TaskStatus {
        match self {
            TaskState::Blocked { .. } => TaskStatus::Blocked,
            TaskState::Delayed { .. } => TaskStatus::Delayed,
            TaskState::Stashed { .. } => TaskStatus::Stashed,
            TaskState::Queued { .. } => TaskStatus::Queued,
            TaskState::Running { .. } => TaskStatus::Running,
            TaskState::RetryWaiting { .. } => TaskStatus::RetryWaiting,
            TaskState::Succeeded { .. } => TaskStatus::Succeeded,
            TaskState::Failed { .. } => TaskStatus::Failed,
            TaskState::Cancelled { .. } => TaskStatus::Cancelled,
            TaskState::DependencyFailed { .. } => TaskStatus::DependencyFailed,
        }
    }
}

/// The name of a [`TaskState`], for filters and indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// See [`TaskState::Blocked`].
    Blocked,
    /// See [`TaskState::Queued`].
    Queued,
    /// See [`TaskState::Running`].
    Running,
    /// See [`TaskState::RetryWaiting`].
    RetryWaiting,
    /// See [`TaskState::Succeeded`].
    Succeeded,
    /// See [`TaskState::Failed`].
    Failed,
    /// See [`TaskState::Cancelled`].
    Cancelled,
    /// See [`TaskState::DependencyFailed`].
    DependencyFailed,
    /// See [`TaskState::Delayed`] (after the others: their codes are stored).
    Delayed,
    /// See [`TaskState::Stashed`] (last: the codes of the others are stored).
    Stashed,
}

impl TaskStatus {
    /// Every status, in life-cycle order.
    pub const ALL: [TaskStatus; 10] = [
        TaskStatus::Stashed,
        TaskStatus::Blocked,
        TaskStatus::Delayed,
        TaskStatus::Queued,
        TaskStatus::Running,
        TaskStatus::RetryWaiting,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
        TaskStatus::DependencyFailed,
    ];

    /// The snake_case name used on the wire and in Nushell.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Blocked => "blocked",
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::RetryWaiting => "retry_waiting",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::DependencyFailed => "dependency_failed",
            TaskStatus::Delayed => "delayed",
            TaskStatus::Stashed => "stashed",
        }
    }

    /// Parses the snake_case name.
    pub fn parse(name: &str) -> Option<TaskStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// True for the states a task never leaves on its own.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskStatus::Succeeded
                | TaskStatus::Failed
                | TaskStatus::Cancelled
                | TaskStatus::DependencyFailed
        )
    }

    /// A small number for index keys.
    pub fn code(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_read_naturally() {
        assert_eq!(format_millis(300), "300ms");
        assert_eq!(format_millis(1000), "1s");
        assert_eq!(format_millis(1500), "1.5s");
        assert_eq!(format_millis(90_000), "90s");
    }
}
