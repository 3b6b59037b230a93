//! A large queue across a `kill -9`: 100,000 queued tasks (held by the daemon as ids and
//! priorities, their records read from the store as they start) all run after the
//! restart, in priority order then submission order; and `orch tasks` pages through many
//! tasks with a cursor, from nu and over HTTP.

use std::collections::BTreeMap;
use std::time::Duration;

use orch_e2e::http::Shim;
use orch_e2e::{Daemon, eventually, eventually_every};
use orch_protocol::{EventKind, Request, Response};

/// How many tasks are queued: 100,000 (a few minutes in a debug build on two cores), or
/// `$ORCH_E2E_BIG_QUEUE` (a multiple of 10,000, or fewer) for a quicker run.
fn queued() -> u64 {
    std::env::var("ORCH_E2E_BIG_QUEUE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

/// Tasks are submitted from nu in lists of at most this many.
const LIST: u64 = 10_000;

/// The priority of the `i`-th queued task (0-based).
fn priority(i: u64) -> i64 {
    (i * 7 % 5) as i64 - 2
}

#[test]
fn a_restart_with_100_000_queued_tasks_runs_them_all_in_priority_order() {
    let queued = queued();
    let list = LIST.min(queued);
    let mut daemon = Daemon::start(&["--parallel", "4"]);
    let nu = daemon.nu();
    // Four gates hold every slot while the queue fills; they outlive the kill under the
    // supervisor and are cancelled after the restart.
    let gates =
        nu.json("1..4 | each { {command: [sleep 600], priority: 100} } | orch submit | get id");
    let gates: Vec<u64> = serde_json::from_value(gates).unwrap();
    eventually(Duration::from_secs(30), "the gates running", || {
        let n = nu.json("orch tasks --status running | length");
        (n.as_u64() == Some(4)).then_some(())
    });
    let first = gates[3] + 1;
    for part in 0..queued / list {
        let start = part * list;
        let ids = nu.json(&format!(
            "{start}..<{} | each {{|i| {{command: [/bin/true], priority: (($i * 7) mod 5 - 2)}} }} \
             | orch submit | get id | [($in | first) ($in | last)]",
            start + list
        ));
        assert_eq!(
            ids,
            serde_json::json!([first + start, first + start + list - 1])
        );
    }
    let health = nu.json("orch health | get tasks");
    assert_eq!(health["queued"], queued);
    daemon.kill9();
    daemon.restart();
    for gate in &gates {
        nu.run(&format!("orch cancel {gate} | ignore"));
    }
    // One process per task: the longest test of the suite (about 6 minutes in a debug
    // build on two cores).
    // Checked every 2 s: each check starts nu, which would take a share of the two
    // cores the daemon runs the queue on.
    let (hour, every) = (Duration::from_secs(3600), Duration::from_secs(2));
    eventually_every(hour, every, "every queued task run", || {
        let counts = nu.try_run("orch health | get tasks.succeeded").ok()?;
        (counts.trim().parse::<u64>().ok()? == queued).then_some(())
    });
    let started = starts_from(&daemon, first, queued);
    let mut expected: Vec<u64> = (first..first + queued).collect();
    expected.sort_by_key(|id| (-priority(id - first), *id));
    assert_eq!(started.len(), expected.len());
    let wrong = started.iter().zip(&expected).position(|(a, b)| a != b);
    assert_eq!(wrong, None, "the first start out of order");
    let gates_after = nu.json(&format!(
        "[{}] | each {{|id| orch task $id | get status }} | uniq",
        gates
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    assert_eq!(gates_after, serde_json::json!(["cancelled"]));
}

/// The first `n` tasks from `first` on in the order they started, from the event log.
fn starts_from(daemon: &Daemon, first: u64, n: u64) -> Vec<u64> {
    let mut client = daemon.client();
    let watch = Request::Watch {
        since: Some(0),
        task: None,
        workflow: None,
    };
    client.send(&watch).unwrap();
    let mut started = Vec::new();
    while started.len() < n as usize {
        match client.next(&|| false).unwrap() {
            Response::Event { event } => {
                if matches!(event.kind, EventKind::Started { .. }) && event.task >= first {
                    started.push(event.task);
                }
            }
            other => panic!("not an event: {other:?}"),
        }
    }
    started
}

#[test]
fn orch_tasks_pages_with_a_cursor_from_nu_and_over_http() {
    let shim = Shim::start(&["--http-auth", "none", "--parallel", "1"]);
    let nu = shim.daemon.nu();
    // One gate holds the slot: the labelled tasks stay queued.
    nu.run("orch submit --priority 100 [sleep 600] | ignore");
    let ids = nu.json(
        "1..2500 | each {|i| {command: [/bin/true], label: (if $i mod 2 == 0 { 'even' } else { 'odd' })} } \
         | orch submit | get id",
    );
    let ids: Vec<u64> = serde_json::from_value(ids).unwrap();
    let newest_first = |label: Option<usize>| -> Vec<u64> {
        let mut out: Vec<u64> = ids
            .iter()
            .enumerate()
            .filter(|(i, _)| label.is_none_or(|parity| (i + 1) % 2 == parity))
            .map(|(_, id)| *id)
            .collect();
        out.reverse();
        out
    };
    // More than two pages of the plugin's (1,000 tasks each), streamed.
    let all: Vec<u64> =
        serde_json::from_value(nu.json("orch tasks --status queued | get id")).unwrap();
    assert_eq!(all, newest_first(None));
    let odd: Vec<u64> = serde_json::from_value(nu.json("orch tasks --label odd | get id")).unwrap();
    assert_eq!(odd, newest_first(Some(1)));
    let cursor = all[1200];
    let page: Vec<u64> = serde_json::from_value(nu.json(&format!(
        "orch tasks --status queued --before {cursor} --limit 1100 | get id"
    )))
    .unwrap();
    assert_eq!(page, all[1201..2301].to_vec());
    let first = nu.json("orch tasks --limit 3 | get id | length");
    assert_eq!(first, 3);
    // Over HTTP: pages of 700 below the last id, until an empty one.
    let mut pages: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut before = String::new();
    loop {
        let path = format!("/tasks?label=even&limit=700{before}");
        let (status, body) = shim.call(None, "GET", &path, None);
        assert_eq!(status, 200, "{body}");
        let tasks: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
        let page: Vec<u64> = tasks.iter().map(|t| t["id"].as_u64().unwrap()).collect();
        let Some(last) = page.last() else { break };
        before = format!("&before={last}");
        pages.insert(pages.len(), page);
    }
    let sizes: Vec<usize> = pages.values().map(Vec::len).collect();
    assert_eq!(sizes, vec![700, 550]);
    let even: Vec<u64> = pages.into_values().flatten().collect();
    assert_eq!(even, newest_first(Some(0)));
    let (status, body) = shim.call(None, "GET", "/tasks?before=-1", None);
    assert_eq!(status, 400, "{body}");
}
