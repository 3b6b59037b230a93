//! Processes a crashed daemon left behind.
//!
//! When a daemon is killed, the processes of its running attempts keep running. Every
//! process of an attempt carries two environment entries that the runner sets and that
//! children inherit: `ORCH_TASK_ID=<id>` and `ORCH_DATA_DIR=<the daemon's data dir>`. On
//! restart, before an interrupted attempt is retried, every process that carries both
//! markers for an interrupted task is killed, so an attempt never runs twice at the same
//! time. The markers, not a recorded process id, decide: a process started in the instant
//! before the crash (before its id could be recorded) is found too, and a reused process
//! id is never mistaken for a leftover. (A process that clears its own environment escapes
//! this.)

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use orch_protocol::TaskId;

/// The environment entry naming the daemon (its data directory) that started a process.
pub const DATA_DIR_ENV: &str = "ORCH_DATA_DIR";
/// The environment entry naming the task a process belongs to.
pub const TASK_ENV: &str = "ORCH_TASK_ID";
/// The environment entry naming the test environment whose install, probe or test script
/// a process runs.
pub const TEST_ENV_ENV: &str = "ORCH_TEST_ENV_ID";

/// Kills (SIGKILL) every process that belongs to one of `tasks` of the daemon whose data
/// directory is `data_dir`, with the process groups they lead; scans again until none is
/// left (a leftover may fork while it is being killed). Returns how many were killed.
pub fn kill_leftovers(data_dir: &Path, tasks: &HashSet<TaskId>) -> usize {
    if tasks.is_empty() {
        return 0;
    }
    kill_marked(data_dir, TASK_ENV, |task| tasks.contains(&task))
}

/// Kills (SIGKILL) every task process of the daemon whose data directory is `data_dir`
/// (a supervisor whose node lost its lease). Returns how many were killed.
pub fn kill_task_processes(data_dir: &Path) -> usize {
    kill_marked(data_dir, TASK_ENV, |_| true)
}

/// Kills (SIGKILL) every test-environment script (install, probe, test: `nu` and what it
/// started) left by a previous daemon whose data directory is `data_dir`. At start no
/// such script of this daemon can be running yet, so every one found is a leftover.
pub fn kill_test_env_scripts(data_dir: &Path) -> usize {
    kill_marked(data_dir, TEST_ENV_ENV, |_| true)
}

/// Kills every process that carries `data_dir`'s marker and a `key` entry whose value
/// `wanted` accepts, with the process groups they lead; scans again until none is left.
fn kill_marked(data_dir: &Path, key: &str, wanted: impl Fn(u64) -> bool) -> usize {
    let owner = format!("{DATA_DIR_ENV}={}", data_dir.display());
    let key = format!("{key}=");
    let mut killed = 0;
    for _ in 0..10 {
        let found = find_leftovers(&owner, &key, &wanted);
        if found.is_empty() {
            break;
        }
        for (pid, id) in found {
            // SAFETY: kill(2) has no memory-safety preconditions. A negative pid names the
            // group the process leads (if it leads one; otherwise the call fails harmlessly).
            unsafe {
                libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            tracing::warn!(marker = %key, id, pid, "stopped a process left by the previous daemon");
            killed += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    killed
}

/// Live (not zombie) processes that carry `owner` and a `key` entry `wanted` accepts.
fn find_leftovers(owner: &str, key: &str, wanted: impl Fn(u64) -> bool) -> Vec<(u32, u64)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !is_zombie(*pid))
        .filter_map(|pid| Some((pid, leftover_of(pid, owner, key)?)))
        .filter(|(_, id)| wanted(*id))
        .collect()
}

fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .is_some_and(|end| stat[end + 1..].trim_start().starts_with('Z'))
    })
}

/// The id a process carries under `key` (`NAME=`), when its environment carries `owner`.
fn leftover_of(pid: u32, owner: &str, key: &str) -> Option<u64> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let mut task = None;
    let mut owned = false;
    for entry in environ.split(|b| *b == 0) {
        if entry == owner.as_bytes() {
            owned = true;
        } else if let Some(id) = entry.strip_prefix(key.as_bytes()) {
            task = std::str::from_utf8(id).ok()?.parse().ok();
        }
    }
    task.filter(|_| owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(task: &str, data_dir: &str) -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .env("ORCH_TASK_ID", task)
            .env(DATA_DIR_ENV, data_dir)
            .spawn()
            .unwrap()
    }

    #[test]
    fn kills_only_the_processes_of_its_own_interrupted_tasks() {
        let mut mine = sleeper("77", "/tmp/orphans-test-a");
        let mut other_task = sleeper("78", "/tmp/orphans-test-a");
        let mut other_daemon = sleeper("77", "/tmp/orphans-test-b");
        // /proc/PID/environ is readable once the child has exec'd.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let killed = kill_leftovers(Path::new("/tmp/orphans-test-a"), &HashSet::from([77]));
        assert_eq!(killed, 1);
        assert!(!mine.wait().unwrap().success());
        for child in [&mut other_task, &mut other_daemon] {
            assert!(child.try_wait().unwrap().is_none(), "spared");
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
