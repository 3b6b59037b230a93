//! `provisioning-orchestrator migrate --from A --to B`: copies a whole store into an empty
//! one, offline, and checks the copy. A and B are each a data directory (its redb file) or
//! a `postgres://` URL, so a store moves from redb to PostgreSQL and back.
//!
//! What is copied: every task (removed ids stay taken), workflow, test environment and
//! logged event (with the event retention's mark), and the audit log as it is stored, so
//! that its chain and hashes are unchanged; the list of archived audit segments too. The
//! task logs and the archived segments' files stay in the data directory: a daemon on the
//! new store is started on the same one.
//!
//! The copy is checked against the source record by record (tasks page by page through the
//! id index, workflows, environments, events, the audit entries byte for byte and their
//! chain's links, the counts), and the tool says so in a JSON report; a difference is an
//! error. The target is marked as a migration's until then, and a daemon refuses a store
//! so marked (a copy that failed midway holds only part of its source). Both stores must
//! be closed: a daemon holds its redb file, and a PostgreSQL database its daemon's lock,
//! so a store in use is refused. The sides are told apart and opened in `place`.

use std::io::Write as _;
use std::ops::ControlFlow;
use std::process::ExitCode;

use orch_protocol::{Event, Task, TaskFilter};

use crate::store::{Snapshot, Store, StoreError, TaskWrite, WriteBatch};

pub(crate) mod check;
mod place;
#[cfg(test)]
pub(crate) mod tests;

pub use place::Place;

/// Records per transaction of the copy.
const BATCH: usize = 2_000;

/// Why a migration did not happen, or its copy is not the source.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// A side cannot be opened or read, or the copy cannot be written.
    #[error("{side}: {error}")]
    Store {
        /// Which side, as [`Place::describe`] shows it.
        side: String,
        /// What failed.
        error: StoreError,
    },
    /// The target holds something already.
    #[error(
        "{0} is not empty ({1}); migrate only into an empty store: a new database, or a new data directory (what a migration stopped midway left: drop and create the database again, or remove the directory)"
    )]
    NotEmpty(String, String),
    /// The copy differs from the source.
    #[error("the copy differs from the source: {0}")]
    Differs(String),
    /// A side's name is neither a URL nor a directory.
    #[error("{0}")]
    Place(String),
}

impl MigrateError {
    /// A store failure on `side` (for `map_err`).
    pub(crate) fn on(side: &str) -> impl Fn(StoreError) -> MigrateError + '_ {
        move |error| MigrateError::Store {
            side: side.to_string(),
            error,
        }
    }
}

/// What was copied, as the tool reports it.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    /// Tasks.
    pub tasks: u64,
    /// Workflows.
    pub workflows: u64,
    /// Test environments.
    pub test_envs: u64,
    /// Logged events.
    pub events: u64,
    /// Live audit entries.
    pub audit_entries: u64,
    /// Archived audit segments (their records; the files stay in the data directory).
    pub audit_segments: u64,
    /// The highest id taken.
    pub last_id: u64,
}

