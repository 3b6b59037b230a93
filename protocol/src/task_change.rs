//! Changes to a task that has not started: stash it (held, never started until it is
//! enqueued), enqueue a stashed one, or edit what it runs and how it is scheduled.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use crate::task::{TaskId, TaskKind};

/// A change to one task that has not started ([`crate::Request::ChangeTask`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "change", rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskChange {
    /// Hold a queued, blocked or delayed task: it is `stashed` and never starts until it
    /// is enqueued.
    Stash,
    /// Release a stashed task into the state it would have had at submission (blocked
    /// on its dependencies, delayed until its start time, or queued).
    Enqueue {
        /// A new start time (`orch enqueue --at` / `--delay`); absent: the one it had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        not_before: Option<DateTime<Utc>>,
    },
    /// Change what a stashed, queued, blocked or delayed task runs, or how it is
    /// scheduled.
    Edit(TaskEdit),
}

/// The fields an edit replaces; each one absent is left as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskEdit {
    /// What to run instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TaskKind>,
    /// The new priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// The new label; `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub label: Option<Option<String>>,
    /// The new environment variables (replacing all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// The new parameters (replacing them; `null` removes them).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub params: Option<serde_json::Value>,
    /// The tasks that must succeed first (replacing its `after`); each one submitted
    /// before this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<TaskId>>,
}

impl TaskEdit {
    /// The names of the fields this edit sets, in the spec's terms.
    pub fn fields(&self) -> Vec<&'static str> {
        [
            (self.kind.is_some(), "command"),
            (self.priority.is_some(), "priority"),
            (self.label.is_some(), "label"),
            (self.env.is_some(), "env"),
            (self.params.is_some(), "params"),
            (self.after.is_some(), "after"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect()
    }
}

/// A field that is present deserializes to `Some`, even when it is `null` (which a plain
/// `Option<Option<_>>` would read as absent).
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_label_removes_it_and_an_absent_one_keeps_it() {
        let clear: TaskEdit = serde_json::from_str(r#"{"label": null}"#).unwrap();
        assert_eq!(clear.label, Some(None));
        let keep: TaskEdit = serde_json::from_str(r#"{"priority": 3}"#).unwrap();
        assert_eq!(keep.label, None);
        assert_eq!(keep.fields(), vec!["priority"]);
        let round: TaskEdit =
            serde_json::from_str(&serde_json::to_string(&clear).unwrap()).unwrap();
        assert_eq!(round, clear);
    }

    #[test]
    fn changes_are_tagged_and_strict() {
        let change: TaskChange =
            serde_json::from_str(r#"{"change": "edit", "priority": 5}"#).unwrap();
        assert_eq!(
            change,
            TaskChange::Edit(TaskEdit {
                priority: Some(5),
                ..TaskEdit::default()
            })
        );
        let wrong = serde_json::from_str::<TaskChange>(r#"{"change": "edit", "colour": 1}"#);
        assert!(wrong.unwrap_err().to_string().contains("colour"));
        let stash: TaskChange = serde_json::from_str(r#"{"change": "stash"}"#).unwrap();
        assert_eq!(stash, TaskChange::Stash);
    }
}
