//! The PostgreSQL backend against a real server, named by `PROVISIONING_TEST_DATABASE_URL`
//! (`scripts/postgres.sh start DIR` starts one and prints it). Each test works in a
//! database of its own, created for it and dropped afterwards, even when it fails.

use super::*;
use std::time::Duration;

use crate::store::TaskWrite;
use crate::store::conformance::{Fixture, conformance_tests, task};

/// The variable naming the test server.
const URL_VARIABLE: &str = "PROVISIONING_TEST_DATABASE_URL";

/// The test server's URL; fails the test, saying how to start one, when it is not set.
fn server_url() -> String {
    std::env::var(URL_VARIABLE).unwrap_or_else(|_| {
        panic!(
            "{URL_VARIABLE} is not set: the PostgreSQL store's tests need a server. Start one with \
             `export {URL_VARIABLE}=$(scripts/postgres.sh start /tmp/orch-pg)` and run them again \
             (`scripts/postgres.sh stop /tmp/orch-pg` removes it afterwards)"
        )
    })
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority_from = base.find("://").map_or(0, |i| i + 3);
    let path_from = base[authority_from..]
        .find('/')
        .map_or(base.len(), |i| authority_from + i);
    format!("{}/{database}{query}", &base[..path_from])
}

/// Runs `sql` against the database at `url` (from outside any runtime), returning the
/// first column of the first row as text, if any.
fn sql(url: &str, sql: &str) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let messages = client.simple_query(sql).await.unwrap();
        messages.into_iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
    })
}

/// A database of the test's own, dropped (with its connections) when the test ends.
struct Database {
    server: String,
    name: String,
    url: String,
    dir: tempfile::TempDir,
}

impl Database {
    fn create() -> Database {
        let server = server_url();
        let name = format!("orch_test_{:016x}", fastrand::u64(..));
        sql(&server, &format!("CREATE DATABASE {name}"));
        Database {
            url: with_database(&server, &name),
            server,
            name,
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let drop_it = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Not a second panic while a failed test unwinds.
        let server = self.server.clone();
        let dropped = std::thread::spawn(move || sql(&server, &drop_it)).join();
        if dropped.is_err() {
            eprintln!("could not drop the test database {}", self.name);
        }
    }
}

impl Fixture for Database {
    fn open(&self) -> Box<dyn Store> {
        Box::new(PostgresStore::connect(&self.url).unwrap())
    }

    fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

conformance_tests!(Database::create());

#[test]
fn the_backend_is_named_postgres_and_its_url_helper_keeps_the_query() {
    let db = Database::create();
    assert_eq!(db.open().backend_name(), "postgres");
    let url = with_database("postgres://u:p@h:1/postgres?sslmode=disable", "x");
    assert_eq!(url, "postgres://u:p@h:1/x?sslmode=disable");
}

#[test]
fn a_database_of_a_newer_schema_is_refused_and_left_as_it_is() {
    let db = Database::create();
    drop(db.open());
    let newer = schema::CURRENT + 1;
    sql(
        &db.url,
        &format!("UPDATE schema_version SET version = {newer}"),
    );
    let error = PostgresStore::connect(&db.url).err().unwrap();
    let message = error.to_string();
    assert!(
        matches!(error, StoreError::Unusable { .. }) && message.contains("newer daemon"),
        "{message}"
    );
    let version = sql(&db.url, "SELECT version FROM schema_version");
    assert_eq!(version, Some(newer.to_string()));
}

#[test]
fn daemons_starting_together_migrate_once_and_take_the_database_in_turn() {
    let db = Database::create();
    let url = db.url.clone();
    let starts: Vec<_> = (0..3)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || PostgresStore::connect(&url).map(drop))
        })
        .collect();
    for start in starts {
        start.join().unwrap().unwrap();
    }
    let version = sql(&db.url, "SELECT version FROM schema_version");
    assert_eq!(version, Some(schema::CURRENT.to_string()));
}

#[test]
fn a_second_daemon_on_the_same_database_is_refused_clearly() {
    let db = Database::create();
    let _first = db.open();
    let error = PostgresStore::connect(&db.url).err().unwrap();
    assert!(matches!(error, StoreError::AlreadyOpen { .. }), "{error}");
    assert!(error.to_string().contains(&db.name), "{error}");
}

