//! Several daemons on one PostgreSQL store (issue 11's cluster): three real daemons, each
//! with its own data directory and socket, on a database of the test's own, driven through
//! the real plugin and nu. One leads; the others stand by, serve the reads of the shared
//! store (waits and watches included), and forward changes to the leader through the
//! store; the streams they do not serve are refused naming the leader and its socket,
//! where the plugin sends them instead. A leader killed with `kill -9`, or paused past
//! its lease, is replaced within the lease; its attempts are stopped by its supervisor
//! (at once when the daemon is gone, else before the lease runs out) and run again
//! elsewhere, never two at the same time, and no success the store recorded runs again; a
//! paused leader that wakes up stands down without writing.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use orch_e2e::postgres::TestDatabase;
use orch_e2e::{Daemon, Nu, eventually};

/// The lease of the tests' nodes: short, to keep them quick, with room for a busy machine.
const LEASE: &str = "3s";

/// Three daemons on one database: `nodes[0]` started first, so it leads.
struct Cluster {
    nodes: Vec<Daemon>,
    db: TestDatabase,
}

impl Cluster {
    fn start(extra: &[&str]) -> Cluster {
        Cluster::start_with_http(extra, None)
    }

    /// Three nodes; node number `http.0` (1 to 3) also serves HTTP on port `http.1`.
    fn start_with_http(extra: &[&str], http: Option<(usize, u16)>) -> Cluster {
        Cluster::launch(extra, http, [&[], &[], &[]])
    }

    /// Three nodes, each with its own extra arguments too (`per_node`).
    fn launch(extra: &[&str], http: Option<(usize, u16)>, per_node: [&[&str]; 3]) -> Cluster {
        let db = TestDatabase::create();
        let url = db.url();
        let nodes = (1..=3)
            .map(|n| {
                let name = format!("n{n}");
                let port = http.filter(|(on, _)| *on == n).map(|(_, p)| p.to_string());
                let mut args = vec![
                    "--storage-type",
                    "postgres",
                    "--database-url",
                    &url,
                    "--node",
                    &name,
                    "--node-lease",
                    LEASE,
                ];
                args.extend_from_slice(extra);
                args.extend_from_slice(per_node[n - 1]);
                if let Some(port) = &port {
                    args.extend(["--port", port.as_str()]);
                }
                let daemon = Daemon::start(&args);
                if n == 1 {
                    // The first node leads before the others join.
                    eventually(Duration::from_secs(10), "n1 leads", || {
                        (role(&daemon.nu()) == "leader").then_some(())
                    });
                }
                daemon
            })
            .collect();
        Cluster { nodes, db }
    }

    /// The index of the node that leads now, once one does.
    fn leader(&self, except: Option<usize>) -> usize {
        eventually(Duration::from_secs(15), "a node leads", || {
            (0..self.nodes.len())
                .filter(|&i| Some(i) != except)
                .find(|&i| try_role(&self.nodes[i].nu()).as_deref() == Some("leader"))
        })
    }
}

fn try_role(nu: &Nu) -> Option<String> {
    let out = nu
        .try_run("orch health | get cluster.role | to json")
        .ok()?;
    serde_json::from_str(&out).ok()
}

fn role(nu: &Nu) -> String {
    try_role(nu).unwrap_or_default()
}

/// A shell command that logs its runs to `ledger`: `start`, a `tick` every 50 ms for
/// `ticks` ticks, then `end`, each line with the task, the attempt and the time in ms.
fn ledger_task(ledger: &Path, ticks: u32) -> String {
    let line = |what: &str| {
        format!(
            "echo \"$ORCH_TASK_ID $ORCH_ATTEMPT {what} $(date +%s%3N)\" >> {}",
            ledger.display()
        )
    };
    format!(
        "{}; i=0; while [ $i -lt {ticks} ]; do sleep 0.05; {}; i=$((i+1)); done; {}",
        line("start"),
        line("tick"),
        line("end")
    )
}

/// A run of one attempt in the ledger: when it started, its last line, whether it ended.
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    first_ms: u64,
    last_ms: u64,
    ended: bool,
}

/// Every run in the ledger, by task and attempt.
fn runs(ledger: &Path) -> BTreeMap<(u64, u32), Run> {
    let mut runs: BTreeMap<(u64, u32), Run> = BTreeMap::new();
    for line in std::fs::read_to_string(ledger).unwrap_or_default().lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let [task, attempt, what, at] = fields[..] else {
            panic!("a torn ledger line: {line:?}");
        };
        let at: u64 = at.parse().unwrap();
        let run = runs
            .entry((task.parse().unwrap(), attempt.parse().unwrap()))
            .or_insert(Run {
                first_ms: at,
                ..Run::default()
            });
        run.first_ms = run.first_ms.min(at);
        run.last_ms = run.last_ms.max(at);
        run.ended |= what == "end";
    }
    runs
}

