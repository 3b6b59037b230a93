//! The daemon's own log: structured lines to `orchestrator.log` in the data directory and,
//! unless `--quiet`, to stderr.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, fmt};

/// Starts logging; keep the guard alive until exit so the file gets every line.
pub fn init(data_dir: &Path, filter: &str, quiet: bool) -> anyhow::Result<WorkerGuard> {
    let filter = EnvFilter::try_new(filter)
        .map_err(|e| anyhow::anyhow!("invalid --log filter {filter:?}: {e}"))?;
    let file = tracing_appender::rolling::never(data_dir, "orchestrator.log");
    let (file, guard) = tracing_appender::non_blocking(file);
    tracing_subscriber::registry()
        .with(filter)
        .with((!quiet).then(|| fmt::layer().with_writer(std::io::stderr)))
        .with(fmt::layer().with_ansi(false).with_writer(file))
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))?;
    Ok(guard)
}
