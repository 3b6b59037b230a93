//! `orch audit compact`: the oldest entries go to a sealed segment file and a checkpoint
//! entry; the whole log still verifies; tampering with a segment (found online and by the
//! offline check of an exported copy), with what remains live, with a checkpoint or with
//! the list of segments is detected; compactions made while entries are being recorded,
//! and a kill -9 amid them, lose and repeat no entry.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use orch_e2e::{Daemon, Nu, binary};
use serde_json::{Value, json};

use super::store_file::{AUDIT, SEGMENTS, expect_broken, http_get, json, rows, tamper, verify};

/// `n` refused cancels: one audit entry each.
pub fn refused_cancels(nu: &Nu, n: u32) {
    nu.run(&format!(
        "1..{n} | each {{ try {{ orch cancel 999 }} catch {{ null }} }} | ignore"
    ));
}

/// `provisioning-orchestrator audit verify-segment FILE [--sha256 HEX]`: its report and
/// whether it exited 0.
pub fn verify_offline(file: &Path, sha256: Option<&str>) -> (Value, bool) {
    let mut command = Command::new(binary("provisioning-orchestrator"));
    command.args(["audit", "verify-segment"]).arg(file);
    if let Some(sha256) = sha256 {
        command.args(["--sha256", sha256]);
    }
    let out = command.output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (report, out.status.success())
}