/// How long before a leader's death an attempt's end may be and its outcome still be
/// lost with the leader (reported, not yet committed).
const UNCOMMITTED_MS: u64 = 200;

/// Checks that no two attempts of one task overlapped in time, and that each task's last
/// attempt in the store ran to its end. An earlier attempt may have run to its end only if
/// it ended as the leader died (`leader_died_ms`), its outcome not committed yet: a success
/// the store recorded is never run again.
fn assert_each_ran_once(
    runs: &BTreeMap<(u64, u32), Run>,
    final_attempts: &BTreeMap<u64, u32>,
    leader_died_ms: Option<u64>,
) {
    for (&task, &last) in final_attempts {
        let mine: Vec<(u32, Run)> = runs
            .range((task, 0)..=(task, u32::MAX))
            .map(|(&(_, attempt), &run)| (attempt, run))
            .collect();
        assert!(
            mine.iter().any(|&(a, r)| a == last && r.ended),
            "task {task}: its last attempt {last} did not run to its end: {mine:?}"
        );
        for &(attempt, run) in mine.iter().filter(|(a, r)| *a != last && r.ended) {
            let lost = leader_died_ms.is_some_and(|died| run.last_ms + UNCOMMITTED_MS >= died);
            assert!(
                lost,
                "task {task}: attempt {attempt} ran to its end ({run:?}) before the leader died ({leader_died_ms:?}), yet ran again: {mine:?}"
            );
        }
        for pair in mine.windows(2) {
            let ((a, first), (b, second)) = (pair[0], pair[1]);
            assert!(
                first.last_ms < second.first_ms,
                "task {task}: attempt {a} ({first:?}) still ran when attempt {b} ({second:?}) started"
            );
        }
    }
}

/// Now, in milliseconds since the Unix epoch (the ledger's clock).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The tasks' final attempt numbers, from the leader, once all succeeded.
fn final_attempts(nu: &Nu, label: &str, n: usize) -> BTreeMap<u64, u32> {
    let tasks = nu.json(&format!(
        "orch tasks --label {label} --limit 100000 | select id status attempts"
    ));
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), n);
    tasks
        .iter()
        .map(|t| {
            assert_eq!(t["status"], "succeeded", "{t}");
            (
                t["id"].as_u64().unwrap(),
                t["attempts"].as_u64().unwrap() as u32,
            )
        })
        .collect()
}

