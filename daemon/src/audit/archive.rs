//! Compaction of the audit log into sealed segments, and the check of the whole log.
//!
//! A compaction, under [`Archive`]'s lock (one at a time, never during a check):
//! 1. removes files in `audit/` that no recorded segment owns (a crashed compaction's);
//! 2. walks the live log in one read, checking its chain from the newest segment's last
//!    hash to the head (a log that is not intact is never sealed), and writes the oldest
//!    entries the cut selects to a segment file, made durable under its name;
//! 3. in one transaction removes those entries, records the segment, and appends the
//!    checkpoint entry sealing it (its range, last hash, the file's SHA-256).
//!
//! Killed before 3 commits, the live log is as it was and the file is removed at the next
//! start; after, the entries are in the segment only.
//!
//! The check walks every segment file (its chain, its SHA-256 and size against its
//! checkpoint) then the live log to the head, as one chain from genesis, and holds the
//! list of segments to the checkpoint entries found on the way.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use orch_protocol::{Actor, AuditCut, AuditEntry, AuditReport, AuditSegment, SegmentSeal};

use super::AuditRecord;
use super::chain::{Broken, CHECKPOINT_ACTION, Chain, checkpoint_seal};
use super::segment::{self, SegmentError, Writer};
use crate::store::{Store, StoreError};

/// Why an archive operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A file of the archive could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// The live log is not intact, so it is not sealed into a segment.
    #[error(
        "the audit log is not intact ({0}); nothing was archived (`orch audit verify` shows the problem)"
    )]
    NotIntact(Broken),
    /// No segment holds the entry asked for.
    #[error("no archived segment holds audit entry {0}")]
    NoSegment(u64),
}

/// The archived segments of one data directory, over its store.
pub struct Archive {
    data_dir: PathBuf,
    dir: PathBuf,
    store: Arc<dyn Store>,
    /// Held by a compaction and a check, so that neither sees the other half done.
    lock: Mutex<()>,
}

impl Archive {
    /// The archive of `data_dir` (its `audit/` directory is created, mode 0700), with what
    /// an interrupted compaction left removed.
    pub fn open(data_dir: &Path, store: Arc<dyn Store>) -> Result<Archive, ArchiveError> {
        let dir = data_dir.join(segment::DIR);
        crate::files::create_private_dir(&dir).map_err(|error| ArchiveError::Io {
            path: dir.clone(),
            error,
        })?;
        let archive = Archive {
            data_dir: data_dir.to_path_buf(),
            dir,
            store,
            lock: Mutex::new(()),
        };
        archive.sweep(&archive.store.audit_segments()?)?;
        Ok(archive)
    }

    /// The archived segments, oldest first.
    pub fn segments(&self) -> Result<Vec<AuditSegment>, StoreError> {
        self.store.audit_segments()
    }

    /// The file of the segment that holds entry `seq`.
    pub fn holding(&self, seq: u64) -> Result<PathBuf, ArchiveError> {
        let segments = self.store.audit_segments()?;
        let segment = segments
            .iter()
            .find(|s| (s.seal.first..=s.seal.last).contains(&seq))
            .ok_or(ArchiveError::NoSegment(seq))?;
        Ok(self.path_of(&segment.seal))
    }

    /// Where a segment's file is (from its range, never from a stored path).
    fn path_of(&self, seal: &SegmentSeal) -> PathBuf {
        self.data_dir
            .join(segment::relative_name(seal.first, seal.last))
    }

    /// Removes what a compaction that did not commit left in `audit/`: temporary files,
    /// and segment files that are not among `segments` while their entries are still live.
    /// (A listed segment is never removed, nor an unlisted one whose entries left the live
    /// log: that is the list tampered with, and the file is what `verify` shows it by.)
    fn sweep(&self, segments: &[AuditSegment]) -> Result<(), ArchiveError> {
        let io = |error| ArchiveError::Io {
            path: self.dir.clone(),
            error,
        };
        let mut live_from = None;
        self.store.walk_audit(&mut |key, _| {
            live_from = Some(key);
            ControlFlow::Break(())
        })?;
        for item in std::fs::read_dir(&self.dir).map_err(io)? {
            let name = item.map_err(io)?.file_name();
            let name = name.to_string_lossy();
            let uncommitted = segment::range_of(&name).is_some_and(|(first, last)| {
                let listed = segments
                    .iter()
                    .any(|s| (s.seal.first, s.seal.last) == (first, last));
                !listed && live_from.is_some_and(|live| live <= first)
            });
            if uncommitted || segment::is_temporary(&name) {
                let path = self.dir.join(&*name);
                std::fs::remove_file(&path).map_err(io)?;
                tracing::info!(path = %path.display(), "removed a segment an interrupted compaction left");
            }
        }
        Ok(())
    }