/// A way of tampering with a stopped daemon's store: what, how, and the entry and words
/// the check must then report.
type Tampering<'a> = (&'a str, Box<dyn Fn(&Daemon) + 'a>, u64, &'a str);

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_compacted_log_verifies_and_tampering_with_segments_or_what_remains_is_detected() {
    let port = orch_e2e::free_port();
    let mut daemon = Daemon::start(&["--port", &port.to_string()]);
    let nu = daemon.nu();
    refused_cancels(&nu, 6);
    let segment =
        nu.json("orch audit compact --before 5 | select first last entries file checkpoint");
    assert_eq!(
        segment,
        json!({"first": 1, "last": 4, "entries": 4, "file": "audit/segment-1-4.jsonl", "checkpoint": 7})
    );
    refused_cancels(&nu, 2);
    let report = verify(&daemon, &nu, port);
    assert_eq!(
        (&report["intact"], &report["entries"], &report["archived"]),
        (&json!(true), &json!(5), &json!(4)),
        "{report}"
    );
    assert_eq!(nu.json("orch audit | get seq"), json!([9, 8, 7, 6, 5]));
    let checkpoint =
        nu.json("orch audit | where seq == 7 | get 0 | select action ok params.archived.sha256");
    let sealed = nu.json("orch audit segments | get 0.sha256");
    assert_eq!(checkpoint["action"], "audit_compact");
    assert_eq!(checkpoint["params.archived.sha256"], sealed);
    let listed = http_get(&daemon, port, "/audit/segments");
    assert_eq!(
        (
            &listed[0]["first"],
            &listed[0]["last"],
            &listed[0]["sha256"]
        ),
        (&json!(1), &json!(4), &sealed)
    );
    assert!(
        nu.json("orch audit compact --before 3").is_null(),
        "nothing left to archive"
    );
    let noop = nu.json("orch audit --limit 1 | get 0 | select seq action ok outcome");
    assert_eq!(
        noop,
        json!({"seq": 10, "action": "audit_compact", "ok": true, "outcome": "no entry before entry 3 to archive"})
    );
    let file = daemon.data_dir().join("audit/segment-1-4.jsonl");
    assert_eq!((mode(&file), mode(file.parent().unwrap())), (0o600, 0o700));

    // Exported, a segment checks offline against what its checkpoint sealed.
    let copy = daemon.dir().join("exported.jsonl");
    nu.run(&format!("orch audit export 2 | save '{}'", copy.display()));
    let original = std::fs::read(&file).unwrap();
    assert_eq!(std::fs::read(&copy).unwrap(), original);
    let sealed = sealed.as_str().unwrap();
    let (offline, ok) = verify_offline(&copy, Some(sealed));
    assert!(ok, "{offline}");
    assert_eq!(
        (&offline["first"], &offline["last"]),
        (&json!(1), &json!(4))
    );

    // An edited segment: found by the daemon, and in an exported copy offline.
    let text = String::from_utf8(original.clone()).unwrap();
    let edited = text.replacen("there is no task 999", "task 999 cancelled", 1);
    std::fs::write(&file, &edited).unwrap();
    let report = verify(&daemon, &nu, port);
    assert_eq!(report["bad_seq"], 1, "{report}");
    assert!(
        report["problem"]
            .as_str()
            .unwrap()
            .contains("in segment audit/segment-1-4.jsonl: entry 1 was altered")
    );
    nu.run(&format!(
        "orch audit export 1 | save -f '{}'",
        copy.display()
    ));
    let (offline, ok) = verify_offline(&copy, Some(sealed));
    assert!(!ok);
    assert_eq!(offline["bad_seq"], 1, "{offline}");
    // Re-hashed after the edit, the entries chain again, but not to what was sealed.
    std::fs::write(
        &copy,
        text.lines().skip(1).collect::<Vec<_>>().join("\n") + "\n",
    )
    .unwrap();
    let (offline, ok) = verify_offline(&copy, Some(sealed));
    assert!(
        !ok && offline["problem"].as_str().unwrap().contains("SHA-256"),
        "{offline}"
    );
    let (offline, ok) = verify_offline(&file.with_file_name("segment-1-4.jsonl"), None);
    assert!(!ok, "{offline}");
    std::fs::write(&file, &original).unwrap();
    assert_eq!(verify(&daemon, &nu, port)["intact"], true);

    // What remains live, the checkpoint and the list of segments, with the daemon stopped.
    daemon.kill9();
    let live = rows(&daemon, AUDIT);
    let listed = rows(&daemon, SEGMENTS);
    let restore = |daemon: &Daemon| {
        tamper(daemon, AUDIT, |t| {
            for (seq, body) in &live {
                t.insert(*seq, body.as_slice()).unwrap();
            }
        });
        tamper(daemon, SEGMENTS, |t| {
            for (first, body) in &listed {
                t.insert(*first, body.as_slice()).unwrap();
            }
        });
    };
    let edit = |body: &[u8], from: &str, to: &str| {
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains(from), "{text}");
        text.replacen(from, to, 1)
    };
    let cases: Vec<Tampering> = vec![
        (
            "an entry after the checkpoint edited",
            Box::new(|d| {
                let body = edit(&live[&8], "there is no task", "there was a task");
                tamper(d, AUDIT, |t| drop(t.insert(8, body.as_bytes()).unwrap()));
            }),
            8,
            "entry 8 was altered",
        ),
        (
            "the first live entry deleted",
            Box::new(|d| tamper(d, AUDIT, |t| drop(t.remove(5).unwrap()))),
            5,
            "entry 5 is missing",
        ),
        (
            "the checkpoint made to seal another file",
            Box::new(|d| {
                let body = edit(&live[&7], sealed, &"0".repeat(64));
                tamper(d, AUDIT, |t| drop(t.insert(7, body.as_bytes()).unwrap()));
            }),
            7,
            "entry 7 was altered",
        ),
        (
            "two live entries swapped",
            Box::new(|d| {
                tamper(d, AUDIT, |t| {
                    t.insert(8, live[&9].as_slice()).unwrap();
                    t.insert(9, live[&8].as_slice()).unwrap();
                })
            }),
            8,
            "were moved",
        ),
        (
            "the tail removed",
            Box::new(|d| tamper(d, AUDIT, |t| drop(t.remove(10).unwrap()))),
            10,
            "removed from the end",
        ),
        (
            "the segment dropped from the list",
            Box::new(|d| tamper(d, SEGMENTS, |t| drop(t.remove(1).unwrap()))),
            1,
            "entry 1 is missing (the log jumps to 5)",
        ),
        (
            "the list made to seal an edited segment",
            Box::new(|d| {
                let body = edit(&listed[&1], sealed, &"0".repeat(64));
                tamper(d, SEGMENTS, |t| drop(t.insert(1, body.as_bytes()).unwrap()));
            }),
            1,
            "the file was changed",
        ),
    ];
    for (what, change, bad, words) in cases {
        change(&daemon);
        eprintln!("case: {what}");
        expect_broken(&mut daemon, port, bad, words);
        restore(&daemon);
    }
    assert_eq!(json(&listed[&1])["checkpoint"], 7);
    daemon.restart();
    assert_eq!(verify(&daemon, &daemon.nu(), port)["intact"], true);
}