#[test]
fn standbys_serve_reads_and_watches_and_send_changes_to_the_leader() {
    let port = orch_e2e::free_port();
    let mut cluster = Cluster::start_with_http(&[], Some((2, port)));
    let standby = cluster.nodes[1].nu();
    assert_eq!(role(&standby), "standby");
    let nodes = standby.json("orch cluster nodes | select name role term parallel");
    assert_eq!(
        nodes,
        serde_json::json!([
            {"name": "n1", "role": "leader", "term": 1, "parallel": 8},
            {"name": "n2", "role": "standby", "term": null, "parallel": 8},
            {"name": "n3", "role": "standby", "term": null, "parallel": 8},
        ])
    );
    // A change is forwarded to the leader through the store, whatever its host: the
    // standby answers it itself, with no redirect...
    let forwarded = cluster.nodes[1]
        .client()
        .call(&orch_protocol::Request::Submit {
            tasks: vec![orch_protocol::TaskSpec::command("true", Vec::new())],
            stashed: false,
        });
    let Ok(orch_protocol::Response::Tasks { tasks, .. }) = forwarded else {
        panic!("a standby did not forward a submit: {forwarded:?}");
    };
    let leader = cluster.nodes[0].nu();
    assert_eq!(
        leader.json(&format!("orch task {} | get id", tasks[0].id)),
        tasks[0].id
    );
    // ...recorded in the audit log as the client's, forwarded by the standby's node.
    let actor = leader.json("orch audit | where action == submit | last | get interface");
    assert_eq!(actor, "socket via node n2");
    // Through the plugin: a submit, its wait, and a test environment's list.
    let submitted = standby.json("orch submit --wait --label via-standby true | get status");
    assert_eq!(submitted, "succeeded");
    assert_eq!(leader.json("orch tasks --label via-standby | length"), 1);
    assert_eq!(standby.json("orch test env list | length"), 0);
    let cancelled = standby.json(
        "let id = (orch submit --label cancelled-there [sleep 600] | get id); orch cancel $id | get status",
    );
    assert_eq!(cancelled, "cancelled");
    // The leader carries out only what a standby forwards: a row asking it to stop
    // (written by hand in the shared database) is answered with a refusal.
    let id = cluster.db.sql(
        r#"INSERT INTO cluster_requests (from_node, actor, role, owner, request, created_ms)
           VALUES ('n2', '{"uid":0,"interface":"socket"}', 'admin', true,
                   convert_to('{"request":"shutdown"}', 'UTF8'),
                   (extract(epoch from clock_timestamp()) * 1000)::bigint)
           RETURNING id"#,
    );
    cluster.db.sql("SELECT pg_notify('orch_requests', '')");
    let answer = eventually(
        Duration::from_secs(10),
        "the forged request answered",
        || {
            let reply = cluster.db.sql(&format!(
            "SELECT convert_from(substring(reply from 5), 'UTF8') FROM cluster_requests WHERE id = {id}"
        ));
            (!reply.is_empty()).then_some(reply)
        },
    );
    assert!(
        answer.contains("a request that is not forwarded"),
        "{answer}"
    );
    assert_eq!(role(&leader), "leader");
    // A stream the standby does not serve is refused, naming the leader and its socket
    // on this host, where the plugin asks instead.
    let refused = cluster.nodes[1]
        .client()
        .call(&orch_protocol::Request::AuditExport { seq: 1 });
    let Err(orch_protocol::ClientError::Daemon(reply)) = refused else {
        panic!("a standby exported the audit log: {refused:?}");
    };
    assert!(
        reply.message.contains("node n2 is a standby")
            && reply.message.contains("node n1 leads (term 1"),
        "{reply:?}"
    );
    assert_eq!(reply.leader_socket, Some(cluster.nodes[0].socket()));
    // A wait on the standby follows a task the leader runs, from the shared event log.
    let gate = cluster.nodes[0].dir().join("go");
    let id = leader.json(&format!(
        "orch submit --label gated [sh -c 'while [ ! -e {} ]; do sleep 0.05; done'] | get id",
        gate.display()
    ));
    let waiting = standby.spawn(&format!(
        "orch wait --timeout 1min {id} | get status | to json"
    ));
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&gate, "").unwrap();
    let out = waiting.wait_with_output().unwrap();
    let statuses: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(statuses, serde_json::json!(["succeeded"]), "{out:?}");
    // Reads of the shared store, on any node.
    assert_eq!(
        standby.json(&format!("orch task {id} | get status")),
        "succeeded"
    );
    assert_eq!(standby.json("orch tasks --label gated | length"), 1);
    assert_eq!(standby.json("orch health | get tasks.succeeded"), 3);
    assert_eq!(standby.json("orch audit verify | get intact"), true);
    assert_eq!(leader.json("orch health | get cluster.nodes_up"), 3);
    // Over HTTP too: reads answer.
    let viewer = orch_e2e::http::token(&cluster.nodes[1], "viewer");
    let operator = orch_e2e::http::token(&cluster.nodes[1], "operator");
    let get = |path: &str, token: &str| {
        let out = std::process::Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "-H"])
            .arg(format!("Authorization: Bearer {token}"))
            .arg(format!("http://127.0.0.1:{port}{path}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tasks = get("/tasks?label=gated", &viewer);
    assert!(
        tasks.ends_with("\n200") && tasks.contains("succeeded"),
        "{tasks}"
    );
    let cluster_view = get("/cluster", &viewer);
    assert!(
        cluster_view.contains("\"leader\"") && cluster_view.ends_with("\n200"),
        "{cluster_view}"
    );
    // Changes (and the test environments) are forwarded to the leader, behind the
    // standby's own token and role checks.
    let envs = get("/test/environments", &operator);
    assert!(envs.ends_with("[]\n200"), "{envs}");
    let refused = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-X", "POST", "-d", "{}", "-H"])
        .arg(format!("Authorization: Bearer {viewer}"))
        .arg(format!("http://127.0.0.1:{port}/test/environments/create"))
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&refused.stdout);
    assert!(
        refused.ends_with("\n403") && refused.contains("viewer"),
        "{refused}"
    );
    // A body over the limit is refused by the standby itself, before anything is forwarded.
    let huge = daemon_dir_file(&cluster, "huge.json", 5 * 1024 * 1024);
    let too_large = std::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "-X", "POST", "--data-binary"])
        .arg(format!("@{}", huge.display()))
        .args(["-H", "Content-Type: application/json", "-H"])
        .arg(format!("Authorization: Bearer {operator}"))
        .arg(format!("http://127.0.0.1:{port}/test/environments/create"))
        .output()
        .unwrap();
    let too_large = String::from_utf8_lossy(&too_large.stdout);
    assert!(too_large.ends_with("\n413"), "{too_large}");
    // Nothing was forwarded (the forged request's unread answer aside).
    let forwarded_rows = cluster.db.sql(
        "SELECT count(*) FROM cluster_requests
         WHERE position(convert_to('shutdown', 'UTF8') in request) = 0",
    );
    assert_eq!(forwarded_rows.trim(), "0", "nothing left behind");
    let missing = get("/test/environments/999", &operator);
    assert!(
        missing.ends_with("\n404") && missing.contains("999"),
        "{missing}"
    );
    // A shell whose connection a standby accepted goes on with that node once it leads.
    let shell = standby.spawn(
        "orch health | ignore
         loop { if (orch health | get cluster.role) == leader { break }; sleep 100ms }
         orch submit --wait true | get status | to json",
    );
    cluster.nodes[2].terminate();
    cluster.nodes[0].kill9();
    let out = shell.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "\"succeeded\"",
        "{out:?}"
    );
}

