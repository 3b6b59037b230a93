//! The HTTP shim (`--port`) end to end with curl: the seed's example verbatim, every
//! endpoint, errors as JSON with their status codes, the audit log of HTTP mutations,
//! server-sent events of a workflow in order, metrics, the OpenAPI document, the test
//! environment endpoints, and a graceful stop with a stream open. The authentication matrix
//! is in http_auth.rs, the schemathesis fuzz in http_fuzz.rs.
//! (Over 400 lines: one test walks every endpoint in turn on one daemon.)

use std::process::Command;

use orch_e2e::Daemon;
use orch_e2e::containers::{Cleanup, TestEnvSweeper, engine_socket};
use orch_e2e::http::Shim;
use serde_json::{Value, json};

#[test]
fn the_seed_example_works_as_written() {
    let Some(socket) = engine_socket() else {
        eprintln!("skipped: no container engine");
        return;
    };
    let workspace = tempfile::tempdir().unwrap();
    let ws = workspace.path().display().to_string();
    let daemon = Daemon::start(&["--port", "8080", "--http-auth", "none", "--workspace", &ws]);
    let _cleanup = Cleanup {
        socket,
        infra: "production".into(),
    };
    let infra = workspace.path().join("infra/production");
    std::fs::create_dir_all(&infra).unwrap();
    std::fs::write(
        infra.join("settings.yaml"),
        "provider: local\nservers:\n  - hostname: web-01\n  - hostname: web-02\n",
    )
    .unwrap();
    // Verbatim from the seed's README (infra `production` is looked up in the daemon's
    // `--workspace`).
    let seed = r#"curl -X POST http://localhost:8080/workflows/servers/create \
 -H "Content-Type: application/json" \
 -d '{
 "infra": "production",
 "settings": "./settings.yaml",
 "servers": ["web-01", "web-02"],
 "check_mode": false,
 "wait": true
 }'"#;
    let out = Command::new("sh")
        .arg("-c")
        .arg(seed)
        .current_dir(daemon.dir())
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(answer["status"], "succeeded", "{answer:#}");
    let task_id = answer["task_id"].as_u64().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("curl http://localhost:8080/tasks/{task_id}"))
        .output()
        .unwrap();
    let task: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(task["workflow"]["state"]["status"], "succeeded");
    assert_eq!(task["tasks"].as_array().unwrap().len(), 2);
    let nu = daemon.nu();
    let rolled = nu.json(&format!("orch workflow rollback {task_id} | ignore; orch watch --workflow {task_id} --all | last | get details.status"));
    assert_eq!(rolled, "rolled_back");
}

