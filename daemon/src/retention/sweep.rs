//! At start: delete the logs of removed tasks. A removal's logs are deleted once the
//! removal is durable, so a kill -9 between the two leaves logs whose task is gone; the
//! next start finds them here (a log exists only for a task that was recorded running,
//! so a `<id>.log` with an id already assigned and no record is such a log).

use std::path::Path;
use std::sync::Arc;

use orch_protocol::TaskId;

use crate::store::{Store, StoreError};

/// Deletes in `logs_dir` the logs of tasks with ids up to `last_id` that the store no
/// longer holds; returns how many were deleted.
pub fn orphan_logs(
    store: &dyn Store,
    logs_dir: &Path,
    last_id: TaskId,
) -> Result<usize, StoreError> {
    let entries = match std::fs::read_dir(logs_dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %logs_dir.display(), error = %e, "cannot list the task logs");
            return Ok(0);
        }
    };
    let mut deleted = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = task_of(&name.to_string_lossy()) else {
            continue;
        };
        if id > last_id || !store.statuses(id..=id)?.is_empty() {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => deleted += 1,
            Err(e) => {
                tracing::warn!(log = %entry.path().display(), error = %e, "cannot delete the log of a removed task")
            }
        }
    }
    Ok(deleted)
}

/// The task a log file name (`<id>.log`) belongs to.
fn task_of(name: &str) -> Option<TaskId> {
    let id = name.strip_suffix(".log")?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// Runs [`orphan_logs`] in the background.
pub fn spawn(store: Arc<dyn Store>, logs_dir: std::path::PathBuf, last_id: TaskId) {
    tokio::task::spawn_blocking(
        move || match orphan_logs(store.as_ref(), &logs_dir, last_id) {
            Ok(0) => {}
            Ok(n) => tracing::info!(logs = n, "logs of removed tasks deleted"),
            Err(e) => tracing::warn!(error = %e, "cannot check the logs of removed tasks"),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_task_log_names_are_read_as_tasks() {
        assert_eq!(task_of("12.log"), Some(12));
        assert_eq!(task_of("env-3.log"), None);
        assert_eq!(task_of("12.log.1"), None);
        assert_eq!(task_of(".log"), None);
        assert_eq!(task_of("+1.log"), None);
    }
}
