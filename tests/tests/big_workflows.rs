//! Workflows at the step limit: every answer stays under the 16 MiB frame. A submission
//! answers with the workflow's summary, `orch workflow list` with summaries, `orch
//! workflow show` and `GET /tasks/{id}` with pages of steps, a plan with counts and its
//! first ids; and an answer that would exceed the frame anyway is replaced by an error
//! that says so, on a connection that keeps working.

use std::process::Command;

use orch_e2e::Daemon;
use orch_protocol::{
    BatchRequest, BatchWorkflow, ErrorKind, MAX_FRAME_LEN, Operation, Request, Response,
    WorkflowRequest,
};
use serde_json::Value;

/// The most steps a workflow may have (the daemon's limit).
const STEPS: u64 = 100_000;

/// Nushell code making a batch workflow of `STEPS` `command: true` steps, one at a time.
fn big_workflow() -> String {
    format!(
        "{{name: big, parallel_limit: 1, operations: (0..<{STEPS} | each {{|i| {{id: $'s($i)', type: command, command: ['true']}}}})}}"
    )
}

/// `GET path` with the viewer token; the body as JSON.
fn get(daemon: &Daemon, port: u16, path: &str) -> Value {
    let token = orch_e2e::http::token(daemon, "viewer");
    let out = Command::new("curl")
        .args(["-s", "--fail-with-body", "--max-time", "60", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_workflow_at_the_step_limit_is_submitted_listed_and_shown_in_pages() {
    let port = orch_e2e::free_port();
    let daemon = Daemon::start(&["--parallel", "1", "--port", &port.to_string()]);
    let nu = daemon.nu();
    // The plan: counts and the first ids, under the frame.
    let plan = nu.json(&format!(
        "{} | orch workflow submit batch --check | {{step_count: $in.step_count, wave_count: $in.wave_count, truncated: $in.truncated, steps: ($in.steps | length), waves: ($in.waves | length), first: $in.waves.0.0}}",
        big_workflow()
    ));
    assert_eq!(plan["step_count"], STEPS);
    assert_eq!(plan["wave_count"], STEPS);
    assert_eq!(plan["truncated"], true);
    let steps = plan["steps"].as_u64().unwrap();
    assert!(steps > 0 && steps < STEPS, "{steps} steps listed");
    assert!(plan["waves"].as_u64().unwrap() <= STEPS, "{plan}");
    assert_eq!(plan["first"], "s0");

    // The submission answers with the summary.
    let submitted = nu.json(&format!(
        "{} | orch workflow submit batch | select id status steps waves step_counts",
        big_workflow()
    ));
    let id = submitted["id"].as_u64().unwrap();
    assert_eq!(submitted["status"], "running");
    assert_eq!(submitted["steps"], STEPS);
    assert_eq!(submitted["waves"], STEPS);
    let counts = &submitted["step_counts"];
    let counted: u64 = ["blocked", "queued", "running", "succeeded"]
        .iter()
        .map(|s| counts[s].as_u64().unwrap())
        .sum();
    assert_eq!(counted, STEPS, "{counts}");

    // Listing and showing work, and the pages hold every step exactly once, in order.
    let listed = nu.json(&format!(
        "orch workflow list | where id == {id} | first | select steps status"
    ));
    assert_eq!(listed["steps"], STEPS);
    let pages = nu.json(&format!(
        "0..<10 | each {{|p| orch workflow show {id} --offset ($p * 10000) --limit 10000 | get step_list.step }} | flatten | {{count: ($in | length), distinct: ($in | uniq | length), first: ($in | first), last: ($in | last)}}"
    ));
    assert_eq!(pages["count"], STEPS);
    assert_eq!(pages["distinct"], STEPS);
    assert_eq!(pages["first"], "s0");
    assert_eq!(pages["last"], format!("s{}", STEPS - 1));
    let window = nu.json(&format!(
        "orch workflow show {id} --offset 99995 --limit 100 | {{steps: $in.steps, listed: ($in.step_list | length), first: ($in.step_list.0.step)}}"
    ));
    assert_eq!(
        window,
        serde_json::json!({"steps": STEPS, "listed": 5, "first": "s99995"})
    );

    // Over HTTP: the summary and a page of steps, with where the next page starts.
    let first = get(&daemon, port, &format!("/tasks/{id}"));
    assert_eq!(first["workflow"]["steps"], STEPS);
    let page = first["tasks"].as_array().unwrap().len() as u64;
    assert!(page > 0 && page < STEPS, "{page} steps in the first page");
    assert_eq!(first["next_offset"], page);
    let last = get(
        &daemon,
        port,
        &format!("/tasks/{id}?offset=99990&limit=100"),
    );
    assert_eq!(last["tasks"].as_array().unwrap().len(), 10);
    assert_eq!(last["tasks"][9]["id"], format!("s{}", STEPS - 1));
    assert!(last.get("next_offset").is_none(), "{}", last["next_offset"]);
}

#[test]
fn an_answer_too_large_for_a_frame_becomes_an_error_and_the_connection_goes_on() {
    let daemon = Daemon::start(&[]);
    let mut client = daemon.client();
    // A name that fits in the request but not in the answers that repeat it with more.
    let name = "n".repeat(MAX_FRAME_LEN - 400);
    let request = Request::WorkflowSubmit {
        workflow: WorkflowRequest::Batch(BatchRequest {
            workflow: BatchWorkflow {
                name,
                version: None,
                parallel_limit: None,
                rollback_enabled: false,
                priority: 0,
                group: None,
                operations: vec![
                    serde_json::from_value::<Operation>(serde_json::json!(
                        {"id": "a", "type": "command", "command": ["true"]}
                    ))
                    .unwrap(),
                ],
            },
            infra: None,
            settings: None,
            workspace: None,
            base_dir: None,
            check_mode: false,
            wait: false,
        }),
    };
    let error = client.call(&request).unwrap_err();
    let orch_protocol::ClientError::Daemon(reply) = error else {
        panic!("not an error answer: {error}");
    };
    assert_eq!(reply.kind, ErrorKind::TooLarge);
    assert!(reply.message.contains("exceeds the frame limit"), "{reply}");
    assert!(reply.message.contains("--limit"), "{reply}");
    // The same connection still answers, and so does a list that holds that workflow.
    assert!(matches!(
        client.call(&Request::Health),
        Ok(Response::Health(_))
    ));
    let error = client
        .call(&Request::Workflows {
            limit: None,
            before: None,
        })
        .unwrap_err();
    assert!(
        error.to_string().contains("exceeds the frame limit"),
        "{error}"
    );
    assert!(matches!(
        client.call(&Request::Health),
        Ok(Response::Health(_))
    ));
}
