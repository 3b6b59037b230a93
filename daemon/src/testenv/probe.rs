//! Readiness, judged by the daemon itself: each taskserv's `[probe]` command is exec'd in
//! its node's container until it passes or its timeout ends (Podman's health checks do
//! not work here), then the topology's checks run in order, stopping at the first that
//! fails.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use orch_protocol::{EnvNode, ProbeResult, TopologyCheck};

use super::engine::ContainerEngine;
use crate::extensions::Registry;

/// How long a probe is retried when its taskserv names no timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one attempt of a probe may run.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// The `taskserv` of a topology check's result.
const CHECK: &str = "cluster";

/// Every node's probes (nodes in parallel), then the topology's `checks`.
pub async fn nodes_then_checks(
    registry: &Registry,
    engine: &ContainerEngine,
    nodes: &[EnvNode],
    checks: &[TopologyCheck],
) -> Vec<ProbeResult> {
    let probes = nodes.iter().map(|node| node_probes(registry, engine, node));
    let mut results = join_all(probes).await.concat();
    for check in checks {
        let Some(node) = nodes.iter().find(|n| n.name == check.node) else {
            continue;
        };
        let probe = Probe {
            node,
            taskserv: CHECK,
            command: &check.command,
            expect: check.expect.as_deref(),
            timeout: PROBE_TIMEOUT,
        };
        let result = probe.run(engine).await;
        let passed = result.ok;
        results.push(result);
        if !passed {
            break;
        }
    }
    results
}

/// Every probe of a node's taskservs, in install order.
async fn node_probes(
    registry: &Registry,
    engine: &ContainerEngine,
    node: &EnvNode,
) -> Vec<ProbeResult> {
    let mut results = Vec::new();
    for name in &node.taskservs {
        let Some(spec) = registry.taskserv(name).ok().and_then(|t| t.probe.as_ref()) else {
            continue;
        };
        let timeout = spec
            .timeout
            .as_deref()
            .and_then(|t| humantime::parse_duration(t).ok())
            .unwrap_or(PROBE_TIMEOUT);
        let probe = Probe {
            node,
            taskserv: name,
            command: &spec.command,
            expect: spec.expect.as_deref(),
            timeout,
        };
        results.push(probe.run(engine).await);
    }
    results
}

/// One probe: a shell command in a node's container, whose output must contain `expect`.
struct Probe<'a> {
    node: &'a EnvNode,
    taskserv: &'a str,
    command: &'a str,
    expect: Option<&'a str>,
    timeout: Duration,
}

impl Probe<'_> {
    /// Runs the command until it passes or the timeout passes.
    async fn run(&self, engine: &ContainerEngine) -> ProbeResult {
        let started = Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (ok, output) = match engine
                .exec(&self.node.container, self.command, ATTEMPT_TIMEOUT)
                .await
            {
                Ok((code, output)) => (
                    code == 0 && self.expect.is_none_or(|e| output.contains(e)),
                    output,
                ),
                Err(e) => (false, e),
            };
            if ok || started.elapsed() >= self.timeout {
                return ProbeResult {
                    node: self.node.name.clone(),
                    taskserv: self.taskserv.into(),
                    command: self.command.into(),
                    ok,
                    output,
                    attempts,
                    duration_ms: started.elapsed().as_millis() as u64,
                };
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}
