//! The daemon on `--storage-type postgres` (issue 11's store, one daemon): the real daemon,
//! the real plugin and nu, against a database of the test's own on the real PostgreSQL
//! server the test command started. Tasks, priorities, workflows and the audit chain
//! behave as on redb, a `kill -9` loses nothing, the URL's password shows nowhere, a bad
//! URL is refused before anything starts, and a migration is refused while a daemon uses
//! the database (several daemons on one database form a cluster: tests/cluster.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use orch_e2e::postgres::TestDatabase;
use orch_e2e::{Daemon, eventually};

fn on(db: &TestDatabase, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--storage-type".to_string(),
        "postgres".to_string(),
        "--database-url".to_string(),
        db.url(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs the daemon binary to its end (a refused start, or a tool) in `cwd` with `args`,
/// without the database URL variable of the test's environment.
fn orchestrator(cwd: &std::path::Path, args: &[String]) -> std::process::Output {
    std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .current_dir(cwd)
        .args(args)
        .env_remove("PROVISIONING_ORCHESTRATOR_DATABASE_URL")
        .output()
        .unwrap()
}

/// `--data-dir` and `--socket` in `dir`, then `args`.
fn in_dir(dir: &std::path::Path, args: &[String]) -> Vec<String> {
    let mut all = vec![
        "--data-dir".to_string(),
        dir.join("data").display().to_string(),
        "--socket".to_string(),
        dir.join("s.sock").display().to_string(),
    ];
    all.extend_from_slice(args);
    all
}

fn start(args: &[String]) -> Daemon {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Daemon::start(&args)
}

#[test]
fn tasks_run_in_priority_order_and_a_kill_9_loses_nothing() {
    let db = TestDatabase::create();
    let mut daemon = start(&on(&db, &["--parallel", "1"]));
    let nu = daemon.nu();
    assert_eq!(nu.json("orch health | get storage"), "postgres");
    assert!(!daemon.data_dir().join("orchestrator.redb").exists());
    let order = daemon.dir().join("order.txt");
    // A gate holds the only slot while the others are queued with mixed priorities.
    nu.run("orch submit --label gate [sleep 1000] | ignore");
    nu.run(&format!(
        "0..<30 | each {{|i| {{command: [sh -c $'echo ($i) >> {}'], priority: ($i mod 3), label: queued}} }} | orch submit | ignore",
        order.display()
    ));
    daemon.kill9();
    daemon.restart();
    assert_eq!(
        nu.json("orch tasks --label queued --status queued | length"),
        30
    );
    nu.run("orch tasks --label gate | get id | each {|id| orch cancel $id } | ignore");
    let statuses = nu
        .json("orch tasks --label queued | get id | orch wait --timeout 1min | get status | uniq");
    assert_eq!(statuses, serde_json::json!(["succeeded"]));
    let ran: Vec<u32> = std::fs::read_to_string(&order)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let priorities: Vec<u32> = ran.iter().map(|i| i % 3).collect();
    let mut sorted = priorities.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(
        priorities, sorted,
        "ran by priority, highest first: {ran:?}"
    );
    let mut per_priority: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for i in &ran {
        per_priority.entry(i % 3).or_default().push(*i);
    }
    for same in per_priority.values() {
        assert!(
            same.is_sorted(),
            "submission order within a priority: {ran:?}"
        );
    }
    let counts = db.sql("SELECT count(*) FROM tasks");
    assert_eq!(counts.trim(), "31", "every task is a row of the database");
}

#[test]
fn a_running_task_survives_a_kill_9_of_the_daemon() {
    let db = TestDatabase::create();
    let mut daemon = start(&on(&db, &[]));
    let nu = daemon.nu();
    let flag = daemon.dir().join("go");
    let id = nu.json(&format!(
        "orch submit [sh -c 'while [ ! -e {} ]; do sleep 0.05; done'] | get id",
        flag.display()
    ));
    eventually(Duration::from_secs(10), "the task to run", || {
        (nu.json(&format!("orch task {id} | get status")) == "running").then_some(())
    });
    daemon.kill9();
    daemon.restart();
    std::fs::write(&flag, "").unwrap();
    let task = nu.json(&format!("orch wait {id} --timeout 30sec | first"));
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["attempts"], 1, "taken over, not run again: {task}");
}

#[test]
fn a_workflow_runs_and_the_audit_chain_verifies() {
    let db = TestDatabase::create();
    let daemon = start(&on(&db, &[]));
    let nu = daemon.nu();
    let batch = daemon.dir().join("three.json");
    std::fs::write(
        &batch,
        r#"{"name": "pg", "operations": [
            {"id": "a", "type": "command", "command": ["true"]},
            {"id": "b", "type": "command", "command": ["true"], "dependencies": ["a"]},
            {"id": "c", "type": "command", "command": ["true"], "dependencies": ["b"]}
        ]}"#,
    )
    .unwrap();
    let workflow = nu.json(&format!(
        "orch workflow submit batch {} --wait",
        batch.display()
    ));
    assert_eq!(workflow["status"], "succeeded", "{workflow}");
    let listed = nu.json("orch workflow list | get 0.id");
    assert_eq!(listed, workflow["id"]);
    let report = nu.json("orch audit verify");
    assert_eq!(report["intact"], true, "{report}");
    assert!(report["entries"].as_u64().unwrap() >= 1, "{report}");
}