/// The `migrate` tool: opens both sides, copies, checks, and prints the JSON report (or
/// the error on stderr, exiting 1).
pub fn run(from: &str, to: &str) -> ExitCode {
    let outcome = Place::parse("--from", from).and_then(|from| {
        let to = Place::parse("--to", to)?;
        if from.same_as(&to) {
            return Err(MigrateError::Place(format!(
                "--from and --to are the same store ({}): migrate into another, empty one",
                to.describe()
            )));
        }
        let source = from.open(false)?;
        let target = to.open(true)?;
        let copied = migrate(source.as_ref(), target.as_ref(), &to.describe())?;
        Ok((from, to, copied))
    });
    match outcome {
        Ok((from, to, copied)) => {
            let report = serde_json::json!({
                "from": from.describe(),
                "to": to.describe(),
                "copied": copied,
                "verified": true,
            });
            // A closed stdout (`| head`) loses the report, not the finished migration.
            let _ = writeln!(std::io::stdout(), "{report:#}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("provisioning-orchestrator migrate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Copies `source` into the empty `target` (named `target_name` in errors), then checks
/// the copy against the source.
pub fn migrate(
    source: &dyn Store,
    target: &dyn Store,
    target_name: &str,
) -> Result<Copied, MigrateError> {
    let read = MigrateError::on("the source");
    let write = MigrateError::on(target_name);
    let target_snapshot = target.load().map_err(&write)?;
    if let Some(what) = contents(target, &target_snapshot).map_err(&write)? {
        return Err(MigrateError::NotEmpty(target_name.to_string(), what));
    }
    let snapshot = source.load().map_err(&read)?;
    if snapshot.migration_underway {
        return Err(MigrateError::Place(
            "the source holds an unfinished migration (only part of its own source): migrate from that one instead".into(),
        ));
    }
    if contents(source, &snapshot).map_err(&read)?.is_none() {
        return Err(MigrateError::Place(
            "the source is empty: nothing to migrate (is it the right store?)".into(),
        ));
    }
    // Marked first: a daemon refuses the target until the copy is complete and checked.
    let underway = |on| WriteBatch {
        migration_underway: Some(on),
        ..WriteBatch::default()
    };
    target.commit(&underway(true)).map_err(&write)?;
    let mut copied = Copied::default();
    copy_tasks(source, target, target_name, &mut copied)?;
    let workflows = source.workflows(None, usize::MAX).map_err(&read)?;
    copied.workflows = workflows.len() as u64;
    copied.test_envs = snapshot.test_envs.len() as u64;
    copied.last_id = snapshot.last_task_id;
    for chunk in workflows.chunks(BATCH) {
        let batch = WriteBatch {
            workflows: chunk.to_vec(),
            ..WriteBatch::default()
        };
        target.commit(&batch).map_err(&write)?;
    }
    let batch = WriteBatch {
        test_envs: snapshot.test_envs,
        controls: Some(snapshot.controls),
        schedules: snapshot.schedules,
        notifiers: snapshot.notifiers,
        outbox: source.outbox(usize::MAX).map_err(&read)?,
        ids_used_through: Some(snapshot.last_task_id),
        events_removed_through: Some(source.events_removed_through().map_err(&read)?)
            .filter(|&through| through > 0),
        ..WriteBatch::default()
    };
    target.commit(&batch).map_err(&write)?;
    copied.events = copy_events(source, target, target_name)?;
    let (entries, head) = audit_of(source).map_err(&read)?;
    let segments = source.audit_segments().map_err(&read)?;
    copied.audit_entries = entries.len() as u64;
    copied.audit_segments = segments.len() as u64;
    target
        .import_audit(&entries, &segments, &head)
        .map_err(&write)?;
    check::same(source, target)?;
    target.commit(&underway(false)).map_err(&write)?;
    Ok(copied)
}

/// Copies every task, page by page through the id index (newest first).
fn copy_tasks(
    source: &dyn Store,
    target: &dyn Store,
    target_name: &str,
    copied: &mut Copied,
) -> Result<(), MigrateError> {
    let mut pages = TaskPages::new();
    while let Some(page) = pages.next(source, "the source")? {
        copied.tasks += page.len() as u64;
        let batch = WriteBatch {
            tasks: page
                .into_iter()
                .map(|task| TaskWrite {
                    task,
                    previous: None,
                    reindex: None,
                })
                .collect(),
            ..WriteBatch::default()
        };
        target
            .commit(&batch)
            .map_err(MigrateError::on(target_name))?;
    }
    Ok(())
}

/// Every task of a store, [`BATCH`] at a time, newest first (through the id index).
pub(crate) struct TaskPages {
    before: Option<u64>,
}

impl TaskPages {
    /// From the newest task.
    pub(crate) fn new() -> TaskPages {
        TaskPages { before: None }
    }

    /// The next page from the same position of `store` (named `side` in errors); `None`
    /// after the oldest task.
    pub(crate) fn next(
        &mut self,
        store: &dyn Store,
        side: &str,
    ) -> Result<Option<Vec<Task>>, MigrateError> {
        let filter = TaskFilter {
            limit: Some(BATCH),
            before: self.before,
            ..TaskFilter::default()
        };
        let page = store.list(&filter).map_err(MigrateError::on(side))?;
        Ok(page.last().map(|last| last.id).map(|last| {
            self.before = Some(last);
            page
        }))
    }
}

/// Copies the logged events in order; returns how many.
fn copy_events(
    source: &dyn Store,
    target: &dyn Store,
    target_name: &str,
) -> Result<u64, MigrateError> {
    let mut pages = EventPages::default();
    let mut count = 0;
    while let Some(events) = pages.next(source, "the source")? {
        count += events.len() as u64;
        let batch = WriteBatch {
            events,
            ..WriteBatch::default()
        };
        target
            .commit(&batch)
            .map_err(MigrateError::on(target_name))?;
    }
    Ok(count)
}

/// Every logged event of a store, [`BATCH`] at a time, oldest first.
#[derive(Default)]
pub(crate) struct EventPages {
    after: u64,
}

impl EventPages {
    /// The next page from the same position of `store` (named `side` in errors); `None`
    /// after the newest event.
    pub(crate) fn next(
        &mut self,
        store: &dyn Store,
        side: &str,
    ) -> Result<Option<Vec<Event>>, MigrateError> {
        let page = store
            .events_after(self.after, BATCH)
            .map_err(MigrateError::on(side))?;
        Ok(page.last().map(|last| last.seq).map(|last| {
            self.after = last;
            page
        }))
    }
}

/// Live audit entries as stored: each one's key and JSON.
pub(crate) type StoredEntries = Vec<(u64, Vec<u8>)>;

/// The live audit entries and the head, from one read.
pub(crate) fn audit_of(
    store: &dyn Store,
) -> Result<(StoredEntries, crate::store::audit::AuditHead), StoreError> {
    let mut entries = Vec::new();
    let head = store.walk_audit(&mut |seq, body| {
        entries.push((seq, body.to_vec()));
        ControlFlow::Continue(())
    })?;
    Ok((entries, head))
}

/// What `store` (whose snapshot is `snapshot`) holds, described, or `None` when it is
/// empty.
fn contents(store: &dyn Store, snapshot: &Snapshot) -> Result<Option<String>, StoreError> {
    let tasks: u64 = store.count_by_status()?.iter().map(|(_, n)| n).sum();
    let workflows: u64 = store
        .count_workflows_by_status()?
        .iter()
        .map(|(_, n)| n)
        .sum();
    let audit = store.walk_audit(&mut |_, _| ControlFlow::Break(()))?;
    let held = [
        (tasks, "tasks"),
        (workflows, "workflows"),
        (snapshot.test_envs.len() as u64, "test environments"),
        (store.last_event_seq()?, "events"),
        (u64::from(audit.is_some()), "an audit log"),
        (snapshot.last_task_id, "ids taken"),
        (
            u64::from(snapshot.migration_underway),
            "an unfinished migration",
        ),
    ];
    let found: Vec<String> = held
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{what}: {n}"))
        .collect();
    Ok((!found.is_empty()).then(|| found.join(", ")))
}