#[test]
fn a_leader_killed_mid_run_is_replaced_and_every_task_runs_to_its_end_once() {
    let mut cluster = Cluster::start(&["--parallel", "4"]);
    let ledger = cluster.nodes[0].dir().join("ledger.txt");
    let leader = cluster.nodes[0].nu();
    // 300 tasks in 100 chains of 3 (each waits for the one before it), with retries.
    let command = ledger_task(&ledger, 4);
    let task = format!("command: [sh -c '{command}'], label: ledger, retries: 5");
    leader.run(&format!(
        "let heads = (0..<100 | each {{ {{{task}}} }} | orch submit | get id)
         let second = ($heads | each {{|id| {{{task}, after: [$id]}} }} | orch submit | get id)
         $second | each {{|id| {{{task}, after: [$id]}} }} | orch submit | ignore"
    ));
    eventually(Duration::from_secs(60), "some tasks ran", || {
        (runs(&ledger).len() >= 40).then_some(())
    });
    cluster.nodes[0].kill9();
    let died = now_ms();
    let next = cluster.leader(Some(0));
    let nu = cluster.nodes[next].nu();
    nu.run("orch tasks --label ledger --limit 1000 | get id | orch wait --timeout 3min | ignore");
    let finals = final_attempts(&nu, "ledger", 300);
    assert_each_ran_once(&runs(&ledger), &finals, Some(died));
    assert_eq!(
        nu.json("orch cluster nodes | where name == n1 | get 0.role"),
        "down"
    );
    assert_eq!(nu.json("orch audit verify | get intact"), true);
}

#[test]
fn a_paused_leader_is_replaced_and_stands_down_when_it_wakes_without_writing() {
    let mut cluster = Cluster::start(&[]);
    let ledger = cluster.nodes[0].dir().join("ledger.txt");
    let leader = cluster.nodes[0].nu();
    // A task that runs for 4 s, longer than the lease.
    let command = ledger_task(&ledger, 80);
    let id = leader.json(&format!(
        "orch submit --retries 3 --label long [sh -c '{command}'] | get id"
    ));
    eventually(Duration::from_secs(20), "the task runs", || {
        (!runs(&ledger).is_empty()).then_some(())
    });
    let pid = cluster.nodes[0].pid().unwrap() as libc::pid_t;
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let next = cluster.leader(Some(0));
    let nu = cluster.nodes[next].nu();
    assert_eq!(nu.json("orch health | get cluster.term"), 2);
    // The paused node's supervisor stopped the attempt before the lease ran out.
    let first = runs(&ledger)[&(id.as_u64().unwrap(), 1)];
    assert!(!first.ended, "{first:?}");
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let stderr = eventually(Duration::from_secs(15), "n1 stands down", || {
        let stderr = cluster.nodes[0].stderr();
        stderr.contains("stood down").then_some(stderr)
    });
    assert!(stderr.contains("deposed: node n"), "{stderr}");
    nu.run(&format!("orch wait --timeout 1min {id} | ignore"));
    let finals = final_attempts(&nu, "long", 1);
    assert_each_ran_once(&runs(&ledger), &finals, None);
    // Whatever it tried to commit once awake was refused by the fence.
    let log = std::fs::read_to_string(cluster.nodes[0].data_dir().join("orchestrator.log"))
        .unwrap_or_default();
    for line in log.lines().filter(|l| l.contains("commit failed")) {
        assert!(
            line.contains("refused: this node led the cluster in term 1"),
            "{line}"
        );
    }
    cluster.nodes[0].kill9();
}

