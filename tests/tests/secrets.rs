//! Secrets and tokens end to end: secret-looking params and env values are redacted for
//! every reader below admin on every read (HTTP tokens, socket users granted a role with
//! `--allow-user`), admins see them; HTTP tokens are listed without their secrets and
//! revoked at once, durably, with the last admin token kept.

use std::os::unix::fs::PermissionsExt;

use orch_e2e::Daemon;
use orch_e2e::http::Shim;
use orch_e2e::peer;
use serde_json::{Value, json};

/// The values a reader below admin must never see.
const SECRETS: [&str; 3] = ["s3cret-param", "s3cret-env", "s3cret-wf"];

/// Every socket read a client can make, as uid `uid` through the raw protocol, one
/// answer (frame) per line.
fn socket_reads_as(uid: u32, daemon: &Daemon, task: u64, workflow: u64) -> String {
    let messages = [
        peer::hello("reader"),
        json!({"request": "get", "id": task}),
        json!({"request": "list"}),
        json!({"request": "wait", "ids": [task]}),
        json!({"request": "workflows"}),
        json!({"request": "workflow", "id": workflow}),
        json!({"request": "watch", "since": 0, "task": task}),
    ];
    let answers = peer::socket_as(uid, &daemon.socket(), &messages);
    assert_eq!(
        answers.len(),
        messages.len(),
        "every request answered: {answers:?}"
    );
    answers
        .iter()
        .flatten()
        .map(|frame| format!("{frame}\n"))
        .collect()
}

fn assert_no_secret(reader: &str, seen: &str) {
    for secret in SECRETS {
        assert!(!seen.contains(secret), "{reader} saw `{secret}`:\n{seen}");
    }
    assert!(
        seen.contains("[redacted]"),
        "{reader} should see the redaction marker:\n{seen}"
    );
}

#[test]
fn readers_below_admin_never_see_secret_params_or_env() {
    let http = Shim::start(&[
        "--allow-user",
        "65534:viewer",
        "--allow-user",
        "65533:operator",
    ]);
    let daemon = &http.daemon;
    std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let nu = daemon.nu();
    let ids = nu.json(
        "let t = (orch submit --nu 'print $params.host' --params {db_password: s3cret-param, host: h1} --env {API_TOKEN: s3cret-env, REGION: eu}); \
         orch wait $t.id | ignore; \
         let w = ({name: w, operations: [{id: a, type: nu, nu: 'print ok', params: {target: {api_key: s3cret-wf}}, rollback: 'print undo'}]} | orch workflow submit batch --wait); \
         [$t.id, $w.id]",
    );
    let (task, workflow) = (ids[0].as_u64().unwrap(), ids[1].as_u64().unwrap());
    let step = nu.json(&format!(
        "orch workflow show {workflow} | get step_list.0.task"
    ));
    let reads = [
        "/tasks".to_string(),
        format!("/tasks/{task}"),
        format!("/tasks/{workflow}"),
        format!("/tasks/{step}"),
    ];
    for role in ["viewer", "operator"] {
        let token = http.token(role);
        let mut seen = String::new();
        for path in &reads {
            let (status, body) = http.curl(Some(token), "GET", path, &[]);
            assert_eq!(status, 200, "{role} GET {path}: {body}");
            seen.push_str(&body);
        }
        // The event stream stays open: read what it replays for a few seconds.
        let (_, events) = http.curl(
            Some(token),
            "GET",
            "/events?since=0",
            &["-N", "--max-time", "3"],
        );
        assert!(events.contains("succeeded"), "{events}");
        seen.push_str(&events);
        assert_no_secret(&format!("the HTTP {role}"), &seen);
    }
    for (uid, role) in [(65534, "viewer"), (65533, "operator")] {
        let seen = socket_reads_as(uid, daemon, task, workflow);
        assert!(!seen.contains("\"error\""), "{seen}");
        assert_no_secret(&format!("the socket {role} (uid {uid})"), &seen);
    }
    // Admins (the socket's owner, the admin token) see what was submitted.
    let owner = socket_reads_as(0, daemon, task, workflow);
    let (_, admin_task) = http.curl(
        Some(http.token("admin")),
        "GET",
        &format!("/tasks/{task}"),
        &[],
    );
    let (_, admin_workflow) = http.curl(
        Some(http.token("admin")),
        "GET",
        &format!("/tasks/{workflow}"),
        &[],
    );
    for seen in [owner, admin_task + &admin_workflow] {
        for secret in SECRETS {
            assert!(seen.contains(secret), "an admin sees `{secret}`:\n{seen}");
        }
    }
    assert!(
        nu.run(&format!("orch logs {task}")).contains("h1"),
        "the task itself got its params"
    );
}

