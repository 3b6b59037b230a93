//! The web dashboard in a real headless Chromium (the distribution's `chromium`, driven by
//! playwright-core from `tests/browser`) against a real daemon: each role signs in and is
//! offered what its role may do, a viewer's forged action gets 403, deep links load, a
//! task is cancelled from its page with the keyboard while live updates keep the focus, a
//! log tail follows a task as it writes, a workflow goes from running to rolled back in
//! the graph without a reload, a failed step of a running workflow is retried, a failed
//! workflow is restarted from a step, a test environment is created, followed through
//! its stages, tested and deleted on a real container engine, the audit chain is checked
//! and the log filtered, and every view is drawn at desktop and phone widths, light and
//! dark (screenshots in `target/screenshots/`, not committed).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use orch_e2e::containers::{engine_or_skip, sweeper_of};
use orch_e2e::http::{Shim, tokens_by_role};
use orch_e2e::{Nu, bin_dir, eventually_every};
use serde_json::{Value, json};

/// How long one scenario may take before it is stopped.
const SCENARIO_LIMIT: Duration = Duration::from_secs(240);

/// The directory of the browser tests (its `node_modules` installed by scripts/test.sh).
fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("browser")
}

/// Runs scenario `name` of tests/browser/dashboard.mjs against `shim` with `data`, and
/// fails the test with its output unless it passes. The node process (and the Chromium
/// it starts) is killed if it outlives [`SCENARIO_LIMIT`].
fn scenario(shim: &Shim, name: &str, data: &Value) {
    let dir = browser_dir();
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not installed in {}: scripts/test.sh runs `npm ci` there",
        dir.display()
    );
    assert!(
        Path::new("/usr/bin/chromium").exists() || std::env::var_os("CHROMIUM").is_some(),
        "no Chromium: scripts/test.sh installs the distribution's `chromium`"
    );
    let shots = bin_dir().parent().expect("target/").join("screenshots");
    let tokens = Value::Object(tokens_by_role(&shim.daemon));
    let mut child = Command::new("node")
        .arg(dir.join("dashboard.mjs"))
        .arg(name)
        .current_dir(shim.daemon.dir())
        .env("ORCH_URL", shim.url(""))
        .env("ORCH_TOKENS", tokens.to_string())
        .env("ORCH_DATA", data.to_string())
        .env("ORCH_SHOTS", &shots)
        .env("HOME", shim.daemon.dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("node runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the scenario's status") {
            break Some(status);
        }
        if started.elapsed() > SCENARIO_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if status.is_none() {
        // The whole group: node and the browser it started.
        let group = -(child.id() as i32);
        // SAFETY: kill(2) on the scenario's own process group.
        unsafe { libc::kill(group, libc::SIGKILL) };
    }
    let out = child.wait_with_output().expect("the scenario's output");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match status {
        Some(status) if status.success() => assert!(report.contains("passed"), "{report}"),
        Some(_) => panic!(
            "the {name} scenario failed:\n{report}\n--- tasks:\n{}",
            shim.daemon.nu().task_logs()
        ),
        None => panic!("the {name} scenario took over {SCENARIO_LIMIT:?}:\n{report}"),
    }
}

/// Submits `script`'s task and returns its id.
fn submit(nu: &Nu, script: &str) -> u64 {
    nu.json(&format!("({script}).id")).as_u64().expect("an id")
}

/// Waits until task `id` runs.
fn running(nu: &Nu, id: u64) {
    eventually_every(
        Duration::from_secs(30),
        Duration::from_millis(200),
        "the task to run",
        || (nu.json(&format!("orch task {id} | get status")) == "running").then_some(()),
    );
}

/// A batch workflow file in the daemon's directory, submitted; its id.
fn workflow(shim: &Shim, nu: &Nu, name: &str, body: &Value, wait: bool) -> u64 {
    let path = shim.daemon.dir().join(format!("{name}.json"));
    std::fs::write(&path, body.to_string()).expect("the batch file");
    let wait = if wait { " --wait" } else { "" };
    submit(
        nu,
        &format!("orch workflow submit batch '{}'{wait}", path.display()),
    )
}