/// The lines of `path` (none when it is missing).
fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A workflow step that appends its id to `dir/runs.txt` (its compensation to
/// `dir/rollback.txt`), then pauses; it fails when `fail`.
fn step(dir: &Path, id: &str, deps: &[&str], pause_ms: u64, fail: bool) -> serde_json::Value {
    let (runs, rollbacks) = (dir.join("runs.txt"), dir.join("rollback.txt"));
    let exit = if fail { "; exit 1" } else { "" };
    serde_json::json!({"id": id, "type": "nu", "dependencies": deps,
        "nu": format!("\"{id}\\n\" | save -a '{}'; sleep {pause_ms}ms{exit}", runs.display()),
        "rollback": format!("\"r{id}\\n\" | save -a '{}'; sleep {pause_ms}ms", rollbacks.display())})
}

#[test]
fn a_rollback_under_way_when_the_leader_dies_is_finished_by_the_next_leader() {
    let mut cluster = Cluster::start(&[]);
    let dir = cluster.nodes[0].dir().to_path_buf();
    let workflow = serde_json::json!({"name": "rollback-across-failover", "rollback_enabled": true,
        "operations": [step(&dir, "a", &[], 3_000, false), step(&dir, "b", &["a"], 10, false),
            step(&dir, "c", &["b"], 10, true)]});
    let id = cluster.nodes[0].nu().json(&format!(
        "'{workflow}' | from json | orch workflow submit batch | get id"
    ));
    // rb is quick; ra pauses 3 s: the leader dies while it runs.
    eventually(Duration::from_secs(30), "ra runs", || {
        lines(&dir.join("rollback.txt"))
            .contains(&"ra".to_string())
            .then_some(())
    });
    cluster.nodes[0].kill9();
    let next = cluster.leader(Some(0));
    let nu = cluster.nodes[next].nu();
    let done = nu.json(&format!(
        "orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | reject request"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}");
    assert_eq!(
        lines(&dir.join("runs.txt")),
        ["a", "b", "c"],
        "no step ran again"
    );
    // The compensation the old leader's supervisor was running was stopped with it and
    // run again by the next leader; the finished one did not run again.
    assert_eq!(lines(&dir.join("rollback.txt")), ["rb", "ra", "ra"]);
}

/// A shell command that appends `TASK ATTEMPT DATA_DIR` to `ledger` (the node that runs
/// it: every task gets its node's data directory as `ORCH_DATA_DIR`), then ticks as
/// [`ledger_task`] does.
fn placed_task(ledger: &Path, ticks: u32) -> String {
    format!(
        "echo \"log of $ORCH_TASK_ID\"; echo \"$ORCH_TASK_ID $ORCH_ATTEMPT $ORCH_DATA_DIR\" >> {}.nodes; {}",
        ledger.display(),
        ledger_task(ledger, ticks)
    )
}

/// Where each attempt ran, from [`placed_task`]'s lines: (task, attempt) → data directory.
fn placements(ledger: &Path) -> BTreeMap<(u64, u32), String> {
    let nodes = ledger.with_extension("txt.nodes");
    lines(&nodes)
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let [task, attempt, dir] = fields[..] else {
                panic!("a torn line: {line:?}");
            };
            let key = (task.parse().unwrap(), attempt.parse().unwrap());
            (key, dir.to_string())
        })
        .collect()
}