#[test]
fn errors_name_the_server_and_never_the_password() {
    let server = server_url();
    let missing = with_database(&server, "orch_test_no_such_database");
    let with_password = missing.replacen("://postgres@", "://postgres:s3cret-pw@", 1);
    let error = PostgresStore::connect(&with_password)
        .err()
        .unwrap()
        .to_string();
    assert!(!error.contains("s3cret"), "{error}");
    assert!(error.contains("/orch_test_no_such_database"), "{error}");
    let nobody = "postgres://orch:s3cret-pw@127.0.0.1:1/orch";
    let error = PostgresStore::connect(nobody).err().unwrap().to_string();
    assert!(!error.contains("s3cret"), "{error}");
    assert!(error.contains("127.0.0.1:1/orch"), "{error}");
}

#[test]
fn the_store_is_used_and_dropped_from_inside_the_daemons_runtime() {
    let db = Database::create();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = db.url.clone();
    let read = runtime.block_on(async move {
        let store = PostgresStore::connect(&url).unwrap();
        let batch = WriteBatch {
            tasks: vec![TaskWrite {
                task: task(
                    1,
                    0,
                    orch_protocol::TaskState::Queued {
                        since: chrono::Utc::now(),
                    },
                ),
                previous: None,
                reindex: None,
            }],
            ..WriteBatch::default()
        };
        store.commit(&batch).unwrap();
        let read = tokio::task::spawn_blocking({
            let store = std::sync::Arc::new(store);
            move || store.get(1).map(|t| t.map(|t| t.id))
        });
        read.await.unwrap()
    });
    assert_eq!(read.unwrap(), Some(1));
}

#[test]
fn the_group_committer_and_concurrent_readers_share_the_store() {
    use std::sync::Arc;
    let db = Database::create();
    let store: Arc<dyn Store> = Arc::from(db.open());
    let (committer, writer) = crate::store::GroupCommitter::start(store.clone(), Box::new(|_| {}));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut jobs = Vec::new();
        for worker in 0..8u64 {
            let committer = committer.clone();
            jobs.push(tokio::spawn(async move {
                for n in 0..25u64 {
                    let id = worker * 25 + n + 1;
                    let actor = orch_protocol::Actor {
                        uid: 0,
                        interface: "socket".into(),
                    };
                    let params = serde_json::json!({ "id": id });
                    let batch = WriteBatch {
                        tasks: vec![TaskWrite {
                            task: task(
                                id,
                                (id % 3) as i32,
                                orch_protocol::TaskState::Queued {
                                    since: chrono::Utc::now(),
                                },
                            ),
                            previous: None,
                            reindex: None,
                        }],
                        events: vec![Event {
                            seq: id,
                            at: chrono::Utc::now(),
                            task: id,
                            workflow: None,
                            kind: orch_protocol::EventKind::Queued,
                        }],
                        audit: vec![crate::audit::AuditRecord::new(
                            actor,
                            "submit",
                            params,
                            Ok("ok".into()),
                        )],
                        ..WriteBatch::default()
                    };
                    committer.commit(batch).await.unwrap();
                }
            }));
        }
        for _ in 0..4 {
            let store = store.clone();
            jobs.push(tokio::spawn(async move {
                for _ in 0..50 {
                    let listed = store.list(&TaskFilter {
                        limit: Some(5),
                        ..TaskFilter::default()
                    });
                    assert!(listed.unwrap().len() <= 5);
                    store.count_by_status().unwrap();
                    store.get(1).unwrap();
                    tokio::task::yield_now().await;
                }
            }));
        }
        for job in jobs {
            job.await.unwrap();
        }
    });
    drop(committer);
    let stats = writer.join().unwrap();
    assert_eq!(stats.batches, 200);
    let counts: std::collections::HashMap<_, _> =
        store.count_by_status().unwrap().into_iter().collect();
    assert_eq!(counts[&TaskStatus::Queued], 200);
    assert_eq!(store.last_event_seq().unwrap(), 200);
    let archive = crate::audit::archive::Archive::open(db.data_dir(), store.clone()).unwrap();
    let report = archive.verify().unwrap();
    assert!(report.intact && report.entries == 200, "{report:?}");
}

