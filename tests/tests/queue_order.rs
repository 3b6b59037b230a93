//! Priority, FIFO and dependencies decide the execution order, checked end to end:
//! tasks submitted from `nu` through the plugin append their names to a file.

use orch_e2e::Daemon;
use std::collections::{BTreeMap, BTreeSet};

/// One task of the test plan: its priority and the plan indexes it runs after.
struct Planned {
    priority: i64,
    after: Vec<usize>,
}

/// 60 tasks: priorities cycle through -2..=3; every seventh task depends on one or two
/// earlier tasks.
fn plan() -> Vec<Planned> {
    (0..60)
        .map(|i| Planned {
            priority: (i as i64 * 7 % 6) - 2,
            after: match i {
                i if i % 7 == 6 => vec![i - 5],
                i if i % 11 == 10 => vec![i - 3, i - 9],
                _ => vec![],
            },
        })
        .collect()
}

/// The order a one-slot priority queue must run `plan` in, all tasks queued at once.
fn expected_order(plan: &[Planned]) -> Vec<usize> {
    let mut done = BTreeSet::new();
    let mut order = Vec::new();
    while order.len() < plan.len() {
        let next = (0..plan.len())
            .filter(|i| !done.contains(i))
            .filter(|i| plan[*i].after.iter().all(|d| done.contains(d)))
            .max_by_key(|i| (plan[*i].priority, std::cmp::Reverse(*i)))
            .expect("the plan has no cycles");
        done.insert(next);
        order.push(next);
    }
    order
}

#[test]
fn sixty_tasks_run_by_priority_fifo_and_dependencies() {
    let daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    let gate = daemon.dir().join("gate");
    let out = daemon.dir().join("order.txt");
    // A gate task holds the only slot while the others are submitted.
    let gate_task = nu.json(&format!(
        "orch submit --priority 100 --label gate [sh -c 'while [ ! -f {} ]; do sleep 0.01; done'] | get id",
        gate.display()
    ));
    let gate_id = gate_task.as_u64().unwrap();
    let plan = plan();
    // Task ids are assigned in submission order: gate_id + 1 + index.
    let records: Vec<String> = plan
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let after: Vec<String> = p
                .after
                .iter()
                .map(|d| (gate_id + 1 + *d as u64).to_string())
                .collect();
            format!(
                "{{command: [sh -c 'echo {i} >> {}'], priority: {}, after: [{}], label: order}}",
                out.display(),
                p.priority,
                after.join(" ")
            )
        })
        .collect();
    let submitted = nu.json(&format!("[{}] | orch submit | get id", records.join(", ")));
    let ids: Vec<u64> = serde_json::from_value(submitted).unwrap();
    assert_eq!(ids, (gate_id + 1..=gate_id + 60).collect::<Vec<_>>());
    std::fs::write(&gate, "").unwrap();
    let statuses =
        nu.json("orch tasks --label order | get id | orch wait --timeout 2min | get status | uniq");
    assert_eq!(statuses, serde_json::json!(["succeeded"]));
    let ran: Vec<usize> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ran, expected_order(&plan));
}

#[test]
fn a_failed_dependency_fails_its_dependants_transitively() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let result = nu.json(
        "let a = (orch submit false); let b = (orch submit --after $a.id echo b); \
         let c = (orch submit --after $b.id echo c); let d = (orch submit echo d); \
         orch wait $a.id $b.id $c.id $d.id | select id status error",
    );
    let rows = result.as_array().unwrap();
    let a = rows[0]["id"].as_u64().unwrap();
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[0]["error"], "exit code 1");
    for row in &rows[1..3] {
        assert_eq!(row["status"], "dependency_failed");
        assert_eq!(row["error"], format!("dependency {a} did not succeed"));
    }
    assert_eq!(rows[3]["status"], "succeeded");
}

#[test]
fn parallel_limit_is_respected() {
    let daemon = Daemon::start(&["--parallel", "3"]);
    let nu = daemon.nu();
    let dir = daemon.dir().join("running");
    std::fs::create_dir(&dir).unwrap();
    let log = daemon.dir().join("peaks.txt");
    // Each task counts the tasks running beside it (marker files) and records the count.
    let script = format!(
        "touch {d}/$ORCH_TASK_ID; ls {d} | wc -l >> {l}; sleep 0.15; rm {d}/$ORCH_TASK_ID",
        d = dir.display(),
        l = log.display()
    );
    nu.run(&format!(
        "1..12 | each {{ {{command: [sh -c '{script}']}} }} | orch submit | orch wait | ignore"
    ));
    let counts: BTreeMap<usize, usize> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<usize>().unwrap())
        .fold(BTreeMap::new(), |mut m, c| {
            *m.entry(c).or_default() += 1;
            m
        });
    let max = *counts.keys().max().unwrap();
    assert!(max <= 3, "more than 3 tasks ran at once: {counts:?}");
    assert!(max >= 2, "tasks never overlapped: {counts:?}");
}
