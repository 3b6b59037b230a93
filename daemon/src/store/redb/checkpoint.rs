//! How a batch becomes durable in the redb store: appended to the journal (see
//! [`super::journal`]), then committed by redb without a sync; a checkpoint has redb sync
//! everything and starts a new epoch of the journal; at open, what the journal holds
//! after redb's last durable commit is applied again.
//!
//! Readers see a batch once redb has committed it, which is after its journal record is
//! durable: nothing is read that a crash could take back.

use std::sync::{Mutex, MutexGuard};

use ::redb::{Database, Durability, WriteTransaction};
use chrono::{DateTime, Utc};

use super::journal::{Found, Journal};
use super::open::QuickRepair;
use super::{META, backend, write};
use crate::store::{StoreError, WriteBatch};

/// The `meta` key of the journal epoch of the last batch applied.
const JOURNAL_EPOCH: &str = "journal_epoch";
/// The `meta` key of the number (in its epoch) of the last batch applied.
const JOURNAL_RECORD: &str = "journal_record";
/// The `meta` key of the store's journal id (in the journal's header too).
const JOURNAL_ID: &str = "journal_id";

/// A journal record as written: the batch, and the time its audit records are sealed
/// with.
#[derive(serde::Serialize)]
struct Written<'a> {
    at: DateTime<Utc>,
    batch: &'a WriteBatch,
}

/// A journal record as read back.
#[derive(serde::Deserialize)]
struct Read {
    at: DateTime<Utc>,
    batch: WriteBatch,
}

/// The journal, and what syncs redb when a checkpoint is due.
pub(super) struct Durable {
    journal: Mutex<Journal>,
}

impl Durable {
    /// Applies what `found` (the journal as opened) holds after redb's last durable
    /// commit, in one durable transaction, and starts a new epoch of the journal.
    pub fn recover(
        db: &Database,
        mut journal: Journal,
        found: Found,
    ) -> Result<(Durable, usize), StoreError> {
        if found.damaged_header {
            tracing::warn!(
                journal = %journal.path().display(),
                "the store's journal has a damaged header: commits made after the last checkpoint may be lost"
            );
        }
        let (id, epoch, applied) = position(db)?;
        let id = match id {
            0 => new_id(db)?,
            id => id,
        };
        if found.store != id && !found.records.is_empty() {
            tracing::warn!(
                journal = %journal.path().display(),
                records = found.records.len(),
                "the journal belongs to another store file: it is not applied to this one"
            );
        }
        let pending: Vec<(u64, Vec<u8>)> = match found.epoch {
            _ if found.store != id => Vec::new(),
            e if e > epoch => found.records,
            e if e == epoch => found
                .records
                .into_iter()
                .filter(|(n, _)| *n > applied)
                .collect(),
            _ => Vec::new(),
        };
        let replayed = pending.len();
        if replayed > 0 {
            let txn = durable_txn(db, None)?;
            for (number, body) in pending {
                let record: Read =
                    serde_json::from_slice(&body).map_err(|e| StoreError::Unusable {
                        path: journal.path().display().to_string(),
                        problem: format!(
                            "its record {number} of epoch {} cannot be read by this daemon ({e})",
                            found.epoch
                        ),
                    })?;
                write::apply(&txn, &record.batch, record.at).map_err(backend)?;
                set_position(&txn, found.epoch, number)?;
            }
            txn.commit().map_err(backend)?;
        }
        journal
            .start_epoch(id, epoch.max(found.epoch) + 1)
            .map_err(|e| journal_error(&journal, &e))?;
        let durable = Durable {
            journal: Mutex::new(journal),
        };
        Ok((durable, replayed))
    }

    /// Commits `batch`: journaled and durable, then committed by redb without a sync. A
    /// batch too large for the journal is committed by redb with a sync; a checkpoint that
    /// comes due is made at once.
    pub fn commit(
        &self,
        db: &Database,
        quick_repair: &QuickRepair,
        batch: &WriteBatch,
    ) -> Result<(), StoreError> {
        let at = Utc::now();
        let mut journal = self.lock();
        let Some(body) = journal_record(at, batch) else {
            // Larger than the journal: committed by redb with a sync, which also syncs
            // what the journal holds (the position says none of it is left to apply), so
            // the journal starts over as after a checkpoint.
            let txn = durable_txn(db, Some(quick_repair))?;
            write::apply(&txn, batch, at).map_err(backend)?;
            set_position(&txn, journal.epoch(), journal.last())?;
            txn.commit().map_err(backend)?;
            return next_epoch(&mut journal);
        };
        if !journal.fits(body.len()) {
            checkpoint(db, quick_repair, &mut journal)?;
        }
        let number = journal
            .append(&body)
            .map_err(|e| journal_error(&journal, &e))?;
        let mut txn = db.begin_write().map_err(backend)?;
        txn.set_durability(Durability::None).map_err(backend)?;
        write::apply(&txn, batch, at).map_err(backend)?;
        set_position(&txn, journal.epoch(), number)?;
        txn.commit().map_err(backend)?;
        if journal.due() {
            checkpoint(db, quick_repair, &mut journal)?;
        }
        Ok(())
    }