#[test]
fn the_password_in_the_url_shows_nowhere() {
    let db = TestDatabase::create();
    let secret = "pw-Zq81x";
    let url = db.url_with_password(Some(secret));
    let mut daemon = Daemon::start(&[
        "--storage-type",
        "postgres",
        "--database-url",
        &url,
        "--log",
        "debug",
    ]);
    let nu = daemon.nu();
    nu.run("orch submit --wait true | ignore");
    let health = nu.run("orch health | to json");
    daemon.terminate();
    let log = std::fs::read_to_string(daemon.data_dir().join("orchestrator.log")).unwrap();
    for (what, text) in [
        ("log", &log),
        ("stderr", &daemon.stderr()),
        ("health", &health),
    ] {
        assert!(
            !text.contains(secret),
            "the password is in the {what}: {text}"
        );
    }
    // A server that does not answer: the refusal names it, without the password.
    let dead = url.replace(
        &format!(
            "@{}",
            url.split('@').nth(1).unwrap().split('/').next().unwrap()
        ),
        "@127.0.0.1:1",
    );
    let out = daemon
        .spawn(&[
            "--storage-type".into(),
            "postgres".into(),
            "--database-url".into(),
            dead,
        ])
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = daemon.stderr();
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
}

#[test]
fn bad_database_settings_are_refused_before_anything_starts() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--storage-type", "postgres"],
            "--storage-type postgres needs the database",
        ),
        (
            &[
                "--storage-type",
                "postgres",
                "--database-url",
                "mysql://u:pw-1@h/d",
            ],
            "must start with postgres://",
        ),
        (
            &["--database-url", "postgres://h/d"],
            "--database-url is only for --storage-type postgres",
        ),
        (
            &[
                "--storage-type",
                "postgres",
                "--database-url-file",
                "/nonexistent/url",
            ],
            "--database-url-file /nonexistent/url",
        ),
    ];
    for (args, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let out = orchestrator(dir.path(), &in_dir(dir.path(), &args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("pw-1"), "{stderr}");
        assert!(
            !dir.path().join("data").exists(),
            "{args:?} created the data dir"
        );
    }
}

#[test]
fn a_migration_is_refused_while_a_daemon_uses_the_database() {
    let db = TestDatabase::create();
    let first = start(&on(&db, &[]));
    assert_eq!(
        first.nu().json("orch submit --wait true | get status"),
        "succeeded"
    );
    let target = tempfile::tempdir().unwrap();
    let to = target.path().join("copy").display().to_string();
    let refused = migrate(&db.url(), &to).unwrap_err();
    assert!(refused.contains("another"), "{refused}");
    assert!(!target.path().join("copy").exists(), "{refused}");
    // The daemon is untouched.
    assert_eq!(
        first.nu().json("orch submit --wait true | get status"),
        "succeeded"
    );
}

