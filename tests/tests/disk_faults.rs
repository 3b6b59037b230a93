//! A commit the disk refuses, with the real daemon: a file size limit (`RLIMIT_FSIZE`)
//! makes the store file's growth fail part-way through a run of submissions, as a full
//! disk would. The daemon answers the submission it could not commit with the store's
//! error and stops; started again without the limit, it holds exactly the tasks it
//! acknowledged and none of the refused ones, its audit chain is intact, and it takes new
//! work.

use std::os::unix::process::CommandExt;
use std::time::Duration;

use orch_e2e::{Daemon, eventually};
use orch_protocol::Client;
use serde_json::Value;

/// Submits batches of 100 tasks held for an hour (with 200 bytes of params each, so that
/// the store grows fast) until one is refused, or 200 were taken: the ids acknowledged,
/// and the refusal as nu rendered it.
const SUBMIT_UNTIL_REFUSED: &str = r#"
mut acknowledged = []
mut refused = ''
for batch in 1..200 {
    let result = try {
        1..100 | each { {command: [true], delay: 1hr, params: {pad: ('' | fill -c x -w 200)}} } | orch submit | get id
    } catch {|e| {error: ($e.rendered | ansi strip)} }
    if ($result | describe | str starts-with 'record') {
        $refused = $result.error
        break
    }
    $acknowledged = ($acknowledged | append $result)
}
{acknowledged: $acknowledged, refused: (if $refused == '' { null } else { $refused })}"#;

#[test]
fn a_commit_the_disk_refuses_stops_the_daemon_and_loses_nothing_it_acknowledged() {
    let mut daemon = Daemon::start(&[]);
    // The store and its journal are made without the limit, then the daemon stops cleanly.
    assert!(daemon.terminate().success(), "{}", daemon.stderr());
    // The largest file the limited daemon may write: its journal, made whole by the first
    // start (4 MiB), fits; the store file fails to grow once it holds a few thousand tasks.
    let journal = daemon.data_dir().join("orchestrator.redb.journal");
    let limit = std::fs::metadata(&journal)
        .expect("the store's journal")
        .len();
    let mut limited = daemon.command(&[]);
    // SAFETY: only setrlimit(2) and signal(2) run between fork and exec, both
    // async-signal-safe, on values owned by the closure.
    unsafe {
        limited.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // A write past the limit then fails with EFBIG instead of killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = limited.spawn().expect("the limited daemon starts");
    eventually(
        Duration::from_secs(20),
        "the limited daemon answers",
        || Client::connect(&daemon.socket(), "e2e").ok(),
    );

    let outcome = daemon.nu().json(SUBMIT_UNTIL_REFUSED);
    let refused = outcome["refused"].as_str().unwrap_or_else(|| {
        panic!(
            "no submission was refused under a {limit}-byte file limit: {}",
            daemon.stderr()
        )
    });
    assert!(refused.contains("File too large"), "{refused}");
    let mut acknowledged: Vec<u64> = outcome["acknowledged"]
        .as_array()
        .expect("a list of ids")
        .iter()
        .map(|id| id.as_u64().expect("an id"))
        .collect();
    assert!(
        !acknowledged.is_empty(),
        "the first batch already failed: {refused}"
    );

    // The daemon stops rather than act on state it could not commit.
    let status = eventually(Duration::from_secs(20), "the limited daemon exits", || {
        child.try_wait().expect("its status")
    });
    assert!(!status.success(), "{status}");
    assert!(
        daemon
            .stderr()
            .contains("a state change could not be committed to the store"),
        "{}",
        daemon.stderr()
    );

    daemon.restart();
    let nu = daemon.nu();
    let held: Vec<u64> = serde_json::from_value(nu.json("orch tasks | get id | sort")).unwrap();
    acknowledged.sort_unstable();
    assert_eq!(
        held.len(),
        acknowledged.len(),
        "every task acknowledged and no other"
    );
    assert_eq!(held, acknowledged);
    assert_eq!(
        nu.json("orch tasks | where status != delayed | length"),
        0,
        "all are still held for their hour"
    );
    assert_eq!(nu.json("orch audit verify | get intact"), true);
    assert_eq!(
        nu.json("orch submit --wait true | get status"),
        Value::from("succeeded")
    );
}
