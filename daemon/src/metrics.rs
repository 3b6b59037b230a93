//! Metrics in the Prometheus text format (`GET /metrics`): what the store and the event
//! bus say, computed at scrape time, plus histograms and counters kept as atomics.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use orch_protocol::{EventKind, TaskStatus};

use crate::events::EventBus;
use crate::store::Store;

/// A histogram with fixed upper bounds (in seconds).
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, in seconds).
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, seconds: f64) {
        for (bound, bucket) in self.bounds.iter().zip(&self.buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, bucket) in self.bounds.iter().zip(&self.buckets) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Commit latency buckets: 0.1 ms to 1 s.
pub const COMMIT_BOUNDS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0,
];
/// Task duration buckets: 10 ms to 1 h.
const TASK_BOUNDS: &[f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0];

/// Counters fed by the event bus.
pub struct Metrics {
    /// Store commit latency (fed by the group committer).
    pub commit_latency: Arc<Histogram>,
    task_duration: Histogram,
    retries: AtomicU64,
    failures: AtomicU64,
}

impl Metrics {
    /// Starts counting the bus's events from now on.
    pub fn start(
        bus: &EventBus,
        store: Arc<dyn Store>,
        commit_latency: Arc<Histogram>,
    ) -> Arc<Metrics> {
        let metrics = Arc::new(Metrics {
            commit_latency,
            task_duration: Histogram::new(TASK_BOUNDS),
            retries: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        });
        let mut events = bus.subscribe();
        let counting = metrics.clone();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                match &event.kind {
                    EventKind::AttemptFailed { .. } => {
                        counting.retries.fetch_add(1, Ordering::Relaxed);
                    }
                    EventKind::Failed { .. } => {
                        counting.failures.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                if matches!(
                    event.kind,
                    EventKind::Succeeded { .. } | EventKind::Failed { .. }
                ) && let Ok(Some(task)) = store.get(event.task)
                    && let Some(attempt) = task.last_attempt()
                    && let Some(finished) = attempt.finished_at
                {
                    let seconds = (finished - attempt.started_at)
                        .num_microseconds()
                        .unwrap_or(0);
                    counting.task_duration.observe(seconds as f64 / 1e6);
                }
            }
        });
        metrics
    }

    /// The Prometheus text exposition.
    pub fn render(&self, store: &dyn Store, envs: &[orch_protocol::TestEnv]) -> String {
        let mut out = String::new();
        let counts = store.count_by_status().unwrap_or_default();
        let _ = writeln!(
            out,
            "# HELP orchestrator_tasks Tasks by status.\n# TYPE orchestrator_tasks gauge"
        );
        for status in TaskStatus::ALL {
            let n = counts
                .iter()
                .find(|(s, _)| *s == status)
                .map_or(0, |(_, n)| *n);
            let _ = writeln!(
                out,
                "orchestrator_tasks{{status=\"{}\"}} {n}",
                status.as_str()
            );
        }
        let queued = counts
            .iter()
            .find(|(s, _)| *s == TaskStatus::Queued)
            .map_or(0, |(_, n)| *n);
        let _ = writeln!(
            out,
            "# HELP orchestrator_queue_depth Tasks ready and waiting for a slot.\n# TYPE orchestrator_queue_depth gauge\norchestrator_queue_depth {queued}"
        );
        self.task_duration.render(
            &mut out,
            "orchestrator_task_duration_seconds",
            "Duration of finished attempts (since the daemon started).",
        );
        let _ = writeln!(
            out,
            "# HELP orchestrator_task_retries_total Failed attempts followed by a retry.\n# TYPE orchestrator_task_retries_total counter\norchestrator_task_retries_total {}",
            self.retries.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP orchestrator_task_failures_total Tasks that failed for good.\n# TYPE orchestrator_task_failures_total counter\norchestrator_task_failures_total {}",
            self.failures.load(Ordering::Relaxed)
        );
        let mut workflows = std::collections::BTreeMap::new();
        for workflow in store.workflows(usize::MAX).unwrap_or_default() {
            *workflows
                .entry(workflow.state.status().as_str())
                .or_insert(0u64) += 1;
        }
        let _ = writeln!(
            out,
            "# HELP orchestrator_workflows Workflows by status.\n# TYPE orchestrator_workflows gauge"
        );
        for (status, n) in workflows {
            let _ = writeln!(out, "orchestrator_workflows{{status=\"{status}\"}} {n}");
        }
        let mut by_state = std::collections::BTreeMap::new();
        for env in envs {
            *by_state.entry(env.state.status()).or_insert(0u64) += 1;
        }
        let _ = writeln!(
            out,
            "# HELP orchestrator_test_environments Test environments by status.\n# TYPE orchestrator_test_environments gauge"
        );
        for (status, n) in by_state {
            let _ = writeln!(
                out,
                "orchestrator_test_environments{{status=\"{status}\"}} {n}"
            );
        }
        self.commit_latency.render(
            &mut out,
            "orchestrator_store_commit_seconds",
            "Latency of store transactions (group commits).",
        );
        out
    }
}
