//! The state machine's reads of committed task records, from the store. A failed read
//! stops the daemon, as a failed commit does: the engine cannot go on without its state.

use std::sync::Arc;

use orch_protocol::{Task, TaskId, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::state::Records;
use crate::store::{Store, StoreError};

/// [`Records`] read from the store.
pub struct StoreRecords {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Cancelled when a read fails: the daemon stops.
    pub fatal: CancellationToken,
}

impl StoreRecords {
    fn failed(&self, error: &StoreError) {
        tracing::error!(%error, "cannot read the store; stopping the daemon");
        self.fatal.cancel();
    }
}

impl Records for StoreRecords {
    fn task(&self, id: TaskId) -> Option<Task> {
        self.store.get(id).unwrap_or_else(|e| {
            self.failed(&e);
            None
        })
    }

    fn each_in(&self, status: TaskStatus, each: &mut dyn FnMut(Task)) {
        if let Err(e) = self.store.scan_status(status, each) {
            self.failed(&e);
        }
    }
}
