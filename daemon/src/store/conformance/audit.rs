//! The audit log's conformance cases: entries sealed in order in their batch's
//! transaction onto a chain the daemon's own check accepts, compaction into segments, and
//! the refusals of `archive_audit`.

use std::ops::ControlFlow;
use std::sync::Arc;

use orch_protocol::{Actor, AuditCut, AuditFilter, SegmentSeal};

use super::{Fixture, queued, task};
use crate::audit::AuditRecord;
use crate::audit::archive::Archive;
use crate::store::{Store, TaskWrite, WriteBatch};

/// Entry `n`: asked by uid `n % 3`, refused when `n` is a multiple of 3.
fn record(action: &'static str, n: u64) -> AuditRecord {
    let actor = Actor {
        uid: (n % 3) as u32,
        interface: "socket".into(),
    };
    let params = serde_json::json!({ "n": n, "token": "hidden" });
    let outcome = if n.is_multiple_of(3) {
        Err(format!("refused {n}"))
    } else {
        Ok(format!("done {n}"))
    };
    AuditRecord::new(actor, action, params, outcome)
}

/// Commits batches of 1, 2 and 3 records (the first with a task), actions `submit` and
/// `cancel` alternating.
fn six_entries(store: &dyn Store) {
    let mut n = 0;
    for size in 1..=3 {
        let audit = (0..size)
            .map(|_| {
                n += 1;
                record(if n % 2 == 1 { "submit" } else { "cancel" }, n)
            })
            .collect();
        let tasks = if size == 1 {
            vec![TaskWrite {
                task: task(1, 0, queued()),
                previous: None,
                reindex: None,
            }]
        } else {
            vec![]
        };
        let batch = WriteBatch {
            tasks,
            audit,
            ..WriteBatch::default()
        };
        store.commit(&batch).unwrap();
    }
}

/// The keys the walk passes, and the head it returns.
fn walk(store: &dyn Store) -> (Vec<u64>, Option<(u64, String)>) {
    let mut keys = Vec::new();
    let head = store
        .walk_audit(&mut |key, body| {
            let entry: orch_protocol::AuditEntry = serde_json::from_slice(body).unwrap();
            assert_eq!(entry.seq, key);
            keys.push(key);
            ControlFlow::Continue(())
        })
        .unwrap();
    (keys, head)
}

/// Entries are numbered in commit order, filtered newest first, walked oldest first with
/// the head, verified by the daemon's check, compacted into a segment, and all of it
/// survives a reopen.
pub(crate) fn audit_entries_are_sealed_in_order_onto_a_chain_that_verifies(fixture: &dyn Fixture) {
    {
        let store: Arc<dyn Store> = Arc::from(fixture.open());
        six_entries(store.as_ref());
        let seqs = |filter: &AuditFilter| -> Vec<u64> {
            store.audit(filter).unwrap().iter().map(|e| e.seq).collect()
        };
        assert_eq!(seqs(&AuditFilter::default()), vec![6, 5, 4, 3, 2, 1]);
        let cancels = AuditFilter {
            action: Some("cancel".into()),
            limit: Some(2),
            ..AuditFilter::default()
        };
        assert_eq!(seqs(&cancels), vec![6, 4]);
        // Entry n was asked by uid n % 3, and refused when n is a multiple of 3.
        let of_uid_1 = AuditFilter {
            uid: Some(1),
            ..AuditFilter::default()
        };
        assert_eq!(seqs(&of_uid_1), vec![4, 1]);
        let refused = AuditFilter {
            ok: Some(false),
            ..AuditFilter::default()
        };
        assert_eq!(seqs(&refused), vec![6, 3]);
        let refused_cancels_of_uid_0 = AuditFilter {
            action: Some("cancel".into()),
            uid: Some(0),
            ok: Some(false),
            ..AuditFilter::default()
        };
        assert_eq!(seqs(&refused_cancels_of_uid_0), vec![6]);
        let page = AuditFilter {
            limit: Some(2),
            before: Some(5),
            ..AuditFilter::default()
        };
        assert_eq!(seqs(&page), vec![4, 3]);
        let entries = store.audit(&AuditFilter::default()).unwrap();
        assert!(
            entries
                .iter()
                .all(|e| e.params["token"] == crate::audit::REDACTED)
        );
        let (keys, head) = walk(store.as_ref());
        assert_eq!(keys, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(head, Some((6, entries[0].hash.clone())));
        let archive = Archive::open(fixture.data_dir(), store.clone()).unwrap();
        let report = archive.verify().unwrap();
        assert!(report.intact, "{report:?}");
        assert_eq!(report.entries, 6);
        let actor = crate::audit::retention::daemon();
        let segment = archive
            .compact(AuditCut::Seq(4), actor, None)
            .unwrap()
            .unwrap();
        assert_eq!((segment.seal.first, segment.seal.last), (1, 3));
        assert_eq!(segment.checkpoint, 7);
        assert_eq!(store.audit_segments().unwrap(), vec![segment]);
        assert_eq!(walk(store.as_ref()).0, vec![4, 5, 6, 7]);
    }
    let store: Arc<dyn Store> = Arc::from(fixture.open());
    let archive = Archive::open(fixture.data_dir(), store.clone()).unwrap();
    let report = archive.verify().unwrap();
    assert!(report.intact, "{report:?}");
    assert_eq!((report.archived, report.entries), (3, 4));
}

/// `archive_audit` refuses, changing nothing, unless the live log still starts at the
/// seal's first entry and its last entry still has the sealed hash.
pub(crate) fn archiving_is_refused_when_the_log_changed_and_nothing_changes(fixture: &dyn Fixture) {
    let store = fixture.open();
    six_entries(store.as_ref());
    let entries = store.audit(&AuditFilter::default()).unwrap();
    let hash_of = |seq: u64| entries.iter().find(|e| e.seq == seq).unwrap().hash.clone();
    let seal = |first, last, last_hash| SegmentSeal {
        file: format!("audit/segment-{first}-{last}.jsonl"),
        first,
        last,
        last_hash,
        sha256: String::new(),
        bytes: 0,
    };
    let before = walk(store.as_ref());
    let refused = [
        seal(2, 3, hash_of(3)),
        seal(1, 3, hash_of(2)),
        seal(1, 9, hash_of(6)),
    ];
    for bad in refused {
        let checkpoint = record("audit_compact", 0);
        let error = store.archive_audit(&bad, checkpoint).err().unwrap();
        assert!(
            error.to_string().contains("nothing was archived"),
            "{error}"
        );
        assert_eq!(walk(store.as_ref()), before);
        assert!(store.audit_segments().unwrap().is_empty());
    }
    let good = seal(1, 2, hash_of(2));
    let segment = store
        .archive_audit(&good, record("audit_compact", 0))
        .unwrap();
    assert_eq!(segment.checkpoint, 7);
    assert_eq!(walk(store.as_ref()).0, vec![3, 4, 5, 6, 7]);
    assert_eq!(store.audit_segments().unwrap(), vec![segment]);
}