/// A node record of instance `instance` named `name` (its home named after it too).
fn node(name: &str, instance: &str) -> NodeRecord {
    NodeRecord {
        name: name.into(),
        instance: instance.into(),
        home: format!("test-host:{name}"),
        host: "test-host".into(),
        pid: 1,
        socket: format!("/tmp/{name}.sock"),
        http: None,
        parallel: 4,
        labels: vec!["docker".into()],
    }
}

/// A batch that adds queued task `id`.
fn one_task(id: u64) -> WriteBatch {
    let queued = orch_protocol::TaskState::Queued {
        since: chrono::Utc::now(),
    };
    WriteBatch {
        tasks: vec![TaskWrite {
            task: task(id, 0, queued),
            previous: None,
            reindex: None,
        }],
        ..WriteBatch::default()
    }
}

const MINUTE: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn nodes_share_the_database_and_a_migration_is_kept_out_while_they_use_it() {
    let db = Database::create();
    let a = PostgresStore::join(&db.url).unwrap();
    let b = PostgresStore::join(&db.url).unwrap();
    let error = PostgresStore::connect(&db.url).err().unwrap();
    assert!(matches!(error, StoreError::AlreadyOpen { .. }), "{error}");
    drop((a, b));
    drop(PostgresStore::connect(&db.url).unwrap());
}

#[test]
fn a_name_a_live_instance_renews_is_refused_and_taken_once_its_lease_ran_out() {
    let db = Database::create();
    let store = PostgresStore::join(&db.url).unwrap();
    let first = store.register_node(&node("n1", "i1"), MINUTE).unwrap();
    assert!(matches!(first, Registration::Registered), "{first:?}");
    // Another home (host and data directory) under the same name.
    let mut other = node("n1", "i2");
    other.home = "other-host:x".into();
    let second = store.register_node(&other, MINUTE).unwrap();
    assert!(
        matches!(&second, Registration::Taken { host, pid: 1 } if host == "test-host"),
        "{second:?}"
    );
    // The first instance's lease runs out (renewed for no time at all).
    assert!(store.heartbeat("n1", "i1", Duration::ZERO).unwrap().renewed);
    let again = store.register_node(&other, MINUTE).unwrap();
    assert!(matches!(again, Registration::Registered), "{again:?}");
    assert!(!store.heartbeat("n1", "i1", MINUTE).unwrap().renewed);
    let (_, nodes) = store.cluster().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(
        (nodes[0].role, nodes[0].labels.clone()),
        (orch_protocol::NodeRole::Standby, vec!["docker".to_string()])
    );
}

#[test]
fn a_deposed_leader_writes_nothing_and_a_live_one_is_never_replaced() {
    let db = Database::create();
    let a = PostgresStore::join(&db.url).unwrap();
    let b = PostgresStore::join(&db.url).unwrap();
    a.register_node(&node("a", "ia"), MINUTE).unwrap();
    b.register_node(&node("b", "ib"), MINUTE).unwrap();
    assert_eq!(a.try_lead("a", "ia").unwrap(), Some(1));
    a.fence(1, "ia");
    a.commit(&one_task(1)).unwrap();
    assert_eq!(b.try_lead("b", "ib").unwrap(), None, "a's lease runs");
    let beat = b.heartbeat("b", "ib", MINUTE).unwrap();
    assert!(beat.leader_alive);
    assert_eq!(
        beat.leader.map(|l| (l.term, l.node)),
        Some((1, "a".to_string()))
    );
    // a's lease runs out (a paused leader); b takes over under term 2.
    a.heartbeat("a", "ia", Duration::ZERO).unwrap();
    assert_eq!(b.try_lead("b", "ib").unwrap(), Some(2));
    let refused = a.commit(&one_task(2)).unwrap_err();
    assert!(
        matches!(refused, StoreError::Fenced { term: 1 }),
        "{refused}"
    );
    assert!(
        b.get(2).unwrap().is_none(),
        "the refused batch left nothing"
    );
    assert!(b.get(1).unwrap().is_some());
    let (leader, nodes) = b.cluster().unwrap();
    assert_eq!(leader.map(|l| (l.term, l.node)), Some((2, "b".to_string())));
    let roles: Vec<_> = nodes.iter().map(|n| (n.name.as_str(), n.role)).collect();
    use orch_protocol::NodeRole::{Down, Leader};
    assert_eq!(roles, vec![("a", Down), ("b", Leader)]);
}

