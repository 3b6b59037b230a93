//! Binding the Unix socket: owner-only, with stale-socket detection.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Another daemon answers on the socket.
    #[error(
        "another provisioning-orchestrator is already running on {}; stop it first (`orch daemon stop`) or choose another --socket",
        .0.display()
    )]
    InUse(PathBuf),
    /// Something other than a socket is at the path; it is never removed.
    #[error(
        "{path} exists and is {kind}, not a socket; it is left as it is: remove it yourself or choose another --socket",
        path = .0.display(),
        kind = .1
    )]
    NotASocket(PathBuf, &'static str),
    /// Something else failed.
    #[error("cannot listen on {path}: {source}", path = .0.display(), source = .1)]
    Io(PathBuf, io::Error),
}

/// Removes the socket file when dropped: on a clean exit, and when start-up fails after
/// the socket was bound.
pub struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A bound socket: the listener, the guard that removes the file, and whether a stale
/// socket left by a dead daemon was replaced.
pub struct Bound {
    /// Accepts the connections.
    pub listener: UnixListener,
    /// Removes the socket file when dropped.
    pub file: SocketFile,
    /// True when a dead daemon's socket file was removed first.
    pub replaced_stale: bool,
}

/// Binds `path` with mode 0600. A socket file left by a dead daemon (nothing accepts on
/// it) is removed first; a live one is an error, and so is anything at `path` that is not
/// a socket (a file, a directory, a symlink), which is never touched.
pub fn bind(path: &Path) -> Result<Bound, SocketError> {
    let io_err = |e| SocketError::Io(path.to_path_buf(), e);
    let replaced_stale = remove_stale(path)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_err)?;
    }
    // Create it owner-only from the start: no window in which others could connect.
    // SAFETY: umask(2) only swaps the process's file-mode mask.
    let old_mask = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old_mask) };
    let listener = bound.map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => SocketError::InUse(path.to_path_buf()),
        _ => io_err(e),
    })?;
    let file = SocketFile(path.to_path_buf());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    Ok(Bound {
        listener,
        file,
        replaced_stale,
    })
}

/// Removes a dead daemon's socket at `path`; true when there was one. Refuses a live
/// socket and anything that is not a socket.
fn remove_stale(path: &Path) -> Result<bool, SocketError> {
    use std::os::unix::fs::FileTypeExt as _;
    let io_err = |e| SocketError::Io(path.to_path_buf(), e);
    let kind = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta.file_type(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_err(e)),
    };
    if !kind.is_socket() {
        let what = if kind.is_symlink() {
            "a symbolic link"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_file() {
            "a regular file"
        } else {
            "a special file"
        };
        return Err(SocketError::NotASocket(path.to_path_buf(), what));
    }
    // A connection that is accepted may still come from a dead daemon: a child it was
    // forking when it died holds a copy of the listener until that child's exec closes
    // it (a few milliseconds). Only a socket that stays live for `LIVE_FOR` is in use.
    let deadline = std::time::Instant::now() + LIVE_FOR;
    loop {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) if std::time::Instant::now() >= deadline => {
                return Err(SocketError::InUse(path.to_path_buf()));
            }
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(io_err)?;
                return Ok(true);
            }
            Err(e) => return Err(io_err(e)),
        }
    }
}

/// How long a socket must keep accepting connections to count as a live daemon's.
const LIVE_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// The effective uid of this process: the only peer allowed to connect.
pub fn owner_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
