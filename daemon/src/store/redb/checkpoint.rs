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

use super::journal::{Found, Journal, Position};
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
    state: Mutex<State>,
}

struct State {
    journal: Journal,
    /// Why nothing more may be written, once the store may hold a batch its caller was
    /// told failed, or a checkpoint failed: later commits fail, and the journal is left
    /// for the next open to apply (no checkpoint at close).
    poisoned: Option<String>,
}

impl Durable {
    /// Applies what `found` (the journal as opened) holds after redb's last durable
    /// commit, in one durable transaction, and starts a new epoch of the journal. A store
    /// file older than the position its journal starts from is refused; a journal of
    /// another store, or older than the store file, is not applied.
    pub fn recover(
        db: &Database,
        quick_repair: &QuickRepair,
        mut journal: Journal,
        found: Found,
    ) -> Result<(Durable, usize), StoreError> {
        let shown = journal.path().display().to_string();
        if found.damaged_header {
            tracing::warn!(journal = %shown, "the store's journal has a damaged header: commits made after the last checkpoint may be lost");
        }
        let (id, position) = position(db)?;
        if found.created && id != 0 {
            tracing::warn!(journal = %shown, "the store's journal was missing: commits made after its last checkpoint, if any, are lost");
        }
        let id = match id {
            0 => new_id(db, quick_repair)?,
            id => id,
        };
        let epoch = found.epoch;
        let pending: Vec<(u64, Vec<u8>)> = if epoch.store != id {
            if !found.records.is_empty() {
                tracing::warn!(journal = %shown, records = found.records.len(), "the journal belongs to another store file: it is not applied to this one");
            }
            Vec::new()
        } else if position == epoch.base {
            found.records
        } else if position.0 == epoch.number {
            let applied = position.1;
            found
                .records
                .into_iter()
                .filter(|(n, _)| *n > applied)
                .collect()
        } else if position > (epoch.number, 0) {
            tracing::warn!(journal = %shown, "the journal is older than the store file: it is not applied");
            Vec::new()
        } else {
            return Err(StoreError::Unusable {
                path: shown,
                problem: format!(
                    "the store file is older than its journal (it has applied epoch {} up to record {}, the journal starts after epoch {} record {}): it was restored or copied without its journal. Restore both files together, or move the journal aside to open the store as the file has it",
                    position.0, position.1, epoch.base.0, epoch.base.1
                ),
            });
        };
        let mut reached = position;
        let replayed = pending.len();
        if replayed > 0 {
            let txn = durable_txn(db, quick_repair)?;
            for (number, body) in pending {
                let record: Read =
                    serde_json::from_slice(&body).map_err(|e| StoreError::Unusable {
                        path: shown.clone(),
                        problem: format!(
                            "its record {number} of epoch {} cannot be read by this daemon ({e})",
                            epoch.number
                        ),
                    })?;
                write::apply(&txn, &record.batch, record.at).map_err(backend)?;
                set_position(&txn, (epoch.number, number))?;
                reached = (epoch.number, number);
            }
            txn.commit().map_err(backend)?;
        }
        let next = position.0.max(epoch.number) + 1;
        journal
            .start_epoch(id, next, reached)
            .map_err(|e| journal_error(&journal, &e))?;
        let state = State {
            journal,
            poisoned: None,
        };
        Ok((
            Durable {
                state: Mutex::new(state),
            },
            replayed,
        ))
    }

