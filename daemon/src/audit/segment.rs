//! Segment files: archived audit entries `first..=last`, one per line, each exactly as the
//! live log stored it (JSON), in `audit/segment-<first>-<last>.jsonl` of the data directory.
//!
//! A segment is written to a temporary file (mode 0600) beside it, synced, renamed into
//! place and the directory synced, so a file under a segment's name is always complete; a
//! temporary file left by a crash is removed by the next start. Reading streams the file
//! line by line (each line bounded), hashing it on the way.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use orch_protocol::{AuditEntry, SegmentSeal};
use sha2::{Digest, Sha256};

use super::chain::{Broken, Chain};
use super::hex;

/// The directory of segments, in the data directory.
pub const DIR: &str = "audit";

/// The longest line a segment may hold (an entry is far smaller: recorded parameters are
/// summarized past 64 KiB, and a request is at most one frame).
const MAX_LINE: u64 = orch_protocol::MAX_FRAME_LEN as u64 + 4096;

/// The suffix of a segment being written.
const TEMPORARY: &str = ".jsonl.tmp";

/// A segment's file name, relative to the data directory (`audit/segment-1-40.jsonl`).
pub fn relative_name(first: u64, last: u64) -> String {
    format!("{DIR}/{}", file_name(first, last))
}

/// A segment's file name in [`DIR`].
fn file_name(first: u64, last: u64) -> String {
    format!("segment-{first}-{last}.jsonl")
}

/// The range a segment's file name (in [`DIR`]) says it holds.
pub fn range_of(name: &str) -> Option<(u64, u64)> {
    let range = name.strip_prefix("segment-")?.strip_suffix(".jsonl")?;
    let (first, last) = range.split_once('-')?;
    let range = (first.parse().ok()?, last.parse().ok()?);
    (file_name(range.0, range.1) == name).then_some(range)
}

/// Whether a file name in [`DIR`] is a segment being written (or left by a crash).
pub fn is_temporary(name: &str) -> bool {
    name.starts_with("segment-") && name.ends_with(TEMPORARY)
}

/// The paths `make_data_private` tightens: the `audit/` directory and its files.
pub fn private_paths(data_dir: &Path) -> Vec<PathBuf> {
    let dir = data_dir.join(DIR);
    let mut paths = vec![dir.clone()];
    if let Ok(items) = std::fs::read_dir(&dir) {
        paths.extend(items.filter_map(|item| Some(item.ok()?.path())));
    }
    paths
}

/// A segment being written. Dropped before [`Writer::finish`], it removes its temporary
/// file.
pub struct Writer {
    dir: PathBuf,
    tmp: PathBuf,
    file: BufWriter<File>,
    hasher: Sha256,
    bytes: u64,
    first: u64,
    last: Option<(u64, String)>,
}

impl Writer {
    /// Starts the segment whose first entry is `first`, in `dir` ([`DIR`] of the data
    /// directory).
    pub fn create(dir: &Path, first: u64) -> std::io::Result<Writer> {
        let tmp = dir.join(format!("segment-{first}{TEMPORARY}"));
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        Ok(Writer {
            dir: dir.to_path_buf(),
            tmp,
            file: BufWriter::new(file),
            hasher: Sha256::new(),
            bytes: 0,
            first,
            last: None,
        })
    }

    /// Appends `entry`, whose stored form is `body`.
    pub fn push(&mut self, entry: &AuditEntry, body: &[u8]) -> std::io::Result<()> {
        for part in [body, b"\n"] {
            self.file.write_all(part)?;
            self.hasher.update(part);
            self.bytes += part.len() as u64;
        }
        self.last = Some((entry.seq, entry.hash.clone()));
        Ok(())
    }