#[test]
fn every_node_runs_tasks_by_capacity_and_labels_and_a_killed_nodes_attempts_run_elsewhere() {
    let mut cluster = Cluster::launch(
        &["--parallel", "2"],
        None,
        [&[], &[], &["--label", "docker"]],
    );
    let ledger = cluster.nodes[0].dir().join("ledger.txt");
    let leader = cluster.nodes[0].nu();
    let dirs: Vec<String> = (0..3)
        .map(|i| cluster.nodes[i].data_dir().display().to_string())
        .collect();
    // A label no node has is refused, naming the nodes' labels (once the leader has
    // seen all three join).
    let refused = eventually(Duration::from_secs(10), "the leader sees n3", || {
        let refused = leader.try_run("orch submit --on gpu true").unwrap_err();
        refused.contains("n3 [docker]").then_some(refused)
    });
    assert!(refused.contains("no node has all of them"), "{refused}");
    // Six tasks fill the six slots of the three nodes; two more need docker (n3 only).
    let command = placed_task(&ledger, 30);
    let task = format!("command: [sh -c '{command}'], label: spread, retries: 3");
    leader.run(&format!(
        "0..<6 | each {{ {{{task}}} }} | orch submit | ignore"
    ));
    let docker = leader.json(&format!(
        "0..<2 | each {{ {{{task}, on: [docker]}} }} | orch submit | get id"
    ));
    let docker: Vec<u64> = serde_json::from_value(docker).unwrap();
    eventually(Duration::from_secs(30), "six attempts run", || {
        (placements(&ledger).len() >= 6).then_some(())
    });
    let first = placements(&ledger);
    for dir in &dirs {
        let here = first.values().filter(|d| *d == dir).count();
        assert_eq!(here, 2, "two attempts on {dir}: {first:?}");
    }
    // n2's daemon is killed: its supervisor stops its attempts before its lease runs out,
    // and the leader then runs them again on the other nodes.
    let on_n2: Vec<u64> = first
        .iter()
        .filter(|(_, d)| **d == dirs[1])
        .map(|((id, _), _)| *id)
        .collect();
    cluster.nodes[1].kill9();
    let killed = now_ms();
    leader
        .run("orch tasks --label spread --limit 100 | get id | orch wait --timeout 3min | ignore");
    let finals = final_attempts(&leader, "spread", 8);
    assert_each_ran_once(&runs(&ledger), &finals, Some(killed));
    let placed = placements(&ledger);
    for id in &on_n2 {
        let last = finals[id];
        assert!(last >= 2, "task {id} ran again: {placed:?}");
        assert_ne!(
            placed[&(*id, last)],
            dirs[1],
            "task {id} ran again elsewhere"
        );
    }
    for ((id, attempt), dir) in placed.iter().filter(|((id, _), _)| docker.contains(id)) {
        assert_eq!(*dir, dirs[2], "task {id} attempt {attempt} needs docker");
    }
    // Each attempt names its node; the log of one that n3 ran, asked of the leader, is
    // read from n3 through the store (no redirect: the same from another host).
    let id = docker[0];
    let node = leader.json(&format!(
        "orch task {id} | get attempt_history | last | get node"
    ));
    assert_eq!(node, "n3");
    let log = leader.run(&format!("orch logs {id}"));
    assert!(log.contains(&format!("log of {id}")), "{log}");
    let mut client = cluster.nodes[0].client();
    client
        .send(&orch_protocol::Request::Logs { id, follow: false })
        .unwrap();
    let mut text = String::new();
    loop {
        match client.next(&|| false).unwrap() {
            orch_protocol::Response::Log { text: part } => text.push_str(&part),
            orch_protocol::Response::StreamEnd => break,
            other => panic!("not a log: {other:?}"),
        }
    }
    assert!(text.contains(&format!("log of {id}")), "{text}");
    // A log followed from the leader while n3 runs the attempt, to its end.
    let followed = leader.json(
        "let id = (orch submit --on docker [sh -c 'for i in 1 2 3; do echo line $i; sleep 0.7; done'] | get id)
         orch logs --follow $id | lines",
    );
    assert_eq!(followed, serde_json::json!(["line 1", "line 2", "line 3"]));
    // The progress of an attempt n3 runs reaches the leader's task record and events.
    let id = leader.json(
        r#"orch submit --on docker [sh -c 'echo "{\"progress\": 40, \"message\": \"halfway\"}"; sleep 30'] | get id"#,
    );
    let progress = eventually(Duration::from_secs(20), "n3's progress", || {
        let p = leader.json(&format!(
            "orch task {id} | select progress progress_message"
        ));
        (!p["progress"].is_null()).then_some(p)
    });
    assert_eq!(
        progress,
        serde_json::json!({"progress": 40.0, "progress_message": "halfway"})
    );
    leader.run(&format!("orch cancel {id} | ignore"));
    let events = leader.json(&format!(
        "orch watch --task {id} | where event == progress | get details.progress.message"
    ));
    assert_eq!(events, serde_json::json!(["halfway"]));
    assert_eq!(
        leader.json("orch cluster nodes | where name == n2 | get 0.role"),
        "down"
    );
    assert_eq!(leader.json("orch audit verify | get intact"), true);
}

#[test]
fn the_logs_a_node_keeps_of_tasks_the_leader_removed_are_deleted_on_that_node() {
    let cluster = Cluster::launch(
        &["--retain-finished", "2s"],
        None,
        [&[], &["--label", "here"], &[]],
    );
    let leader = cluster.nodes[0].nu();
    let id = eventually(Duration::from_secs(10), "the leader sees n2", || {
        leader
            .try_run("orch submit --on here echo kept on n2 | get id")
            .ok()
    });
    let log = cluster.nodes[1]
        .data_dir()
        .join("logs")
        .join(format!("{}.log", id.trim()));
    eventually(Duration::from_secs(20), "the log written on n2", || {
        std::fs::read_to_string(&log)
            .is_ok_and(|text| text.contains("kept on n2"))
            .then_some(())
    });
    // The leader's retention removes the task; n2 deletes the log it kept.
    eventually(Duration::from_secs(30), "the task removed", || {
        leader.try_run(&format!("orch task {}", id.trim())).err()
    });
    eventually(Duration::from_secs(30), "the log deleted on n2", || {
        (!log.exists()).then_some(())
    });
}

