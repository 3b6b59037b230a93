//! The audit log in PostgreSQL: `audit` (sequence number → the entry's JSON text exactly
//! as serde_json wrote it, and its action for filtering), `audit_head` (the last entry's
//! sequence number and hash, kept apart so that a removed tail is detected) and
//! `audit_segments` (first archived entry → the segment, JSON). Records are sealed with
//! [`crate::audit::seal`] inside the transaction of the batch they belong to.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use orch_protocol::{AuditEntry, AuditFilter, AuditSegment, SegmentSeal};

use super::bridge::{Conn, pg};
use super::read::ReadSnapshot;
use super::write::Pipeline;
use super::{PostgresStore, decode, encode, record, signed, unsigned};
use crate::audit::AuditRecord;
use crate::store::audit::AuditHead;
use crate::store::{AuditLog, StoreError};

impl AuditLog for PostgresStore {
    fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let action = filter.action.clone();
        let limit = filter.limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let before = filter
            .before
            .map_or(i64::MAX, |b| i64::try_from(b).unwrap_or(i64::MAX));
        let uid = filter.uid.map(i64::from);
        let ok = filter.ok;
        self.read(|conn| async move {
            let sql = "SELECT seq, body FROM audit WHERE ($1::text IS NULL OR action = $1)
                AND seq < $3
                AND ($4::int8 IS NULL OR (body::jsonb -> 'actor' ->> 'uid')::int8 = $4)
                AND ($5::bool IS NULL OR (body::jsonb ->> 'ok')::bool = $5)
                ORDER BY seq DESC LIMIT $2";
            let rows = conn
                .query(sql, &[&action, &limit, &before, &uid, &ok])
                .await?;
            rows.iter().map(|r| record("audit entry", r)).collect()
        })
    }

    fn walk_audit(
        &self,
        visit: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
    ) -> Result<AuditHead, StoreError> {
        let snapshot = ReadSnapshot::begin(&self.bridge)?;
        let head = snapshot.run(|conn| async move { read_head(&conn).await })?;
        snapshot.cursor("SELECT seq, body FROM audit ORDER BY seq", &mut |row| {
            let seq = unsigned("audit seq", row.try_get(0).map_err(pg)?)?;
            let body: &str = row.try_get(1).map_err(pg)?;
            Ok(visit(seq, body.as_bytes()))
        })?;
        Ok(head)
    }

    fn audit_segments(&self) -> Result<Vec<AuditSegment>, StoreError> {
        self.read(|conn| async move {
            let sql = "SELECT first_seq, body FROM audit_segments ORDER BY first_seq";
            let rows = conn.query(sql, &[]).await?;
            rows.iter().map(|r| record("audit segment", r)).collect()
        })
    }

    fn archive_audit(
        &self,
        seal: &SegmentSeal,
        checkpoint: AuditRecord,
    ) -> Result<AuditSegment, StoreError> {
        let seal = seal.clone();
        self.write(|conn| async move {
            remove_archived(&conn, &seal).await?;
            let sealed = self::seal(&conn, vec![checkpoint]).await?;
            let segment = AuditSegment {
                seal,
                checkpoint: sealed.seq,
                archived_at: sealed.at,
            };
            let first = signed("audit seq", segment.seal.first)?;
            let body = encode("an audit segment", &segment)?;
            let mut steps = Pipeline::default();
            sealed.write(&mut steps);
            steps.push(
                "INSERT INTO audit_segments (first_seq, body) VALUES ($1, $2)
                 ON CONFLICT (first_seq) DO UPDATE SET body = EXCLUDED.body",
                vec![&first, &body],
            );
            conn.pipeline(&steps.0).await?;
            Ok(segment)
        })
    }

    fn import_audit(
        &self,
        entries: &[(u64, Vec<u8>)],
        segments: &[AuditSegment],
        head: &AuditHead,
    ) -> Result<(), StoreError> {
        let mut seqs = Vec::with_capacity(entries.len());
        let mut actions = Vec::with_capacity(entries.len());
        let mut bodies = Vec::with_capacity(entries.len());
        for (seq, body) in entries {
            let body = String::from_utf8(body.clone()).map_err(|e| StoreError::Corrupt {
                what: format!("audit entry {seq}"),
                error: e.to_string(),
            })?;
            let entry: AuditEntry = decode("audit entry", &body)?;
            seqs.push(signed("audit seq", *seq)?);
            actions.push(entry.action);
            bodies.push(body);
        }
        let mut firsts = Vec::with_capacity(segments.len());
        let mut segment_bodies = Vec::with_capacity(segments.len());
        for segment in segments {
            firsts.push(signed("audit seq", segment.seal.first)?);
            segment_bodies.push(encode("an audit segment", segment)?);
        }
        let head = match head {
            Some((seq, hash)) => Some((signed("audit seq", *seq)?, hash.clone())),
            None => None,
        };
        self.write(|conn| async move {
            let held = conn
                .query_opt(
                    "SELECT 1 FROM audit UNION ALL SELECT 1 FROM audit_head
                     UNION ALL SELECT 1 FROM audit_segments LIMIT 1",
                    &[],
                )
                .await?;
            if held.is_some() {
                return Err(StoreError::Backend(
                    "the target already has an audit log; nothing was imported".into(),
                ));
            }
            conn.execute(
                "INSERT INTO audit (seq, action, body)
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])",
                &[&seqs, &actions, &bodies],
            )
            .await?;
            conn.execute(
                "INSERT INTO audit_segments (first_seq, body)
                 SELECT * FROM UNNEST($1::int8[], $2::text[])",
                &[&firsts, &segment_bodies],
            )
            .await?;
            if let Some((seq, hash)) = head {
                conn.execute(
                    "INSERT INTO audit_head (id, seq, hash) VALUES (0, $1, $2)",
                    &[&seq, &hash],
                )
                .await?;
            }
            Ok(())
        })
    }
}

