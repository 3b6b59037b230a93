//! `provisioning-orchestrator audit verify-segment FILE [--sha256 HEX]`: checks an archived
//! segment on its own, without a daemon or a store: its entries' chain (numbering, links,
//! hashes), the range its name gives (when it still has its name), and, given the SHA-256
//! its checkpoint sealed (`orch audit segments` lists it), that the file is the one sealed.
//! Prints a JSON report; exits 0 when the segment is intact, 1 when it is not.

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use super::chain::Chain;
use super::segment::{self, Contents};

/// What `audit verify-segment` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SegmentCheck {
    /// The file checked.
    pub file: String,
    /// True when nothing is wrong.
    pub intact: bool,
    /// How many entries were read before a problem (all of them, when intact).
    pub entries: u64,
    /// Its first entry.
    pub first: Option<u64>,
    /// Its last entry.
    pub last: Option<u64>,
    /// The last entry's hash (the next entry's `prev_hash`).
    pub last_hash: Option<String>,
    /// The file's SHA-256.
    pub sha256: Option<String>,
    /// The file's size.
    pub bytes: Option<u64>,
    /// The first entry found wrong.
    pub bad_seq: Option<u64>,
    /// What is wrong.
    pub problem: Option<String>,
}

/// Checks the segment at `path`; `sha256` is what its checkpoint sealed, when known.
pub fn verify_segment(path: &Path, sha256: Option<&str>) -> SegmentCheck {
    let mut chain = Chain::anywhere();
    let mut report = SegmentCheck {
        file: path.display().to_string(),
        ..SegmentCheck::default()
    };
    let contents = segment::check(path, &mut chain);
    report.entries = chain.checked();
    let problem = match contents {
        Ok(contents) => {
            let problem = mismatch(path, &contents, sha256);
            report.first = Some(contents.first);
            report.last = Some(contents.last.0);
            report.last_hash = Some(contents.last.1);
            report.sha256 = Some(contents.sha256);
            report.bytes = Some(contents.bytes);
            problem
        }
        Err(segment::SegmentError::Broken(broken)) => Some((Some(broken.seq), broken.problem)),
        Err(segment::SegmentError::Io(e)) => Some((None, format!("cannot read it: {e}"))),
    };
    match problem {
        Some((bad_seq, problem)) => {
            report.bad_seq = bad_seq;
            report.problem = Some(problem);
        }
        None => report.intact = true,
    }
    report
}

/// What does not match between an intact chain and what the segment should be.
fn mismatch(
    path: &Path,
    contents: &Contents,
    sha256: Option<&str>,
) -> Option<(Option<u64>, String)> {
    let held = (contents.first, contents.last.0);
    let named = path
        .file_name()
        .and_then(|name| segment::range_of(&name.to_string_lossy()));
    if let Some(named) = named.filter(|named| *named != held) {
        let problem = format!(
            "its name says entries {}–{}, it holds {}–{}: entries were added or removed",
            named.0, named.1, held.0, held.1
        );
        return Some((Some(named.0.max(held.0)), problem));
    }
    match sha256 {
        Some(expected) if !expected.eq_ignore_ascii_case(&contents.sha256) => Some((
            Some(contents.first),
            format!(
                "the file was changed: its SHA-256 is {}, its checkpoint sealed {expected}",
                contents.sha256
            ),
        )),
        _ => None,
    }
}

/// Runs `audit verify-segment`: the report on stdout as JSON.
pub fn run(file: &Path, sha256: Option<&str>) -> ExitCode {
    let report = verify_segment(file, sha256);
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("reports serialize")
    );
    if report.intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