#[test]
fn a_node_restarted_in_its_home_leads_again_at_once_and_no_other_node_before_its_lease() {
    let db = Database::create();
    let store = PostgresStore::join(&db.url).unwrap();
    store.register_node(&node("a", "ia1"), MINUTE).unwrap();
    store.register_node(&node("b", "ib"), MINUTE).unwrap();
    assert_eq!(store.try_lead("a", "ia1").unwrap(), Some(1));
    // a's daemon is killed and started again in the same home: no wait for its lease.
    let again = store.register_node(&node("a", "ia2"), MINUTE).unwrap();
    assert!(matches!(again, Registration::Registered), "{again:?}");
    // b must wait: the dead instance's attempts may run until its lease ends.
    assert!(store.heartbeat("b", "ib", MINUTE).unwrap().leader_alive);
    assert_eq!(store.try_lead("b", "ib").unwrap(), None);
    // a's new instance inherits its supervisor's attempts, and leads again.
    assert!(!store.heartbeat("a", "ia2", MINUTE).unwrap().leader_alive);
    assert_eq!(store.try_lead("a", "ia2").unwrap(), Some(2));
    // Another home under the same name is refused while the name's lease runs.
    let mut elsewhere = node("a", "ia3");
    elsewhere.home = "other-host:x".into();
    let taken = store.register_node(&elsewhere, MINUTE).unwrap();
    assert!(matches!(taken, Registration::Taken { .. }), "{taken:?}");
}

/// Whether `wakeups` ticks within two seconds.
fn woken(wakeups: &mut tokio::sync::watch::Receiver<u64>) -> bool {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(2), wakeups.changed())
            .await
            .is_ok()
    })
}

#[test]
fn a_commit_with_events_wakes_the_nodes_that_listen_and_one_without_does_not() {
    let db = Database::create();
    let store = PostgresStore::join(&db.url).unwrap();
    let mut wakeups = store.event_wakeups().unwrap();
    store.commit(&one_task(1)).unwrap();
    assert!(!woken(&mut wakeups), "a batch without events");
    let event = orch_protocol::Event {
        seq: 1,
        at: chrono::Utc::now(),
        task: 1,
        workflow: None,
        kind: orch_protocol::EventKind::Queued,
    };
    let batch = WriteBatch {
        events: vec![event],
        ..WriteBatch::default()
    };
    store.commit(&batch).unwrap();
    assert!(woken(&mut wakeups), "a batch with an event");
}

/// A request forwarded by node `from`.
fn forwarded(from: &str, body: &str) -> crate::store::ForwardedRequest {
    crate::store::ForwardedRequest {
        from_node: from.into(),
        to_node: None,
        actor: r#"{"uid":1000,"interface":"socket"}"#.into(),
        role: "operator".into(),
        owner: false,
        request: body.as_bytes().to_vec(),
    }
}

