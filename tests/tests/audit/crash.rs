//! A kill -9 in the middle of a compaction: while its segment is being written, just after
//! the segment got its name (before or while the transaction commits), and after it
//! answered. Each time the store holds either the old log or the new log plus a complete
//! segment: every entry is in exactly one place, unchanged, and after a restart nothing is
//! left over and the whole log verifies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use orch_e2e::Daemon;
use serde_json::Value;

use super::store_file::{AUDIT, SEGMENTS, json, rows};

/// When to kill the daemon during a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillWhen {
    /// Once the segment's temporary file exists.
    Writing,
    /// Once a new segment file has its name.
    Named,
    /// After the compaction answered.
    Answered,
}

/// Every entry of a stopped daemon (seq → hash): in the listed segments' files and in the
/// live log. Panics on an entry found twice.
fn every_entry(daemon: &Daemon) -> BTreeMap<u64, String> {
    let mut all = BTreeMap::new();
    let mut add = |entry: Value, place: &str| {
        let seq = entry["seq"].as_u64().unwrap();
        let hash = entry["hash"].as_str().unwrap().to_string();
        assert!(
            all.insert(seq, hash).is_none(),
            "entry {seq} is twice ({place})"
        );
    };
    for body in rows(daemon, SEGMENTS).values() {
        let file = json(body)["file"].as_str().unwrap().to_string();
        let text = std::fs::read_to_string(daemon.data_dir().join(&file)).unwrap();
        for line in text.lines() {
            add(serde_json::from_str(line).unwrap(), &file);
        }
    }
    for body in rows(daemon, AUDIT).values() {
        add(json(body), "live");
    }
    all
}

/// The names of the files in the daemon's `audit/`.
fn segment_files(data_dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(data_dir.join("audit"))
        .map(|items| {
            items
                .map(|item| item.unwrap().file_name().into_string().unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// Starts `orch audit compact --before <before>` and kills the daemon at `when`; returns
/// whether the compaction committed (a segment was listed).
fn compact_and_kill(daemon: &mut Daemon, before: u64, when: KillWhen) -> bool {
    let listed_before = rows(daemon, SEGMENTS).len();
    daemon.restart();
    let files_before = segment_files(&daemon.data_dir());
    let mut client = daemon
        .nu()
        .spawn(&format!("orch audit compact --before {before}"));
    let data_dir = daemon.data_dir();
    // Polled closely, so that the kill follows the file's appearance within a moment.
    let appeared = |suffix: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !segment_files(&data_dir)
            .iter()
            .any(|name| !files_before.contains(name) && name.ends_with(suffix))
        {
            assert!(Instant::now() < deadline, "the compaction wrote no file");
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    let file_to_wait_for = match when {
        KillWhen::Writing => Some(".jsonl.tmp"),
        KillWhen::Named => Some(".jsonl"),
        KillWhen::Answered => None,
    };
    if let Some(suffix) = file_to_wait_for {
        appeared(suffix);
        daemon.kill9();
        let _ = client.wait();
    } else {
        let out = client.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        daemon.kill9();
    }
    rows(daemon, SEGMENTS).len() > listed_before
}

#[test]
fn a_kill_during_a_compaction_loses_and_duplicates_no_entry() {
    let mut daemon = Daemon::start(&[]);
    // 200 refused submissions, each recording about 20 KiB of specs, so that writing a
    // segment takes long enough to be interrupted.
    daemon.nu().run(
        "let big = (1..2000 | each { 'abcdefghij' } | str join)
         1..200 | each { try { orch submit --after 999999 --env {BIG: $big} true } catch { null } } | ignore",
    );
    daemon.kill9();
    let mut expected = every_entry(&daemon);
    assert_eq!(expected.len(), 200);
    let rounds = [
        (KillWhen::Writing, 70),
        (KillWhen::Named, 140),
        (KillWhen::Answered, 201),
    ];
    let mut outcomes = Vec::new();
    for (when, before) in rounds {
        let committed = compact_and_kill(&mut daemon, before, when);
        outcomes.push((when, committed));
        let found = every_entry(&daemon);
        for (seq, hash) in &expected {
            assert_eq!(found.get(seq), Some(hash), "entry {seq} after {when:?}");
        }
        let last = *found.keys().last().unwrap();
        assert!(found.keys().copied().eq(1..=last), "no gap after {when:?}");
        expected = found;
        daemon.restart();
        let report = daemon.nu().json("orch audit verify");
        assert_eq!(report["intact"], true, "after {when:?}: {report}");
        daemon.kill9();
        let listed: BTreeSet<String> = rows(&daemon, SEGMENTS)
            .values()
            .map(|body| json(body)["file"].as_str().unwrap().replace("audit/", ""))
            .collect();
        assert_eq!(
            segment_files(&daemon.data_dir()),
            listed,
            "nothing left over"
        );
    }
    eprintln!("committed: {outcomes:?}");
    assert_eq!(outcomes[0], (KillWhen::Writing, false));
    assert_eq!(outcomes[2], (KillWhen::Answered, true));
    assert!(
        rows(&daemon, AUDIT).len() <= 3,
        "only checkpoints are left live"
    );
}