/// A file of `size` bytes of JSON-ish filler in the first node's directory.
fn daemon_dir_file(cluster: &Cluster, name: &str, size: usize) -> std::path::PathBuf {
    let path = cluster.nodes[0].dir().join(name);
    std::fs::write(&path, "x".repeat(size)).unwrap();
    path
}

#[test]
fn test_environments_go_to_the_node_labelled_docker_and_are_reached_from_any_node() {
    let Some(engine) = orch_e2e::containers::engine_or_skip() else {
        return;
    };
    let mut cluster = Cluster::launch(&[], None, [&[], &[], &["--label", "docker"]]);
    let sweeper = orch_e2e::containers::TestEnvSweeper {
        socket: engine,
        data_dir: cluster.nodes[2].data_dir(),
    };
    let (leader, standby) = (cluster.nodes[0].nu(), cluster.nodes[1].nu());
    eventually(Duration::from_secs(10), "the leader sees n3", || {
        let labels =
            leader.try_run("orch cluster nodes | where name == n3 | get 0.labels | to json");
        labels.ok().filter(|l| l.contains("docker"))
    });
    // Asked of a standby, created by n3 (the only node labelled docker) on its engine.
    let env = standby
        .json("orch test env create single redis --auto-start | select id status cluster_node");
    assert_eq!(
        (&env["status"], &env["cluster_node"]),
        (&serde_json::json!("ready"), &serde_json::json!("n3")),
        "{env:#}"
    );
    let id = env["id"].as_u64().unwrap();
    assert_eq!(
        sweeper.leftovers().0.len(),
        1,
        "the container carries n3's label"
    );
    // The leader sends n3 the requests about it; its log is read on n3.
    let run = leader.json(&format!("orch test env run {id} | select status tests"));
    assert_eq!(
        run,
        serde_json::json!({"status": "ready", "tests": {"passed": 1, "failed": 0, "total": 1}})
    );
    let log = leader.run(&format!("orch test env logs {id}"));
    assert!(
        log.contains("=== container") && log.contains("test redis (exit 0"),
        "{log}"
    );
    // The leader dies: the next one knows the environment, and n3 has it commit.
    cluster.nodes[0].kill9();
    let next = cluster.leader(Some(0));
    let leader = cluster.nodes[next].nu();
    let run = leader.json(&format!(
        "orch test env run {id} | select status tests cluster_node"
    ));
    assert_eq!(
        run,
        serde_json::json!({"status": "ready", "tests": {"passed": 1, "failed": 0, "total": 1}, "cluster_node": "n3"})
    );
    // n3 down (leading or not): a request about it says so (no other node holds its
    // containers); n2 leads by then.
    cluster.nodes[2].kill9();
    let leader = standby;
    let down = leader
        .try_run(&format!("orch test env delete {id}"))
        .unwrap_err();
    assert!(down.contains("n3"), "{down}");
    assert_eq!(
        leader.json(&format!("orch test env show {id} | get status")),
        "ready"
    );
    // Back, n3 keeps its environment (recovered, its time to live re-armed) and deletes
    // it when asked, from any node.
    cluster.nodes[2].restart();
    let deleted = eventually(Duration::from_secs(20), "n3 back", || {
        leader
            .try_run(&format!("orch test env delete {id} | get state.reason"))
            .ok()
    });
    assert_eq!(deleted.trim(), "requested");
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
    // One audit chain: each request recorded once, by the leader, as its client's.
    let actions = leader
        .json("orch audit | where action starts-with test_env | reverse | select action interface");
    assert_eq!(
        actions,
        serde_json::json!([
            {"action": "test_env_create", "interface": "socket via node n2 via node n1"},
            {"action": "test_env_run", "interface": "socket via node n1"},
            // Placed on n3 by n2, or n3's own when it took the lead.
            {"action": "test_env_run", "interface": if next == 1 { "socket via node n2" } else { "socket" }},
            {"action": "test_env_delete", "interface": "socket via node n2"},
        ]),
    );
    for node in [&leader, &cluster.nodes[2].nu()] {
        assert_eq!(node.json("orch audit verify | get intact"), true);
    }
}

