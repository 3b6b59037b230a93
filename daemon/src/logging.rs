//! The daemon's own log: structured lines to `orchestrator.log` in the data directory and,
//! unless `--quiet`, to stderr.
//!
//! The file is written by tracing-appender's worker thread (the daemon only queues lines),
//! through a [`rotating::RotatingFile`] that rotates it by size (`--log-max-size`,
//! `--log-keep`): rotation happens on that thread, between two lines, so it neither blocks
//! the daemon nor splits or loses a line.

pub mod rotating;

use std::path::{Path, PathBuf};

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, fmt};

pub use rotating::Rotation;

/// The name of the daemon's log file in the data directory.
pub const LOG_FILE: &str = "orchestrator.log";

/// Parses a `--log` filter; the error says why it does not parse.
pub fn filter(text: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(text).map_err(|e| e.to_string())
}

/// Parses a size such as `64MiB`, `512KiB`, `1GiB` or a number of bytes (`K`, `M`, `G`
/// and the `B` suffix are accepted too; all are powers of 1024), at least 1 KiB.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => return Err(format!("`{unit}` is not a size unit: use KiB, MiB or GiB")),
    };
    let number: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 64MiB"))?;
    match number.checked_mul(scale) {
        Some(bytes) if bytes >= 1024 => Ok(bytes),
        Some(_) => Err("the size must be at least 1KiB".into()),
        None => Err(format!("`{text}` is too large")),
    }
}

/// The rotated logs present in `data_dir` (`orchestrator.log.1`, `.2`, ...).
pub fn rotated_files(data_dir: &Path) -> Vec<PathBuf> {
    rotating::rotated(data_dir, LOG_FILE)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}

/// Starts logging; keep the guard alive until exit so the file gets every line. The files
/// are created owner-only (0600).
pub fn init(
    data_dir: &Path,
    filter_text: &str,
    quiet: bool,
    rotation: Rotation,
) -> anyhow::Result<WorkerGuard> {
    let filter = filter(filter_text)
        .map_err(|e| anyhow::anyhow!("invalid --log filter {filter_text:?}: {e}"))?;
    let file = rotating::RotatingFile::open(data_dir, LOG_FILE, rotation)
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", data_dir.join(LOG_FILE).display()))?;
    let (file, guard) = tracing_appender::non_blocking(file);
    tracing_subscriber::registry()
        .with(filter)
        .with((!quiet).then(|| fmt::layer().with_writer(std::io::stderr)))
        .with(fmt::layer().with_ansi(false).with_writer(file))
        .try_init()
        .map_err(|e| anyhow::anyhow!("cannot start logging: {e}"))?;
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_units_and_bad_ones_say_why() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("2k"), Ok(2048));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("10").unwrap_err().contains("at least"));
        assert!(
            parse_size("5 parsecs")
                .unwrap_err()
                .contains("not a size unit")
        );
        assert!(parse_size("MiB").unwrap_err().contains("not a size"));
        assert!(
            parse_size("99999999999GiB")
                .unwrap_err()
                .contains("too large")
        );
    }
}
