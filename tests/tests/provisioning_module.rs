//! The `provisioning` Nushell module over the plugin.

use orch_e2e::Daemon;

#[test]
fn provisioning_task_run_submits_a_script_and_waits_for_its_output() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nushell-modules/provisioning"
    );
    let script = daemon.dir().join("create-server.nu");
    std::fs::write(
        &script,
        "def main [] { let p = ($env.ORCH_PARAMS | from json); print $\"created ($p.server) on ($p.provider)\" }\n",
    )
    .unwrap();
    let result = nu.json(&format!(
        "use {module}; provisioning task run {} --params {{server: web-01, provider: local}} --wait | select label status output",
        script.display()
    ));
    assert_eq!(
        result,
        serde_json::json!({"label": "create-server", "status": "succeeded", "output": "created web-01 on local\n"})
    );
    let status = nu.json(&format!(
        "use {module}; provisioning orchestrator status | select running tasks.succeeded"
    ));
    assert_eq!(
        status,
        serde_json::json!({"running": true, "tasks.succeeded": 1})
    );
    let commands = nu.json(&format!("use {module}; provisioning | get name"));
    assert!(
        commands
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "provisioning task run"),
        "{commands}"
    );
}
