//! The commit journal in front of the redb file. Each commit is appended to a small
//! preallocated file and made durable there by one `fdatasync` of the page or two it
//! wrote, while redb commits it without syncing (its pages stay in redb's memory). Now
//! and then a checkpoint has redb write and sync everything at once, and the journal
//! starts over (a new epoch). After a crash, redb comes back as of its last durable
//! commit, and the journal's records after it are applied again, in order.
//!
//! Why: a redb commit that syncs writes every page the batch touched (a dozen or more, in
//! as many tables) before its `fsync`, and what an `fsync` costs grows with the pages it
//! writes (docs/benchmarks.md: 0.11 ms for one page, 0.24 ms for twelve, here).
//!
//! The file: a header page (a magic string that names the format, the id of the store it
//! belongs to, the epoch, a random salt of the epoch, the position in the store the epoch
//! starts from, a checksum), then records: the body's length (u32), the epoch (u64), the
//! record's number in its epoch (u64, from 1), a checksum (the first 8 bytes of the
//! SHA-256 of store id, salt, epoch, number and body), the body. Reading stops at the
//! first record that is not whole, of another epoch, out of sequence or whose checksum is
//! wrong: the torn write of a commit that never returned, a record taken back, or what an
//! earlier epoch left behind (its salt differs, even where an epoch number came again).
//! The file is written with zeros to its full size when it is made, so that an append
//! overwrites blocks the file already has: its `fdatasync` writes data only, never the
//! file's size or its blocks.
//!
//! The redb `meta` table holds, in the same transaction as each batch, the epoch and the
//! number of the record it applied: where the last durable commit stands is where a
//! restart resumes, which must be the position the journal's epoch starts from or a
//! position inside that epoch (a store file older than its journal is refused, one
//! newer ignores it). It also holds the store's journal id: a journal of another store (a
//! store file replaced, or made anew beside an old journal) is never applied to it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The header's magic string: the journal format, version 2.
const MAGIC: &[u8; 8] = b"ORCHJNL2";
/// What the header holds: magic, store id, epoch, salt, base epoch, base record,
/// checksum.
const HEADER_USED: usize = 56;
/// The header's size: the records start after it.
const HEADER: u64 = 4096;
/// A record's length, epoch, number and checksum.
const RECORD_HEAD: u64 = 4 + 8 + 8 + 8;
/// The file's size.
pub(super) const CAPACITY: u64 = 4 << 20;
/// The largest record body (see [`Journal::largest_record`]).
const LARGEST_RECORD: usize = 256 << 10;
/// A checkpoint is due once the records take this much of the file...
const CHECKPOINT_BYTES: u64 = CAPACITY / 2;
/// ... or once there are this many (each keeps its pages in redb's memory until then).
const CHECKPOINT_RECORDS: u64 = 1024;

/// A position in the store: a journal epoch and the number of a record in it (0: none of
/// its records). Positions compare in that order.
pub(super) type Position = (u64, u64);

/// What an epoch is: whose, which, its salt, and the store's position it starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Epoch {
    /// The id of the store it belongs to.
    pub store: u64,
    /// Its number.
    pub number: u64,
    /// Random, so that records of an epoch numbered again never pass for its own.
    pub salt: u64,
    /// The position the store had applied when the epoch started.
    pub base: Position,
}

/// The journal of a store file, open for appending.
pub(super) struct Journal {
    file: File,
    path: PathBuf,
    epoch: Epoch,
    /// The number of the last record appended in this epoch (0: none yet).
    last: u64,
    /// Where the next record goes.
    end: u64,
}

/// What a journal held when it was opened.
pub(super) struct Found {
    /// Its epoch (all zero when it had no readable header).
    pub epoch: Epoch,
    /// Its records, in order: number and body.
    pub records: Vec<(u64, Vec<u8>)>,
    /// Where the records end.
    end: u64,
    /// The file was made just now (none was there).
    pub created: bool,
    /// Its header could not be read although the file was not new (damaged): records
    /// not yet checkpointed may be lost.
    pub damaged_header: bool,
}

/// Where the journal of the store file `store` is.
pub(super) fn path_of(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".journal");
    store.with_file_name(name)
}