#[test]
fn a_forwarded_request_is_taken_by_one_term_only_and_its_answer_read_once() {
    use crate::store::RequestState::{Answered, Missing, Taken, Waiting};
    let db = Database::create();
    let a = PostgresStore::join(&db.url).unwrap();
    let b = PostgresStore::join(&db.url).unwrap();
    a.register_node(&node("a", "ia"), MINUTE).unwrap();
    b.register_node(&node("b", "ib"), MINUTE).unwrap();
    let mut answers = b.reply_wakeups().unwrap();
    let mut requests = a.request_wakeups().unwrap();
    let first = b.forward_request(&forwarded("b", "first")).unwrap();
    let second = b.forward_request(&forwarded("b", "second")).unwrap();
    let third = b.forward_request(&forwarded("b", "third")).unwrap();
    assert!(woken(&mut requests), "forwarding wakes the leader");
    assert_eq!(b.request_state(first).unwrap(), Waiting);
    // Nobody takes anything without leading.
    assert!(a.take_requests(1, "ia", 10, MINUTE).unwrap().is_empty());
    assert_eq!(a.try_lead("a", "ia").unwrap(), Some(1));
    assert!(
        a.take_requests(1, "someone-else", 10, MINUTE)
            .unwrap()
            .is_empty()
    );
    // The waiting one withdrawn is never taken.
    assert!(b.withdraw_request(third).unwrap());
    let taken = a.take_requests(1, "ia", 10, MINUTE).unwrap();
    let ids: Vec<u64> = taken.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![first, second]);
    assert_eq!(taken[0].1, forwarded("b", "first"));
    assert!(
        a.take_requests(1, "ia", 10, MINUTE).unwrap().is_empty(),
        "taken once"
    );
    assert!(!b.withdraw_request(first).unwrap(), "a taken one stays");
    assert_eq!(
        b.request_state(first).unwrap(),
        Taken {
            term: 1,
            leading: true
        }
    );
    assert!(a.answer_request(first, 1, b"frames".to_vec()).unwrap());
    assert!(woken(&mut answers), "an answer wakes the standbys");
    assert_eq!(
        b.request_state(first).unwrap(),
        Answered(b"frames".to_vec())
    );
    b.forget_request(first).unwrap();
    assert_eq!(b.request_state(first).unwrap(), Missing);
    assert!(
        !a.answer_request(first, 1, Vec::new()).unwrap(),
        "its client left"
    );
    // a is deposed before answering the second: its outcome is unknown, and a new
    // leader neither takes it again nor can answer it under its own term.
    a.heartbeat("a", "ia", Duration::ZERO).unwrap();
    assert_eq!(b.try_lead("b", "ib").unwrap(), Some(2));
    assert_eq!(
        b.request_state(second).unwrap(),
        Taken {
            term: 1,
            leading: false
        }
    );
    assert!(b.take_requests(2, "ib", 10, MINUTE).unwrap().is_empty());
    assert!(!b.answer_request(second, 2, Vec::new()).unwrap());
    assert_eq!(
        b.sweep_requests(2, MINUTE).unwrap(),
        1,
        "the orphan is swept"
    );
    assert_eq!(b.request_state(second).unwrap(), Missing);
    // A request for a node is taken by that node only, while its lease runs, and never
    // by the leader; its answer may come whoever leads.
    let mut for_a = forwarded("b", "log");
    for_a.to_node = Some("a".into());
    let to_a = b.forward_request(&for_a).unwrap();
    assert!(b.take_requests(2, "ib", 10, MINUTE).unwrap().is_empty());
    assert!(
        b.take_node_requests("b", "ib", 10, MINUTE)
            .unwrap()
            .is_empty()
    );
    assert!(
        a.take_node_requests("a", "ia", 10, MINUTE)
            .unwrap()
            .is_empty(),
        "a's lease ran out"
    );
    a.heartbeat("a", "ia", MINUTE).unwrap();
    let taken = a.take_node_requests("a", "ia", 10, MINUTE).unwrap();
    assert_eq!(taken, vec![(to_a, for_a)]);
    assert_eq!(
        b.request_state(to_a).unwrap(),
        Taken {
            term: 0,
            leading: true
        }
    );
    assert_eq!(b.sweep_requests(2, MINUTE).unwrap(), 0);
    assert!(a.answer_request(to_a, 0, b"log".to_vec()).unwrap());
    assert_eq!(b.request_state(to_a).unwrap(), Answered(b"log".to_vec()));
    // One not taken in time is never taken, and swept.
    let late = b.forward_request(&forwarded("b", "late")).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        b.take_requests(2, "ib", 10, Duration::from_millis(10))
            .unwrap()
            .is_empty()
    );
    assert_eq!(b.sweep_requests(2, Duration::from_millis(10)).unwrap(), 1);
    assert_eq!(b.request_state(late).unwrap(), Missing);
}
