//! A log file rotated by size: when the next line would take `orchestrator.log` past the
//! maximum, it is renamed `orchestrator.log.1` (the older ones shifting to `.2`, `.3`, ...,
//! the one past `keep` removed) and a new file is started. Rotation only happens between
//! lines, so no line is split across files; a rotation that fails leaves the lines going
//! to the current file. Every file is created 0600.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// When to rotate and how many old files to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The largest a file may grow (a single longer line still goes whole into a new file).
    pub max_bytes: u64,
    /// How many rotated files to keep.
    pub keep: u32,
}

/// The rotated files of `name` in `dir`, by number (`name.1` is the newest).
pub fn rotated(dir: &Path, name: &str) -> Vec<(u32, PathBuf)> {
    let prefix = format!("{name}.");
    let Ok(items) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = items
        .filter_map(|item| {
            let item = item.ok()?;
            let file_name = item.file_name();
            let number = file_name.to_str()?.strip_prefix(&prefix)?;
            let n: u32 = number.parse().ok()?;
            (n > 0 && n.to_string() == number).then(|| (n, item.path()))
        })
        .collect();
    found.sort();
    found
}

/// The log file and its rotation (written from tracing-appender's worker thread).
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: File,
    size: u64,
    /// Whether the last byte written ended a line (rotation waits for it).
    at_line_start: bool,
}

impl RotatingFile {
    /// Opens (appending) or creates `dir/name`, and removes rotated files past `keep`.
    pub fn open(dir: &Path, name: &str, rotation: Rotation) -> std::io::Result<RotatingFile> {
        let path = dir.join(name);
        for (n, old) in rotated(dir, name) {
            if n > rotation.keep {
                std::fs::remove_file(old)?;
            }
        }
        let file = open_private(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path,
            rotation,
            file,
            size,
            at_line_start: true,
        })
    }

    /// `path.n`.
    fn numbered(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Shifts the rotated files up by one, the current file to `.1` (or away, with
    /// `keep` 0), and starts a new one.
    fn rotate(&mut self) -> std::io::Result<()> {
        let keep = self.rotation.keep;
        if keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            remove_if_present(&self.numbered(keep))?;
            for n in (1..keep).rev() {
                rename_if_present(&self.numbered(n), &self.numbered(n + 1))?;
            }
            std::fs::rename(&self.path, self.numbered(1))?;
        }
        self.file = open_private(&self.path)?;
        self.size = 0;
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let past_max = self.size + buf.len() as u64 > self.rotation.max_bytes;
        if past_max
            && self.size > 0
            && self.at_line_start
            && let Err(e) = self.rotate()
        {
            // Keep writing to the file as it is; try again after another full file.
            eprintln!("cannot rotate {}: {e}", self.path.display());
            self.size = 0;
        }
        let written = self.file.write(buf)?;
        self.size += written as u64;
        if written > 0 {
            self.at_line_start = buf[written - 1] == b'\n';
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

fn open_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_present(from: &Path, to: &Path) -> std::io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn files_rotate_between_lines_and_only_keep_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let rotation = Rotation {
            max_bytes: 1024,
            keep: 2,
        };
        let mut file = RotatingFile::open(dir.path(), "x.log", rotation).unwrap();
        for i in 0..100 {
            file.write_all(format!("line {i:03} {}\n", "-".repeat(40)).as_bytes())
                .unwrap();
        }
        let numbers: Vec<u32> = rotated(dir.path(), "x.log").iter().map(|r| r.0).collect();
        assert_eq!(numbers, vec![1, 2]);
        let mut all = lines(&dir.path().join("x.log.2"));
        all.extend(lines(&dir.path().join("x.log.1")));
        all.extend(lines(&dir.path().join("x.log")));
        let first: usize = all[0][5..8].parse().unwrap();
        for (offset, line) in all.iter().enumerate() {
            assert!(
                line.starts_with(&format!("line {:03} ", first + offset)),
                "{line}"
            );
        }
        assert_eq!(all.last().unwrap()[5..8].parse::<usize>().unwrap(), 99);
        for (_, path) in rotated(dir.path(), "x.log") {
            assert!(std::fs::metadata(path).unwrap().len() <= 1024);
        }
        drop(file);
        let fewer = Rotation {
            keep: 1,
            ..rotation
        };
        RotatingFile::open(dir.path(), "x.log", fewer).unwrap();
        assert_eq!(
            rotated(dir.path(), "x.log").len(),
            1,
            "files past --log-keep go"
        );
    }
}
