//! The running attempt's process group: waiting for its end, its timeout or its cancel,
//! and meanwhile stopping and continuing it (pauses), signalling it, and passing input on.
//! A stop is SIGTERM (and SIGCONT, so that a paused group receives it), then SIGKILL after
//! a grace period; a signal goes only while the group's leader is unreaped, so a reused
//! process group id is never signalled.

use std::process::ExitStatus;
use std::time::Duration;

use orch_protocol::{AttemptOutcome, Nudge, TaskSignal};
use tokio::process::Child;

use super::Launch;
use super::input::Input;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// Waits for the process, its timeout, or a cancel, whichever comes first; pauses and
/// resumes its process group as `launch.paused` says meanwhile, and passes signals and
/// input (to `input`) on.
pub(super) async fn supervise(
    child: &mut Child,
    launch: &mut Launch,
    input: &mut Input,
) -> AttemptOutcome {
    let timeout_ms = launch.spec.timeout_ms;
    let timeout = async {
        match timeout_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let mut paused = launch.paused.clone();
    let mut pause_open = true;
    let mut nudges_open = true;
    if *paused.borrow_and_update() {
        pause_group(child, true);
    }
    loop {
        tokio::select! {
            status = child.wait() => return match status {
                Ok(status) => outcome_of(status),
                Err(e) => AttemptOutcome::SpawnFailed { error: e.to_string() },
            },
            () = &mut timeout => {
                stop_group(child).await;
                return AttemptOutcome::TimedOut { after_ms: timeout_ms.unwrap_or_default() };
            }
            () = launch.token.cancelled() => {
                stop_group(child).await;
                return AttemptOutcome::Cancelled;
            }
            changed = paused.changed(), if pause_open => match changed {
                Ok(()) => pause_group(child, *paused.borrow_and_update()),
                Err(_) => pause_open = false, // no one steers it any more
            },
            nudge = launch.nudges.recv(), if nudges_open => match nudge {
                // `id` is None once the process is reaped: its group id may be reused.
                Some(Nudge::Signal(signal)) => if let Some(pid) = child.id() {
                    tracing::info!(task = launch.id, attempt = launch.attempt, %signal, "signalling a task");
                    signal_group(pid, signal_number(signal));
                },
                Some(Nudge::Input { data, eof }) => input.send(data, eof),
                None => nudges_open = false,
            },
        }
    }
}

/// Stops (`paused`: SIGSTOP) or continues (SIGCONT) the attempt's process group.
fn pause_group(child: &Child, paused: bool) {
    if let Some(pid) = child.id() {
        signal_group(pid, if paused { libc::SIGSTOP } else { libc::SIGCONT });
    }
}

/// `signal`'s number on this system.
fn signal_number(signal: TaskSignal) -> libc::c_int {
    match signal {
        TaskSignal::Hup => libc::SIGHUP,
        TaskSignal::Int => libc::SIGINT,
        TaskSignal::Quit => libc::SIGQUIT,
        TaskSignal::Kill => libc::SIGKILL,
        TaskSignal::Usr1 => libc::SIGUSR1,
        TaskSignal::Usr2 => libc::SIGUSR2,
        TaskSignal::Alrm => libc::SIGALRM,
        TaskSignal::Term => libc::SIGTERM,
        TaskSignal::Winch => libc::SIGWINCH,
    }
}

fn outcome_of(status: ExitStatus) -> AttemptOutcome {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => AttemptOutcome::Exited { code },
        (None, Some(signal)) => AttemptOutcome::Signalled { signal },
        (None, None) => AttemptOutcome::Exited { code: -1 },
    }
}

/// SIGTERM to the whole group, SIGKILL after the grace period, and reap the child.
async fn stop_group(child: &mut Child) {
    let Some(pid) = child.id() else { return };
    signal_group(pid, libc::SIGTERM);
    // A paused group would hold the TERM until it is continued.
    signal_group(pid, libc::SIGCONT);
    if tokio::time::timeout(KILL_GRACE, child.wait())
        .await
        .is_err()
    {
        signal_group(pid, libc::SIGKILL);
        let _ = child.wait().await;
    }
    // Members of the group that outlived the leader get no second chance.
    signal_group(pid, libc::SIGKILL);
}

fn signal_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names the group
    // that `process_group(0)` created with the child's pid as its id.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), signal);
    }
}