/// The state letter of process `pid` in /proc (`T`: stopped).
fn proc_state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.trim().chars().next())
        .unwrap_or('?')
}

#[test]
fn a_pause_signal_or_input_asked_of_a_standby_reaches_the_task_on_the_node_that_runs_it() {
    let cluster = Cluster::launch(&[], None, [&[], &["--label", "here"], &[]]);
    let standby = cluster.nodes[2].nu();
    let pid_file = cluster.nodes[1].dir().join("pid");
    let got = cluster.nodes[1].dir().join("got");
    let script = format!(
        "orch submit --group deploy --on here -- sh -c \"trap 'echo usr1 >> {}' USR1; echo $$ > {}; while true; do sleep 0.1; done\" | get id",
        got.display(),
        pid_file.display()
    );
    standby.run("orch group add deploy --parallel 1 | ignore");
    let id = eventually(Duration::from_secs(10), "the leader sees n2", || {
        standby.try_run(&script).ok()
    });
    let id = id.trim();
    let pid: u32 = eventually(Duration::from_secs(20), "the task runs on n2", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    standby.run(&format!("orch pause {id} | ignore"));
    eventually(Duration::from_secs(10), "stopped on n2", || {
        (proc_state(pid) == 'T').then_some(())
    });
    let paused_at = standby.json(&format!("orch task {id} | get state.paused_at"));
    assert!(paused_at.is_string(), "{paused_at}");
    // The group's pause holds a new task of it; its resume continues the paused one.
    standby.run("orch pause --group deploy | ignore");
    let deploy = standby.json("orch group list | where name == deploy | first");
    assert_eq!(
        (deploy["paused"].clone(), deploy["running"].clone()),
        (true.into(), 1.into())
    );
    standby.run("orch resume --group deploy | ignore");
    eventually(Duration::from_secs(10), "running again on n2", || {
        (proc_state(pid) != 'T').then_some(())
    });
    // Signals asked of the standby reach the task on n2, each once, in order.
    let received = || {
        std::fs::read_to_string(&got)
            .unwrap_or_default()
            .lines()
            .count()
    };
    for n in 1..=2 {
        standby.run(&format!("orch kill {id} --signal USR1 | ignore"));
        eventually(Duration::from_secs(10), "n2 passes the signal on", || {
            (received() == n).then_some(())
        });
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(received(), 2, "no signal goes twice");
    standby.run(&format!("orch cancel {id} | ignore"));
    // So does input, to a task of n2 that reads it.
    let read = cluster.nodes[1].dir().join("read");
    let reader = standby.json(&format!(
        "orch submit --stdin --on here -- sh -c 'read a; echo \"$a\" > {}' | get id",
        read.display()
    ));
    eventually(Duration::from_secs(20), "the reader runs on n2", || {
        let status = standby.json(&format!("orch task {reader} | get status"));
        (status == "running").then_some(())
    });
    standby.run(&format!("orch send {reader} 'from n3' | ignore"));
    let status = standby.json(&format!(
        "orch wait {reader} --timeout 20sec | get 0.status"
    ));
    assert_eq!(status, "succeeded");
    assert_eq!(std::fs::read_to_string(&read).unwrap(), "from n3\n");
}

#[test]
fn a_schedule_goes_on_under_the_next_leader_and_no_time_runs_twice() {
    let mut cluster = Cluster::start(&[]);
    let standby = cluster.nodes[1].nu();
    standby.run("orch schedule add tick '* * * * * *' --label tick true | ignore");
    let runs = |nu: &Nu| {
        nu.json("orch schedule list | where name == tick | get 0.runs")
            .as_u64()
            .unwrap_or(0)
    };
    eventually(Duration::from_secs(15), "two runs", || {
        (runs(&standby) >= 2).then_some(())
    });
    cluster.nodes[0].kill9();
    let next = cluster.leader(Some(0));
    let nu = cluster.nodes[next].nu();
    let before = runs(&nu);
    eventually(
        Duration::from_secs(20),
        "runs under the next leader",
        || (runs(&nu) >= before + 2).then_some(()),
    );
    nu.run("orch schedule pause tick | ignore");
    let runs = runs(&nu);
    let tasks = nu.json("orch tasks --label tick --limit 1000 | length");
    assert_eq!(tasks.as_u64(), Some(runs), "one task per run");
    let slots = nu.json(
        "orch audit --limit 1000 | where action == schedule_run | get params.slot | uniq | length",
    );
    assert_eq!(slots.as_u64(), Some(runs), "no time ran twice");
}
