//! The cluster's two tables: `cluster_nodes` (one row per node, its lease renewed by its
//! heartbeat) and `cluster_leader` (the one leadership row: its term, and the node and
//! process instance holding it). Every lease is measured by the server's clock.
//!
//! A node leads while its own lease runs; another node takes over only once the leader's
//! lease has run out, by raising the term. A node restarted in the same home (host and
//! data directory) replaces its dead instance's row at once, keeping that instance's lease
//! as `fenced_until_ms`: it may lead again at once (its supervisor's attempts are its own),
//! but no other node takes over before the dead instance's attempts are stopped. The leader's commits check the term in their own
//! transaction (`fence`), under a share lock of the leadership row that the takeover's
//! update must wait for: no commit of a deposed leader can land after a takeover.

use std::sync::Arc;
use std::time::Duration;

use orch_protocol::{Leadership, NodeInfo, NodeRole};
use tokio_postgres::types::ToSql;

use super::bridge::{Conn, pg};
use super::{PostgresStore, codec::unsigned};
use crate::store::StoreError;

/// The server's clock, in milliseconds since the Unix epoch.
pub(super) const NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// What a node registers about itself.
#[derive(Debug, Clone)]
pub struct NodeRecord {
    /// Its name, unique in the cluster.
    pub name: String,
    /// This process's instance (random): a later daemon under the same name is another.
    pub instance: String,
    /// Where it runs: its host and its data directory's id. A daemon of the same home
    /// holds the data directory's lock, so an earlier instance of that home is dead.
    pub home: String,
    /// The host it runs on.
    pub host: String,
    /// The daemon's process id.
    pub pid: u32,
    /// Its socket.
    pub socket: String,
    /// Its HTTP address, if any.
    pub http: Option<String>,
    /// How many tasks it may run at once.
    pub parallel: u32,
    /// Its labels.
    pub labels: Vec<String>,
}

/// The outcome of a registration.
#[derive(Debug)]
pub enum Registration {
    /// The node's row is this instance's.
    Registered,
    /// A live daemon holds the name (its lease runs).
    Taken {
        /// Its host.
        host: String,
        /// Its process id.
        pid: u32,
    },
}

/// The leadership row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The term.
    pub term: u64,
    /// The leading node.
    pub node: String,
    /// Its process instance.
    pub instance: String,
}

/// What a heartbeat found.
#[derive(Debug)]
pub struct Beat {
    /// Whether the node's row is still this instance's (it was renewed).
    pub renewed: bool,
    /// The leadership as it is now.
    pub leader: Option<Leader>,
    /// Whether the leader holds on for this node: its lease runs, or (for another node
    /// than the leader's) a dead instance's attempts may still run. False with no leader.
    pub leader_alive: bool,
}

