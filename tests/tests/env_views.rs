//! What the dashboard and the shell see of test environments, on a real container engine
//! (Podman in CI): the list by pages (newest first, `before`, `alive`), a page of an
//! environment's log by offset or tail, its `env` events on the event stream (filtered
//! by type) and through `orch watch --task <env id>` until it is deleted, the plugin's
//! `orch test env list` flags, and hostile pages refused with the field named.

use orch_e2e::containers::{engine_or_skip, sweeper_of};
use orch_e2e::http::Shim;
use serde_json::{Value, json};

/// Environments made without starting them (their containers exist, stopped): their ids,
/// oldest first.
fn created(nu: &orch_e2e::Nu, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            nu.json("(orch test env create single redis).id")
                .as_u64()
                .expect("an id")
        })
        .collect()
}

fn ids(envs: &Value) -> Vec<u64> {
    envs.as_array()
        .expect("a list")
        .iter()
        .map(|e| e["id"].as_u64().expect("an id"))
        .collect()
}

/// The body and the `x-next-before` header of `GET path` as a viewer.
fn page(shim: &Shim, path: &str) -> (Value, Option<u64>) {
    let (status, text) = shim.curl(Some(shim.token("viewer")), "GET", path, &["-i"]);
    assert_eq!(status, 200, "{path}: {text}");
    let (head, body) = text.split_once("\r\n\r\n").expect("headers, then the body");
    let next = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("x-next-before: ")
                .map(str::to_string)
        })
        .map(|v| v.trim().parse().expect("a number"));
    (serde_json::from_str(body).expect("JSON"), next)
}

#[test]
fn environments_are_listed_by_pages_their_logs_by_tail_and_their_changes_are_events() {
    if engine_or_skip().is_none() {
        return;
    }
    let shim = Shim::start(&[]);
    let _sweeper = sweeper_of(&shim.daemon);
    let nu = shim.daemon.nu();
    let made = created(&nu, 3);
    let (first, next) = page(&shim, "/test/environments?limit=2");
    assert_eq!(ids(&first), vec![made[2], made[1]], "newest first");
    assert_eq!(
        next,
        Some(made[1]),
        "the next page starts below the last id shown"
    );
    let (rest, next) = page(
        &shim,
        &format!("/test/environments?limit=2&before={}", made[1]),
    );
    assert_eq!((ids(&rest), next), (vec![made[0]], None));

    nu.run(&format!("orch test env delete {}", made[1]));
    let (alive, _) = page(&shim, "/test/environments?alive=true");
    assert_eq!(
        ids(&alive),
        vec![made[2], made[0]],
        "a deleted one is not alive"
    );
    let listed = nu.json("orch test env list --alive | get id");
    assert_eq!(listed, json!([made[2], made[0]]));
    let limited = nu.json(&format!(
        "orch test env list --limit 1 --before {}",
        made[2]
    ));
    assert_eq!(ids(&limited), vec![made[1]]);
    assert_eq!(
        nu.json("orch test env list | length"),
        3,
        "all of them, by pages"
    );

    // The log: as text, or a page of it as JSON.
    let id = made[1];
    let (status, text) = shim.call(
        Some("viewer"),
        "GET",
        &format!("/test/environments/{id}/logs"),
        None,
    );
    assert_eq!(status, 200);
    assert!(text.contains("deleted"), "{text}");
    let tail = shim.json(
        "viewer",
        "GET",
        &format!("/test/environments/{id}/logs?tail=16"),
        None,
        200,
    );
    let size = tail["size"].as_u64().expect("a size");
    assert_eq!(tail["next_offset"], size);
    assert_eq!(tail["offset"], size.saturating_sub(16));
    assert!(text.ends_with(tail["text"].as_str().unwrap()), "{tail}");
    assert_eq!(
        tail["complete"], true,
        "nothing is at work on a deleted environment"
    );
    let first = shim.json(
        "viewer",
        "GET",
        &format!("/test/environments/{id}/logs?offset=0&limit=10"),
        None,
        200,
    );
    assert_eq!(first["text"].as_str(), Some(&text[..10]));

    // Its events: on the stream filtered by type, and through `orch watch --task`, which
    // ends at its deletion.
    let (_, stream) = shim.curl(
        Some(shim.token("viewer")),
        "GET",
        &format!("/events?since=0&type=env&task={id}"),
        &["-N", "--max-time", "2"],
    );
    let states: Vec<Value> = stream
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).expect("an event"))
        .inspect(|e| {
            assert_eq!(
                (e["kind"]["type"].as_str(), e["task"].as_u64()),
                (Some("env"), Some(id)),
                "{e}"
            )
        })
        .map(|e| e["kind"]["state"]["status"].clone())
        .collect();
    assert_eq!(states.first(), Some(&json!("starting")), "{states:?}");
    assert_eq!(
        &states[states.len() - 3..],
        [json!("created"), json!("deleting"), json!("deleted")]
    );
    let watched = nu.json(&format!(
        "orch watch --task {id} | get details.state.status"
    ));
    assert_eq!(
        watched,
        Value::Array(states),
        "the same history, then the end"
    );
    // A notifier may name them.
    nu.run("orch notify add envs --command [cat] --events [env]");

    // Hostile pages: refused, naming the field.
    for (path, field) in [
        ("/test/environments?limit=0", "limit"),
        ("/test/environments?limit=10001", "limit"),
        ("/events?type=env,bogus", "type"),
        ("/events?type=", "type"),
    ] {
        let (status, body) = shim.call_json("viewer", "GET", path, None);
        assert_eq!(status, 422, "{path}: {body}");
        assert_eq!(body["error"]["field"], field, "{path}: {body}");
    }
    for path in [
        format!("/test/environments/{id}/logs?offset=1&tail=1"),
        "/test/environments?alive=maybe".to_string(),
        "/test/environments?before=-1".to_string(),
    ] {
        let (status, body) = shim.call_json("viewer", "GET", &path, None);
        assert_eq!(status, 400, "{path}: {body}");
    }
    let error = nu
        .try_run("orch test env list --before -5")
        .expect_err("a negative cursor is refused");
    assert!(error.contains("must not be negative"), "{error}");
}
