//! The daemon's own files: private modes (directories 0700, files 0600), and small files
//! written atomically beside the database (the HTTP tokens, the instance id).
//!
//! The daemon runs with umask 0077 ([`set_private_umask`]), so whatever it (or a library it
//! uses) creates is owner-only from the start; the processes it starts for tasks get back
//! the umask it was started with ([`crate::child::restore`]), as their files are the
//! user's.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The umask the daemon was started with (before [`set_private_umask`]).
static INHERITED_UMASK: OnceLock<libc::mode_t> = OnceLock::new();

/// Makes everything the daemon creates from now on owner-only (umask 0077), keeping the
/// umask it was started with for the processes it runs. Call it first, before any thread
/// creates a file.
pub fn set_private_umask() {
    // SAFETY: umask(2) only swaps the process's file-mode mask.
    let inherited = unsafe { libc::umask(0o077) };
    let _ = INHERITED_UMASK.set(inherited);
}

/// The umask the daemon was started with, once [`set_private_umask`] replaced it (for
/// the processes it starts: [`crate::child::restore`]).
pub fn inherited_umask() -> Option<libc::mode_t> {
    INHERITED_UMASK.get().copied()
}

/// Creates `dir` (and its parents) with mode 0700 when missing.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Takes group and other permissions away from each path that has any (directories end up
/// 0700, files 0600); returns the paths it changed. Missing paths are skipped.
pub fn make_private(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    for path in paths {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mode = meta.permissions().mode();
        if meta.file_type().is_symlink() || mode & 0o077 == 0 {
            continue;
        }
        let private = if meta.is_dir() { 0o700 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(private))?;
        changed.push(path.clone());
    }
    Ok(changed)
}

/// Replaces `path` with `bytes` atomically and durably: written to a temporary file in
/// the same directory (created with `mode`, so it is never readable more widely), synced,
/// then renamed over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Creates `path` (mode 0600) when missing and takes an exclusive lock on it (flock);
/// `None` when another process holds it. The lock lasts as long as the returned file.
pub fn lock_exclusive(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    // SAFETY: flock(2) on an open descriptor.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let error = std::io::Error::last_os_error();
        return match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) => Ok(None),
            _ => Err(error),
        };
    }
    Ok(Some(file))
}