    /// Commits `batch`: journaled and durable, then committed by redb without a sync. A
    /// batch too large for the journal is committed by redb with a sync; a checkpoint that
    /// comes due is made at once. Once its record is durable the batch is committed: a
    /// failure after that poisons the store (later commits fail) rather than this commit,
    /// unless the record could be taken back.
    pub fn commit(
        &self,
        db: &Database,
        quick_repair: &QuickRepair,
        batch: &WriteBatch,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        if let Some(why) = &state.poisoned {
            return Err(StoreError::Backend(format!("not written: {why}")));
        }
        let at = Utc::now();
        let Some(body) = journal_record(at, batch) else {
            return state.commit_synced(db, quick_repair, batch, at);
        };
        if !state.journal.fits(body.len()) {
            state.checkpoint(db, quick_repair)?;
        }
        if let Err(e) = state.journal.append(&body) {
            // A failed sync may yet have written it: blank it, or the store is in doubt.
            let error = journal_error(&state.journal, &e);
            if let Err(blank) = state.journal.blank_failed_append() {
                state.poison(StoreError::Backend(format!(
                    "a journal record that failed ({error}) could not be blanked ({blank}): the next open may apply it"
                )));
            }
            return Err(error);
        }
        let position = (state.journal.epoch().number, state.journal.last());
        let applied = (|| {
            let mut txn = db.begin_write().map_err(backend)?;
            txn.set_durability(Durability::None).map_err(backend)?;
            write::apply(&txn, batch, at).map_err(backend)?;
            set_position(&txn, position)?;
            txn.commit().map_err(backend)
        })();
        if let Err(error) = applied {
            state.take_back(body.len(), &error);
            return Err(error);
        }
        if state.journal.due() {
            state.checkpoint_after_commit(db, quick_repair);
        }
        Ok(())
    }

    /// Whether redb holds commits it has not synced (a checkpoint would sync them).
    pub fn unsettled(&self) -> bool {
        let state = self.lock();
        state.poisoned.is_none() && state.journal.holds_records()
    }

