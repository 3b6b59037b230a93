//! The schema: an ordered list of migrations embedded in the binary, and the
//! `schema_version` table that says how many of them a database has had.
//!
//! Each migration runs in a transaction of its own that first takes a transaction-scoped
//! advisory lock, so that daemons starting together against one database apply each
//! migration once (the second waits, then finds it applied). A database whose version is
//! above what this binary knows is refused and left as it is.

use super::bridge::Conn;
use crate::store::StoreError;

/// The advisory lock key held while the schema is checked or migrated.
const LOCK: i64 = 0x6f72_6368_7374_6f72; // "orchstor"

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the tables and their indexes.
    "CREATE TABLE tasks (
        id bigint PRIMARY KEY,
        status smallint NOT NULL,
        priority integer NOT NULL,
        label text,
        body text NOT NULL
    );
    CREATE INDEX tasks_by_status ON tasks (status, id);
    CREATE INDEX tasks_by_label ON tasks (label, id) WHERE label IS NOT NULL;
    CREATE INDEX tasks_queue ON tasks (priority DESC, id) WHERE status = {QUEUED};
    CREATE TABLE task_counts (status smallint PRIMARY KEY, n bigint NOT NULL);
    CREATE TABLE events (seq bigint PRIMARY KEY, body text NOT NULL);
    CREATE TABLE meta (key text PRIMARY KEY, value bigint NOT NULL);
    CREATE TABLE workflows (id bigint PRIMARY KEY, status text NOT NULL, body text NOT NULL);
    CREATE TABLE workflow_counts (status text PRIMARY KEY, n bigint NOT NULL);
    CREATE TABLE test_envs (id bigint PRIMARY KEY, body text NOT NULL);
    CREATE TABLE audit (seq bigint PRIMARY KEY, action text NOT NULL, body text NOT NULL);
    CREATE TABLE audit_head (
        id smallint PRIMARY KEY CHECK (id = 0),
        seq bigint NOT NULL,
        hash text NOT NULL
    );
    CREATE TABLE audit_segments (first_seq bigint PRIMARY KEY, body text NOT NULL);",
    // 2: the cluster: the nodes (renewed by their heartbeats; room left on each page so
    // that the updates stay HOT and leave little to vacuum) and the leadership. Times are
    // milliseconds since the Unix epoch by the server's clock, the one clock every node's
    // lease is measured by.
    "CREATE TABLE cluster_nodes (
        node text PRIMARY KEY,
        instance text NOT NULL,
        home text NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        socket text NOT NULL,
        http text,
        parallel integer NOT NULL,
        labels text NOT NULL,
        version text NOT NULL,
        started_ms bigint NOT NULL,
        heartbeat_ms bigint NOT NULL,
        expires_ms bigint NOT NULL,
        fenced_until_ms bigint NOT NULL DEFAULT 0
    ) WITH (fillfactor = 50);
    CREATE TABLE cluster_leader (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        term bigint NOT NULL,
        node text NOT NULL,
        instance text NOT NULL,
        since_ms bigint NOT NULL
    );
    INSERT INTO cluster_leader (term, node, instance, since_ms) VALUES (0, '', '', 0);",
    // 3: the attempts placed on the nodes of a cluster: written with each attempt's
    // `Running` record, run by the node's worker (which notes its instance before it
    // starts the process, and its outcome once it ends), removed with the outcome's
    // commit; and which nodes run placed attempts (a daemon of an earlier binary, still
    // running when a newer one migrated the schema, does not: none is placed on it).
    "CREATE TABLE cluster_attempts (
        task_id bigint NOT NULL,
        attempt integer NOT NULL,
        node text NOT NULL,
        spec text NOT NULL,
        stop boolean NOT NULL DEFAULT false,
        launched_by text,
        outcome text,
        PRIMARY KEY (task_id, attempt)
    );
    CREATE INDEX cluster_attempts_by_node ON cluster_attempts (node, task_id)
        WHERE outcome IS NULL;
    CREATE INDEX cluster_attempts_ended ON cluster_attempts (task_id)
        WHERE outcome IS NOT NULL;
    ALTER TABLE cluster_nodes ADD COLUMN runs_placements boolean NOT NULL DEFAULT false;",
    // 4: the requests a node forwards for its client: to the leader (a change, or a
    // test environment's), taken under its term before it acts on them, or to another
    // node (`to_node`: the log of an attempt it ran); answered with the frames the
    // client is to receive; the forwarding node removes the row once it has read them.
    // And the latest progress of an attempt a node runs, for the leader's events.
    "CREATE TABLE cluster_requests (
        id bigserial PRIMARY KEY,
        from_node text NOT NULL,
        to_node text,
        actor text NOT NULL,
        role text NOT NULL,
        owner boolean NOT NULL,
        request bytea NOT NULL,
        created_ms bigint NOT NULL,
        taken_term bigint,
        reply bytea,
        answered_ms bigint
    );
    CREATE INDEX cluster_requests_waiting ON cluster_requests (to_node, id)
        WHERE taken_term IS NULL;
    ALTER TABLE cluster_attempts ADD COLUMN progress text,
        ADD COLUMN progress_version bigint NOT NULL DEFAULT 0;",
    // 5: delayed tasks (status code 8, a spec's `not_before`): no table changes, but
    // records a daemon of an earlier version cannot read; the version makes it refuse
    // the store rather than fail on them.
    "SELECT 1;",
    // 6: groups and pauses: the queue's controls (one row), and whether a placed attempt
    // is to be paused (SIGSTOP) by its node. Tasks may name a group and running ones be
    // paused, which a daemon of an earlier version cannot read. And the schedules, the
    // notifiers and the outbox of their notifications (by key: the oldest events first).
    "CREATE TABLE queue_controls (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        body text NOT NULL
    );
    CREATE TABLE schedules (name text PRIMARY KEY, body text NOT NULL);
    CREATE TABLE notifiers (name text PRIMARY KEY, body text NOT NULL);
    CREATE TABLE notify_outbox (
        key text PRIMARY KEY,
        body text NOT NULL,
        notifier text NOT NULL,
        due_ms bigint NOT NULL
    );
    CREATE INDEX notify_outbox_due ON notify_outbox (notifier, due_ms, key);
    ALTER TABLE cluster_attempts ADD COLUMN paused boolean NOT NULL DEFAULT false;",
    // 7: stashed tasks (status code 9): no table changes, but records a daemon of an
    // earlier version cannot read; the version makes it refuse the store.
    "SELECT 1;",
    // 8: signals and input for a placed attempt (`orch kill --signal`, `orch send`), as
    // JSON, in the order they were asked for; its node passes on those it has not yet.
    // Tasks may take input (a spec's `stdin`), which a daemon of an earlier version
    // cannot read.
    "ALTER TABLE cluster_attempts ADD COLUMN nudges text[] NOT NULL DEFAULT '{}';",
    // 9: the event log may hold `env` events (a test environment's changes), which a
    // daemon of an earlier version cannot read: no table changes, the version makes it
    // refuse the store.
    "SELECT 1;",
];