/// The seq of the newest entry, in nu.
const NEWEST_SEQ: &str = "orch audit --limit 1 | get 0.seq";

/// Compacts up to the newest entry, again and again while `recording` runs and until
/// `enough` says so; returns how many compactions archived something.
fn compact_while(
    nu: &Nu,
    recording: &mut std::process::Child,
    enough: impl Fn(u64) -> bool,
) -> u64 {
    let mut compactions = 0;
    while recording.try_wait().expect("its status").is_none() && !enough(compactions) {
        let segment = nu.json(&format!("orch audit compact --before ({NEWEST_SEQ})"));
        compactions += u64::from(!segment.is_null());
    }
    compactions
}

/// Checks that the whole log verifies with every entry in it once (the live and the
/// archived ones number the newest entry's seq); returns how many refused cancels it holds.
fn whole_log_cancels(daemon: &Daemon, nu: &Nu) -> u64 {
    let report = nu.json("orch audit verify");
    assert_eq!(report["intact"], true, "{report}");
    let newest = nu.json(NEWEST_SEQ);
    assert_eq!(
        report["entries"].as_u64().unwrap() + report["archived"].as_u64().unwrap(),
        newest.as_u64().unwrap(),
        "{report}"
    );
    let segments = daemon.data_dir().join("audit");
    nu.json(&format!(
        "(ls '{}' | where name ends-with .jsonl | get name | each {{ open --raw $in | lines | each {{ from json }} }} | flatten | append (orch audit --limit 100000) | where action == cancel | length)",
        segments.display()
    ))
    .as_u64()
    .expect("a count")
}

#[test]
fn compactions_while_entries_are_recorded_lose_and_repeat_none() {
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    refused_cancels(&nu, 5);
    // Another nu records 400 more while this one compacts up to the newest entry it sees.
    let mut recorder =
        nu.spawn("1..400 | each { try { orch cancel 999 } catch { null } } | ignore");
    let compactions = compact_while(&nu, &mut recorder, |_| false);
    assert!(recorder.wait().unwrap().success(), "the recorder failed");
    assert!(
        compactions >= 2,
        "only {compactions} compaction(s) overlapped the recording"
    );
    assert_eq!(
        whole_log_cancels(&daemon, &nu),
        405,
        "each refused cancel is recorded once"
    );

    // Killed while both go on, the last commits are in the journal only, between
    // compactions the store file holds: folded in (by the checkpoint tool, as an open
    // would), the chain is whole.
    let mut recorder =
        nu.spawn("1..100000 | each { try { orch cancel 999 } catch { null } } | ignore");
    compact_while(&nu, &mut recorder, |done| done >= 3);
    // Some more entries after the last compaction, so that the journal holds some.
    let newest = || nu.json(NEWEST_SEQ).as_u64().unwrap();
    let compacted = newest();
    orch_e2e::eventually(Duration::from_secs(20), "more entries", || {
        (newest() >= compacted + 10).then_some(())
    });
    daemon.kill9();
    let _ = recorder.kill();
    let _ = recorder.wait();
    let report = orch_e2e::checkpoint_tool(&daemon.data_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report["applied"].as_u64() >= Some(1),
        "the kill left nothing in the journal: {report}"
    );
    daemon.restart();
    let nu = daemon.nu();
    assert!(whole_log_cancels(&daemon, &nu) > 405);
}