/// The workflow that rolls back: `db` waits for the gate file, then fails; `servers` and
/// `cache` are compensated.
fn rolling_back(gate: &Path) -> Value {
    json!({"name": "deploy", "rollback_enabled": true, "operations": [
        {"id": "servers", "type": "nu", "nu": "print 'servers up'", "rollback": "print 'servers down'"},
        {"id": "cache", "type": "nu", "nu": "print 'cache'", "dependencies": ["servers"], "rollback": "print 'cache gone'"},
        {"id": "db", "type": "nu", "nu": format!("while not ('{}' | path exists) {{ sleep 50ms }}; error make {{msg: 'db broke'}}", gate.display()), "dependencies": ["servers"]},
        {"id": "notify", "type": "nu", "nu": "print done", "dependencies": ["cache", "db"]}
    ]})
}

#[test]
fn each_role_sees_what_it_may_do_and_a_forged_action_is_refused() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let running = submit(&nu, "orch submit sleep 300");
    let done = json!({"name": "small", "operations": [{"id": "a", "type": "command", "command": ["true"]}]});
    let workflow = workflow(&shim, &nu, "small", &done, true);
    self::running(&nu, running);
    scenario(
        &shim,
        "roles",
        &json!({"running": running, "workflow": workflow}),
    );
    let task = nu.json(&format!("orch task {running}"));
    assert_eq!(
        task["status"], "running",
        "nothing the viewer did stopped it"
    );
    let audit = nu.json("orch audit --action cancel");
    assert_eq!(audit, json!([]), "no cancel reached the audit log");
}

#[test]
fn an_operator_cancels_a_running_task_from_its_page() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    // Progress ten times a second: each one an event that redraws the task's page.
    let running = submit(
        &nu,
        "orch submit --nu 'for i in 1..3000 { print ({progress: ($i mod 100)} | to json -r); sleep 100ms }'",
    );
    self::running(&nu, running);
    scenario(&shim, "cancel", &json!({"running": running}));
    let task = nu.json(&format!("orch task {running}"));
    assert_eq!(task["status"], "cancelled");
    let audit = nu.json("orch audit --action cancel | get 0");
    assert!(
        audit["interface"]
            .as_str()
            .is_some_and(|i| i.contains("operator")),
        "{audit}"
    );
}

#[test]
fn the_log_tail_follows_a_task_as_it_writes() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let lines = 40;
    let writer = submit(
        &nu,
        &format!("orch submit --nu 'for i in 1..{lines} {{ print $\"line ($i)\"; sleep 150ms }}'"),
    );
    scenario(
        &shim,
        "log-tail",
        &json!({"writer": writer, "lines": lines}),
    );
}

#[test]
fn a_workflow_goes_from_running_to_rolled_back_in_the_graph_without_a_reload() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let gate = shim.daemon.dir().join("gate");
    let id = workflow(&shim, &nu, "deploy", &rolling_back(&gate), false);
    scenario(
        &shim,
        "rollback",
        &json!({"workflow": id, "slow": "db", "gate": gate}),
    );
    let shown = nu.json(&format!("orch workflow show {id}"));
    assert_eq!(shown["status"], "rolled_back", "{shown}");
}

#[test]
fn a_failed_workflow_is_restarted_from_its_failed_step() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let marker = shim.daemon.dir().join("fixed");
    let pipeline = json!({"name": "pipeline", "operations": [
        {"id": "build", "type": "command", "command": ["true"]},
        {"id": "test", "type": "command", "command": ["test", "-e", marker], "dependencies": ["build"]},
        {"id": "ship", "type": "command", "command": ["true"], "dependencies": ["test"]},
        {"id": "docs", "type": "command", "command": ["true"], "dependencies": ["build"]}
    ]});
    let failed = workflow(&shim, &nu, "pipeline", &pipeline, true);
    std::fs::write(&marker, "").expect("the marker");
    scenario(
        &shim,
        "restart",
        &json!({"failed_workflow": failed, "failed_step": "test", "restarted_steps": ["test", "ship"]}),
    );
    let newest = nu.json("orch workflow list --limit 1 | get 0");
    let id = newest["id"].as_u64().expect("an id");
    assert_ne!(id, failed);
    let shown = nu.json(&format!(
        "orch watch --workflow {id} --all | last | ignore; orch workflow show {id}"
    ));
    assert_eq!(shown["status"], "succeeded", "{shown}");
    let audit = nu.json("orch audit --action workflow_restart | get 0");
    assert_eq!(audit["params"]["restart_of"], failed, "{audit}");
}

