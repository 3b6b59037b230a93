//! Opening the store file: created only when none exists (under a temporary name, then
//! linked into place), an existing one opened with redb's integrity check while it is
//! small, brought to the current layout, and redb's errors and panics on a damaged file
//! turned into a clear refusal that names it.
//!
//! Costs that grow with the file, and what is done about them (measured figures are in
//! docs/benchmarks.md):
//! - the integrity check on open reads every page (about 0.4 s per 0.5 GB), so it runs only
//!   on files up to [`CHECK_ON_OPEN_UP_TO`]; a larger file is opened without it (redb still
//!   verifies what it reads, and repairs after a crash);
//! - the repair after a crash walks every page too, unless the last commit used redb's
//!   quick repair, which makes it O(1) but a commit about 200 µs slower: commits use it
//!   once the file is larger than [`QUICK_REPAIR_FROM`], where a full repair would cost
//!   more than the restart target (1 s);
//! - redb's page cache is bounded to [`CACHE_BYTES`], so that reading a large store does not
//!   grow the daemon's memory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ::redb::{Database, DatabaseError, StorageError};

use super::checkpoint::Durable;
use super::journal::{self, Journal};
use super::layout::{self, Upgrade};
use super::{
    AUDIT, AUDIT_HEAD, BY_LABEL, BY_STATUS, COUNTS, EVENTS, META, NOTIFIERS, OUTBOX, OUTBOX_DUE,
    QUEUE, RedbStore, SCHEDULES, SETTINGS, TASKS, TEST_ENVS, WORKFLOW_COUNTS, WORKFLOW_STATUS,
    WORKFLOWS, backend,
};
use crate::store::StoreError;

/// The largest file checked page by page at open.
pub const CHECK_ON_OPEN_UP_TO: u64 = 64 << 20;

/// The file size from which commits use quick repair.
pub const QUICK_REPAIR_FROM: u64 = 64 << 20;

/// redb's page cache.
const CACHE_BYTES: usize = 16 << 20;

/// How many commits go by between two looks at the file's size.
const SIZE_CHECK_EVERY: u64 = 16;

/// Whether commits use redb's quick repair: from the moment the file is larger than
/// [`QUICK_REPAIR_FROM`] (looked at on open and every [`SIZE_CHECK_EVERY`] commits), for
/// good.
pub(super) struct QuickRepair {
    path: PathBuf,
    on: AtomicBool,
    commits: AtomicU64,
}

impl QuickRepair {
    fn new(path: &Path) -> QuickRepair {
        let quick = QuickRepair {
            path: path.to_path_buf(),
            on: AtomicBool::new(false),
            commits: AtomicU64::new(0),
        };
        quick.look();
        quick
    }

    /// Whether the next commit should use quick repair.
    pub(super) fn wanted(&self) -> bool {
        if !self.on.load(Ordering::Relaxed)
            && self
                .commits
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(SIZE_CHECK_EVERY)
        {
            self.look();
        }
        self.on.load(Ordering::Relaxed)
    }

    fn look(&self) {
        if file_size(&self.path) > QUICK_REPAIR_FROM {
            self.on.store(true, Ordering::Relaxed);
        }
    }
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

impl RedbStore {
    /// Opens the database at `path`, creating it only when no file exists there. An empty
    /// file, a file that is not a redb database, or one whose pages fail redb's integrity
    /// check is refused with [`StoreError::Unusable`] and left as it is; redb's own panics
    /// on a damaged file are caught and reported the same way.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        Ok(Self::open_replaying(path)?.0)
    }

    /// [`RedbStore::open`], with how many commits of its journal were applied again.
    pub fn open_replaying(path: &Path) -> Result<(RedbStore, usize), StoreError> {
        let db = match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_new(path)?;
                open_existing(path)?
            }
            Err(e) => return Err(backend(format!("cannot open {}: {e}", path.display()))),
            Ok(meta) if !meta.is_file() => return Err(unusable(path, "it is not a regular file")),
            Ok(meta) if meta.len() == 0 => {
                return Err(unusable(path, "it is empty (0 bytes), not a database"));
            }
            Ok(_) => open_existing(path)?,
        };
        ensure_tables(&db)?;
        match layout::upgrade(&db)? {
            Err(problem) => return Err(unusable(path, problem)),
            Ok(Upgrade::Migrated(from)) => tracing::info!(
                store = %path.display(),
                from,
                to = layout::CURRENT,
                "store layout migrated"
            ),
            Ok(Upgrade::Current) => {}
        }
        let quick_repair = QuickRepair::new(path);
        let journal_path = journal::path_of(path);
        let (journal, found) = Journal::open(&journal_path).map_err(|e| {
            backend(format!(
                "cannot open the store's journal {}: {e}",
                journal_path.display()
            ))
        })?;
        let (durable, replayed) = Durable::recover(&db, &quick_repair, journal, found)?;
        if replayed > 0 {
            tracing::info!(
                store = %path.display(),
                commits = replayed,
                "applied again the commits the journal held after the last checkpoint"
            );
        }
        let store = RedbStore {
            db,
            quick_repair,
            durable,
        };
        Ok((store, replayed))
    }
}

