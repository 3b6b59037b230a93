//! Requests a node forwards for its client (`cluster_requests`, schema migration 4): to
//! the leader, or to another node.
//!
//! A node writes its client's request as a row and notifies [`REQUESTS_CHANNEL`]. The
//! leader takes the waiting rows for the leader under its term (a statement that checks
//! the term still leads) before it acts on them, so that a request is carried out at
//! most once: a later leader never takes a row an earlier one took. A row for a node is
//! taken by that node while its lease runs (under term 0: reads only). Once done, the
//! taker writes the frames of its answer into the row and notifies [`REPLIES_CHANNEL`];
//! the forwarding node reads them, sends them to its client, and removes the row. A row
//! for the leader taken by a term that no longer leads, and not answered, will never be:
//! its outcome is unknown.

use std::time::Duration;

use super::PostgresStore;
use super::bridge::pg;
use super::cluster::{NOW_MS, millis};
use super::codec::{signed, unsigned};
use super::placement::lease_runs;
use crate::store::StoreError;

/// The channel a standby's forwarded requests notify.
pub(super) const REQUESTS_CHANNEL: &str = "orch_requests";
/// The channel the leader's answers notify.
pub(super) const REPLIES_CHANNEL: &str = "orch_replies";

/// How long an answer nobody read (its client gone) is kept.
const UNREAD_ANSWER_MS: i64 = 10 * 60 * 1000;
/// How long any request row is kept at most.
const LONGEST_MS: i64 = 24 * 60 * 60 * 1000;

/// A request as a node forwards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedRequest {
    /// The node that forwards it.
    pub from_node: String,
    /// The node it is for; the leader when none.
    pub to_node: Option<String>,
    /// Who asked, as JSON (an [`orch_protocol::Actor`]).
    pub actor: String,
    /// The role the standby gave them.
    pub role: String,
    /// Whether they own the daemon they asked (they may name its directories).
    pub owner: bool,
    /// The request (its JSON).
    pub request: Vec<u8>,
}

/// Where a forwarded request stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestState {
    /// No leader has taken it yet.
    Waiting,
    /// It was taken and has not been answered yet.
    Taken {
        /// The term that took it (0: the node it is for).
        term: u64,
        /// Whether its answer may still come (the term that took it still leads; always
        /// for a node's).
        leading: bool,
    },
    /// The frames of the answer.
    Answered(Vec<u8>),
    /// The row is gone (removed by the sweep, or by the node that forwarded it).
    Missing,
}

