//! Default locations shared by the daemon and its clients.

use std::path::PathBuf;

/// Environment variable that overrides the socket path for every client and the daemon.
pub const SOCKET_ENV: &str = "PROVISIONING_ORCHESTRATOR_SOCKET";

/// The socket path every client uses unless told otherwise:
/// `$PROVISIONING_ORCHESTRATOR_SOCKET`, else `$XDG_RUNTIME_DIR/provisioning-orchestrator.sock`,
/// else `/tmp/provisioning-orchestrator-<uid>.sock`.
pub fn default_socket_path() -> PathBuf {
    if let Some(path) = std::env::var_os(SOCKET_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        return PathBuf::from(dir).join("provisioning-orchestrator.sock");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    PathBuf::from(format!("/tmp/provisioning-orchestrator-{uid}.sock"))
}

/// The data directory used when `--data-dir` is not given:
/// `$XDG_DATA_HOME/provisioning-orchestrator`, else `~/.local/share/provisioning-orchestrator`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(dir).join("provisioning-orchestrator");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".local/share/provisioning-orchestrator")
}
