//! The REST routes the dashboard reads and acts through, with curl against a real daemon:
//! a task's log by pages and its tail, dependants, the tasks' search and pages, workflows
//! by pages, cancel and retry, a workflow's restart from a step (and every refusal of
//! it), the last hour's activity across a restart, and hostile requests on each.

use std::time::Duration;

use orch_e2e::eventually_every;
use orch_e2e::http::Shim;
use serde_json::{Value, json};

fn ids(tasks: &Value) -> Vec<u64> {
    tasks
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| t["id"].as_u64().unwrap())
        .collect()
}

/// Waits (checking every 100 ms) until `GET path` as a viewer satisfies `done`.
fn until(shim: &Shim, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually_every(
        Duration::from_secs(60),
        Duration::from_millis(100),
        path,
        || {
            let (status, body) = shim.call_json("viewer", "GET", path, None);
            (status == 200 && done(&body)).then_some(body)
        },
    )
}

#[test]
fn a_log_is_read_by_pages_and_by_its_tail_and_bad_pages_are_refused() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let id = nu.json("(orch submit --wait --nu 'for i in 1..2000 { print $\"line ($i)\" }').id");
    let whole = until(&shim, &format!("/tasks/{id}/logs?limit=65536"), |p| {
        p["complete"] == true
    });
    let size = whole["size"].as_u64().unwrap();
    assert!(size > 10_000, "{size}");
    assert!(whole["text"].as_str().unwrap().starts_with("line 1\n"));
    // Pages joined by next_offset give the whole log.
    let mut text = String::new();
    let mut offset = 0;
    while offset < size {
        let page = shim.json(
            "viewer",
            "GET",
            &format!("/tasks/{id}/logs?offset={offset}&limit=4096"),
            None,
            200,
        );
        assert_eq!(page["offset"], offset);
        text.push_str(page["text"].as_str().unwrap());
        offset = page["next_offset"].as_u64().unwrap();
    }
    assert_eq!(text.lines().count(), 2000);
    assert_eq!(text.lines().last(), Some("line 2000"));
    let tail = shim.json(
        "viewer",
        "GET",
        &format!("/tasks/{id}/logs?tail=10"),
        None,
        200,
    );
    assert_eq!(tail["text"], "line 2000\n");
    assert_eq!(tail["next_offset"], size);
    // Past the end: nothing, and where the end is.
    let past = shim.json(
        "viewer",
        "GET",
        &format!("/tasks/{id}/logs?offset=99999999"),
        None,
        200,
    );
    assert_eq!(
        (past["text"].as_str(), past["offset"].as_u64()),
        (Some(""), Some(size))
    );
    for bad in [
        format!("/tasks/{id}/logs?offset=1&tail=1"),
        format!("/tasks/{id}/logs?offset=-1"),
        format!("/tasks/{id}/logs?whence=0"),
        "/tasks/nope/logs".to_string(),
    ] {
        let (status, body) = shim.call(Some("viewer"), "GET", &bad, None);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    assert_eq!(
        shim.call(Some("viewer"), "GET", "/tasks/999999/logs", None)
            .0,
        404
    );
    // A task that wrote nothing has an empty, complete log.
    let quiet = nu.json("(orch submit --wait true).id");
    let page = shim.json("viewer", "GET", &format!("/tasks/{quiet}/logs"), None, 200);
    assert_eq!(
        page,
        json!({"offset": 0, "next_offset": 0, "size": 0, "text": "", "complete": true})
    );
}