#[test]
fn a_failed_step_of_a_running_workflow_is_retried_from_its_page() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let marker = shim.daemon.dir().join("fixed");
    let gate = shim.daemon.dir().join("gate");
    // `flaky` fails until the marker exists; `gate` keeps the workflow running meanwhile.
    let body = json!({"name": "flaky", "operations": [
        {"id": "flaky", "type": "command", "command": ["test", "-e", marker]},
        {"id": "gate", "type": "nu", "nu": format!("while not ('{}' | path exists) {{ sleep 50ms }}", gate.display())},
        {"id": "after", "type": "command", "command": ["true"], "dependencies": ["flaky"]}
    ]});
    let id = workflow(&shim, &nu, "flaky", &body, false);
    scenario(
        &shim,
        "retry-step",
        &json!({"workflow": id, "flaky": "flaky", "after": "after", "marker": marker, "gate": gate,
                "waves": ["1: flaky, gate", "2: after"]}),
    );
    let shown = nu.json(&format!("orch workflow show {id}"));
    assert_eq!(shown["status"], "succeeded", "{shown}");
    let retries = nu.json("orch audit --action retry | length");
    assert_eq!(retries, 1, "the retry is audited");
}

#[test]
fn a_test_environment_is_created_followed_tested_and_deleted_from_the_dashboard() {
    if engine_or_skip().is_none() {
        return;
    }
    let shim = Shim::start(&[]);
    let _sweeper = sweeper_of(&shim.daemon);
    scenario(&shim, "environments", &json!({"taskserv": "redis"}));
    let nu = shim.daemon.nu();
    let envs = nu.json("orch test env list | select status");
    assert_eq!(envs, json!([{"status": "deleted"}]), "{envs}");
    let actions = nu.json("orch audit | where action starts-with test_env | get action | reverse");
    assert_eq!(
        actions,
        json!(["test_env_create", "test_env_run", "test_env_delete"]),
        "{actions}"
    );
}

#[test]
fn the_audit_chain_is_checked_when_asked_and_the_log_filtered_by_outcome_and_user() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let done = submit(&nu, "orch submit --wait true");
    submit(&nu, "orch submit sleep 300");
    // Refused: a cancel of a finished task, a retry of a task that succeeded.
    for refused in [format!("orch cancel {done}"), format!("orch retry {done}")] {
        assert!(nu.try_run(&refused).is_err(), "{refused} is refused");
    }
    let counts = nu.json(
        "{refused: (orch audit --refused | length), entries: (orch audit | length), uid: (orch audit | get 0.uid)}",
    );
    assert!(counts["refused"].as_u64() >= Some(2), "{counts}");
    let uid = counts["uid"].as_u64().expect("a uid");
    scenario(
        &shim,
        "audit",
        &json!({"refused": counts["refused"], "entries": counts["entries"], "uid": uid, "other_uid": uid + 1}),
    );
}

#[test]
fn every_view_is_drawn_at_desktop_and_phone_widths_in_light_and_dark() {
    let shim = Shim::start(&[]);
    let nu = shim.daemon.nu();
    let gate = shim.daemon.dir().join("gate");
    std::fs::write(&gate, "").expect("the gate");
    let id = workflow(&shim, &nu, "deploy", &rolling_back(&gate), true);
    let task = submit(
        &nu,
        "orch submit --params {server: web-01, password: hunter2} --label web --nu 'print $\"installing on ($params.server)\"' --wait",
    );
    submit(&nu, "orch submit sleep 300");
    scenario(
        &shim,
        "screenshots",
        &json!({"workflow": id, "step": "db", "task": task}),
    );
}