#[test]
fn every_endpoint_answers_with_json_and_the_right_status() {
    let shim = Shim::lab();
    let ws = shim.workspace();
    let health = shim.json("viewer", "GET", "/health", None, 200);
    assert_eq!(health["storage"], "redb");
    let (status, _) = shim.call(None, "GET", "/health", None);
    assert_eq!(status, 200, "health needs no token");
    let openapi = shim.json("viewer", "GET", "/openapi.json", None, 200);
    assert_eq!(openapi["openapi"], "3.1.0");
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        openapi, kept,
        "the served document is the one kept in docs/"
    );
    // Workflows in check mode (plans), then a real one.
    let plan = shim.json(
        "operator",
        "POST",
        "/workflows/servers/create",
        Some(&json!({"infra": "lab", "workspace": ws, "check_mode": true})),
        200,
    );
    assert_eq!(
        plan["plan"]["waves"],
        json!([["create:h1"], ["install:redis@h1"]])
    );
    let plan = shim.json(
        "operator",
        "POST",
        "/workflows/taskserv/create",
        Some(
            &json!({"infra": "lab", "workspace": ws, "taskserv": "kubernetes", "check_mode": true}),
        ),
        200,
    );
    assert_eq!(plan["plan"]["waves"].as_array().unwrap().len(), 3);
    let plan = shim.json(
        "operator",
        "POST",
        "/extensions/taskservs/install",
        Some(&json!({"infra": "lab", "workspace": ws, "taskserv": "redis", "check_mode": true})),
        200,
    );
    assert_eq!(plan["plan"]["waves"], json!([["install:redis@h1"]]));
    let plan = shim.json("operator", "POST", "/workflows/cluster/create", Some(&json!({"infra": "lab", "workspace": ws, "cluster": "etcd-cluster", "check_mode": true})), 200);
    assert_eq!(plan["plan"]["waves"].as_array().unwrap().len(), 4);
    // A real workflow: a taskserv install that fails (h1 does not exist), then its task.
    let created = shim.json(
        "operator",
        "POST",
        "/workflows/taskserv/create",
        Some(&json!({"infra": "lab", "workspace": ws, "taskserv": "redis", "wait": true})),
        201,
    );
    assert_eq!(created["status"], "failed", "{created:#}");
    let id = created["task_id"].as_u64().unwrap();
    let shown = shim.json("viewer", "GET", &format!("/tasks/{id}"), None, 200);
    assert_eq!(shown["workflow"]["id"], id);
    let tasks = shim.json("viewer", "GET", "/tasks?status=failed&limit=5", None, 200);
    let step = tasks[0]["id"].as_u64().unwrap();
    assert_eq!(
        shim.json("viewer", "GET", &format!("/tasks/{step}"), None, 200)["id"],
        step
    );
    // Events of that workflow, replayed in order.
    let (status, events) = {
        let out = Command::new("curl")
            .args([
                "-s",
                "-N",
                "--max-time",
                "2",
                "-H",
                &format!("Authorization: Bearer {}", shim.token("viewer")),
            ])
            .arg(format!(
                "http://127.0.0.1:{}/events?since=0&workflow={id}",
                shim.port
            ))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        status,
        Some(28),
        "the stream stays open until the client leaves"
    );
    let seqs: Vec<u64> = events
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    let workflow_events: Vec<&str> = events
        .lines()
        .filter(|l| l.starts_with("data: ") && l.contains(r#""type":"workflow""#))
        .collect();
    assert!(
        workflow_events
            .first()
            .unwrap()
            .contains(r#""status":"running""#),
        "{events}"
    );
    assert!(
        workflow_events
            .last()
            .unwrap()
            .contains(r#""status":"failed""#),
        "{events}"
    );
    // Extensions, metrics, audit.
    let providers = shim.json("viewer", "GET", "/extensions/providers", None, 200);
    assert!(
        providers["providers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "local")
    );
    assert!(
        shim.json("viewer", "GET", "/extensions/taskservs", None, 200)["taskservs"]
            .as_array()
            .unwrap()
            .len()
            >= 6
    );
    assert!(
        shim.json("viewer", "GET", "/extensions/clusters", None, 200)["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "etcd-cluster")
    );
    let (status, metrics) = shim.call(Some("viewer"), "GET", "/metrics", None);
    assert_eq!(status, 200);
    for name in [
        "orchestrator_tasks{status=\"failed\"}",
        "orchestrator_queue_depth",
        "orchestrator_task_duration_seconds_bucket",
        "orchestrator_task_retries_total",
        "orchestrator_task_failures_total",
        "orchestrator_workflows{status=\"failed\"} 1",
        "orchestrator_store_commit_seconds_count",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    let audit = shim.json(
        "admin",
        "GET",
        "/audit?action=workflow_submit&limit=1",
        None,
        200,
    );
    assert!(
        audit[0]["actor"]["interface"]
            .as_str()
            .unwrap()
            .starts_with("http (token operator"),
        "{audit:#}"
    );
    assert_eq!(
        shim.json("admin", "GET", "/audit/verify", None, 200)["intact"],
        true
    );
    // Errors: JSON, named, with their status codes.
    let cases: [(&str, &str, Option<Value>, u16, &str); 7] = [
        ("GET", "/tasks/999999", None, 404, "there is no task 999999"),
        ("GET", "/tasks/abc", None, 400, "Cannot parse"),
        ("GET", "/nowhere", None, 404, "no route GET /nowhere"),
        (
            "POST",
            "/workflows/servers/create",
            Some(json!({"infra": "nope", "workspace": ws})),
            422,
            "unknown infra `nope`",
        ),
        (
            "POST",
            "/workflows/servers/create",
            Some(json!({"infra": "lab", "surprise": 1})),
            422,
            "unknown field `surprise`",
        ),
        (
            "POST",
            "/test/environments/create",
            Some(json!({"env": {"type": "single", "taskserv": "mysql"}})),
            422,
            "unknown taskserv `mysql`",
        ),
        (
            "DELETE",
            "/test/environments/42",
            None,
            404,
            "there is no test environment 42",
        ),
    ];
    for (method, path, body, expect, message) in cases {
        let (status, text) = shim.call(Some("admin"), method, path, body.as_ref());
        assert_eq!(status, expect, "{method} {path}: {text}");
        let error: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains(message),
            "{text}"
        );
    }
    let big = json!({"infra": "x".repeat(5 * 1024 * 1024)});
    let (status, text) = shim.call(
        Some("admin"),
        "POST",
        "/workflows/servers/create",
        Some(&big),
    );
    assert_eq!(status, 413, "{}", &text[..text.len().min(200)]);
    let (status, _) = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
            &format!("Authorization: Bearer {}", shim.token("admin")),
            "-d",
            "{\"infra\":",
            &format!("http://127.0.0.1:{}/workflows/servers/create", shim.port),
        ])
        .output()
        .map(|o| {
            (
                String::from_utf8_lossy(&o.stdout).parse::<u16>().unwrap(),
                (),
            )
        })
        .unwrap();
    assert_eq!(status, 400, "malformed JSON");
    // The queue's controls: a group, a pause and a resume, and a refusal naming its field.
    let queue = shim.json("viewer", "GET", "/queue", None, 200);
    assert_eq!(queue["paused"], false);
    assert_eq!(queue["groups"][0]["name"], "default");
    let add = json!({"change": "add_group", "name": "deploy", "parallel": 2});
    let queue = shim.json("operator", "POST", "/queue", Some(&add), 200);
    assert_eq!(
        queue["groups"][1],
        json!({"name": "deploy", "parallel": 2, "paused": false, "running": 0})
    );
    let pause = json!({"change": "pause", "group": "deploy", "wait": true});
    let queue = shim.json("operator", "POST", "/queue", Some(&pause), 200);
    assert_eq!(queue["groups"][1]["paused"], true);
    let resume = json!({"change": "resume", "group": "deploy"});
    shim.json("operator", "POST", "/queue", Some(&resume), 200);
    let refused = shim.json("operator", "POST", "/queue", Some(&add), 409);
    assert_eq!(refused["error"]["field"], "name", "{refused}");
    let unknown = json!({"change": "parallel", "group": "nope", "limit": 1});
    let refused = shim.json("operator", "POST", "/queue", Some(&unknown), 404);
    assert_eq!(refused["error"]["field"], "group", "{refused}");
    // Schedules: one made, listed with its upcoming times (a secret redacted for a
    // viewer), a bad one refused naming its field, and removed.
    let schedule = json!({
        "name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Berlin",
        "work": {"kind": "task", "task": {"kind": {"type": "command", "program": "true"},
                 "env": {"API_TOKEN": "hunter2"}}}
    });
    let made = shim.json("operator", "POST", "/schedules", Some(&schedule), 201);
    assert_eq!(made["spec"]["timezone"], "Europe/Berlin");
    let listed = shim.json("viewer", "GET", "/schedules?upcoming=3", None, 200);
    assert_eq!(listed[0]["upcoming"].as_array().unwrap().len(), 3);
    assert_eq!(
        listed[0]["spec"]["work"]["task"]["env"]["API_TOKEN"],
        "[redacted]"
    );
    let bad = json!({"name": "x", "cron": "0 3 * *", "work": schedule["work"]});
    let refused = shim.json("operator", "POST", "/schedules", Some(&bad), 422);
    assert_eq!(refused["error"]["field"], "cron", "{refused}");
    let removed = shim.json("operator", "DELETE", "/schedules/nightly", None, 200);
    assert_eq!(removed["spec"]["name"], "nightly");
    shim.json("operator", "DELETE", "/schedules/nightly", None, 404);
}

#[test]
fn test_environment_endpoints_create_run_log_and_delete() {
    let Some(socket) = engine_socket() else {
        eprintln!("skipped: no container engine");
        return;
    };
    let shim = Shim::lab();
    let sweeper = TestEnvSweeper {
        socket,
        data_dir: shim.daemon.data_dir(),
    };
    let env = shim.json(
        "operator",
        "POST",
        "/test/environments/create",
        Some(&json!({"env": {"type": "single", "taskserv": "redis"}, "auto_start": true})),
        201,
    );
    assert_eq!(env["state"]["status"], "ready", "{env:#}");
    let id = env["id"].as_u64().unwrap();
    assert_eq!(
        shim.json("viewer", "GET", "/test/environments", None, 200)[0]["id"],
        id
    );
    assert_eq!(
        shim.json(
            "viewer",
            "GET",
            &format!("/test/environments/{id}"),
            None,
            200
        )["id"],
        id
    );
    let run = shim.json(
        "operator",
        "POST",
        &format!("/test/environments/{id}/run"),
        None,
        200,
    );
    assert_eq!(run["results"][0]["passed"], true, "{run:#}");
    let (status, logs) = shim.call(
        Some("viewer"),
        "GET",
        &format!("/test/environments/{id}/logs"),
        None,
    );
    assert_eq!(status, 200);
    assert!(logs.contains("test redis (exit 0"), "{logs}");
    let deleted = shim.json(
        "operator",
        "DELETE",
        &format!("/test/environments/{id}"),
        None,
        200,
    );
    assert_eq!(deleted["state"]["status"], "deleted");
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn an_open_event_stream_does_not_hold_up_a_graceful_stop() {
    let mut shim = Shim::lab();
    let mut stream = Command::new("curl")
        .args([
            "-s",
            "-N",
            "-H",
            &format!("Authorization: Bearer {}", shim.token("viewer")),
        ])
        .arg(format!("http://127.0.0.1:{}/events", shim.port))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (done, exited) = std::sync::mpsc::channel();
    let mut daemon = std::mem::replace(&mut shim.daemon, Daemon::start(&[]));
    std::thread::spawn(move || {
        let status = daemon.terminate();
        let _ = done.send(status.success());
    });
    let clean = exited
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the daemon stopped while an event stream was open");
    assert!(clean, "the daemon exited cleanly");
    let _ = stream.kill();
    let _ = stream.wait();
}