#[test]
fn tasks_are_searched_and_paged_within_a_bound_and_dependants_are_found() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    nu.run("orch group add deploy --parallel 2 | ignore");
    nu.run(
        "1..30 | each {|i| let t = {command: [echo $'item-($i)'], label: (if $i mod 3 == 0 { 'three' } else { 'other' })}; if $i mod 5 == 0 { $t | insert group deploy } else { $t } } | orch submit | orch wait | ignore",
    );
    // Search by text and group, newest first, with the next page's cursor.
    let (status, text) = shim.curl(
        Some(shim.token("viewer")),
        "GET",
        "/tasks?q=ITEM-2&limit=5",
        &["-D", "-"],
    );
    assert_eq!(status, 200, "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let found: Value = serde_json::from_str(body).unwrap();
    let names: Vec<String> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["spec"]["kind"]["args"][0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["item-29", "item-28", "item-27", "item-26", "item-25"]
    );
    let next = text
        .lines()
        .find_map(|l| l.strip_prefix("x-next-before: "))
        .expect("a cursor for the next page")
        .trim()
        .to_string();
    let rest = shim.json(
        "viewer",
        "GET",
        &format!("/tasks?q=item-2&before={next}"),
        None,
        200,
    );
    let rest: Vec<&str> = rest
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["spec"]["kind"]["args"][0].as_str().unwrap())
        .collect();
    assert_eq!(
        rest,
        [
            "item-24", "item-23", "item-22", "item-21", "item-20", "item-2"
        ]
    );
    let grouped = shim.json(
        "viewer",
        "GET",
        "/tasks?group=deploy&label=other",
        None,
        200,
    );
    assert_eq!(
        grouped.as_array().unwrap().len(),
        4,
        "5, 10, 20, 25: {grouped}"
    );
    // Bounds: the page, the text.
    let long = "x".repeat(201);
    for bad in [
        "/tasks?limit=10001".to_string(),
        format!("/tasks?q={long}"),
        "/tasks?status=nope".to_string(),
        "/tasks?sort=id".to_string(),
        "/workflows?limit=1001".to_string(),
    ] {
        let (status, body) = shim.call(Some("viewer"), "GET", &bad, None);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    // Dependants, oldest first, past a task that is not one.
    let root = nu.json("(orch submit --wait true).id").as_u64().unwrap();
    let first = nu.json(&format!("(orch submit --after {root} true).id"));
    nu.run("orch submit true | ignore");
    let second = nu.json(&format!("(orch submit --after [{root} {first}] true).id"));
    let dependants = shim.json(
        "viewer",
        "GET",
        &format!("/tasks/{root}/dependants"),
        None,
        200,
    );
    assert_eq!(
        ids(&dependants["tasks"]),
        vec![first.as_u64().unwrap(), second.as_u64().unwrap()]
    );
    assert_eq!(dependants["complete"], true);
    let none = shim.json(
        "viewer",
        "GET",
        &format!("/tasks/{second}/dependants"),
        None,
        200,
    );
    assert_eq!(none["tasks"], json!([]));
    assert_eq!(
        shim.call(Some("viewer"), "GET", "/tasks/999999/dependants", None)
            .0,
        404
    );
}

#[test]
fn cancel_retry_and_a_restart_from_a_step_each_do_what_they_say_and_refuse_the_rest() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let sleeper = nu.json("(orch submit sleep 300).id");
    until(&shim, &format!("/tasks/{sleeper}"), |t| {
        t["state"]["status"] == "running"
    });
    let cancelled = shim.json(
        "operator",
        "POST",
        &format!("/tasks/{sleeper}/cancel"),
        None,
        200,
    );
    assert_eq!(cancelled["state"]["status"], "cancelled");
    let (status, body) = shim.call(
        Some("operator"),
        "POST",
        &format!("/tasks/{sleeper}/cancel"),
        None,
    );
    assert_eq!(status, 409, "{body}");
    let retried = shim.json(
        "operator",
        "POST",
        &format!("/tasks/{sleeper}/retry"),
        None,
        200,
    );
    assert_ne!(retried["state"]["status"], "cancelled");
    shim.json(
        "operator",
        "POST",
        &format!("/tasks/{sleeper}/cancel"),
        None,
        200,
    );

    let dir = shim.daemon.dir();
    let marker = dir.join("fixed");
    let batch = dir.join("pipeline.json");
    let pipeline = json!({"name": "pipeline", "operations": [
        {"id": "build", "type": "command", "command": ["true"]},
        {"id": "test", "type": "command", "command": ["test", "-e", marker], "dependencies": ["build"]},
        {"id": "ship", "type": "command", "command": ["true"], "dependencies": ["test"]},
        {"id": "docs", "type": "command", "command": ["true"], "soft_dependencies": ["test"]}
    ]});
    std::fs::write(&batch, pipeline.to_string()).unwrap();
    let failed = nu.json(&format!(
        "(orch workflow submit batch '{}' --wait).id",
        batch.display()
    ));
    let failed = failed.as_u64().unwrap();
    let shown = shim.json("viewer", "GET", &format!("/workflows/{failed}"), None, 200);
    assert_eq!(shown["workflow"]["state"]["status"], "failed", "{shown}");
    let restart = |who: &str, body: Value| {
        shim.call_json(
            who,
            "POST",
            &format!("/workflows/{failed}/restart"),
            Some(&body),
        )
    };
    // Refused: a step that does not exist, one whose dependency did not succeed, a body
    // that is not the restart's, a viewer.
    let (status, body) = restart("operator", json!({"step": "nope"}));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["field"], "step");
    let (status, body) = restart("operator", json!({"step": "ship"}));
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("restart from `test` instead"),
        "{body}"
    );
    for bad in [
        json!({}),
        json!({"step": "test", "also": 1}),
        json!({"step": 7}),
    ] {
        let (status, body) = restart("operator", bad.clone());
        assert!([400, 422].contains(&status), "{bad}: {status} {body}");
    }
    assert_eq!(restart("viewer", json!({"step": "test"})).0, 403);
    let before = shim.json("viewer", "GET", "/workflows", None, 200);
    assert_eq!(
        before.as_array().unwrap().len(),
        1,
        "nothing was created by a refusal"
    );
    // From `test`: test, then ship (hard) and docs (soft); build is taken as done.
    std::fs::write(&marker, "").unwrap();
    let (status, created) = restart("operator", json!({"step": "test"}));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_u64().unwrap();
    let done = until(&shim, &format!("/workflows/{id}"), |w| {
        w["workflow"]["state"]["status"] == "succeeded"
    });
    let steps: Vec<&str> = done["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["test", "ship", "docs"]);
    assert_eq!(done["request"]["restart_of"], failed);
    // A workflow still running cannot be restarted; one rolled back neither.
    let gate = dir.join("gate");
    let slow = dir.join("slow.json");
    let body = json!({"name": "slow", "rollback_enabled": true, "operations": [
        {"id": "a", "type": "nu", "nu": "print a", "rollback": "print undo"},
        {"id": "b", "type": "nu", "nu": format!("while not ('{}' | path exists) {{ sleep 50ms }}; error make {{msg: no}}", gate.display()), "dependencies": ["a"]}
    ]});
    std::fs::write(&slow, body.to_string()).unwrap();
    let running = nu.json(&format!(
        "(orch workflow submit batch '{}').id",
        slow.display()
    ));
    let (status, body) = shim.call_json(
        "operator",
        "POST",
        &format!("/workflows/{running}/restart"),
        Some(&json!({"step": "a"})),
    );
    assert_eq!(status, 409, "{body}");
    std::fs::write(&gate, "").unwrap();
    until(&shim, &format!("/workflows/{running}"), |w| {
        w["workflow"]["state"]["status"] == "rolled_back"
    });
    let (status, body) = shim.call_json(
        "operator",
        "POST",
        &format!("/workflows/{running}/restart"),
        Some(&json!({"step": "b"})),
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("undone"),
        "{body}"
    );
    // Pages of workflows, newest first.
    let page = shim.json("viewer", "GET", "/workflows?limit=2", None, 200);
    let newest = ids(&page);
    assert_eq!(newest.len(), 2);
    let older = shim.json(
        "viewer",
        "GET",
        &format!("/workflows?limit=2&before={}", newest[1]),
        None,
        200,
    );
    assert_eq!(ids(&older), vec![failed]);
    let audit = nu.json("orch audit --action workflow_restart");
    assert_eq!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ok"] == true)
            .count(),
        1,
        "{audit}"
    );
}

