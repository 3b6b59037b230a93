//! The daemon's own log rotates by size: with a tiny `--log-max-size` and debug logging,
//! `orchestrator.log` rotates many times; `--log-keep` old files are kept (owner-only,
//! none over the size), the lines in them follow each other without a gap, the newest file
//! keeps being written, and a restart with a smaller `--log-keep` removes the extra files.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use orch_protocol::Client;

const MAX: u64 = 4096;

/// The `n` of the `client connected client=rotation-<n>` lines in `path`, in order.
fn markers(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split("client=rotation-").nth(1)?.trim().parse().ok())
        .collect()
}

/// Connects once with the client name `rotation-<n>` (the daemon logs it at debug).
fn connect(daemon: &Daemon, n: u32) {
    Client::connect(&daemon.socket(), &format!("rotation-{n}")).expect("the daemon answers");
}

#[test]
fn the_daemon_log_rotates_by_size_keeping_every_line_in_order() {
    let args = [
        "--log",
        "debug",
        "--log-max-size",
        "4KiB",
        "--log-keep",
        "3",
    ];
    let mut daemon = Daemon::start(&args);
    let data = daemon.data_dir();
    let log = data.join("orchestrator.log");
    let numbered = |n: u32| data.join(format!("orchestrator.log.{n}"));
    let lines = 400;
    for n in 0..lines {
        connect(&daemon, n);
    }
    eventually(Duration::from_secs(10), "the last line", || {
        markers(&log).contains(&(lines - 1)).then_some(())
    });
    assert!(
        !numbered(4).exists(),
        "only --log-keep 3 old files are kept"
    );
    let mut seen = Vec::new();
    for path in [numbered(3), numbered(2), numbered(1), log.clone()] {
        let meta = std::fs::metadata(&path).unwrap();
        assert!(
            meta.len() <= MAX,
            "{} is {} bytes",
            path.display(),
            meta.len()
        );
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o600,
            "{}",
            path.display()
        );
        seen.extend(markers(&path));
    }
    let oldest = seen[0];
    assert!(oldest > 0, "the oldest lines were rotated away");
    assert_eq!(
        seen,
        (oldest..lines).collect::<Vec<_>>(),
        "no line lost or repeated"
    );
    connect(&daemon, lines);
    eventually(Duration::from_secs(10), "a line in the newest file", || {
        markers(&log).contains(&lines).then_some(())
    });
    daemon.kill9();
    std::fs::set_permissions(numbered(1), std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut fewer = daemon.spawn(&["--log-keep".into(), "1".into()]);
    eventually(Duration::from_secs(20), "the restarted daemon", || {
        Client::connect(&daemon.socket(), "e2e").ok().map(drop)
    });
    let _ = fewer.kill();
    let _ = fewer.wait();
    assert!(!numbered(2).exists() && !numbered(3).exists());
    let mode = std::fs::metadata(numbered(1)).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "a rotated log left readable is made private"
    );
}
