//! The web dashboard in a real headless Chromium (the distribution's `chromium`, driven by
//! playwright-core from `tests/browser`) against a real daemon: each role signs in and is
//! offered what its role may do, a viewer's forged action gets 403, deep links load, a
//! task is cancelled from its page, a log tail follows a task as it writes, a workflow
//! goes from running to rolled back in the graph without a reload, a failed workflow is
//! restarted from a step, and every view is drawn at desktop and phone widths, light and
//! dark (screenshots in `target/screenshots/`, not committed).

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let running = submit(&nu, "orch submit sleep 300");
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