/// The schema version this binary writes.
pub(super) const CURRENT: i32 = MIGRATIONS.len() as i32;

/// Migration `index` as SQL (with the queued status's code in the queue index).
fn migration(index: usize) -> String {
    let queued = orch_protocol::TaskStatus::Queued.code().to_string();
    MIGRATIONS[index].replace("{QUEUED}", &queued)
}

/// What [`upgrade`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Upgrade {
    /// The schema was already current.
    Current,
    /// The schema was brought from this version to [`CURRENT`].
    Migrated(i32),
}

/// Brings the database to [`CURRENT`], or refuses a newer schema (as the problem to
/// report, nothing changed).
pub(super) async fn upgrade(conn: &Conn) -> Result<Result<Upgrade, String>, StoreError> {
    let mut from = None;
    for index in 0..MIGRATIONS.len() {
        let target = index as i32 + 1;
        let step = conn
            .transaction("BEGIN", async {
                let found = locked_version(conn).await?;
                if found > CURRENT {
                    return Ok(Err(found));
                }
                if found >= target {
                    return Ok(Ok(found));
                }
                conn.batch(&migration(index)).await?;
                conn.execute("UPDATE schema_version SET version = $1", &[&target])
                    .await?;
                Ok(Ok(found))
            })
            .await?;
        match step {
            Err(newer) => {
                return Ok(Err(format!(
                    "its schema version is {newer}, written by a newer daemon; this one knows versions up to {CURRENT}"
                )));
            }
            Ok(found) if found < target => {
                from.get_or_insert(found);
            }
            Ok(_) => {}
        }
    }
    Ok(Ok(match from {
        Some(0) | None => Upgrade::Current,
        Some(version) => Upgrade::Migrated(version),
    }))
}

/// Takes the schema lock (for the rest of the transaction) and reads the version, creating
/// the version table at 0 on a database that has none.
async fn locked_version(conn: &Conn) -> Result<i32, StoreError> {
    conn.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK])
        .await?;
    conn.batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
            version integer NOT NULL
        );
        INSERT INTO schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;",
    )
    .await?;
    let row = conn
        .query_opt("SELECT version FROM schema_version", &[])
        .await?;
    match row {
        Some(row) => row.try_get(0).map_err(super::bridge::pg),
        None => Ok(0),
    }
}