impl PostgresStore {
    /// Writes `request` (for the leader, or the node it names) and wakes them; the row's
    /// id.
    pub fn forward_request(&self, request: &ForwardedRequest) -> Result<u64, StoreError> {
        let request = request.clone();
        self.read(|conn| async move {
            let sql = format!(
                "WITH r AS (
                    INSERT INTO cluster_requests
                        (from_node, to_node, actor, role, owner, request, created_ms)
                    VALUES ($1, $7, $2, $3, $4, $5, {NOW_MS}) RETURNING id
                 )
                 SELECT id, pg_notify($6, '') FROM r"
            );
            let channel = REQUESTS_CHANNEL;
            let row = conn
                .query_opt(
                    &sql,
                    &[
                        &request.from_node,
                        &request.actor,
                        &request.role,
                        &request.owner,
                        &request.request,
                        &channel,
                        &request.to_node,
                    ],
                )
                .await?
                .ok_or_else(|| StoreError::Backend("a forwarded request was not written".into()))?;
            unsigned("request", row.try_get(0).map_err(pg)?)
        })
    }

    /// Takes at most `limit` waiting requests for the leader written within `fresh`,
    /// oldest first, for term `term` of process instance `instance`, while that term
    /// leads (none otherwise): each is then this term's to carry out, and no other's.
    /// An older one is never carried out (its node has told its client that nothing was
    /// done).
    pub fn take_requests(
        &self,
        term: u64,
        instance: &str,
        limit: usize,
        fresh: Duration,
    ) -> Result<Vec<(u64, ForwardedRequest)>, StoreError> {
        let term = signed("term", term)?;
        let instance = instance.to_string();
        let (limit, fresh) = (i64::try_from(limit).unwrap_or(i64::MAX), millis(fresh));
        self.read(|conn| async move {
            let sql = format!(
                "UPDATE cluster_requests SET taken_term = $1
                 WHERE id IN (SELECT id FROM cluster_requests
                              WHERE taken_term IS NULL AND to_node IS NULL
                                 AND created_ms > {NOW_MS} - $4
                              ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
                    AND EXISTS (SELECT 1 FROM cluster_leader
                                WHERE term = $1 AND instance = $2)
                 RETURNING id, from_node, to_node, actor, role, owner, request"
            );
            taken_rows(
                conn.query(&sql, &[&term, &instance, &limit, &fresh])
                    .await?,
            )
        })
    }

    /// Takes at most `limit` waiting requests for node `node` written within `fresh`,
    /// oldest first, while instance `instance`'s lease runs (none otherwise).
    pub fn take_node_requests(
        &self,
        node: &str,
        instance: &str,
        limit: usize,
        fresh: Duration,
    ) -> Result<Vec<(u64, ForwardedRequest)>, StoreError> {
        let (node, instance) = (node.to_string(), instance.to_string());
        let (limit, fresh) = (i64::try_from(limit).unwrap_or(i64::MAX), millis(fresh));
        self.read(|conn| async move {
            let sql = format!(
                "UPDATE cluster_requests SET taken_term = 0
                 WHERE id IN (SELECT id FROM cluster_requests
                              WHERE taken_term IS NULL AND to_node = $1
                                 AND created_ms > {NOW_MS} - $4
                              ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
                    AND {}
                 RETURNING id, from_node, to_node, actor, role, owner, request",
                lease_runs()
            );
            taken_rows(
                conn.query(&sql, &[&node, &instance, &limit, &fresh])
                    .await?,
            )
        })
    }

    /// Writes the answer (`frames`) to request `id`, taken by term `term`, and wakes the
    /// standbys; false when the row is gone (the standby gave up on it).
    pub fn answer_request(&self, id: u64, term: u64, frames: Vec<u8>) -> Result<bool, StoreError> {
        let (id, term) = (signed("request", id)?, signed("term", term)?);
        self.read(|conn| async move {
            let sql = format!(
                "WITH a AS (
                    UPDATE cluster_requests SET reply = $3, answered_ms = {NOW_MS}
                    WHERE id = $1 AND taken_term = $2 RETURNING id
                 )
                 SELECT pg_notify($4, '') FROM a"
            );
            let channel = REPLIES_CHANNEL;
            let answered = conn
                .query_opt(&sql, &[&id, &term, &frames, &channel])
                .await?;
            Ok(answered.is_some())
        })
    }

    /// Where request `id` stands.
    pub fn request_state(&self, id: u64) -> Result<RequestState, StoreError> {
        let id = signed("request", id)?;
        self.read(|conn| async move {
            let row = conn
                .query_opt(
                    "SELECT r.taken_term, r.reply,
                        r.to_node IS NOT NULL OR r.taken_term = l.term
                     FROM cluster_requests AS r CROSS JOIN cluster_leader AS l
                     WHERE r.id = $1",
                    &[&id],
                )
                .await?;
            let Some(row) = row else {
                return Ok(RequestState::Missing);
            };
            let taken: Option<i64> = row.try_get(0).map_err(pg)?;
            let reply: Option<Vec<u8>> = row.try_get(1).map_err(pg)?;
            let leading: Option<bool> = row.try_get(2).map_err(pg)?;
            Ok(match (taken, reply) {
                (_, Some(frames)) => RequestState::Answered(frames),
                (None, None) => RequestState::Waiting,
                (Some(term), None) => RequestState::Taken {
                    term: unsigned("term", term)?,
                    leading: leading.unwrap_or(false),
                },
            })
        })
    }

    /// Removes request `id` if no leader has taken it yet; true when it was removed
    /// (it will never be carried out).
    pub fn withdraw_request(&self, id: u64) -> Result<bool, StoreError> {
        let id = signed("request", id)?;
        self.read(|conn| async move {
            let removed = conn
                .execute(
                    "DELETE FROM cluster_requests WHERE id = $1 AND taken_term IS NULL",
                    &[&id],
                )
                .await?;
            Ok(removed > 0)
        })
    }

    /// Removes request `id` (its answer read, or never to come).
    pub fn forget_request(&self, id: u64) -> Result<(), StoreError> {
        let id = signed("request", id)?;
        self.read(|conn| async move {
            conn.execute("DELETE FROM cluster_requests WHERE id = $1", &[&id])
                .await?;
            Ok(())
        })
    }

    /// Removes the requests nobody will read: answers unread for ten minutes (their
    /// client is gone), requests taken by an earlier term than `term` and not answered
    /// (never to be), requests not taken within `fresh` (never to be), and any row
    /// older than a day. How many were removed.
    pub fn sweep_requests(&self, term: u64, fresh: Duration) -> Result<u64, StoreError> {
        let (term, fresh) = (signed("term", term)?, millis(fresh));
        self.read(|conn| async move {
            let sql = format!(
                "DELETE FROM cluster_requests
                 WHERE (reply IS NOT NULL AND answered_ms < {NOW_MS} - {UNREAD_ANSWER_MS})
                    OR (reply IS NULL AND to_node IS NULL AND taken_term < $1)
                    OR (taken_term IS NULL AND created_ms < {NOW_MS} - $2)
                    OR created_ms < {NOW_MS} - {LONGEST_MS}"
            );
            conn.execute(&sql, &[&term, &fresh]).await
        })
    }

    /// Wake-ups when a standby forwards a request (for the leader).
    pub fn request_wakeups(&self) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        self.wakeups(REQUESTS_CHANNEL)
    }

    /// Wake-ups when the leader answers a request (for the standbys).
    pub fn reply_wakeups(&self) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        self.wakeups(REPLIES_CHANNEL)
    }
}

/// The requests `rows` returned (id, from, to, actor, role, owner, request), by id.
fn taken_rows(rows: Vec<tokio_postgres::Row>) -> Result<Vec<(u64, ForwardedRequest)>, StoreError> {
    let mut taken = Vec::with_capacity(rows.len());
    for row in rows {
        let id = unsigned("request", row.try_get(0).map_err(pg)?)?;
        taken.push((
            id,
            ForwardedRequest {
                from_node: row.try_get(1).map_err(pg)?,
                to_node: row.try_get(2).map_err(pg)?,
                actor: row.try_get(3).map_err(pg)?,
                role: row.try_get(4).map_err(pg)?,
                owner: row.try_get(5).map_err(pg)?,
                request: row.try_get(6).map_err(pg)?,
            },
        ));
    }
    taken.sort_by_key(|(id, _)| *id);
    Ok(taken)
}