    /// Makes a checkpoint when redb holds commits it has not synced (not once poisoned:
    /// the journal is then left for the next open).
    pub fn settle(&self, db: &Database, quick_repair: &QuickRepair) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.poisoned.is_none() && state.journal.holds_records() {
            state.checkpoint(db, quick_repair)?;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    /// A batch larger than the journal, committed by redb with a sync (which also syncs
    /// what the journal holds: the position says none of it is left to apply), after
    /// which the journal starts over as after a checkpoint.
    fn commit_synced(
        &mut self,
        db: &Database,
        quick_repair: &QuickRepair,
        batch: &WriteBatch,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let position = (self.journal.epoch().number, self.journal.last());
        let txn = durable_txn(db, quick_repair)?;
        write::apply(&txn, batch, at).map_err(backend)?;
        set_position(&txn, position)?;
        txn.commit().map_err(|e| self.poison(backend(e)))?;
        if let Err(e) = self.next_epoch(position) {
            self.poison(e);
        }
        Ok(())
    }

    /// Has redb sync everything it committed, then starts a new epoch of the journal. A
    /// crash between the two leaves the old epoch's records, which redb has all applied.
    /// A failure poisons the store.
    fn checkpoint(&mut self, db: &Database, quick_repair: &QuickRepair) -> Result<(), StoreError> {
        let position = (self.journal.epoch().number, self.journal.last());
        let synced = durable_txn(db, quick_repair)
            .and_then(|txn| txn.commit().map_err(backend))
            .and_then(|()| self.next_epoch(position));
        synced.map_err(|e| self.poison(e))
    }

    /// [`State::checkpoint`] due after a batch committed: its failure is not the batch's
    /// (it is durable) but poisons the store for the next ones.
    fn checkpoint_after_commit(&mut self, db: &Database, quick_repair: &QuickRepair) {
        if let Err(e) = self.checkpoint(db, quick_repair) {
            tracing::error!(error = %e, "a checkpoint of the store failed: nothing more is written");
        }
    }

    /// Starts the journal's next epoch, from `position`, which redb has synced.
    fn next_epoch(&mut self, position: Position) -> Result<(), StoreError> {
        let epoch = self.journal.epoch();
        self.journal
            .start_epoch(epoch.store, epoch.number + 1, position)
            .map_err(|e| journal_error(&self.journal, &e))
    }

    /// Takes back the last record appended (of `len` bytes), whose batch redb failed to
    /// apply; when that fails too, the store is in doubt: poisoned.
    fn take_back(&mut self, len: usize, why: &StoreError) {
        if let Err(e) = self.journal.retract_last(len) {
            self.poison(StoreError::Backend(format!(
                "a batch that failed ({why}) could not be taken back from the journal ({e}): the next open may apply it"
            )));
        }
    }

    /// Poisons the store with `error` (logged); returns it.
    fn poison(&mut self, error: StoreError) -> StoreError {
        tracing::error!(%error, "the store takes no more writes");
        self.poisoned.get_or_insert_with(|| error.to_string());
        error
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

/// A write transaction that syncs when it commits (with quick repair as `quick_repair`
/// wants).
fn durable_txn(db: &Database, quick_repair: &QuickRepair) -> Result<WriteTransaction, StoreError> {
    let mut txn = db.begin_write().map_err(backend)?;
    txn.set_durability(Durability::Immediate).map_err(backend)?;
    txn.set_quick_repair(quick_repair.wanted());
    Ok(txn)
}

/// The store's journal id (0: none yet), and the position of the last batch redb applied.
fn position(db: &Database) -> Result<(u64, Position), StoreError> {
    use ::redb::ReadableDatabase as _;
    let txn = db.begin_read().map_err(backend)?;
    let meta = txn.open_table(META).map_err(backend)?;
    let get = |key| -> Result<u64, StoreError> {
        Ok(meta.get(key).map_err(backend)?.map_or(0, |v| v.value()))
    };
    Ok((
        get(JOURNAL_ID)?,
        (get(JOURNAL_EPOCH)?, get(JOURNAL_RECORD)?),
    ))
}

/// Gives the store a journal id (random, never 0), durably.
fn new_id(db: &Database, quick_repair: &QuickRepair) -> Result<u64, StoreError> {
    let id = fastrand::u64(1..);
    let txn = durable_txn(db, quick_repair)?;
    txn.open_table(META)
        .map_err(backend)?
        .insert(JOURNAL_ID, id)
        .map_err(backend)?;
    txn.commit().map_err(backend)?;
    Ok(id)
}

/// Records in `txn` that it applies the batch at `position`.
fn set_position(txn: &WriteTransaction, (epoch, number): Position) -> Result<(), StoreError> {
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
    use super::super::journal::{Journal, path_of};
    use crate::audit::AuditRecord;
    use crate::store::StoreError;
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
    fn a_store_file_older_than_its_journal_is_refused_and_an_older_journal_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        store.commit(&submission(1)).unwrap();
        let old_file = dir.path().join("old.redb");
        std::fs::copy(&path, &old_file).unwrap();
        let old_journal = dir.path().join("old.journal");
        std::fs::copy(path_of(&path), &old_journal).unwrap();
        store.settle().unwrap();
        store.commit(&submission(2)).unwrap();
        store.settle().unwrap();
        store.commit(&submission(3)).unwrap();
        // The file as it was before the checkpoints, with today's journal: refused.
        let restored = dir.path().join("restored.redb");
        std::fs::copy(&old_file, &restored).unwrap();
        std::fs::copy(path_of(&path), path_of(&restored)).unwrap();
        let error = RedbStore::open(&restored).err().unwrap();
        assert!(
            matches!(&error, StoreError::Unusable { problem, .. } if problem.contains("older than its journal")),
            "{error}"
        );
        // Today's file with the journal as it was: not applied (the file has it all).
        let newer = dir.path().join("newer.redb");
        std::fs::copy(&path, &newer).unwrap();
        std::fs::copy(&old_journal, path_of(&newer)).unwrap();
        assert_eq!(ids(&RedbStore::open(&newer).unwrap()), vec![1, 2]);
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
    fn a_batch_larger_than_a_journal_record_is_committed_with_a_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let store = RedbStore::open(&path).unwrap();
        store.commit(&submission(1)).unwrap();
        let mut big = submission(2);
        big.tasks[0].task.spec.params =
            serde_json::json!({ "blob": "x".repeat(Journal::largest_record()) });
        store.commit(&big).unwrap();
        assert!(
            !store.unsettled(),
            "synced by redb, the journal started over"
        );
        store.commit(&submission(3)).unwrap();
        let crashed = dir.path().join("crashed.redb");
        crash_copy(&path, &crashed);
        assert_eq!(ids(&RedbStore::open(&crashed).unwrap()), vec![1, 2, 3]);
    }
}