/// The stored head.
async fn read_head(conn: &Conn) -> Result<AuditHead, StoreError> {
    let row = conn
        .query_opt("SELECT seq, hash FROM audit_head WHERE id = 0", &[])
        .await?;
    match row {
        Some(row) => {
            let seq = unsigned("audit head", row.try_get(0).map_err(pg)?)?;
            Ok(Some((seq, row.try_get(1).map_err(pg)?)))
        }
        None => Ok(None),
    }
}

/// Removes the live entries `seal` archived, once sure they are the ones it archived.
async fn remove_archived(conn: &Conn, seal: &SegmentSeal) -> Result<(), StoreError> {
    let first = signed("audit seq", seal.first)?;
    let last = signed("audit seq", seal.last)?;
    let row = conn.query_opt("SELECT min(seq) FROM audit", &[]).await?;
    let live_first: Option<i64> = match row {
        Some(row) => row.try_get(0).map_err(pg)?,
        None => None,
    };
    let sql = "SELECT body FROM audit WHERE seq = $1";
    let last_hash = match conn.query_opt(sql, &[&last]).await? {
        Some(row) => Some(decode::<AuditEntry>("audit entry", row.try_get(0).map_err(pg)?)?.hash),
        None => None,
    };
    if live_first != Some(first) || last_hash.as_deref() != Some(seal.last_hash.as_str()) {
        return Err(StoreError::Backend(format!(
            "the audit log changed while entries {}–{} were being archived; nothing was archived",
            seal.first, seal.last
        )));
    }
    conn.execute(
        "DELETE FROM audit WHERE seq BETWEEN $1 AND $2",
        &[&first, &last],
    )
    .await
    .map(drop)
}

/// Audit records sealed onto the chain, ready to be written.
pub(super) struct Sealed {
    seqs: Vec<i64>,
    actions: Vec<String>,
    bodies: Vec<String>,
    head: (i64, String),
    /// The new head's sequence number.
    seq: u64,
    /// The time the records were sealed with.
    at: DateTime<Utc>,
}

impl Sealed {
    /// Appends the statements writing the entries and the new head.
    pub(super) fn write<'a>(&'a self, steps: &mut Pipeline<'a>) {
        steps.push(
            "INSERT INTO audit (seq, action, body)
             SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[])",
            vec![&self.seqs, &self.actions, &self.bodies],
        );
        steps.push(
            "INSERT INTO audit_head (id, seq, hash) VALUES (0, $1, $2)
             ON CONFLICT (id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash",
            vec![&self.head.0, &self.head.1],
        );
    }
}

/// Seals the records onto the end of the chain as the open transaction sees it.
pub(super) async fn seal(conn: &Conn, records: Vec<AuditRecord>) -> Result<Sealed, StoreError> {
    let (mut seq, mut hash) = read_head(conn)
        .await?
        .unwrap_or_else(|| (0, crate::audit::GENESIS.to_string()));
    let now = Utc::now();
    let mut seqs = Vec::with_capacity(records.len());
    let mut actions = Vec::with_capacity(records.len());
    let mut bodies = Vec::with_capacity(records.len());
    for record in records {
        seq += 1;
        let entry = crate::audit::seal(record, seq, now, &hash);
        seqs.push(signed("audit seq", seq)?);
        actions.push(entry.action.clone());
        bodies.push(encode("an audit entry", &entry)?);
        hash = entry.hash;
    }
    Ok(Sealed {
        seqs,
        actions,
        bodies,
        head: (signed("audit seq", seq)?, hash),
        seq,
        at: now,
    })
}