/// Runs the `migrate` tool; its JSON report, or its stderr as the error.
fn migrate(from: &str, to: &str) -> Result<serde_json::Value, String> {
    let args = ["migrate", "--from", from, "--to", to].map(String::from);
    let out = orchestrator(std::path::Path::new("/"), &args);
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn a_store_migrates_to_postgres_and_back_unchanged() {
    let db = TestDatabase::create();
    let mut daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    nu.run("1..5 | each {|i| {command: [sh -c $'exit ($i mod 2)'], label: m} } | orch submit | orch wait | ignore");
    nu.run("orch submit --label gate [sleep 1000] | ignore");
    nu.run("1..3 | each { {command: [true], label: later, priority: 2} } | orch submit | ignore");
    nu.run("orch tasks --label gate | get id | each {|id| orch cancel $id } | ignore");
    nu.run("orch tasks --label later | get id | orch wait | ignore");
    let shown = "orch tasks | select id status label attempts exit_code | to json --raw";
    let before = nu.run(shown);
    let audit_before = nu.json("orch audit verify | get entries");
    daemon.terminate();
    let data = daemon.data_dir();
    let data = data.to_str().unwrap();

    let report = migrate(data, &db.url()).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    assert_eq!(report["copied"]["tasks"], 9, "{report}");
    // Into a database that holds something now: refused, nothing changed.
    let again = migrate(data, &db.url()).unwrap_err();
    assert!(again.contains("is not empty"), "{again}");

    daemon.set_args(&["--storage-type", "postgres", "--database-url", &db.url()]);
    daemon.restart();
    assert_eq!(nu.run(shown), before, "the same tasks on PostgreSQL");
    let verify = nu.json("orch audit verify");
    assert_eq!(verify["intact"], true, "{verify}");
    assert!(
        verify["entries"].as_u64() >= audit_before.as_u64(),
        "{verify}"
    );
    nu.run("orch submit --wait true | ignore");
    let on_postgres = nu.run(shown);
    daemon.terminate();

    // And back, into the same data directory once its old store is moved aside.
    let store = daemon.data_dir().join("orchestrator.redb");
    std::fs::rename(&store, store.with_extension("redb.old")).unwrap();
    let report = migrate(&db.url(), data).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    daemon.set_args(&[]);
    daemon.restart();
    assert_eq!(nu.run(shown), on_postgres, "the same tasks on redb again");
    assert_eq!(nu.json("orch audit verify | get intact"), true);
    let new_id = nu.json("orch submit true | get id").as_u64().unwrap();
    let highest = serde_json::from_str::<serde_json::Value>(&on_postgres).unwrap()[0]["id"]
        .as_u64()
        .unwrap();
    assert!(
        new_id > highest,
        "ids go on after the copy: {new_id} after {highest}"
    );
}

#[test]
fn a_daemon_refuses_a_store_an_unfinished_migration_left() {
    let db = TestDatabase::create();
    let mut daemon = start(&on(&db, &[]));
    daemon.terminate();
    // What `migrate` leaves when it stops midway: its mark, set before the first copy.
    db.sql("INSERT INTO meta (key, value) VALUES ('migration_underway', 1)");
    let out = daemon.spawn(&on(&db, &[])).wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = daemon.stderr();
    assert!(stderr.contains("unfinished migration"), "{stderr}");
}

#[test]
fn the_url_in_the_environment_reaches_no_task() {
    let db = TestDatabase::create();
    let url = db.url_with_password(Some("pw-Env42"));
    let daemon = Daemon::start_with_env(
        &["--storage-type", "postgres"],
        &[("PROVISIONING_ORCHESTRATOR_DATABASE_URL", &url)],
    );
    let nu = daemon.nu();
    let id = nu.json("orch submit --wait env | get id");
    let log = nu.run(&format!("orch logs {id}"));
    assert!(
        log.contains("PATH="),
        "the task printed its environment: {log}"
    );
    assert!(!log.contains("pw-Env42"), "{log}");
    assert!(
        !log.contains("PROVISIONING_ORCHESTRATOR_DATABASE_URL"),
        "{log}"
    );
}

#[test]
fn a_second_daemon_on_the_same_data_directory_is_refused() {
    let first_db = TestDatabase::create();
    let second_db = TestDatabase::create();
    let first = start(&on(&first_db, &[]));
    // The same data directory (the harness's socket is orch.sock, this one s.sock).
    let out = orchestrator(first.dir(), &in_dir(first.dir(), &on(&second_db, &[])));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is already in use by another daemon"),
        "{stderr}"
    );
}

#[test]
fn migrate_refuses_a_mistyped_target_and_the_same_store_creating_nothing() {
    let mut daemon = Daemon::start(&[]);
    daemon.nu().run("orch submit --wait true | ignore");
    daemon.terminate();
    let data = daemon.data_dir().display().to_string();
    let cwd = tempfile::tempdir().unwrap();
    for (to, expected) in [
        (
            "postgres:/u:pw-Typo9@127.0.0.1/db",
            "looks like a URL but not a postgres:// one",
        ),
        (
            "host=127.0.0.1 password=pw-Typo9",
            "connection strings (key=value) are not taken",
        ),
        (data.as_str(), "are the same store"),
        ("missing-parent/data", "its parent directory does not exist"),
    ] {
        let args = ["migrate", "--from", &data, "--to", to].map(String::from);
        let out = orchestrator(cwd.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{to}");
        assert!(stderr.contains(expected), "{to}: {stderr}");
        assert!(!stderr.contains("pw-Typo9"), "{stderr}");
    }
    assert_eq!(
        std::fs::read_dir(cwd.path()).unwrap().count(),
        0,
        "nothing was created"
    );
}

#[test]
fn a_plain_stop_stops_the_nodes_attempts_and_the_next_start_runs_them_without_using_one() {
    let db = TestDatabase::create();
    let mut daemon = start(&on(&db, &[]));
    let nu = daemon.nu();
    let (flag, runs) = (daemon.dir().join("go"), daemon.dir().join("runs.txt"));
    // No retries: an attempt the stop counted would fail the task.
    let id = nu.json(&format!(
        "orch submit [sh -c 'echo run >> {}; while [ ! -e {} ]; do sleep 0.05; done'] | get id",
        runs.display(),
        flag.display()
    ));
    eventually(Duration::from_secs(10), "the task to run", || {
        std::fs::read_to_string(&runs).ok().map(drop)
    });
    assert!(daemon.terminate().success(), "{}", daemon.stderr());
    daemon.restart();
    std::fs::write(&flag, "").unwrap();
    let task = nu.json(&format!("orch wait {id} --timeout 30sec | first"));
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(
        task["attempts"], 1,
        "the stopped attempt was not counted: {task}"
    );
    let lines = std::fs::read_to_string(&runs).unwrap();
    assert_eq!(
        lines.lines().count(),
        2,
        "stopped, then run again: {lines:?}"
    );
}
