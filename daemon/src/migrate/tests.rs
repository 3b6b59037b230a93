//! Migrations between real redb stores in temporary directories: everything is carried
//! over (removed ids stay taken, trimmed events stay trimmed, the audit chain with its
//! archived segment keeps its hashes and verifies), a non-empty target is refused with
//! nothing written, and a copy that differs is found.

use std::sync::Arc;

use chrono::Utc;
use orch_protocol::{Actor, AuditCut, Event, EventKind, Task, TaskState, TaskStatus};

use super::{MigrateError, migrate};
use crate::audit::AuditRecord;
use crate::audit::archive::Archive;
use crate::store::{RedbStore, Store, TaskWrite, WriteBatch};

fn actor() -> Actor {
    Actor {
        uid: 0,
        interface: "socket".into(),
    }
}

/// Task `id` with `priority` in `state`, with `label`.
fn task(id: u64, priority: i32, state: TaskState, label: Option<&str>) -> Task {
    let mut task = crate::store::conformance::task(id, priority, state);
    task.spec.label = label.map(str::to_string);
    task
}

fn open(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(RedbStore::open(&dir.path().join(crate::STORE_FILE)).unwrap())
}

/// A store with queued tasks of mixed priorities, a running and a finished labelled one,
/// a removed task (id 6, the highest), trimmed events and an audit log with an archived
/// segment.
pub(crate) fn source() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let queued = || TaskState::Queued { since: Utc::now() };
    let mut tasks: Vec<Task> = [(1, 0), (2, 5), (3, 0)]
        .into_iter()
        .map(|(id, priority)| task(id, priority, queued(), None))
        .collect();
    let running = TaskState::Running {
        attempt: 1,
        started_at: Utc::now(),
        paused_at: None,
    };
    tasks.push(task(4, 0, running, Some("db")));
    let done = TaskState::Succeeded {
        finished_at: Utc::now(),
    };
    tasks.push(task(5, 0, done.clone(), Some("db")));
    tasks.push(task(6, 0, done, None));
    let events = (1..=5)
        .map(|seq| Event {
            seq,
            at: Utc::now(),
            task: 1,
            workflow: None,
            kind: EventKind::Queued,
        })
        .collect();
    let audit = (0..6)
        .map(|i| {
            AuditRecord::new(
                actor(),
                "submit",
                serde_json::json!({ "i": i }),
                Ok(String::new()),
            )
        })
        .collect();
    let batch = WriteBatch {
        tasks: tasks
            .iter()
            .cloned()
            .map(|task| TaskWrite {
                task,
                previous: None,
                reindex: None,
            })
            .collect(),
        events,
        audit,
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    let finish = WriteBatch {
        removals: vec![tasks[5].clone()],
        events_removed_through: Some(2),
        ..WriteBatch::default()
    };
    store.commit(&finish).unwrap();
    let archive = Archive::open(dir.path(), store.clone()).unwrap();
    let segment = archive.compact(AuditCut::Seq(4), actor(), None).unwrap();
    assert!(segment.is_some(), "entries 1-3 archived");
    (dir, store)
}

#[test]
fn everything_is_carried_over_and_checked() {
    let (source_dir, from) = source();
    let target_dir = tempfile::tempdir().unwrap();
    let to = open(&target_dir);
    let copied = migrate(from.as_ref(), to.as_ref(), "the target").unwrap();
    assert_eq!(copied.tasks, 5);
    assert_eq!(copied.events, 3);
    assert_eq!(copied.last_id, 6, "the removed task's id stays taken");
    assert_eq!(copied.audit_segments, 1);
    let snapshot = to.load().unwrap();
    assert!(
        !snapshot.migration_underway,
        "the finished copy is no longer marked"
    );
    assert_eq!(snapshot.queue, vec![(2, 5), (1, 0), (3, 0)]);
    assert_eq!(snapshot.last_task_id, 6);
    assert_eq!(to.events_removed_through().unwrap(), 2);
    assert_eq!(to.get(6).unwrap(), None);
    let labelled = orch_protocol::TaskFilter {
        label: Some("db".into()),
        ..Default::default()
    };
    let ids: Vec<u64> = to.list(&labelled).unwrap().iter().map(|t| t.id).collect();
    assert_eq!(ids, vec![5, 4]);
    // The segment files stay in the data directory: with them, the copy's chain verifies
    // from the first entry, segments included.
    for name in ["audit"] {
        let from_dir = source_dir.path().join(name);
        let to_dir = target_dir.path().join(name);
        std::fs::create_dir_all(&to_dir).unwrap();
        for file in std::fs::read_dir(&from_dir).unwrap() {
            let file = file.unwrap();
            std::fs::copy(file.path(), to_dir.join(file.file_name())).unwrap();
        }
    }
    let report = Archive::open(target_dir.path(), to.clone())
        .unwrap()
        .verify()
        .unwrap();
    assert!(report.intact, "{report:?}");
    assert_eq!(report.archived, 3);
}