impl Journal {
    /// Opens (or makes, private and written to its full size) the journal at `path`, and
    /// reads what it holds. Appending starts once [`Journal::start_epoch`] is called.
    pub fn open(path: &Path) -> io::Result<(Journal, Found)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let size = file.metadata()?.len();
        let created = size == 0;
        if size < CAPACITY {
            fill_with_zeros(&file, size)?;
            if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(dir)?.sync_all()?;
            }
        }
        let found = read(&file, created)?;
        let journal = Journal {
            file,
            path: path.to_path_buf(),
            epoch: found.epoch,
            last: found.records.last().map_or(0, |(n, _)| *n),
            end: found.end,
        };
        Ok((journal, found))
    }

    /// Starts epoch `number` (above every epoch the store has seen) of the journal of
    /// store `store`, which has applied everything up to `base`: an empty journal (the
    /// header and a blank first record written together), durable before this returns.
    pub fn start_epoch(&mut self, store: u64, number: u64, base: Position) -> io::Result<()> {
        let epoch = Epoch {
            store,
            number,
            salt: fastrand::u64(..),
            base,
        };
        let mut page = vec![0u8; (HEADER + RECORD_HEAD) as usize];
        page[..8].copy_from_slice(MAGIC);
        for (i, value) in [store, number, epoch.salt, base.0, base.1]
            .into_iter()
            .enumerate()
        {
            page[8 + i * 8..16 + i * 8].copy_from_slice(&value.to_le_bytes());
        }
        let sum = checksum(&[&page[..48]]);
        page[48..HEADER_USED].copy_from_slice(&sum);
        self.file.write_all_at(&page, 0)?;
        self.file.sync_data()?;
        self.epoch = epoch;
        self.last = 0;
        self.end = HEADER;
        Ok(())
    }

    /// The current epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Whether a record of `len` bytes fits in what is left of the file.
    pub fn fits(&self, len: usize) -> bool {
        self.end + RECORD_HEAD + len as u64 <= CAPACITY
    }

    /// The largest record body the journal takes: a larger batch (a list of thousands
    /// of tasks) gains nothing from it (its own pages are most of what a sync writes) and
    /// is committed by redb with a sync instead.
    pub fn largest_record() -> usize {
        LARGEST_RECORD
    }

    /// The number of the last record appended in this epoch (0: none).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Appends `body` (it must fit) and makes it durable; its number in the epoch.
    pub fn append(&mut self, body: &[u8]) -> io::Result<u64> {
        debug_assert!(self.fits(body.len()));
        let number = self.last + 1;
        let len = u32::try_from(body.len()).map_err(|_| io::Error::other("record too large"))?;
        let mut record = Vec::with_capacity(RECORD_HEAD as usize + body.len());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&self.epoch.number.to_le_bytes());
        record.extend_from_slice(&number.to_le_bytes());
        record.extend_from_slice(&record_sum(&self.epoch, number, body));
        record.extend_from_slice(body);
        self.file.write_all_at(&record, self.end)?;
        self.file.sync_data()?;
        self.end += record.len() as u64;
        self.last = number;
        Ok(number)
    }

    /// Blanks, durably, whatever a failed [`Journal::append`] may have left where the next
    /// record goes (a write whose sync failed may yet be on the disk).
    pub fn blank_failed_append(&mut self) -> io::Result<()> {
        self.file
            .write_all_at(&[0u8; RECORD_HEAD as usize], self.end)?;
        self.file.sync_data()
    }

    /// Takes back the last record appended (its head blanked, durably): for a batch the
    /// store could not apply after its record was written.
    pub fn retract_last(&mut self, len: usize) -> io::Result<()> {
        let start = self.end - RECORD_HEAD - len as u64;
        self.file
            .write_all_at(&[0u8; RECORD_HEAD as usize], start)?;
        self.file.sync_data()?;
        self.end = start;
        self.last -= 1;
        Ok(())
    }

    /// Whether a checkpoint is due (the records fill half the file, or are many).
    pub fn due(&self) -> bool {
        self.last > 0 && (self.end >= CHECKPOINT_BYTES || self.last >= CHECKPOINT_RECORDS)
    }

    /// Whether records were appended since the epoch started.
    pub fn holds_records(&self) -> bool {
        self.last > 0
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The first 8 bytes of the SHA-256 of `parts`, in order.
fn checksum(parts: &[&[u8]]) -> [u8; 8] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&digest[..8]);
    out
}

/// The checksum of record `number` of `epoch` with `body`.
fn record_sum(epoch: &Epoch, number: u64, body: &[u8]) -> [u8; 8] {
    checksum(&[
        &epoch.store.to_le_bytes(),
        &epoch.salt.to_le_bytes(),
        &epoch.number.to_le_bytes(),
        &number.to_le_bytes(),
        body,
    ])
}