    /// Archives the oldest live entries `cut` selects into a new segment sealed by a
    /// checkpoint entry recording `actor` (and the retention, for the daemon's own runs).
    /// `None` when there is nothing to archive but checkpoints (an idle log is not
    /// compacted again and again). Blocks: call it off the async runtime.
    pub fn compact(
        &self,
        cut: AuditCut,
        actor: Actor,
        retention: Option<&str>,
    ) -> Result<Option<AuditSegment>, ArchiveError> {
        let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let segments = self.store.audit_segments()?;
        self.sweep(&segments)?;
        let chain = match segments.last() {
            Some(newest) => Chain::after(newest.seal.last, &newest.seal.last_hash),
            None => Chain::from_genesis(),
        };
        let mut pending = Pending::new(&self.dir, cut, chain);
        let head = self
            .store
            .walk_audit(&mut |key, body| pending.take(key, body))?;
        let writer = pending.finish(head)?;
        let Some(writer) = writer else {
            return Ok(None);
        };
        let seal = writer.finish().map_err(|error| ArchiveError::Io {
            path: self.dir.clone(),
            error,
        })?;
        let mut params = serde_json::json!({ "archived": &seal, "before": cut });
        if let Some(retention) = retention {
            params["retention"] = retention.into();
        }
        let outcome = format!(
            "entries {}–{} archived to {}",
            seal.first, seal.last, seal.file
        );
        let checkpoint = AuditRecord::new(actor, CHECKPOINT_ACTION, params, Ok(outcome));
        Ok(Some(self.store.archive_audit(&seal, checkpoint)?))
    }

    /// Checks the whole log: every segment, then the live entries up to the head.
    /// Blocks: call it off the async runtime.
    pub fn verify(&self) -> Result<AuditReport, StoreError> {
        let _held = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let segments = self.store.audit_segments()?;
        let mut report = AuditReport {
            segments: segments.clone(),
            ..AuditReport::default()
        };
        let mut chain = Chain::from_genesis();
        let outcome = self.verify_segments(&segments, &mut chain, &mut report);
        let outcome = match outcome {
            Ok(()) => self.verify_live(&mut chain, &mut report)?,
            Err(broken) => Err(broken),
        };
        let outcome = outcome.and_then(|()| sealed_by_checkpoints(&segments, &chain));
        match outcome {
            Ok(()) => report.intact = true,
            Err(broken) => {
                report.bad_seq = Some(broken.seq);
                report.problem = Some(broken.problem);
            }
        }
        Ok(report)
    }

    fn verify_segments(
        &self,
        segments: &[AuditSegment],
        chain: &mut Chain,
        report: &mut AuditReport,
    ) -> Result<(), Broken> {
        for segment in segments {
            let before = chain.checked();
            let checked = self.verify_segment(&segment.seal, chain);
            report.archived += chain.checked() - before;
            checked?;
        }
        Ok(())
    }

    /// Checks one segment's file against what its checkpoint sealed.
    fn verify_segment(&self, seal: &SegmentSeal, chain: &mut Chain) -> Result<(), Broken> {
        let name = segment::relative_name(seal.first, seal.last);
        let wrong = |problem: String| Broken::at(seal.first, format!("segment {name}: {problem}"));
        if seal.file != name {
            return Err(wrong(format!(
                "its record names the file {:?}: the list of segments was changed",
                seal.file
            )));
        }
        let contents = segment::check(&self.path_of(seal), chain).map_err(|e| match e {
            SegmentError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                wrong("the file is missing".into())
            }
            SegmentError::Io(e) => wrong(format!("the file cannot be read: {e}")),
            SegmentError::Broken(b) => {
                Broken::at(b.seq, format!("in segment {name}: {}", b.problem))
            }
        })?;
        if contents.sha256 != seal.sha256 || contents.bytes != seal.bytes {
            return Err(wrong(format!(
                "the file was changed (its SHA-256 is {}, its checkpoint sealed {})",
                contents.sha256, seal.sha256
            )));
        }
        if (contents.first, contents.last.0) != (seal.first, seal.last) {
            return Err(wrong(format!(
                "it holds entries {}–{}",
                contents.first, contents.last.0
            )));
        }
        Ok(())
    }

    /// Passes the live entries to `chain` and checks its end against the head.
    fn verify_live(
        &self,
        chain: &mut Chain,
        report: &mut AuditReport,
    ) -> Result<Result<(), Broken>, StoreError> {
        let before = chain.checked();
        let mut broken = None;
        let head = self
            .store
            .walk_audit(&mut |key, body| match chain.push_json(key, body) {
                Ok(_) => ControlFlow::Continue(()),
                Err(b) => {
                    broken = Some(b);
                    ControlFlow::Break(())
                }
            })?;
        report.entries = chain.checked() - before;
        Ok(match broken {
            Some(b) => Err(b),
            None => chain.end(head),
        })
    }
}

