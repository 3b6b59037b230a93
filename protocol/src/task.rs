//! A task as submitted (what to run and how) and as stored (its state and history).

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::state::{Attempt, TaskState};
use crate::workflow::StepRef;

pub use crate::ids::TaskId;

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
    /// Labels the node that runs it must have (`orch submit --on docker`): in a cluster,
    /// only a node with every one of them runs it; a single daemon has its `--label`s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<String>,
    /// Not started before this instant (`orch submit --at` / `--delay`): until then, once
    /// nothing else holds it back, the task is `delayed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
    /// The group it runs in (`orch submit --group`; [`crate::DEFAULT_GROUP`] when none is
    /// named): the group's parallel limit and pause apply to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Its standard input is a pipe the daemon keeps open (`orch submit --stdin`), written
    /// to by `orch send`; otherwise it reads nothing (`/dev/null`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
}

impl TaskSpec {
    /// The group it runs in.
    pub fn group_name(&self) -> &str {
        self.group.as_deref().unwrap_or(crate::queue::DEFAULT_GROUP)
    }

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
            on: Vec::new(),
            not_before: None,
            group: None,
            stdin: false,
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

#[cfg(test)]
mod tests {
    use super::*;

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

/// The tasks that depend on one task (`GET /tasks/{id}/dependants`). No index keeps a
/// task's dependants, so they are looked for among the tasks submitted after it (a task
/// can only depend on older ones), a bounded number of ids at a time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Dependants {
    /// The dependants found, oldest first.
    pub tasks: Vec<Task>,
    /// The highest id looked at.
    pub searched_through: TaskId,
    /// True when every task after it was looked at (none may hide further on).
    pub complete: bool,
}