impl PostgresStore {
    /// Registers `node` with a lease of `lease` (replacing a row whose lease ran out, or
    /// this same instance's); a name a live daemon holds is refused as [`Registration::Taken`].
    pub fn register_node(
        &self,
        node: &NodeRecord,
        lease: Duration,
    ) -> Result<Registration, StoreError> {
        let node = node.clone();
        let lease_ms = millis(lease);
        let labels = serde_json::to_string(&node.labels).unwrap_or_else(|_| "[]".into());
        self.on_cluster_conn(move |conn| async move {
            let sql = format!(
                "INSERT INTO cluster_nodes AS n (node, instance, home, host, pid, socket, http,
                    parallel, labels, version, started_ms, heartbeat_ms, expires_ms,
                    runs_placements)
                 VALUES ($1, $2, $11, $3, $4, $5, $6, $7, $8, $9, {NOW_MS}, {NOW_MS}, {NOW_MS} + $10,
                    true)
                 ON CONFLICT (node) DO UPDATE SET instance = EXCLUDED.instance,
                    runs_placements = EXCLUDED.runs_placements,
                    home = EXCLUDED.home,
                    fenced_until_ms = GREATEST(n.expires_ms, n.fenced_until_ms),
                    host = EXCLUDED.host, pid = EXCLUDED.pid, socket = EXCLUDED.socket,
                    http = EXCLUDED.http, parallel = EXCLUDED.parallel, labels = EXCLUDED.labels,
                    version = EXCLUDED.version, started_ms = EXCLUDED.started_ms,
                    heartbeat_ms = EXCLUDED.heartbeat_ms, expires_ms = EXCLUDED.expires_ms
                 WHERE (n.expires_ms <= {NOW_MS} AND n.fenced_until_ms <= {NOW_MS})
                    OR n.instance = EXCLUDED.instance OR n.home = EXCLUDED.home"
            );
            let pid = i32::try_from(node.pid).unwrap_or(i32::MAX);
            let parallel = i32::try_from(node.parallel).unwrap_or(i32::MAX);
            let version = env!("CARGO_PKG_VERSION");
            let changed = conn
                .execute(
                    &sql,
                    &[
                        &node.name,
                        &node.instance,
                        &node.host,
                        &pid,
                        &node.socket,
                        &node.http,
                        &parallel,
                        &labels,
                        &version,
                        &lease_ms,
                        &node.home,
                    ],
                )
                .await?;
            if changed == 1 {
                return Ok(Registration::Registered);
            }
            let row = conn
                .query_opt(
                    "SELECT host, pid FROM cluster_nodes WHERE node = $1",
                    &[&node.name],
                )
                .await?;
            let (host, pid) = match row {
                Some(row) => (
                    row.try_get::<_, String>(0).map_err(pg)?,
                    row.try_get::<_, i32>(1).map_err(pg)?,
                ),
                None => (String::new(), 0),
            };
            Ok(Registration::Taken {
                host,
                pid: u32::try_from(pid).unwrap_or(0),
            })
        })
    }

    /// Renews the lease of node `name` (instance `instance`) for `lease`, and reads the
    /// leadership, in one statement.
    pub fn heartbeat(
        &self,
        name: &str,
        instance: &str,
        lease: Duration,
    ) -> Result<Beat, StoreError> {
        let (name, instance, lease_ms) = (name.to_string(), instance.to_string(), millis(lease));
        self.on_cluster_conn(move |conn| async move {
            let sql = format!(
                "WITH beat AS (
                    UPDATE cluster_nodes SET heartbeat_ms = {NOW_MS}, expires_ms = {NOW_MS} + $3
                    WHERE node = $1 AND instance = $2 RETURNING 1
                 )
                 SELECT (SELECT count(*) FROM beat), NULLIF(l.term, 0), l.node, l.instance,
                    EXISTS (SELECT 1 FROM cluster_nodes AS n WHERE n.node = l.node AND (
                        (n.instance = l.instance AND n.expires_ms > {NOW_MS})
                        OR (n.node <> $1 AND n.fenced_until_ms > {NOW_MS})))
                 FROM (SELECT 1) AS one LEFT JOIN cluster_leader AS l ON true"
            );
            let row = conn
                .query_opt(&sql, &[&name, &instance, &lease_ms])
                .await?
                .ok_or_else(|| StoreError::Backend("the heartbeat returned no row".into()))?;
            let renewed = row.try_get::<_, i64>(0).map_err(pg)? == 1;
            let leader = match row.try_get::<_, Option<i64>>(1).map_err(pg)? {
                Some(term) => Some(Leader {
                    term: unsigned("term", term)?,
                    node: row.try_get(2).map_err(pg)?,
                    instance: row.try_get(3).map_err(pg)?,
                }),
                None => None,
            };
            let leader_alive = row.try_get::<_, bool>(4).map_err(pg)?;
            Ok(Beat {
                renewed,
                leader,
                leader_alive,
            })
        })
    }

    /// Takes the leadership for node `name` (instance `instance`) when no live node holds
    /// it and this node's own lease runs: the term is raised and returned. `None` while
    /// another live node leads (or this node's lease ran out).
    pub fn try_lead(&self, name: &str, instance: &str) -> Result<Option<u64>, StoreError> {
        let (name, instance) = (name.to_string(), instance.to_string());
        self.on_cluster_conn(move |conn| async move {
            let work = async {
                let count = |sql: String, params: Vec<String>| {
                    let conn = conn.clone();
                    async move {
                        let params: Vec<&(dyn ToSql + Sync)> =
                            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                        let row = conn.query_opt(&sql, &params).await?;
                        let n: i64 = match row {
                            Some(row) => row.try_get(0).map_err(pg)?,
                            None => 0,
                        };
                        Ok::<bool, StoreError>(n > 0)
                    }
                };
                let me_alive = format!(
                    "SELECT count(*) FROM cluster_nodes
                     WHERE node = $1 AND instance = $2 AND expires_ms > {NOW_MS}"
                );
                if !count(me_alive, vec![name.clone(), instance.clone()]).await? {
                    return Ok(None);
                }
                // The leader holds on while its lease runs; for another node than the
                // leader's, also while a dead instance of the leader's node may run attempts.
                let holds_on = format!(
                    "SELECT count(*) FROM cluster_nodes
                     WHERE node = $1 AND ((instance = $2 AND expires_ms > {NOW_MS})
                        OR (node <> $3 AND fenced_until_ms > {NOW_MS}))"
                );
                // A leader stuck in a transaction (paused, cut off) holds the row's lock
                // until the server ends its session: wait for it only briefly.
                conn.batch("SET LOCAL lock_timeout = '2s'").await?;
                let current = conn
                    .query_opt(
                        "SELECT term, node, instance FROM cluster_leader FOR UPDATE",
                        &[],
                    )
                    .await?;
                let term = match current {
                    None => {
                        return Err(StoreError::Backend(
                            "the leadership row is missing (schema migration 2 creates it)".into(),
                        ));
                    }
                    Some(row) => {
                        let term: i64 = row.try_get(0).map_err(pg)?;
                        let holder: String = row.try_get(1).map_err(pg)?;
                        let holder_instance: String = row.try_get(2).map_err(pg)?;
                        let params = vec![holder, holder_instance, name.clone()];
                        if count(holds_on.clone(), params).await? {
                            return Ok(None);
                        }
                        term + 1
                    }
                };
                let sql = format!(
                    "UPDATE cluster_leader SET term = $1, node = $2, instance = $3,
                        since_ms = {NOW_MS}"
                );
                conn.execute(&sql, &[&term, &name, &instance]).await?;
                Ok(Some(unsigned("term", term)?))
            };
            conn.transaction("BEGIN", work).await
        })
    }

    /// From now on every write of this store checks, in its own transaction, that the
    /// leadership is still term `term` of process instance `instance`; a write after a
    /// takeover is refused with [`StoreError::Fenced`] and changes nothing.
    pub fn fence(&self, term: u64, instance: &str) {
        *self
            .fence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Fence {
            term,
            instance: instance.to_string(),
        });
    }

    /// Every node, by name, with its role, and the leadership.
    pub fn cluster(&self) -> Result<(Option<Leadership>, Vec<NodeInfo>), StoreError> {
        self.read(|conn| async move {
            let now: i64 = conn
                .query_opt(&format!("SELECT {NOW_MS}"), &[])
                .await?
                .map(|r| r.try_get(0))
                .transpose()
                .map_err(pg)?
                .unwrap_or(0);
            let leader = conn
                .query_opt(
                    "SELECT term, node, instance, since_ms FROM cluster_leader WHERE term > 0",
                    &[],
                )
                .await?;
            let leader = match leader {
                Some(row) => Some((
                    Leadership {
                        term: unsigned("term", row.try_get(0).map_err(pg)?)?,
                        node: row.try_get(1).map_err(pg)?,
                        since: time(row.try_get(3).map_err(pg)?),
                    },
                    row.try_get::<_, String>(2).map_err(pg)?,
                )),
                None => None,
            };
            let rows = conn
                .query(
                    "SELECT node, instance, host, pid, socket, http, parallel, labels, version,
                        started_ms, heartbeat_ms, expires_ms
                     FROM cluster_nodes ORDER BY node",
                    &[],
                )
                .await?;
            let mut nodes = Vec::with_capacity(rows.len());
            for row in rows {
                let name: String = row.try_get(0).map_err(pg)?;
                let instance: String = row.try_get(1).map_err(pg)?;
                let expires: i64 = row.try_get(11).map_err(pg)?;
                let leads = leader
                    .as_ref()
                    .is_some_and(|(l, i)| l.node == name && *i == instance);
                let role = match (expires > now, leads) {
                    (false, _) => NodeRole::Down,
                    (true, true) => NodeRole::Leader,
                    (true, false) => NodeRole::Standby,
                };
                let labels: String = row.try_get(7).map_err(pg)?;
                nodes.push(NodeInfo {
                    name,
                    role,
                    host: row.try_get(2).map_err(pg)?,
                    pid: u32::try_from(row.try_get::<_, i32>(3).map_err(pg)?).unwrap_or(0),
                    socket: row.try_get(4).map_err(pg)?,
                    http: row.try_get(5).map_err(pg)?,
                    parallel: u32::try_from(row.try_get::<_, i32>(6).map_err(pg)?).unwrap_or(0),
                    labels: serde_json::from_str(&labels).unwrap_or_default(),
                    version: row.try_get(8).map_err(pg)?,
                    started_at: time(row.try_get(9).map_err(pg)?),
                    heartbeat_at: time(row.try_get(10).map_err(pg)?),
                    lease_until: time(expires),
                });
            }
            Ok((leader.map(|(l, _)| l), nodes))
        })
    }

    /// Ends node `name`'s lease now if its row is still instance `instance`'s (a clean
    /// stop: the others need not wait for it to run out). With `attempts_left` (a stop that
    /// leaves running attempts to the supervisor, which stops them at its fence), the
    /// lease it had stays as `fenced_until_ms`, so that no other node takes over before.
    pub fn leave(&self, name: &str, instance: &str, attempts_left: bool) -> Result<(), StoreError> {
        let (name, instance) = (name.to_string(), instance.to_string());
        self.on_cluster_conn(move |conn| async move {
            let sql = format!(
                "UPDATE cluster_nodes SET expires_ms = {NOW_MS},
                    fenced_until_ms = CASE WHEN $3 THEN GREATEST(fenced_until_ms, expires_ms)
                        ELSE fenced_until_ms END
                 WHERE node = $1 AND instance = $2"
            );
            conn.execute(&sql, &[&name, &instance, &attempts_left])
                .await
                .map(drop)
        })
    }

    /// Ends every transaction of this store's writer that stays idle for `limit` (a
    /// leader paused in the middle of one): the server ends its session and its locks
    /// go, so that a takeover does not wait for TCP to give up.
    pub fn end_idle_transactions_after(&self, limit: Duration) -> Result<(), StoreError> {
        let sql = format!(
            "SET idle_in_transaction_session_timeout = {}",
            millis(limit)
        );
        let conn = self.writer.clone();
        self.bridge.run(async move { conn.batch(&sql).await })
    }

    /// Runs `work` on the connection of the cluster's calls (opened at the first), so
    /// that a heartbeat never waits behind a commit or a long read (views use the
    /// reader's connection, so that they never wait behind an election).
    fn on_cluster_conn<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Conn>) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        // Held for the whole call: one call at a time, so that no statement is sent into
        // another call's transaction. A call that fails drops the connection (it may be
        // stuck, or in an aborted transaction); the next opens a new one.
        let mut slot = self
            .cluster_conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let conn = match &*slot {
            Some(conn) if !conn.is_closed() => conn.clone(),
            _ => {
                let conn = self.bridge.connect()?;
                *slot = Some(conn.clone());
                conn
            }
        };
        let result = self.bridge.run(work(conn));
        if result.is_err() {
            *slot = None;
        }
        result
    }
}

/// The leadership a fenced store's writes check.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    pub(super) term: u64,
    pub(super) instance: String,
}

impl Fence {
    /// Checks, in the open transaction on `conn`, that the leadership is still this one
    /// and its lease runs, holding a share lock of its row until the transaction ends (a
    /// takeover waits).
    pub(super) async fn check(&self, conn: &Conn) -> Result<(), StoreError> {
        let term = i64::try_from(self.term).unwrap_or(i64::MAX);
        let sql = format!(
            "SELECT 1 FROM cluster_leader AS l JOIN cluster_nodes AS n
                ON n.node = l.node AND n.instance = l.instance
             WHERE l.term = $1 AND l.instance = $2 AND n.expires_ms > {NOW_MS}
             FOR SHARE OF l"
        );
        let row = conn.query_opt(&sql, &[&term, &self.instance]).await?;
        match row {
            Some(_) => Ok(()),
            None => Err(StoreError::Fenced { term: self.term }),
        }
    }
}

/// `d` in whole milliseconds, as the server's bigint.
pub(super) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the epoch as a time.
fn time(ms: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
