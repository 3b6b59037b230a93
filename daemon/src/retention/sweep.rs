//! At start: delete the logs of removed tasks. A removal's logs are deleted once the
//! removal is durable, so a kill -9 between the two leaves logs whose task is gone; the
//! next start finds them here (a log exists only for a task that was recorded running,
//! so a `<id>.log` with an id already assigned and no record is such a log). Every node
//! of a cluster also does it periodically ([`spawn_periodic`]): the leader removes the
//! tasks, each node keeps the logs of the attempts it ran.

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
    let mut logs: Vec<(TaskId, std::path::PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let id = task_of(&entry.file_name().to_string_lossy())?;
            (id <= last_id).then(|| (id, entry.path()))
        })
        .collect();
    logs.sort_unstable_by_key(|(id, _)| *id);
    let mut deleted = 0;
    // The store is asked once per window of ids that holds logs.
    for window in logs.chunk_by(|(a, _), (b, _)| a / STATUS_WINDOW == b / STATUS_WINDOW) {
        let known = store.statuses(window[0].0..=window[window.len() - 1].0)?;
        for (_, path) in window.iter().filter(|(id, _)| !known.contains_key(id)) {
            match std::fs::remove_file(path) {
                Ok(()) => deleted += 1,
                // Deleted meanwhile (by the removal itself, or another sweep).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(log = %path.display(), error = %e, "cannot delete the log of a removed task")
                }
            }
        }
    }
    Ok(deleted)
}

/// How many consecutive ids one read of the store's statuses covers at most.
const STATUS_WINDOW: TaskId = 10_000;

/// The task a log file name (`<id>.log`) belongs to.
fn task_of(name: &str) -> Option<TaskId> {
    let id = name.strip_suffix(".log")?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// Runs [`orphan_logs`] every `every` until `stop`, with the last task id `last_id` gives
/// at each run (a node of a cluster, whose tasks another node may remove).
pub fn spawn_periodic(
    store: Arc<dyn Store>,
    last_id: impl Fn() -> Result<TaskId, StoreError> + Send + Sync + 'static,
    logs_dir: std::path::PathBuf,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let last_id = Arc::new(last_id);
        loop {
            let (store, dir, last_id) = (store.clone(), logs_dir.clone(), last_id.clone());
            let swept =
                tokio::task::spawn_blocking(move || orphan_logs(store.as_ref(), &dir, last_id()?));
            match swept.await {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(logs = n, "logs of removed tasks deleted"),
                Ok(Err(e)) => tracing::warn!(error = %e, "cannot check the logs of removed tasks"),
                Err(e) => {
                    tracing::warn!(error = %e, "the check of the logs of removed tasks failed")
                }
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
        }
    });
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
