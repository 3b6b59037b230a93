//! Processes a crashed daemon left behind.
//!
//! A task's attempt runs in its own process group, whose id is recorded in the store once
//! the process starts. When a daemon is killed, those groups keep running; the next
//! daemon stops them before the interrupted attempt is retried, so an attempt never runs
//! twice at the same time. A process is only killed when it is in the recorded group
//! *and* its environment carries the task's `ORCH_TASK_ID`, so a reused process id is
//! never mistaken for a leftover.

use std::fs;

use orch_protocol::TaskId;

/// Kills (SIGKILL) every process of group `pgid` that belongs to task `id`; returns how
/// many were found.
pub fn kill_leftovers(id: TaskId, pgid: u32) -> usize {
    let marker = format!("ORCH_TASK_ID={id}");
    let mut killed = 0;
    for pid in members_of_group(pgid) {
        if has_env_entry(pid, &marker) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            killed += 1;
        }
    }
    if killed > 0 {
        tracing::warn!(
            task = id,
            process_group = pgid,
            killed,
            "stopped processes left by the previous daemon"
        );
    }
    killed
}

/// Process ids whose process group is `pgid`.
fn members_of_group(pgid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group_of(*pid) == Some(pgid))
        .collect()
}

/// The process group of `pid`, from `/proc/PID/stat` (the fifth field; the second, the
/// command name, is in parentheses and may contain spaces).
fn process_group_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(2)?.parse().ok()
}

fn has_env_entry(pid: u32, entry: &str) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn kills_only_the_tasks_own_processes() {
        let mut mine = std::process::Command::new("sleep")
            .arg("30")
            .env("ORCH_TASK_ID", "77")
            .process_group(0)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .env("ORCH_TASK_ID", "78")
            .process_group(0)
            .spawn()
            .unwrap();
        assert_eq!(kill_leftovers(77, other.id()), 0, "wrong task id: spared");
        assert_eq!(kill_leftovers(77, mine.id()), 1);
        let status = mine.wait().unwrap();
        assert!(!status.success());
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