/// Writes zeros from `from` to [`CAPACITY`], then syncs the file (its size and blocks).
fn fill_with_zeros(file: &File, from: u64) -> io::Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut at = from;
    while at < CAPACITY {
        let n = (CAPACITY - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_all()
}

/// The header's epoch and the records of that epoch, up to the first that is not whole
/// and sound. `created`: the file was just made (no header is expected).
fn read(file: &File, created: bool) -> io::Result<Found> {
    let mut header = [0u8; HEADER_USED];
    file.read_exact_at(&mut header, 0)?;
    let sound = &header[..8] == MAGIC && header[48..] == checksum(&[&header[..48]]);
    if !sound {
        let blank = header.iter().all(|b| *b == 0);
        return Ok(Found {
            epoch: Epoch::default(),
            records: Vec::new(),
            end: HEADER,
            created,
            damaged_header: !created && !blank,
        });
    }
    let field =
        |i: usize| u64::from_le_bytes(header[8 + i * 8..16 + i * 8].try_into().expect("8 bytes"));
    let epoch = Epoch {
        store: field(0),
        number: field(1),
        salt: field(2),
        base: (field(3), field(4)),
    };
    let mut records = Vec::new();
    let mut at = HEADER;
    while at + RECORD_HEAD <= CAPACITY {
        let mut head = [0u8; RECORD_HEAD as usize];
        file.read_exact_at(&mut head, at)?;
        let len = u64::from(u32::from_le_bytes(head[..4].try_into().expect("4 bytes")));
        let record_epoch = u64::from_le_bytes(head[4..12].try_into().expect("8 bytes"));
        let number = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
        let expected = records.len() as u64 + 1;
        if len == 0 || record_epoch != epoch.number || number != expected {
            break;
        }
        if at + RECORD_HEAD + len > CAPACITY {
            break;
        }
        let mut body = vec![0u8; len as usize];
        file.read_exact_at(&mut body, at + RECORD_HEAD)?;
        if head[20..28] != record_sum(&epoch, number, &body) {
            break;
        }
        records.push((number, body));
        at += RECORD_HEAD + len;
    }
    Ok(Found {
        epoch,
        records,
        end: at,
        created,
        damaged_header: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(path: &Path) -> (Journal, Found) {
        Journal::open(path).unwrap()
    }

    #[test]
    fn records_of_the_current_epoch_are_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb.journal");
        let (mut journal, found) = opened(&path);
        assert_eq!(found.epoch, Epoch::default());
        assert!(found.created && found.records.is_empty() && !found.damaged_header);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), CAPACITY);
        journal.start_epoch(9, 3, (2, 7)).unwrap();
        assert_eq!(journal.append(b"one").unwrap(), 1);
        assert_eq!(journal.append(b"two").unwrap(), 2);
        drop(journal);
        let (journal, found) = opened(&path);
        let epoch = found.epoch;
        assert_eq!((epoch.store, epoch.number, epoch.base), (9, 3, (2, 7)));
        assert!(!found.created);
        assert_eq!(
            found.records,
            vec![(1, b"one".to_vec()), (2, b"two".to_vec())]
        );
        assert_eq!(journal.epoch(), epoch);
    }

    #[test]
    fn a_torn_or_stale_record_ends_what_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.redb.journal");
        let (mut journal, _) = opened(&path);
        journal.start_epoch(9, 1, (0, 0)).unwrap();
        for body in [b"aaaa", b"bbbb", b"cccc"] {
            journal.append(body).unwrap();
        }
        // A new epoch over the old records: they are not read (another epoch).
        journal.start_epoch(9, 2, (1, 3)).unwrap();
        journal.append(b"dddd").unwrap();
        drop(journal);
        let (_, found) = opened(&path);
        assert_eq!(
            found.records,
            vec![(1, b"dddd".to_vec())],
            "epoch 1's records are stale"
        );
        // The last record torn (a byte of its body changed): it is not read.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"x", HEADER + RECORD_HEAD + 2).unwrap();
        drop(file);
        let (_, found) = opened(&path);
        assert!(found.records.is_empty());
        // A damaged header: nothing is read, and it says so.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"X", 0).unwrap();
        drop(file);
        let (_, found) = opened(&path);
        assert_eq!(
            (found.epoch, found.damaged_header),
            (Epoch::default(), true)
        );
    }

    #[test]
    fn records_of_an_epoch_numbered_again_or_taken_back_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j");
        let (mut journal, _) = opened(&path);
        journal.start_epoch(9, 5, (4, 2)).unwrap();
        for body in [b"aaaa", b"bbbb"] {
            journal.append(body).unwrap();
        }
        // Epoch 5 again (as after a damaged header): the old records have another salt.
        journal.start_epoch(9, 5, (4, 2)).unwrap();
        drop(journal);
        let (mut journal, found) = opened(&path);
        assert!(found.records.is_empty(), "{:?}", found.records);
        // A record taken back is not read; the next one takes its place.
        journal.append(b"cccc").unwrap();
        journal.append(b"dddd").unwrap();
        journal.retract_last(4).unwrap();
        assert_eq!(journal.last(), 1);
        drop(journal);
        let (mut journal, found) = opened(&path);
        assert_eq!(found.records, vec![(1, b"cccc".to_vec())]);
        journal.append(b"eeee").unwrap();
        // What a failed append left after them is blanked; the records stay.
        journal.blank_failed_append().unwrap();
        drop(journal);
        let (_, found) = opened(&path);
        assert_eq!(
            found.records,
            vec![(1, b"cccc".to_vec()), (2, b"eeee".to_vec())]
        );
    }

    #[test]
    fn a_checkpoint_is_due_once_the_records_are_many_or_large() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = opened(&dir.path().join("j"));
        journal.start_epoch(9, 1, (0, 0)).unwrap();
        assert!(!journal.due());
        let record = vec![7u8; Journal::largest_record()];
        let mut appended = 0;
        while journal.fits(record.len()) && !journal.due() {
            journal.append(&record).unwrap();
            appended += 1;
        }
        assert!(journal.due(), "due once half the file is taken");
        let per_record = RECORD_HEAD + record.len() as u64;
        assert_eq!(appended, (CHECKPOINT_BYTES - HEADER).div_ceil(per_record));
    }
}
