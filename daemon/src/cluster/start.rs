//! Joining the cluster at start: what the daemon registers about itself, the first
//! heartbeat (and election), the membership thread, and the node's worker.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::Membership;
use super::worker::{WorkerHandle, WorkerNode};
use crate::config::Cli;
use crate::runner::Runner;
use crate::store::{NodeRecord, PostgresStore};

/// Joins the cluster of the shared store `shared` as this daemon's node and starts its
/// membership (`fatal` is cancelled when the node stands down). A node
/// that may lead at once (no live leader, or the leader was this node's previous daemon)
/// does before it serves anyone.
pub async fn join(
    cli: &Cli,
    shared: Arc<PostgresStore>,
    data_dir: &Path,
    socket: &Path,
    fatal: &CancellationToken,
) -> anyhow::Result<Arc<Membership>> {
    let record = node_record(cli, data_dir, socket)?;
    let lease = cli.node_lease;
    let membership = tokio::task::spawn_blocking(move || {
        let membership = Membership::join(shared, record, lease)?;
        membership.beat_once();
        Ok::<_, super::ClusterError>(membership)
    })
    .await??;
    membership.start(fatal.clone());
    Ok(membership)
}

/// What this daemon registers about itself as a node of its cluster.
fn node_record(cli: &Cli, data_dir: &Path, socket: &Path) -> anyhow::Result<NodeRecord> {
    let data_dir_id = crate::testenv::instance_id(data_dir)
        .with_context(|| format!("reading the instance id of {}", data_dir.display()))?;
    Ok(NodeRecord {
        name: cli
            .node
            .clone()
            .unwrap_or_else(|| super::default_node_name(data_dir)),
        instance: super::new_instance(),
        home: format!("{}:{data_dir_id}", super::host_name()),
        host: super::host_name(),
        pid: std::process::id(),
        socket: socket.display().to_string(),
        http: cli
            .port
            .map(|port| std::net::SocketAddr::new(cli.bind, port).to_string()),
        parallel: cli.parallel,
        labels: cli.labels.clone(),
    })
}

/// Deletes, periodically, the logs this node keeps of tasks another node removed: at the
/// period of `retention` (hourly without one).
pub fn sweep_logs(
    shared: &Arc<PostgresStore>,
    logs_dir: &Path,
    retention: &crate::retention::Policy,
    stop: &CancellationToken,
) {
    let every = if retention.is_idle() {
        std::time::Duration::from_secs(3600)
    } else {
        retention.period()
    };
    let last = shared.clone();
    crate::retention::sweep::spawn_periodic(
        shared.clone(),
        move || last.last_task_id(),
        logs_dir.to_path_buf(),
        every,
        stop.clone(),
    );
}

/// Starts the worker that runs the attempts placed on this node (the leader's included),
/// with `runner`, whose supervisor is fenced by the node's lease.
pub async fn worker(
    shared: &Arc<PostgresStore>,
    membership: &Membership,
    runner: &Runner,
) -> anyhow::Result<WorkerHandle> {
    runner.fence_with(membership.fence_deadlines());
    let node = WorkerNode {
        name: membership.name().to_string(),
        instance: membership.instance().to_string(),
    };
    super::worker::start(shared.clone(), node, runner.clone())
        .await
        .context("taking over this node's attempts")
}
