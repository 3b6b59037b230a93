//! The task model shared by the daemon and its clients.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::workflow::{StepRef, WorkflowId, WorkflowStatus};

/// Identifier of a task: assigned by the daemon, increasing in submission order.
pub type TaskId = u64;

/// Position of an event in the daemon's event log.
pub type EventSeq = u64;

/// What a task runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskKind {
    /// A program started directly with its arguments (no shell in between).
    Command {
        /// The program: a path, or a name looked up on the daemon's `PATH`.
        program: String,
        /// Its arguments, passed as they are.
        #[serde(default)]
        args: Vec<String>,
    },
    /// A Nushell snippet run by the real `nu`; the task's parameters are bound to `$params`.
    Nu {
        /// The Nushell code.
        code: String,
    },
    /// A Nushell script file run as `nu FILE`; parameters are in `$env.ORCH_PARAMS` (JSON).
    NuFile {
        /// The script's path (relative paths are taken from the task's working directory).
        path: PathBuf,
    },
}

/// How long to wait between attempts: exponential from `initial_ms`, capped at `max_ms`,
/// with jitter (each delay is drawn between half and all of its nominal value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Nominal delay before the second attempt, in milliseconds.
    pub initial_ms: u64,
    /// Upper bound of any delay, in milliseconds.
    pub max_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial_ms: 1_000,
            max_ms: 60_000,
        }
    }
}

impl Backoff {
    /// The nominal (jitter-free) delay before attempt `next_attempt` (2 for the first retry).
    pub fn nominal_delay_ms(&self, next_attempt: u32) -> u64 {
        let doublings = next_attempt.saturating_sub(2).min(32);
        self.initial_ms
            .saturating_mul(1u64 << doublings)
            .min(self.max_ms)
    }
}

/// A task as submitted: what to run and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// What to run.
    pub kind: TaskKind,
    /// A free-form label for filtering (`orch tasks --label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Higher runs first; equal priorities run in submission order.
    #[serde(default)]
    pub priority: i32,
    /// How many times a failed attempt is retried (0: run once).
    #[serde(default)]
    pub retries: u32,
    /// The delay between attempts.
    #[serde(default)]
    pub backoff: Backoff,
    /// Each attempt is killed (with its whole process group) after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Tasks that must succeed before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<TaskId>,
    /// Tasks that must finish (in any way) before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub soft_after: Vec<TaskId>,
    /// Structured parameters handed to the task (`$env.ORCH_PARAMS` as JSON; `$params` in
    /// Nushell snippets).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub params: serde_json::Value,
    /// Working directory of the process (the daemon's data directory when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variables for the process.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The workflow step this task runs, if any (set by the daemon, not by clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<StepRef>,
}

impl TaskSpec {
    /// A spec with default settings that runs `program` with `args`.
    pub fn command(program: impl Into<String>, args: Vec<String>) -> TaskSpec {
        TaskSpec {
            kind: TaskKind::Command {
                program: program.into(),
                args,
            },
            label: None,
            priority: 0,
            retries: 0,
            backoff: Backoff::default(),
            timeout_ms: None,
            after: Vec::new(),
            soft_after: Vec::new(),
            params: serde_json::Value::Null,
            cwd: None,
            env: BTreeMap::new(),
            workflow: None,
        }
    }

    /// A one-line description of what runs, for tables.
    pub fn describe(&self) -> String {
        match &self.kind {
            TaskKind::Command { program, args } => std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            TaskKind::Nu { code } => format!("nu: {}", code.lines().next().unwrap_or("")),
            TaskKind::NuFile { path } => format!("nu {}", path.display()),
        }
    }
}

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
}

impl TaskStatus {
    /// Every status, in life-cycle order.
    pub const ALL: [TaskStatus; 8] = [
        TaskStatus::Blocked,
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

/// Progress reported by a task on its standard output (see the README's convention).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Progress {
    /// Percent done, 0 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// What the task is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A task with its whole history, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Task {
    /// Its identifier.
    pub id: TaskId,
    /// What was submitted.
    pub spec: TaskSpec,
    /// Where it is now.
    pub state: TaskState,
    /// When it was submitted.
    pub submitted_at: DateTime<Utc>,
    /// Every attempt so far, oldest first.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Attempts made before the last manual retry; they do not count against `retries`.
    #[serde(default)]
    pub attempts_before_retry: u32,
    /// The last progress the task reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
}

impl Task {
    /// Attempts made in the current round (since submission or the last manual retry).
    pub fn attempts_in_round(&self) -> u32 {
        (self.attempts.len() as u32).saturating_sub(self.attempts_before_retry)
    }

    /// The most attempts the current round allows.
    pub fn max_attempts(&self) -> u32 {
        self.spec.retries.saturating_add(1)
    }

