//! Several daemons on one PostgreSQL store: a cluster of nodes, one of which leads.
//!
//! - [`membership`]: a node registers itself, renews its lease (its heartbeat), and takes
//!   the leadership, under a higher term, once no live node holds it. The leader's store
//!   writes are fenced by that term; a leader that is deposed, or cannot renew its lease,
//!   stands down (the daemon stops), and its supervisor stops the tasks' processes a
//!   second before the lease runs out, so that no attempt runs on two nodes at once.
//! - [`start`]: joining the cluster as the daemon starts.
//! - [`standby`]: what a node answers while another leads: the reads of the shared store,
//!   its health and the cluster; changes are forwarded ([`relay`]).
//!
//! - [`placement`]: the leader's side of running attempts on the nodes: which nodes take
//!   them, and the outcomes the nodes report.
//! - [`relay`]: the changes a standby's clients ask, forwarded to the leader through the
//!   store and answered by it.
//! - [`worker`]: every node's side: it runs the attempts placed on it, under its
//!   supervisor, and reports their outcomes through the store.
//!
//! The leader runs the engine; every node (the leader's included) runs the attempts
//! placed on it. A takeover loads the live state from the store and follows the attempts
//! running on live nodes; those of a node whose lease ran out (its processes are gone by
//! then) are interrupted and follow their retry policy.

pub mod membership;
pub mod placement;
pub mod relay;
pub mod standby;
pub mod start;
pub mod wakeups;
pub mod worker;

use std::time::Duration;

pub use membership::{ClusterError, Membership};

/// Runs a store call off the runtime's threads.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, crate::store::StoreError> + Send + 'static,
) -> Result<T, crate::store::StoreError> {
    tokio::task::spawn_blocking(call).await.unwrap_or_else(|e| {
        Err(crate::store::StoreError::Backend(format!(
            "a store call failed: {e}"
        )))
    })
}

/// The default lease of a node (`--node-lease`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(5);

/// The longest a node name or a label may be.
const MAX_NAME: usize = 63;

/// Parses `--node`: 1 to 63 of letters, digits, `.`, `_` and `-`, starting with a letter
/// or digit (it is shown, logged and compared, never used as a path).
pub fn parse_node_name(name: &str) -> Result<String, String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a node name has 1 to {MAX_NAME} characters"));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) || !name.chars().all(valid) {
        return Err(
            "a node name has letters, digits, '.', '_' and '-', and starts with a letter or digit"
                .into(),
        );
    }
    Ok(name.to_string())
}

/// Parses `--label`: like a node name, and may also hold `=` and `/` (`region=eu-west`).
pub fn parse_label(label: &str) -> Result<String, String> {
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '=' | '/');
    if label.is_empty() || label.len() > MAX_NAME {
        return Err(format!("a label has 1 to {MAX_NAME} characters"));
    }
    if !label.starts_with(|c: char| c.is_ascii_alphanumeric()) || !label.chars().all(valid) {
        return Err("a label has letters, digits, '.', '_', '-', '=' and '/', and starts with a letter or digit".into());
    }
    Ok(label.to_string())
}

/// Parses `--node-lease`: a duration between 2 seconds and 5 minutes.
pub fn parse_lease(text: &str) -> Result<Duration, String> {
    let lease = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if !(Duration::from_secs(2)..=Duration::from_secs(300)).contains(&lease) {
        return Err("a node's lease is between 2s and 5min".into());
    }
    Ok(lease)
}

/// The default node name: the host's name (cut to what a name allows) and a digest of
/// the data directory, so that two daemons of one host differ and a restart keeps it.
pub fn default_node_name(data_dir: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let host: String = host_name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_NAME - 9)
        .collect();
    let host = host.trim_start_matches('-');
    let host = if host.is_empty() { "node" } else { host };
    // FNV-1a: the same digest from every build, unlike the standard library's hasher.
    let digest = data_dir
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0x811c_9dc5u32, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
    format!("{host}-{digest:08x}")
}

/// The host's name (empty when it cannot be read).
pub fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `len` bytes into the buffer we own.
    let status = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if status != 0 {
        return String::new();
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

/// A new process instance id: 16 random bytes in hex.
pub fn new_instance() -> String {
    let mut bytes = [0u8; 16];
    // The clock is a fallback only: an instance must differ from the earlier ones of its
    // name, which a time in nanoseconds does as well.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        bytes[..8].copy_from_slice(&nanos.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_checked() {
        assert_eq!(parse_node_name("db-1.eu_w").unwrap(), "db-1.eu_w");
        for bad in ["", "-x", "a b", "a/b", "../x", &"x".repeat(64), "ä"] {
            assert!(parse_node_name(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(parse_label("region=eu-west").unwrap(), "region=eu-west");
        for bad in ["", "=x", "a b", "a;b", &"x".repeat(64)] {
            assert!(parse_label(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn leases_are_bounded() {
        assert_eq!(parse_lease("5s").unwrap(), Duration::from_secs(5));
        for bad in ["1s", "6min", "soon"] {
            assert!(parse_lease(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn the_default_name_is_valid_stable_and_per_data_dir() {
        let a = default_node_name(std::path::Path::new("/srv/a"));
        assert_eq!(a, default_node_name(std::path::Path::new("/srv/a")));
        assert_ne!(a, default_node_name(std::path::Path::new("/srv/b")));
        assert!(parse_node_name(&a).is_ok(), "{a}");
        assert_eq!(new_instance().len(), 32);
        assert_ne!(new_instance(), new_instance());
    }
}
