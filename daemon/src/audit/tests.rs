//! The archive over a real redb store in a temporary directory: compaction keeps the whole
//! chain verifiable, tampering with a segment or the list of segments is found, and what
//! an interrupted compaction leaves is swept away.

use std::sync::Arc;

use orch_protocol::{Actor, AuditCut, AuditFilter};
use serde_json::json;

use super::AuditRecord;
use super::archive::{Archive, ArchiveError};
use crate::store::{RedbStore, Store, WriteBatch};

fn actor() -> Actor {
    Actor {
        uid: 0,
        interface: "socket".into(),
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    archive: Archive,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(RedbStore::open(&dir.path().join("s.redb")).unwrap());
        let archive = Archive::open(dir.path(), store.clone()).unwrap();
        Fixture {
            dir,
            store,
            archive,
        }
    }

    /// Appends `n` entries, one batch each.
    fn record(&self, n: u64) {
        for i in 0..n {
            let record = AuditRecord::new(actor(), "cancel", json!({ "id": i }), Err("no".into()));
            let batch = WriteBatch {
                audit: vec![record],
                ..WriteBatch::default()
            };
            self.store.commit(&batch).unwrap();
        }
    }

    fn compact(&self, before: u64) -> Option<orch_protocol::AuditSegment> {
        self.archive
            .compact(AuditCut::Seq(before), actor(), None)
            .unwrap()
    }

    fn live_seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = (self.store.audit(&AuditFilter::default()).unwrap())
            .iter()
            .map(|e| e.seq)
            .collect();
        seqs.reverse();
        seqs
    }

    fn problem(&self) -> (Option<u64>, String) {
        let report = self.archive.verify().unwrap();
        assert!(!report.intact, "{report:?}");
        (report.bad_seq, report.problem.unwrap())
    }
}

#[test]
fn compactions_archive_the_oldest_entries_and_the_chain_still_verifies() {
    let f = Fixture::new();
    f.record(5);
    let first = f.compact(4).expect("entries 1–3 archived");
    assert_eq!(
        (first.seal.first, first.seal.last, first.checkpoint),
        (1, 3, 6)
    );
    assert_eq!(f.live_seqs(), vec![4, 5, 6]);
    f.record(2);
    let second = f.compact(8).expect("entries 4–7 archived");
    assert_eq!((second.seal.first, second.seal.last), (4, 7));
    assert_eq!(f.live_seqs(), vec![8, 9]);
    let report = f.archive.verify().unwrap();
    assert!(report.intact, "{report:?}");
    assert_eq!((report.archived, report.entries), (7, 2));
    assert_eq!(report.segments, vec![first, second]);
    assert!(f.compact(8).is_none(), "nothing below 8 is live any more");
    assert!(
        f.compact(10).is_some(),
        "entries 8 and 9 (a checkpoint) archived"
    );
    assert_eq!(f.live_seqs(), vec![10]);
    assert!(
        f.compact(11).is_none(),
        "a checkpoint alone is not archived again"
    );
    assert!(f.archive.verify().unwrap().intact);
}

#[test]
fn a_changed_segment_or_list_of_segments_is_found() {
    let f = Fixture::new();
    f.record(4);
    let segment = f.compact(3).unwrap();
    let path = f.dir.path().join(&segment.seal.file);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"id\":1", "\"id\":9")).unwrap();
    let (bad, problem) = f.problem();
    assert_eq!(bad, Some(2));
    assert!(
        problem.contains("in segment audit/segment-1-2.jsonl: entry 2 was altered"),
        "{problem}"
    );
    std::fs::remove_file(&path).unwrap();
    assert!(f.problem().1.contains("the file is missing"));
    std::fs::write(&path, &text).unwrap();
    assert!(f.archive.verify().unwrap().intact);
    std::fs::write(&path, format!("{text}{}\n", text.lines().last().unwrap())).unwrap();
    let (bad, problem) = f.problem();
    assert_eq!(bad, Some(3));
    assert!(problem.contains("comes entry 2 again"), "{problem}");
}

#[test]
fn a_live_log_that_is_not_intact_is_not_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    {
        let store: Arc<dyn Store> = Arc::new(RedbStore::open(&path).unwrap());
        let f = Fixture {
            dir: tempfile::tempdir().unwrap(),
            archive: Archive::open(dir.path(), store.clone()).unwrap(),
            store,
        };
        f.record(3);
    }
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let table: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("audit");
        txn.open_table(table).unwrap().remove(2).unwrap();
        txn.commit().unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(&path).unwrap());
    let archive = Archive::open(dir.path(), store).unwrap();
    match archive.compact(AuditCut::Seq(9), actor(), None) {
        Err(ArchiveError::NotIntact(broken)) => assert_eq!(broken.seq, 2),
        other => panic!("{other:?}"),
    }
    let left = std::fs::read_dir(dir.path().join("audit")).unwrap().count();
    assert_eq!(left, 0, "no segment is left behind");
}

#[test]
fn a_segment_left_by_an_interrupted_compaction_is_swept_at_open() {
    let f = Fixture::new();
    f.record(3);
    let dir = f.dir.path().join("audit");
    std::fs::write(dir.join("segment-1-2.jsonl"), "left by a crash\n").unwrap();
    std::fs::write(dir.join("segment-1.jsonl.tmp"), "half written").unwrap();
    std::fs::write(dir.join("notes.txt"), "not ours").unwrap();
    let reopened = Archive::open(f.dir.path(), f.store.clone()).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["notes.txt"]);
    assert!(reopened.verify().unwrap().intact);
    assert_eq!(f.live_seqs(), vec![1, 2, 3], "no entry was lost");
    drop(reopened);
    f.compact(3).unwrap();
    // Unlisted: entries 1 (no longer live: kept, it shows a tampered list) and 3 (live).
    std::fs::write(dir.join("segment-1-1.jsonl"), "kept\n").unwrap();
    std::fs::write(dir.join("segment-3-3.jsonl"), "left by a crash\n").unwrap();
    Archive::open(f.dir.path(), f.store.clone()).unwrap();
    assert!(dir.join("segment-1-1.jsonl").exists());
    assert!(!dir.join("segment-3-3.jsonl").exists());
    assert!(dir.join("segment-1-2.jsonl").exists());
}

#[test]
fn a_checkpoint_that_names_no_listed_segment_is_found() {
    let f = Fixture::new();
    f.record(2);
    // A correctly chained entry that claims an archive nobody made.
    let seal = json!({"file": "audit/segment-1-1.jsonl", "first": 1, "last": 1,
        "last_hash": "0", "sha256": "0", "bytes": 1});
    let forged = AuditRecord::new(
        actor(),
        super::chain::CHECKPOINT_ACTION,
        json!({ "archived": seal }),
        Ok("forged".into()),
    );
    let batch = WriteBatch {
        audit: vec![forged],
        ..WriteBatch::default()
    };
    f.store.commit(&batch).unwrap();
    let (bad, problem) = f.problem();
    assert_eq!(bad, Some(3));
    assert!(problem.contains("not in the list of segments"), "{problem}");
    assert!(matches!(
        f.archive.holding(99),
        Err(ArchiveError::NoSegment(99))
    ));
}