/// Every checkpoint met names a listed segment as it is listed, and every listed segment
/// was sealed by a checkpoint met.
fn sealed_by_checkpoints(segments: &[AuditSegment], chain: &Chain) -> Result<(), Broken> {
    let checkpoints = chain.checkpoints();
    for (seq, seal) in checkpoints {
        let listed = segments.iter().find(|s| s.seal.first == seal.first);
        match listed {
            Some(s) if s.seal == *seal && s.checkpoint == *seq => {}
            Some(_) => {
                return Err(Broken::at(
                    *seq,
                    format!(
                        "checkpoint entry {seq} sealed {} differently from the list of segments: the list was changed",
                        seal.file
                    ),
                ));
            }
            None => {
                return Err(Broken::at(
                    *seq,
                    format!(
                        "checkpoint entry {seq} archived entries {}–{} to {}, which is not in the list of segments",
                        seal.first, seal.last, seal.file
                    ),
                ));
            }
        }
    }
    match segments
        .iter()
        .find(|s| !checkpoints.iter().any(|(seq, _)| *seq == s.checkpoint))
    {
        Some(s) => Err(Broken::at(
            s.seal.first,
            format!(
                "segment {} is not sealed by any checkpoint entry: the list of segments was changed",
                s.seal.file
            ),
        )),
        None => Ok(()),
    }
}

/// The entries below a cut.
fn below(cut: AuditCut, entry: &AuditEntry) -> bool {
    match cut {
        AuditCut::Seq(seq) => entry.seq < seq,
        AuditCut::Time(at) => entry.at < at,
    }
}

/// A compaction's walk of the live log: its chain checked, the oldest run of entries
/// below the cut written to a segment.
struct Pending<'a> {
    dir: &'a Path,
    cut: AuditCut,
    chain: Chain,
    writer: Option<Writer>,
    /// Still in the oldest run of entries below the cut.
    taking: bool,
    /// Whether an entry other than a checkpoint was taken.
    worth_it: bool,
    failure: Option<ArchiveError>,
}

impl<'a> Pending<'a> {
    fn new(dir: &'a Path, cut: AuditCut, chain: Chain) -> Pending<'a> {
        Pending {
            dir,
            cut,
            chain,
            writer: None,
            taking: true,
            worth_it: false,
            failure: None,
        }
    }

    /// Takes the entry stored under `key`.
    fn take(&mut self, key: u64, body: &[u8]) -> ControlFlow<()> {
        let entry = match self.chain.push_json(key, body) {
            Ok(entry) => entry,
            Err(broken) => return self.fail(ArchiveError::NotIntact(broken)),
        };
        self.taking &= below(self.cut, &entry);
        if !self.taking {
            return ControlFlow::Continue(());
        }
        self.worth_it |= !matches!(checkpoint_seal(&entry), Ok(Some(_)));
        let written = match &mut self.writer {
            Some(writer) => writer.push(&entry, body),
            None => Writer::create(self.dir, entry.seq)
                .and_then(|writer| self.writer.insert(writer).push(&entry, body)),
        };
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => self.fail(ArchiveError::Io {
                path: self.dir.to_path_buf(),
                error,
            }),
        }
    }

    fn fail(&mut self, failure: ArchiveError) -> ControlFlow<()> {
        self.failure = Some(failure);
        ControlFlow::Break(())
    }

    /// The segment to seal, once the whole live log was found intact up to `head`.
    fn finish(self, head: Option<(u64, String)>) -> Result<Option<Writer>, ArchiveError> {
        if let Some(failure) = self.failure {
            return Err(failure);
        }
        self.chain.end(head).map_err(ArchiveError::NotIntact)?;
        Ok(self.writer.filter(|_| self.worth_it))
    }
}
