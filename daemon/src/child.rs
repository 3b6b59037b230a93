//! What every process the daemon starts gets back from the daemon's own start: the umask
//! it was started with (the daemon's is 0077, see [`crate::files`]), and the default
//! action of each signal its starter ignored (`nohup`, a service manager, a shell's
//! `trap '' HUP`). A signal ignored at exec stays ignored in the new program, and a shell
//! cannot even trap it: a task's `trap ... HUP` would silently do nothing, and `orch kill
//! --signal HUP` with it.
//!
//! [`remember_the_start`] reads which signals are ignored once, at the start of the
//! process (the daemon and the supervisor both call it first); [`restore`] sets the
//! child's back between fork and exec.

use std::sync::OnceLock;

/// The signals ignored when this process started (SIGPIPE aside: the standard library
/// ignores it in every Rust program, and gives children the default back itself).
static IGNORED_AT_START: OnceLock<Vec<libc::c_int>> = OnceLock::new();

/// Notes which signals this process was started ignoring. Call it first in `main`.
pub fn remember_the_start() {
    let _ = IGNORED_AT_START.set(ignored_signals());
}

/// The signals (1 to 31, but KILL, STOP and PIPE) whose action is to be ignored now.
fn ignored_signals() -> Vec<libc::c_int> {
    (1..32)
        .filter(|&signal| ![libc::SIGKILL, libc::SIGSTOP, libc::SIGPIPE].contains(&signal))
        .filter(|&signal| {
            // SAFETY: a null new action only reads the current one into `old`.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } == 0;
            read && old.sa_sigaction == libc::SIG_IGN
        })
        .collect()
}

/// Gives `command`'s process the umask this daemon was started with and the default
/// action of the signals it was started ignoring.
pub fn restore(command: &mut tokio::process::Command) {
    let umask = crate::files::inherited_umask();
    let ignored = IGNORED_AT_START.get().cloned().unwrap_or_default();
    if umask.is_none() && ignored.is_empty() {
        return;
    }
    // SAFETY: the closure runs in the forked child before exec and only calls umask(2)
    // and sigaction(2), which are async-signal-safe; it allocates nothing (the list was
    // made before the fork).
    unsafe {
        command.pre_exec(move || {
            if let Some(mask) = umask {
                libc::umask(mask);
            }
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for &signal in &ignored {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ignored-signals mask of a process, from /proc (bit n-1 for signal n).
    fn ignored_mask(status: &str) -> u64 {
        let line = status.lines().find(|l| l.starts_with("SigIgn:")).unwrap();
        u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
    }

    #[tokio::test]
    async fn a_child_gets_the_default_action_of_a_signal_its_parent_was_started_ignoring() {
        // This test process ignores SIGHUP, as under nohup (harmless to the other tests).
        // SAFETY: setting a signal's action to "ignore" has no memory-safety concerns.
        unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
        assert!(ignored_signals().contains(&libc::SIGHUP));
        let _ = IGNORED_AT_START.set(ignored_signals());
        let mut command = tokio::process::Command::new("cat");
        command.arg("/proc/self/status");
        restore(&mut command);
        let status = String::from_utf8(command.output().await.unwrap().stdout).unwrap();
        let hup = 1u64 << (libc::SIGHUP - 1);
        assert_eq!(ignored_mask(&status) & hup, 0, "{status}");
    }
}