    /// Whether redb holds commits it has not synced (a checkpoint would sync them).
    pub fn unsettled(&self) -> bool {
        self.lock().holds_records()
    }

    /// Makes a checkpoint when redb holds commits it has not synced.
    pub fn settle(&self, db: &Database, quick_repair: &QuickRepair) -> Result<(), StoreError> {
        let mut journal = self.lock();
        if journal.holds_records() {
            checkpoint(db, quick_repair, &mut journal)?;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The journal record of `batch` sealed at `at`, or `None` when it would not fit in an
/// empty journal (its JSON is written into a bounded buffer: a batch of a hundred
/// thousand tasks is not serialized whole only to find that out).
fn journal_record(at: DateTime<Utc>, batch: &WriteBatch) -> Option<Vec<u8>> {
    let mut out = Bounded {
        bytes: Vec::new(),
        room: Journal::largest_record(),
    };
    serde_json::to_writer(&mut out, &Written { at, batch }).ok()?;
    Some(out.bytes)
}

/// A buffer that refuses to grow past `room` bytes.
struct Bounded {
    bytes: Vec<u8>,
    room: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.room {
            return Err(std::io::Error::other("larger than the journal"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Has redb sync everything it committed, then starts a new epoch of the journal. A
/// crash between the two leaves the old epoch's records, which redb has all applied.
fn checkpoint(
    db: &Database,
    quick_repair: &QuickRepair,
    journal: &mut Journal,
) -> Result<(), StoreError> {
    durable_txn(db, Some(quick_repair))?
        .commit()
        .map_err(backend)?;
    next_epoch(journal)
}

/// Starts the journal's next epoch, once redb has synced all it applied.
fn next_epoch(journal: &mut Journal) -> Result<(), StoreError> {
    let next = journal.epoch() + 1;
    journal
        .start_epoch(journal.store(), next)
        .map_err(|e| journal_error(journal, &e))
}

/// A write transaction that syncs when it commits (with quick repair as `quick_repair`
/// wants).
fn durable_txn(
    db: &Database,
    quick_repair: Option<&QuickRepair>,
) -> Result<WriteTransaction, StoreError> {
    let mut txn = db.begin_write().map_err(backend)?;
    txn.set_durability(Durability::Immediate).map_err(backend)?;
    if let Some(quick) = quick_repair {
        txn.set_quick_repair(quick.wanted());
    }
    Ok(txn)
}

/// The store's journal id (0: none yet), and the journal epoch and record number of the
/// last batch redb applied.
fn position(db: &Database) -> Result<(u64, u64, u64), StoreError> {
    use ::redb::ReadableDatabase as _;
    let txn = db.begin_read().map_err(backend)?;
    let meta = txn.open_table(META).map_err(backend)?;
    let get = |key| -> Result<u64, StoreError> {
        Ok(meta.get(key).map_err(backend)?.map_or(0, |v| v.value()))
    };
    Ok((get(JOURNAL_ID)?, get(JOURNAL_EPOCH)?, get(JOURNAL_RECORD)?))
}

/// Gives the store a journal id (random, never 0), durably.
fn new_id(db: &Database) -> Result<u64, StoreError> {
    let id = fastrand::u64(1..);
    let txn = durable_txn(db, None)?;
    txn.open_table(META)
        .map_err(backend)?
        .insert(JOURNAL_ID, id)
        .map_err(backend)?;
    txn.commit().map_err(backend)?;
    Ok(id)
}

/// Records in `txn` that it applies record `number` of epoch `epoch`.
fn set_position(txn: &WriteTransaction, epoch: u64, number: u64) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(backend)?;
    meta.insert(JOURNAL_EPOCH, epoch).map_err(backend)?;
    meta.insert(JOURNAL_RECORD, number).map_err(backend)?;
    Ok(())
}

fn journal_error(journal: &Journal, e: &std::io::Error) -> StoreError {
    StoreError::Backend(format!(
        "the store's journal {} cannot be written: {e}",
        journal.path().display()
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use chrono::Utc;
    use orch_protocol::{Actor, AuditFilter, TaskState};

    use super::super::RedbStore;
    use super::super::journal::path_of;
    use crate::audit::AuditRecord;
    use crate::store::conformance::task;
    use crate::store::{AuditLog as _, Store, TaskWrite, WriteBatch};

    /// A batch that submits task `id`, with its audit record.
    fn submission(id: u64) -> WriteBatch {
        let queued = TaskState::Queued { since: Utc::now() };
        let actor = Actor {
            uid: 0,
            interface: "socket".into(),
        };
        let params = serde_json::json!({ "id": id });
        WriteBatch {
            tasks: vec![TaskWrite {
                task: task(id, 0, queued),
                previous: None,
                reindex: None,
            }],
            audit: vec![AuditRecord::new(
                actor,
                "submit",
                params,
                Ok(format!("task {id}")),
            )],
            ..WriteBatch::default()
        }
    }

    /// The store file and its journal as a crash would leave them now (the store stays
    /// open): copied to `to`.
    fn crash_copy(from: &Path, to: &Path) {
        std::fs::copy(from, to).unwrap();
        std::fs::copy(path_of(from), path_of(to)).unwrap();
    }

    fn ids(store: &RedbStore) -> Vec<u64> {
        (1..=10)
            .filter(|id| store.get(*id).unwrap().is_some())
            .collect()
    }

    #[test]
    fn commits_after_the_last_checkpoint_come_back_from_the_journal_after_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        for id in 1..=3 {
            store.commit(&submission(id)).unwrap();
        }
        assert!(store.unsettled(), "nothing is checkpointed yet");
        let entries = store.audit(&AuditFilter::default()).unwrap();
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        // The store file alone holds none of them: they are in the journal.
        let journal_less = dir.path().join("journal-less.redb");
        std::fs::copy(&path, &journal_less).unwrap();
        assert_eq!(
            ids(&RedbStore::open(&journal_less).unwrap()),
            Vec::<u64>::new()
        );
        // With its journal, all of them, their audit entries sealed as they were.
        let recovered = RedbStore::open(&crashed).unwrap();
        assert_eq!(ids(&recovered), vec![1, 2, 3]);
        assert_eq!(recovered.audit(&AuditFilter::default()).unwrap(), entries);
        assert!(!recovered.unsettled(), "recovery ends with a checkpoint");
        drop(recovered);
        // Opened again: nothing is applied twice.
        let again = RedbStore::open(&crashed).unwrap();
        assert_eq!(again.audit(&AuditFilter::default()).unwrap().len(), 3);
    }

    #[test]
    fn the_journal_of_another_store_file_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        store.commit(&submission(1)).unwrap();
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        // A new store made where the crashed one was: its journal is not this store's.
        std::fs::remove_file(&crashed).unwrap();
        let fresh = RedbStore::open(&crashed).unwrap();
        assert_eq!(ids(&fresh), Vec::<u64>::new());
        drop(fresh);
        // Nor is it applied later: the new store started a journal of its own.
        assert_eq!(ids(&RedbStore::open(&crashed).unwrap()), Vec::<u64>::new());
    }

    #[test]
    fn a_torn_last_record_loses_only_the_commit_that_never_returned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        for id in 1..=2 {
            store.commit(&submission(id)).unwrap();
        }
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        // Tear the second record: its last byte never reached the disk.
        let journal = std::fs::read(path_of(&crashed)).unwrap();
        let end = journal.iter().rposition(|b| *b != 0).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path_of(&crashed))
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[0], end as u64).unwrap();
        drop(file);
        assert_eq!(ids(&RedbStore::open(&crashed).unwrap()), vec![1]);
    }

    #[test]
    fn a_checkpoint_folds_the_commits_into_the_store_file_and_later_ones_start_a_new_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        store.commit(&submission(1)).unwrap();
        store.settle().unwrap();
        assert!(!store.unsettled());
        store.commit(&submission(2)).unwrap();
        // The store file alone has the first (checkpointed), not the second.
        let journal_less = dir.path().join("journal-less.redb");
        std::fs::copy(&path, &journal_less).unwrap();
        assert_eq!(ids(&RedbStore::open(&journal_less).unwrap()), vec![1]);
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        assert_eq!(ids(&RedbStore::open(&crashed).unwrap()), vec![1, 2]);
        // A clean close checkpoints: the file alone has both.
        drop(store);
        let closed = dir.path().join("closed.redb");
        std::fs::copy(&path, &closed).unwrap();
        assert_eq!(ids(&RedbStore::open(&closed).unwrap()), vec![1, 2]);
    }

    #[test]
    fn a_batch_larger_than_the_journal_is_committed_with_a_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        store.commit(&submission(1)).unwrap();
        let mut big = submission(2);
        big.tasks[0].task.spec.params =
            serde_json::json!({ "blob": "x".repeat(super::super::journal::CAPACITY as usize) });
        store.commit(&big).unwrap();
        assert!(!store.unsettled(), "synced by redb, after a checkpoint");
        store.commit(&submission(3)).unwrap();
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        assert_eq!(ids(&RedbStore::open(&crashed).unwrap()), vec![1, 2, 3]);
    }
}