#[test]
fn a_target_that_holds_anything_is_refused_and_left_as_it_was() {
    let (_source_dir, from) = source();
    let target_dir = tempfile::tempdir().unwrap();
    let to = open(&target_dir);
    let one = WriteBatch {
        tasks: vec![TaskWrite {
            task: task(1, 0, TaskState::Queued { since: Utc::now() }, None),
            previous: None,
            reindex: None,
        }],
        ..WriteBatch::default()
    };
    to.commit(&one).unwrap();
    let error = migrate(from.as_ref(), to.as_ref(), "the target").unwrap_err();
    assert!(matches!(error, MigrateError::NotEmpty(..)), "{error}");
    assert!(error.to_string().contains("tasks: 1"), "{error}");
    let counts = to.count_by_status().unwrap();
    let held: Vec<_> = counts.into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(held, vec![(TaskStatus::Queued, 1)]);
    assert_eq!(to.last_event_seq().unwrap(), 0);
}

#[test]
fn a_copy_that_differs_is_found() {
    let (_source_dir, from) = source();
    let target_dir = tempfile::tempdir().unwrap();
    let to = open(&target_dir);
    migrate(from.as_ref(), to.as_ref(), "the target").unwrap();
    // The source changes after the copy: the check sees it.
    let changed = WriteBatch {
        tasks: vec![TaskWrite {
            task: task(1, 9, TaskState::Queued { since: Utc::now() }, None),
            previous: Some(TaskStatus::Queued),
            reindex: None,
        }],
        ..WriteBatch::default()
    };
    from.commit(&changed).unwrap();
    let error = super::check::same(from.as_ref(), to.as_ref()).unwrap_err();
    assert!(error.to_string().contains("task 1"), "{error}");
}

#[test]
fn a_store_left_by_an_unfinished_migration_is_marked_and_refused_as_a_target() {
    let (_source_dir, from) = source();
    let target_dir = tempfile::tempdir().unwrap();
    let to = open(&target_dir);
    // What a copy that stopped after its first batch leaves.
    let begun = WriteBatch {
        migration_underway: Some(true),
        ..WriteBatch::default()
    };
    to.commit(&begun).unwrap();
    assert!(to.load().unwrap().migration_underway);
    let error = migrate(from.as_ref(), to.as_ref(), "the target").unwrap_err();
    assert!(
        error.to_string().contains("an unfinished migration"),
        "{error}"
    );
}

#[test]
fn an_empty_source_or_one_an_unfinished_migration_left_is_refused() {
    let empty_dir = tempfile::tempdir().unwrap();
    let empty = open(&empty_dir);
    let target_dir = tempfile::tempdir().unwrap();
    let to = open(&target_dir);
    let error = migrate(empty.as_ref(), to.as_ref(), "the target").unwrap_err();
    assert!(error.to_string().contains("the source is empty"), "{error}");
    let (_source_dir, half) = source();
    let begun = WriteBatch {
        migration_underway: Some(true),
        ..WriteBatch::default()
    };
    half.commit(&begun).unwrap();
    let error = migrate(half.as_ref(), to.as_ref(), "the target").unwrap_err();
    assert!(
        error.to_string().contains("unfinished migration"),
        "{error}"
    );
    assert!(
        !to.load().unwrap().migration_underway,
        "the target was not touched"
    );
    assert_eq!(to.last_event_seq().unwrap(), 0);
}

#[test]
fn what_looks_like_another_url_or_a_connection_string_is_no_directory() {
    use super::Place;
    for text in [
        "postgres:/u:pw-1@127.0.0.1/db",
        "mysql://u:pw-1@h/d",
        "u:pw-1@h",
        "host=127.0.0.1 password=pw-1 dbname=x",
    ] {
        let error = Place::parse("--to", text).unwrap_err().to_string();
        assert!(error.starts_with("--to: "), "{error}");
        assert!(!error.contains("pw-1"), "{error}");
    }
    assert!(matches!(
        Place::parse("--to", "./data-2"),
        Ok(Place::Redb(_))
    ));
    assert!(matches!(
        Place::parse("--to", "postgres://h/d"),
        Ok(Place::Postgres(_))
    ));
}
