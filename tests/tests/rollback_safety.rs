//! A rollback undoes only what its own workflow created, on real containers (the `local`
//! provider on Podman's Docker-compatible API): workflow A creates servers and installs
//! redis, someone starts redis by hand on another server; workflow B, which names the same
//! servers and the same taskserv and then fails, rolls back and removes only what B itself
//! created.

use orch_e2e::Nu;
use orch_e2e::containers::{API, curl};
use orch_e2e::local_infra::LocalInfra;
use serde_json::{Value, json};

/// A shell command's output on a server of `infra`, through the provider.
fn on(nu: &Nu, infra: &str, host: &str, command: &str) -> String {
    let modules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nushell-modules/providers/local"
    );
    nu.try_run(&format!(
        "use {modules} *; server-exec {{hostname: {host}, infra: {infra}, provider: local}} '{command}' | str trim"
    ))
    .unwrap_or_else(|e| e)
    .trim()
    .to_string()
}

/// `redis-cli ping` on a server (PONG when redis runs).
fn ping(nu: &Nu, infra: &str, host: &str) -> String {
    on(nu, infra, host, "redis-cli ping 2>&1 || true")
}

/// Who a server records as the installer of redis.
fn redis_owner(nu: &Nu, infra: &str, host: &str) -> String {
    on(
        nu,
        infra,
        host,
        "cat /var/lib/provisioning/taskservs/redis.created-by 2>/dev/null || echo none",
    )
}

#[test]
fn a_rollback_keeps_the_servers_and_taskservs_another_workflow_created() {
    let Some(local) = LocalInfra::start(
        "rb",
        "settings.toml",
        "provider = \"local\"\n\n[[servers]]\nhostname = \"web-01\"\ntaskservs = [\"redis\"]\n\n[[servers]]\nhostname = \"web-02\"\n\n[[servers]]\nhostname = \"web-03\"\n",
    ) else {
        return;
    };
    let (daemon, infra, socket) = (&local.daemon, &local.name, &local.socket);
    let nu = daemon.nu();

    // A: web-01 (with redis) and web-02.
    let a = nu.json(&format!(
        "orch workflow submit servers web-01 web-02 --infra {infra} --wait | select id status"
    ));
    assert_eq!(a["status"], "succeeded", "{a}\n{}", nu.task_logs());
    assert_eq!(ping(&nu, infra, "web-01"), "PONG");
    // Redis started by hand on web-02, outside any workflow.
    on(
        &nu,
        infra,
        "web-02",
        "redis-server --daemonize yes --port 6379 >/dev/null",
    );
    eventually_pong(&nu, infra, "web-02");

    // B: creates web-02 (there already) and web-03, installs redis on web-01 (A's),
    // web-02 (found running) and web-03, then fails: its rollback runs.
    let b = json!({"name": "b", "rollback_enabled": true, "operations": [
        {"id": "servers", "type": "server_create", "servers": ["web-02", "web-03"]},
        {"id": "cache", "type": "taskserv_create", "taskserv": "redis",
         "servers": ["web-01", "web-02", "web-03"], "dependencies": ["servers"]},
        {"id": "boom", "type": "nu", "nu": "error make {msg: 'boom'}", "dependencies": ["cache"]},
    ]});
    let done = nu.json(&format!(
        "'{b}' | from json | orch workflow submit batch --infra {infra} --wait | select id status rollback"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}\n{}", nu.task_logs());
    let mut compensated: Vec<String> = done["rollback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step"].as_str().unwrap().to_string())
        .collect();
    compensated.sort();
    assert_eq!(compensated, ["cache", "servers"], "{done}");

    // What A created is still there, redis on web-01 included; what B created is gone.
    let (mut containers, network) = local.leftovers();
    containers.sort();
    assert_eq!(
        containers,
        [format!("{infra}-web-01"), format!("{infra}-web-02")],
        "{}",
        nu.task_logs()
    );
    assert!(network, "the network A created is kept");
    assert_eq!(ping(&nu, infra, "web-01"), "PONG", "{}", nu.task_logs());
    assert_eq!(ping(&nu, infra, "web-02"), "PONG", "{}", nu.task_logs());
    assert_eq!(
        redis_owner(&nu, infra, "web-01"),
        format!("{}/install:redis@web-01", a["id"])
    );
    assert_eq!(redis_owner(&nu, infra, "web-02"), "preexisting");
    let (_, inspect) = curl(socket, &[&format!("{API}/containers/{infra}-web-02/json")]);
    let inspect: Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(
        inspect["Config"]["Labels"]["provisioning.created-by"],
        format!("{}/create:web-02", a["id"]),
        "web-02 keeps A's mark"
    );
    // The compensations say what they kept.
    let rollback_logs = nu.run(&format!(
        "orch workflow show {} | get rollback.task | each {{|t| orch logs $t }} | str join",
        done["id"]
    ));
    assert!(
        rollback_logs.contains("web-02: kept ")
            && rollback_logs.contains("created by workflow step")
            && rollback_logs.contains("redis: kept on web-01")
            && rollback_logs.contains("redis: kept on web-02: installed by preexisting"),
        "{rollback_logs}"
    );

    // A's own rollback still removes what A created.
    let id = &a["id"];
    let rolled = nu.roll_back(id);
    assert_eq!(rolled["status"], "rolled_back", "{}", nu.task_logs());
    local.assert_nothing_left();
}

/// Waits (generously) until redis answers on a server.
fn eventually_pong(nu: &Nu, infra: &str, host: &str) {
    orch_e2e::eventually(std::time::Duration::from_secs(30), "redis answers", || {
        (ping(nu, infra, host) == "PONG").then_some(())
    });
}
