//! The daemon's own log: structured lines to `orchestrator.log` in the data directory and,
//! unless `--quiet`, to stderr.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, fmt};

/// The name of the daemon's log file in the data directory.
pub const LOG_FILE: &str = "orchestrator.log";

/// Parses a `--log` filter; the error says why it does not parse.
pub fn filter(text: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(text).map_err(|e| e.to_string())
}

/// Starts logging; keep the guard alive until exit so the file gets every line. The file
/// is created under the daemon's umask (0077), so it is owner-only.
pub fn init(data_dir: &Path, filter_text: &str, quiet: bool) -> anyhow::Result<WorkerGuard> {
    let filter = filter(filter_text)
        .map_err(|e| anyhow::anyhow!("invalid --log filter {filter_text:?}: {e}"))?;
    let file = tracing_appender::rolling::never(data_dir, LOG_FILE);
    let (file, guard) = tracing_appender::non_blocking(file);
    tracing_subscriber::registry()
        .with(filter)
        .with((!quiet).then(|| fmt::layer().with_writer(std::io::stderr)))
        .with(fmt::layer().with_ansi(false).with_writer(file))
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))?;
    Ok(guard)
}
