//! Metrics in the Prometheus text format (`GET /metrics`), through the `prometheus-client`
//! crate: counters and histograms it keeps (fed by the event bus and, for commit latency,
//! by the group committer's callback), and gauges of what the store and the test
//! environment service say, read at scrape time ([`State`]).

use std::fmt;
use std::sync::Arc;

use orch_protocol::{EventKind, TaskStatus};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::events::EventBus;
use crate::store::Store;
use crate::testenv::TestEnvService;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Commit latency buckets: 0.1 ms to 1 s.
const COMMIT_BOUNDS: [f64; 10] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 1.0,
];
/// Task duration buckets: 10 ms to 1 h.
const TASK_BOUNDS: [f64; 10] = [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0];

/// The histogram of store commit latency (seconds), made before the committer starts so
/// that its callback can feed it.
pub fn commit_latency() -> Histogram {
    Histogram::new(COMMIT_BOUNDS)
}

/// Every metric, for `GET /metrics`.
pub struct Metrics {
    registry: Registry,
}

impl Metrics {
    /// Registers every metric and starts counting the bus's events from now on.
    pub fn start(
        bus: &EventBus,
        store: Arc<dyn Store>,
        testenvs: Arc<TestEnvService>,
        commit_latency: Histogram,
    ) -> Arc<Metrics> {
        let task_duration = Histogram::new(TASK_BOUNDS);
        let retries = Counter::<u64>::default();
        let failures = Counter::<u64>::default();
        let mut registry = Registry::default();
        registry.register(
            "orchestrator_task_duration_seconds",
            "Duration of finished attempts (since the daemon started)",
            task_duration.clone(),
        );
        registry.register(
            "orchestrator_task_retries",
            "Failed attempts followed by a retry",
            retries.clone(),
        );
        registry.register(
            "orchestrator_task_failures",
            "Tasks that failed for good",
            failures.clone(),
        );
        registry.register(
            "orchestrator_store_commit_seconds",
            "Latency of store transactions (group commits)",
            commit_latency,
        );
        registry.register_collector(Box::new(State {
            store: store.clone(),
            testenvs,
        }));
        let mut events = bus.subscribe();
        tokio::spawn(async move {
            loop {
                let event = match events.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                match &event.kind {
                    EventKind::AttemptFailed { .. } => {
                        retries.inc();
                    }
                    EventKind::Failed { .. } => {
                        failures.inc();
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
                    let micros = (finished - attempt.started_at)
                        .num_microseconds()
                        .unwrap_or(0);
                    task_duration.observe(micros as f64 / 1e6);
                }
            }
        });
        Arc::new(Metrics { registry })
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
        {
            tracing::warn!(error = %e, "the metrics could not be encoded");
        }
        out
    }
}

/// The gauges read at scrape time: tasks, the queue, workflows and test environments by
/// status.
struct State {
    store: Arc<dyn Store>,
    testenvs: Arc<TestEnvService>,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

impl Collector for State {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let counts = self.store.count_by_status().unwrap_or_default();
        let count = |status: TaskStatus| {
            counts
                .iter()
                .find(|(s, _)| *s == status)
                .map_or(0, |(_, n)| *n)
        };
        let tasks = TaskStatus::ALL.into_iter().map(|s| (s.as_str(), count(s)));
        by_status(
            &mut encoder,
            "orchestrator_tasks",
            "Tasks by status.",
            tasks,
        )?;
        let queue_depth = ConstGauge::new(count(TaskStatus::Queued));
        queue_depth.encode(encoder.encode_descriptor(
            "orchestrator_queue_depth",
            "Tasks ready and waiting for a slot.",
            None,
            MetricType::Gauge,
        )?)?;
        let workflows = self.store.count_workflows_by_status().unwrap_or_default();
        let help = "Workflows by status.";
        by_status(
            &mut encoder,
            "orchestrator_workflows",
            help,
            workflows
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| (s.as_str(), *n)),
        )?;
        let envs = self.testenvs.counts();
        let help = "Test environments by status.";
        by_status(
            &mut encoder,
            "orchestrator_test_environments",
            help,
            envs.into_iter(),
        )
    }
}

/// A gauge with a `status` label: one sample per status.
fn by_status<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    counts: impl Iterator<Item = (&'a str, u64)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (status, n) in counts {
        let labels = [("status", status)];
        ConstGauge::new(n).encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}
