//! Queue controls: groups of tasks with their own parallel limit, and pausing the whole
//! queue, a group, or a running task.
//!
//! Every task runs in a group: the one its spec names, else [`DEFAULT_GROUP`]. A group's
//! limit caps how many of its tasks run at once, on top of the nodes' slots; a paused
//! group starts none of its tasks, and a paused queue starts no task at all.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The group of every task that names none. It always exists.
pub const DEFAULT_GROUP: &str = "default";

/// The most groups a daemon keeps.
pub const MAX_GROUPS: usize = 256;

/// The longest group name.
pub const MAX_GROUP_NAME: usize = 64;

/// Checks a group name: 1 to [`MAX_GROUP_NAME`] letters, digits, `_`, `-` and `.`,
/// starting with a letter or digit. The error says what is wrong.
pub fn check_group_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_GROUP_NAME {
        return Err(format!(
            "a group name has 1 to {MAX_GROUP_NAME} characters ({} given)",
            name.len()
        ));
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(valid) {
        return Err(format!(
            "{name:?} is not a group name: letters, digits, '_', '-' and '.', starting with a letter or digit"
        ));
    }
    Ok(())
}

/// One group's settings, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GroupSettings {
    /// How many of its tasks may run at once (`None`: as many as the nodes have slots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u32>,
    /// Its tasks do not start.
    #[serde(default)]
    pub paused: bool,
}

/// The queue's controls, as stored: whether the whole queue is paused, and the groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueControls {
    /// No task starts.
    #[serde(default)]
    pub paused: bool,
    /// The groups by name ([`DEFAULT_GROUP`] among them).
    pub groups: BTreeMap<String, GroupSettings>,
}

impl Default for QueueControls {
    fn default() -> QueueControls {
        let default = (DEFAULT_GROUP.to_string(), GroupSettings::default());
        QueueControls {
            paused: false,
            groups: BTreeMap::from([default]),
        }
    }
}

/// One group as `orch group list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GroupView {
    /// Its name.
    pub name: String,
    /// How many of its tasks may run at once (`None`: as many as the nodes have slots).
    pub parallel: Option<u32>,
    /// Its tasks do not start.
    pub paused: bool,
    /// How many of its tasks run now (paused ones included).
    pub running: u64,
}

/// The queue's controls and the groups, as the daemon answers them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueView {
    /// No task starts.
    pub paused: bool,
    /// The groups, by name.
    pub groups: Vec<GroupView>,
}

/// A change to the queue's controls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "change", rename_all = "snake_case", deny_unknown_fields)]
pub enum QueueChange {
    /// Create a group.
    AddGroup {
        /// Its name.
        name: String,
        /// Its parallel limit (none or 0: as many as the nodes have slots).
        #[serde(default)]
        parallel: Option<u32>,
    },
    /// Remove a group: its tasks run in [`DEFAULT_GROUP`] from then on (the default group
    /// itself cannot be removed).
    RemoveGroup {
        /// Its name.
        name: String,
    },
    /// Set a group's parallel limit (0: as many as the nodes have slots).
    Parallel {
        /// The group ([`DEFAULT_GROUP`] when none is named).
        #[serde(default)]
        group: Option<String>,
        /// The limit.
        limit: u32,
    },
    /// Pause the whole queue, or one group: no task (of the group) starts. Its running
    /// tasks are paused too (SIGSTOP), unless `wait` lets them finish.
    Pause {
        /// The group (the whole queue when none is named).
        #[serde(default)]
        group: Option<String>,
        /// Let the running tasks finish.
        #[serde(default)]
        wait: bool,
    },
    /// Resume the whole queue, or one group, and the running tasks paused in it
    /// (SIGCONT).
    Resume {
        /// The group (the whole queue when none is named).
        #[serde(default)]
        group: Option<String>,
    },
}

impl QueueChange {
    /// The group the change names, if any.
    pub fn group(&self) -> Option<&str> {
        match self {
            QueueChange::AddGroup { name, .. } | QueueChange::RemoveGroup { name } => Some(name),
            QueueChange::Parallel { group, .. }
            | QueueChange::Pause { group, .. }
            | QueueChange::Resume { group } => group.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_checked() {
        for good in ["default", "deploy", "db-1", "a.b_c", "9"] {
            assert!(check_group_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", "../x", "é", &"x".repeat(65)] {
            assert!(check_group_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_group_always_exists() {
        let controls = QueueControls::default();
        assert!(controls.groups.contains_key(DEFAULT_GROUP));
        assert!(!controls.paused);
    }

    #[test]
    fn changes_are_tagged_and_strict() {
        let change: QueueChange =
            serde_json::from_str(r#"{"change": "pause", "group": "deploy", "wait": true}"#)
                .unwrap();
        assert_eq!(
            change,
            QueueChange::Pause {
                group: Some("deploy".into()),
                wait: true
            }
        );
        let unknown = serde_json::from_str::<QueueChange>(r#"{"change": "pause", "x": 1}"#);
        assert!(unknown.unwrap_err().to_string().contains("unknown field"));
    }
}