/// Every table, so that reads never meet a missing one.
fn ensure_tables(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(backend)?;
    txn.open_table(TASKS).map_err(backend)?;
    txn.open_table(BY_STATUS).map_err(backend)?;
    txn.open_table(BY_LABEL).map_err(backend)?;
    txn.open_table(QUEUE).map_err(backend)?;
    txn.open_table(COUNTS).map_err(backend)?;
    txn.open_table(EVENTS).map_err(backend)?;
    txn.open_table(AUDIT).map_err(backend)?;
    txn.open_table(AUDIT_HEAD).map_err(backend)?;
    txn.open_table(META).map_err(backend)?;
    txn.open_table(WORKFLOWS).map_err(backend)?;
    txn.open_table(WORKFLOW_STATUS).map_err(backend)?;
    txn.open_table(WORKFLOW_COUNTS).map_err(backend)?;
    txn.open_table(TEST_ENVS).map_err(backend)?;
    txn.open_table(SETTINGS).map_err(backend)?;
    txn.open_table(SCHEDULES).map_err(backend)?;
    txn.open_table(NOTIFIERS).map_err(backend)?;
    txn.open_table(OUTBOX).map_err(backend)?;
    txn.open_table(OUTBOX_DUE).map_err(backend)?;
    txn.commit().map_err(backend)
}

fn unusable(path: &Path, problem: impl Into<String>) -> StoreError {
    StoreError::Unusable {
        path: path.display().to_string(),
        problem: problem.into(),
    }
}

/// Creates a new database at `path`, which must not exist: initialized under a temporary
/// name and then linked into place, so that an interrupted creation never leaves a
/// half-made (or empty) file at `path`, and a file that appeared meanwhile is not replaced.
fn create_new(path: &Path) -> Result<(), StoreError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".new-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let cannot =
        |e: &dyn std::fmt::Display| backend(format!("cannot create {}: {e}", path.display()));
    let _ = std::fs::remove_file(&tmp);
    let created = Database::create(&tmp)
        .map_err(|e| cannot(&e))
        .and_then(|db| ensure_tables(&db))
        .and_then(|()| std::fs::hard_link(&tmp, path).map_err(|e| cannot(&e)));
    let _ = std::fs::remove_file(&tmp);
    created?;
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| cannot(&e))?;
    }
    Ok(())
}

/// Opens an existing database, with redb's integrity check (every page's checksum) when
/// it is at most [`CHECK_ON_OPEN_UP_TO`], and turns both redb's errors and its panics on a
/// damaged file into [`StoreError::Unusable`].
fn open_existing(path: &Path) -> Result<Database, StoreError> {
    let mut builder = Database::builder();
    builder.set_cache_size(CACHE_BYTES);
    builder.set_check_integrity_on_open(file_size(path) <= CHECK_ON_OPEN_UP_TO);
    let opened = without_panic_output(|| builder.open(path));
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(DatabaseError::DatabaseAlreadyOpen)) => Err(StoreError::AlreadyOpen {
            path: path.display().to_string(),
        }),
        Ok(Err(DatabaseError::Storage(StorageError::Io(e))))
            if e.kind() != std::io::ErrorKind::InvalidData =>
        {
            Err(backend(format!("cannot open {}: {e}", path.display())))
        }
        Ok(Err(e)) => Err(unusable(
            path,
            format!("it is not a readable redb database ({e})"),
        )),
        Err(panic) => Err(unusable(
            path,
            format!("it is corrupt (reading it failed: {panic})"),
        )),
    }
}

/// Runs `f`, catching a panic (as its message) without printing it: redb may panic on a
/// file damaged outside it. Used at start-up only, before other threads run.
fn without_panic_output<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}