    /// Makes the segment durable under its name and returns what a checkpoint seals.
    pub fn finish(mut self) -> std::io::Result<SegmentSeal> {
        let (last, last_hash) = self
            .last
            .take()
            .ok_or_else(|| std::io::Error::other("a segment needs at least one entry"))?;
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        let path = self.dir.join(file_name(self.first, last));
        std::fs::rename(&self.tmp, &path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(SegmentSeal {
            file: relative_name(self.first, last),
            first: self.first,
            last,
            last_hash,
            sha256: hex(&std::mem::take(&mut self.hasher).finalize()),
            bytes: self.bytes,
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // After `finish` the temporary file has been renamed: this finds nothing.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Why a segment file could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// It cannot be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Its chain is broken.
    #[error("{0}")]
    Broken(#[from] Broken),
}

/// What a segment file holds, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// Its first entry.
    pub first: u64,
    /// Its last entry and that entry's hash.
    pub last: (u64, String),
    /// How many entries.
    pub entries: u64,
    /// SHA-256 of the file.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
}

/// Reads the segment at `path`, passing each entry to `chain`.
pub fn check(path: &Path, chain: &mut Chain) -> Result<Contents, SegmentError> {
    let mut reader = BufReader::new(File::open(path)?);
    let mut hasher = Sha256::new();
    let (mut bytes, mut first, mut entries) = (0u64, None, 0u64);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .by_ref()
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        hasher.update(&line);
        bytes += read as u64;
        let position = entries + 1;
        let body = line.strip_suffix(b"\n").ok_or_else(|| {
            let problem = format!("line {position} is cut short or longer than {MAX_LINE} bytes");
            Broken::at(chain.last().map_or(0, |(seq, _)| seq + 1), problem)
        })?;
        let entry: AuditEntry = serde_json::from_slice(body).map_err(|e| {
            let seq = chain.last().map_or(0, |(seq, _)| seq + 1);
            Broken::at(seq, format!("line {position} is not an audit entry: {e}"))
        })?;
        chain.push(entry.seq, &entry)?;
        first.get_or_insert(entry.seq);
        entries += 1;
    }
    let (Some(first), Some((last, hash))) = (first, chain.last()) else {
        return Err(Broken::at(0, "the file holds no entries").into());
    };
    Ok(Contents {
        first,
        last: (last, hash.to_string()),
        entries,
        sha256: hex(&hasher.finalize()),
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditRecord, GENESIS, seal};
    use orch_protocol::Actor;

    fn entries(n: u64) -> Vec<AuditEntry> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let actor = Actor {
                    uid: 0,
                    interface: "socket".into(),
                };
                let params = serde_json::json!({ "n": seq });
                let record = AuditRecord::new(actor, "cancel", params, Ok("ok".into()));
                let entry = seal(record, seq, chrono::Utc::now(), &prev);
                prev = entry.hash.clone();
                entry
            })
            .collect()
    }

    fn write(dir: &Path, entries: &[AuditEntry]) -> SegmentSeal {
        let mut writer = Writer::create(dir, entries[0].seq).unwrap();
        for entry in entries {
            writer
                .push(entry, &serde_json::to_vec(entry).unwrap())
                .unwrap();
        }
        writer.finish().unwrap()
    }

    #[test]
    fn a_written_segment_reads_back_with_its_seal() {
        let dir = tempfile::tempdir().unwrap();
        let all = entries(4);
        let seal = write(dir.path(), &all);
        assert_eq!(seal.file, "audit/segment-1-4.jsonl");
        assert_eq!((seal.first, seal.last), (1, 4));
        let path = dir.path().join("segment-1-4.jsonl");
        let contents = check(&path, &mut Chain::from_genesis()).unwrap();
        assert_eq!(contents.sha256, seal.sha256);
        assert_eq!((contents.entries, contents.bytes), (4, seal.bytes));
        assert_eq!(contents.last, (4, all[3].hash.clone()));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
    }

    #[test]
    fn an_abandoned_writer_leaves_nothing_and_names_are_strict() {
        let dir = tempfile::tempdir().unwrap();
        let all = entries(2);
        let mut writer = Writer::create(dir.path(), 1).unwrap();
        writer.push(&all[0], b"{}").unwrap();
        assert!(is_temporary("segment-1.jsonl.tmp"));
        drop(writer);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(range_of("segment-3-9.jsonl"), Some((3, 9)));
        for name in [
            "segment-03-9.jsonl",
            "segment-3-9.json",
            "segment-3.jsonl",
            "x",
        ] {
            assert_eq!(range_of(name), None, "{name}");
        }
    }

    #[test]
    fn edits_and_cuts_in_a_segment_are_found() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &entries(3));
        let path = dir.path().join("segment-1-3.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"n\":2", "\"n\":7")).unwrap();
        let err = check(&path, &mut Chain::anywhere()).unwrap_err();
        assert!(err.to_string().contains("entry 2 was altered"), "{err}");
        std::fs::write(&path, &text[..text.len() - 10]).unwrap();
        let err = check(&path, &mut Chain::anywhere()).unwrap_err();
        assert!(err.to_string().contains("line 3 is cut short"), "{err}");
    }
}
