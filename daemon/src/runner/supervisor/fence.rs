//! The node's lease as the supervisor keeps it (set by a daemon of a cluster): the moment
//! by which the node's task processes must be gone unless a later one comes. A task of
//! its own watches it, so that a supervisor waiting to write to a daemon that stopped
//! reading (a paused daemon) still kills them in time.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::super::wire::monotonic_ms;

/// The fence and its history.
#[derive(Default)]
pub(super) struct Fence {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Until when attempts may run (the monotonic clock, in ms); none: unfenced.
    until_ms: Option<u64>,
    /// When the fence last lapsed.
    lapsed_at_ms: Option<u64>,
    /// Whether it lapsed and was not renewed since: launches are refused.
    lapsed: bool,
}

impl Fence {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A later deadline: it renews the fence if it is still ahead (one sent before the
    /// daemon was paused, and read after, renews nothing).
    pub(super) fn renew(&self, until_ms: u64) {
        let mut state = self.state();
        if until_ms > monotonic_ms() {
            state.until_ms = Some(until_ms);
            state.lapsed = false;
        }
        drop(state);
        self.changed.notify_one();
    }

    /// A new daemon connection starts unfenced (a daemon of a cluster fences it at once).
    pub(super) fn clear(&self) {
        let mut state = self.state();
        state.until_ms = None;
        state.lapsed = false;
        drop(state);
        self.changed.notify_one();
    }

    /// Whether launches are refused: the fence lapsed and was not renewed.
    pub(super) fn refuses_launches(&self) -> bool {
        self.state().lapsed
    }

    /// Whether an attempt launched at `launched_ms` that exited at `exited_ms` was
    /// stopped by the fence's last lapse.
    pub(super) fn stopped(&self, launched_ms: u64, exited_ms: u64) -> bool {
        self.state()
            .lapsed_at_ms
            .is_some_and(|at| launched_ms <= at && at <= exited_ms)
    }

    /// Kills every task process of the data directory `data_dir` each time the fence
    /// lapses (at once, not TERM first: there is no time to wait). Runs for ever.
    pub(super) async fn watch(self: Arc<Self>, data_dir: PathBuf) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let until = {
                let state = self.state();
                state.until_ms.filter(|_| !state.lapsed)
            };
            let Some(until) = until else {
                changed.await;
                continue;
            };
            let left = Duration::from_millis(until.saturating_sub(monotonic_ms()));
            tokio::select! {
                () = changed => continue,
                () = tokio::time::sleep(left) => {}
            }
            let now = monotonic_ms();
            {
                let mut state = self.state();
                if state.until_ms != Some(until) || state.lapsed || now < until {
                    continue;
                }
                state.lapsed = true;
                state.lapsed_at_ms = Some(now);
            }
            let killed = crate::orphans::kill_task_processes(&data_dir);
            let _ = super::writeln_stderr(&format!(
                "the node's lease lapsed: its task processes were killed ({killed})"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lapse_refuses_launches_until_a_fresh_deadline_and_a_stale_one_renews_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fence = Arc::new(Fence::default());
        tokio::spawn(fence.clone().watch(dir.path().to_path_buf()));
        let launched = monotonic_ms();
        fence.renew(monotonic_ms() + 100);
        assert!(!fence.refuses_launches());
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            fence.refuses_launches(),
            "the deadline passed with no renewal"
        );
        assert!(fence.stopped(launched, monotonic_ms()));
        assert!(
            !fence.stopped(launched, launched),
            "it ended before the lapse"
        );
        assert!(
            !fence.stopped(monotonic_ms(), monotonic_ms()),
            "launched after it"
        );
        // A deadline already past (a fence sent before a pause, read after) renews nothing.
        fence.renew(monotonic_ms().saturating_sub(10));
        assert!(fence.refuses_launches());
        fence.renew(monotonic_ms() + 60_000);
        assert!(!fence.refuses_launches());
        fence.clear();
        assert!(!fence.refuses_launches());
    }
}