#[test]
fn tokens_are_listed_without_secrets_and_revoked_at_once_and_durably() {
    let mut http = Shim::start(&[]);
    let admin = http.token("admin").to_string();
    let (status, made) = http.call_json(
        &admin,
        "POST",
        "/auth/tokens",
        Some(&json!({"name": "ci", "role": "operator"})),
    );
    assert_eq!(status, 201, "{made}");
    let (id, secret) = (
        made["id"].as_str().unwrap().to_string(),
        made["token"].as_str().unwrap().to_string(),
    );
    assert_eq!(secret.len(), 64, "32 random bytes in hex");
    assert_eq!(http.curl(Some(&*secret), "GET", "/tasks", &[]).0, 200);

    let (status, listed) = http.curl(Some(&*admin), "GET", "/auth/tokens", &[]);
    assert_eq!(status, 200, "{listed}");
    for role in ["admin", "operator", "viewer"] {
        assert!(
            !listed.contains(http.token(role)),
            "a secret is listed: {listed}"
        );
    }
    assert!(!listed.contains(&secret), "a secret is listed: {listed}");
    let listed: Vec<Value> = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|t| t.get("token").is_none()));
    assert!(listed.iter().any(|t| t["id"] == id && t["name"] == "ci"));

    let path = format!("/auth/tokens/{id}");
    assert_eq!(
        http.curl(Some(&*secret), "DELETE", &path, &[]).0,
        403,
        "an operator may not revoke"
    );
    let (status, revoked) = http.call_json(&admin, "DELETE", &path, None);
    assert_eq!(status, 200, "{revoked}");
    assert_eq!(revoked["name"], "ci");
    assert!(revoked.get("token").is_none());
    assert_eq!(
        http.curl(Some(&*secret), "GET", "/tasks", &[]).0,
        401,
        "revoked at once"
    );
    let (status, again) = http.call_json(&admin, "DELETE", &path, None);
    assert_eq!(status, 404, "{again}");
    assert_eq!(again["error"]["field"], "id");
    let file = daemon_file(&http.daemon, "tokens.json");
    assert!(
        !file.contains(&secret),
        "the revoked secret is gone from tokens.json"
    );
    let mode = std::fs::metadata(http.daemon.data_dir().join("tokens.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // The last admin token stays; with a second admin, the first can go.
    let admin_id = listed.iter().find(|t| t["role"] == "admin").unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, refused) =
        http.call_json(&admin, "DELETE", &format!("/auth/tokens/{admin_id}"), None);
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("last admin token")
    );
    let (_, second) = http.call_json(
        &admin,
        "POST",
        "/auth/tokens",
        Some(&json!({"name": "second-admin", "role": "admin"})),
    );
    let second = second["token"].as_str().unwrap().to_string();
    let (status, _) = http.call_json(&second, "DELETE", &format!("/auth/tokens/{admin_id}"), None);
    assert_eq!(status, 200);
    assert_eq!(http.curl(Some(&*admin), "GET", "/tasks", &[]).0, 401);

    // Durable: after a restart the revoked tokens still fail, the others work.
    assert!(http.daemon.terminate().success());
    http.daemon.restart();
    assert_eq!(http.curl(Some(&*secret), "GET", "/tasks", &[]).0, 401);
    assert_eq!(http.curl(Some(&*admin), "GET", "/tasks", &[]).0, 401);
    assert_eq!(http.curl(Some(&*second), "GET", "/tasks", &[]).0, 200);

    // The audit log records both revocations and the creations, never a secret.
    let (status, audit) = http.curl(Some(&*second), "GET", "/audit", &[]);
    assert_eq!(status, 200, "{audit}");
    for secret in [&secret, &second, &admin] {
        assert!(
            !audit.contains(secret.as_str()),
            "a secret is in the audit log"
        );
    }
    let entries: Vec<Value> = serde_json::from_str(&audit).unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        [
            "token_revoke",
            "token_create",
            "token_revoke",
            "token_create"
        ],
        "{audit}"
    );
    assert_eq!(entries[2]["params"]["id"], id.as_str());
}

fn daemon_file(daemon: &Daemon, name: &str) -> String {
    std::fs::read_to_string(daemon.data_dir().join(name)).unwrap()
}