    /// The latest attempt, if any.
    pub fn last_attempt(&self) -> Option<&Attempt> {
        self.attempts.last()
    }
}

/// Which tasks `List` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskFilter {
    /// Only tasks in one of these states (all when empty).
    #[serde(default)]
    pub status: Vec<TaskStatus>,
    /// Only tasks with this label.
    #[serde(default)]
    pub label: Option<String>,
    /// At most this many, newest first.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// What happened to a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The task was accepted, in its first state.
    Submitted {
        /// Blocked or queued.
        status: TaskStatus,
    },
    /// Its dependencies succeeded, or its retry delay passed: it is ready.
    Queued,
    /// An attempt started.
    Started {
        /// Which attempt.
        attempt: u32,
    },
    /// The task reported progress.
    Progress {
        /// What it reported.
        progress: Progress,
    },
    /// An attempt failed and another one will follow.
    AttemptFailed {
        /// The failed attempt.
        attempt: u32,
        /// How it ended.
        outcome: AttemptOutcome,
        /// When the next attempt is due.
        retry_at: DateTime<Utc>,
    },
    /// An attempt could not start for lack of system resources (file descriptors,
    /// processes): it is not counted, and the task is started again at `retry_at`.
    StartDeferred {
        /// The attempt that could not start (it keeps its number).
        attempt: u32,
        /// The system's error, e.g. `Too many open files`.
        reason: String,
        /// When the attempt is tried again.
        retry_at: DateTime<Utc>,
    },
    /// The task succeeded.
    Succeeded {
        /// The attempt that succeeded.
        attempt: u32,
    },
    /// The task failed for good.
    Failed {
        /// How the last attempt ended.
        outcome: AttemptOutcome,
    },
    /// The task was cancelled.
    Cancelled,
    /// The task will not run because a dependency failed.
    DependencyFailed {
        /// The dependency that failed.
        dependency: TaskId,
    },
    /// A finished task was put back in the queue on request.
    Retried,
    /// A finished task was removed from the store (`orch clean`).
    Removed,
    /// A workflow changed state (the event's `task` is the workflow's id).
    Workflow {
        /// Its new status.
        status: WorkflowStatus,
        /// Why, in words (the failed step, the rollback's reason).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl EventKind {
    /// True for the events that leave a task in a final state.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            EventKind::Succeeded { .. }
                | EventKind::Failed { .. }
                | EventKind::Cancelled
                | EventKind::DependencyFailed { .. }
        ) || matches!(self, EventKind::Workflow { status, .. } if status.is_final())
    }

    /// The event's name, as in its `type` field.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Submitted { .. } => "submitted",
            EventKind::Queued => "queued",
            EventKind::Started { .. } => "started",
            EventKind::Progress { .. } => "progress",
            EventKind::AttemptFailed { .. } => "attempt_failed",
            EventKind::StartDeferred { .. } => "start_deferred",
            EventKind::Succeeded { .. } => "succeeded",
            EventKind::Failed { .. } => "failed",
            EventKind::Cancelled => "cancelled",
            EventKind::DependencyFailed { .. } => "dependency_failed",
            EventKind::Retried => "retried",
            EventKind::Removed => "removed",
            EventKind::Workflow { .. } => "workflow",
        }
    }
}

/// One entry of the event log: each state change emits exactly one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// Position in the log, increasing.
    pub seq: EventSeq,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// The task it concerns (for a workflow event, the workflow).
    pub task: TaskId,
    /// The workflow the task belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// What happened.
    pub kind: EventKind,
}

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

/// Who asked for a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Actor {
    /// The peer's user id.
    pub uid: u32,
    /// How it reached the daemon (`socket`).
    pub interface: String,
}

/// One entry of the audit log: a request that changes state, and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditEntry {
    /// Position in the log, from 1, without gaps.
    pub seq: u64,
    /// When the change was committed.
    pub at: DateTime<Utc>,
    /// Who asked.
    pub actor: Actor,
    /// What was asked: `submit`, `cancel`, `retry`, `shutdown`.
    pub action: String,
    /// The request's parameters, with secrets redacted.
    pub params: serde_json::Value,
    /// Whether it was carried out.
    pub ok: bool,
    /// The outcome in words (the task ids affected, or the error).
    pub outcome: String,
    /// The previous entry's hash (64 zeros for the first).
    pub prev_hash: String,
    /// SHA-256 over `prev_hash` and this entry's other fields.
    pub hash: String,
}

/// Which finished tasks `Clean` removes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CleanFilter {
    /// Only tasks that finished at least this long ago.
    #[serde(default)]
    pub older_than_ms: Option<u64>,
    /// Only tasks in these final states (all final states when empty).
    #[serde(default)]
    pub status: Vec<TaskStatus>,
}

/// Which audit entries `Audit` returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AuditFilter {
    /// Only this action.
    #[serde(default)]
    pub action: Option<String>,
    /// At most this many, newest first.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The result of checking the audit log's hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AuditReport {
    /// How many entries were checked.
    pub entries: u64,
    /// True when every entry is intact and in place.
    pub intact: bool,
    /// The first entry found wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_seq: Option<u64>,
    /// What is wrong with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
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

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff {
            initial_ms: 100,
            max_ms: 500,
        };
        let delays: Vec<_> = (2..7).map(|n| b.nominal_delay_ms(n)).collect();
        assert_eq!(delays, vec![100, 200, 400, 500, 500]);
    }
}
