//! Nushell values for the audit log: its entries, its archived segments and the check of
//! the whole log (rows derive [`IntoValue`], as in [`crate::convert`]).

use chrono::{DateTime, FixedOffset};
use nu_protocol::{Filesize, IntoValue, Span, Value};
use orch_protocol::{AuditEntry, AuditReport, AuditSegment};

use crate::convert::date;
use crate::typed::Typed;

/// One row of `orch audit`.
#[derive(IntoValue)]
struct AuditRow {
    seq: i64,
    at: DateTime<FixedOffset>,
    uid: u32,
    interface: String,
    action: String,
    ok: bool,
    outcome: String,
    params: Typed,
    hash: String,
}

/// One row of `orch audit`.
pub fn audit_entry(entry: &AuditEntry, span: Span) -> Value {
    AuditRow {
        seq: entry.seq as i64,
        at: date(entry.at),
        uid: entry.actor.uid,
        interface: entry.actor.interface.clone(),
        action: entry.action.clone(),
        ok: entry.ok,
        outcome: entry.outcome.clone(),
        params: Typed(entry.params.clone()),
        hash: entry.hash.clone(),
    }
    .into_value(span)
}

/// One row of `orch audit segments` (and of `segments` in `orch audit verify`).
#[derive(IntoValue)]
struct SegmentRow {
    first: i64,
    last: i64,
    entries: i64,
    file: String,
    size: Filesize,
    archived_at: DateTime<FixedOffset>,
    checkpoint: i64,
    sha256: String,
    last_hash: String,
}

/// One archived segment.
pub fn segment(segment: &AuditSegment, span: Span) -> Value {
    let seal = &segment.seal;
    SegmentRow {
        first: seal.first as i64,
        last: seal.last as i64,
        entries: (seal.last - seal.first + 1) as i64,
        file: seal.file.clone(),
        size: Filesize::new(i64::try_from(seal.bytes).unwrap_or(i64::MAX)),
        archived_at: date(segment.archived_at),
        checkpoint: segment.checkpoint as i64,
        sha256: seal.sha256.clone(),
        last_hash: seal.last_hash.clone(),
    }
    .into_value(span)
}

/// The record of `orch audit verify`.
#[derive(IntoValue)]
struct ReportRow {
    intact: bool,
    entries: i64,
    archived: i64,
    bad_seq: Option<i64>,
    problem: Option<String>,
    segments: Vec<Value>,
}

/// The record of `orch audit verify`.
pub fn report(report: AuditReport, span: Span) -> Value {
    ReportRow {
        intact: report.intact,
        entries: report.entries as i64,
        archived: report.archived as i64,
        bad_seq: report.bad_seq.map(|s| s as i64),
        problem: report.problem,
        segments: report.segments.iter().map(|s| segment(s, span)).collect(),
    }
    .into_value(span)
}