#[test]
fn the_last_hour_is_counted_by_minute_and_read_back_after_a_restart() {
    let mut shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    nu.run("1..5 | each { {command: [true]} } | orch submit | orch wait | ignore");
    nu.run("[{command: [false]}] | orch submit | orch wait | ignore");
    let counted = until(&shim, "/activity", |a| {
        a["succeeded_last_hour"] == 5 && a["failed_last_hour"] == 1
    });
    assert_eq!(counted["minutes"].as_array().unwrap().len(), 60);
    let submitted: u64 = counted["minutes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["submitted"].as_u64().unwrap())
        .sum();
    assert_eq!(submitted, 6);
    shim.daemon.kill9();
    shim.daemon.restart();
    let again = until(&shim, "/activity", |a| a["succeeded_last_hour"] == 5);
    assert_eq!(again["failed_last_hour"], 1, "{again}");
}

#[test]
fn the_dashboard_serves_its_own_files_only_and_forbids_inline_code_and_framing() {
    let shim = Shim::start(&[]);
    std::fs::write(shim.daemon.dir().join("secret.txt"), "do-not-serve").unwrap();
    for path in [
        "/ui/assets/../../secret.txt",
        "/ui/assets/%2e%2e/%2e%2e/secret.txt",
        "/ui/../secret.txt",
        "/ui/assets/..%2F..%2Fsecret.txt",
        "/ui//etc/passwd",
    ] {
        let (status, body) = shim.curl(None, "GET", path, &["--path-as-is"]);
        assert!(
            !body.contains("do-not-serve") && !body.contains("root:"),
            "{path}"
        );
        assert!([200, 404].contains(&status), "{path}: {status}");
        if status == 200 {
            assert!(
                body.contains("/ui/assets/app.js"),
                "{path} is the page: {body}"
            );
        }
    }
    let (status, headers) = shim.curl(
        None,
        "GET",
        "/ui/workflows/1",
        &["-D", "-", "-o", "/dev/null"],
    );
    assert_eq!(status, 200);
    let headers = headers.to_ascii_lowercase();
    assert!(
        headers.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{headers}"
    );
    assert!(
        headers.contains("frame-ancestors 'none'") && headers.contains("x-frame-options: deny"),
        "{headers}"
    );
    let (status, _) = shim.curl(None, "GET", "/", &[]);
    assert_eq!(status, 303, "/ goes to the dashboard");
}
