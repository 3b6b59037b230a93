//! Ctrl-C (SIGINT to `nu`) stops the plugin's blocking and streaming commands.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use orch_e2e::{Daemon, eventually};

/// The inodes of the sockets that bear the daemon's socket path: its listener and each
/// accepted connection (from /proc/net/unix, whose seventh column is the inode).
fn connections(daemon: &Daemon) -> HashSet<String> {
    let path = daemon.socket().display().to_string();
    std::fs::read_to_string("/proc/net/unix")
        .unwrap()
        .lines()
        .filter(|line| line.ends_with(&path))
        .filter_map(|line| line.split_whitespace().nth(6).map(str::to_string))
        .collect()
}

/// Runs `command` after printing a marker, sends SIGINT once the marker is seen (and the
/// command had a moment to block), and returns nu's stderr.
fn interrupt(daemon: &Daemon, command: &str) -> String {
    let nu = daemon.nu();
    let before = connections(daemon);
    let mut child = nu.spawn(&format!("print ready; {command}"));
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    // Interrupt only once the command is connected and blocked on the daemon.
    // Generous bounds: `nu` and the plugin start slowly on a loaded machine.
    // A new socket, not a count: the connection of an earlier command may close meanwhile.
    eventually(Duration::from_secs(60), "the command to connect", || {
        connections(daemon).difference(&before).next().map(|_| ())
    });
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("`{command}` did not stop on SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.code().is_some(),
        "nu handled the signal itself: {status}"
    );
    stderr
}

#[test]
fn ctrl_c_stops_watch_wait_and_follow() {
    let daemon = Daemon::start(&[]);
    daemon.nu().run("orch submit sleep 60 | ignore");
    for command in [
        "orch watch | ignore",
        "orch wait 1 | ignore",
        "orch logs 1 --follow | ignore",
    ] {
        let stderr = interrupt(&daemon, command);
        assert!(
            stderr.contains("stopped waiting (Ctrl-C)"),
            "{command}: {stderr}"
        );
    }
    // The daemon is unaffected and the task still runs.
    assert_eq!(daemon.nu().json("orch task 1 | get status"), "running");
}
