//! A workflow on real containers: the `local` provider creates two servers on the
//! container engine (Podman's Docker-compatible API in CI), redis is installed and
//! checked on both, and the workflow's rollback removes them again.

use std::time::{SystemTime, UNIX_EPOCH};

use orch_e2e::Daemon;
use orch_e2e::containers::{Cleanup, candidate_sockets, engine_socket};
use serde_json::json;

#[test]
fn local_servers_get_redis_and_the_rollback_removes_them() {
    let Some(socket) = engine_socket() else {
        eprintln!(
            "skipped: no container engine (DOCKER_HOST is unset and none of {:?} answers)",
            candidate_sockets()
        );
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let infra = format!("wf-{:05x}", (nanos ^ std::process::id()) & 0xfffff);
    let cleanup = Cleanup {
        socket,
        infra: infra.clone(),
    };
    let daemon = Daemon::start(&[]);
    let dir = daemon.dir().join("infra").join(&infra);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.toml"),
        "provider = \"local\"\n\n[[servers]]\nhostname = \"web-01\"\ntaskservs = [\"redis\"]\n\n[[servers]]\nhostname = \"web-02\"\ntaskservs = [\"redis\"]\n",
    )
    .unwrap();
    let nu = daemon.nu();
    let plan = nu.json(&format!(
        "orch workflow submit servers --infra {infra} --check | get waves"
    ));
    assert_eq!(
        plan,
        json!([
            ["create:web-01", "create:web-02"],
            ["install:redis@web-01", "install:redis@web-02"]
        ])
    );
    let done = nu.json(&format!(
        "orch workflow submit servers --infra {infra} --wait | select id status step_list.status"
    ));
    assert_eq!(done["status"], "succeeded", "{done}\n{}", logs(&nu));
    let (containers, network) = cleanup.leftovers();
    assert_eq!((containers.len(), network), (2, true), "{containers:?}");
    // redis answers on both servers, and one server reaches the other by hostname.
    let modules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nushell-modules/providers/local"
    );
    let pong = nu.json(&format!(
        "use {modules} *; [web-01 web-02] | each {{|h| server-exec {{hostname: $h, infra: {infra}, provider: local}} 'redis-cli -h web-02 ping' | str trim }}"
    ));
    assert_eq!(pong, json!(["PONG", "PONG"]));
    let id = &done["id"];
    let rolled = nu.json(&format!(
        "orch workflow rollback {id} | ignore; orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | select status rollback.step"
    ));
    assert_eq!(rolled["status"], "rolled_back", "{rolled}\n{}", logs(&nu));
    let mut compensated: Vec<String> =
        serde_json::from_value(rolled["rollback.step"].clone()).unwrap();
    compensated.sort();
    assert_eq!(
        compensated,
        [
            "create:web-01",
            "create:web-02",
            "install:redis@web-01",
            "install:redis@web-02"
        ]
    );
    let (containers, network) = cleanup.leftovers();
    assert!(
        containers.is_empty() && !network,
        "left: {containers:?}, network {network}"
    );
}

/// The logs of every task, to explain a failure.
fn logs(nu: &orch_e2e::Nu) -> String {
    nu.try_run(
        "orch tasks | each {|t| $'--- task ($t.id) ($t.status)\n(orch logs $t.id)' } | str join",
    )
    .unwrap_or_else(|e| e)
}

#[test]
fn an_etcd_cluster_workflow_reaches_quorum_replicates_and_rolls_back() {
    let Some(socket) = engine_socket() else {
        eprintln!("skipped: no container engine");
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let infra = format!("cl-{:05x}", (nanos ^ std::process::id()) & 0xfffff);
    let cleanup = Cleanup {
        socket,
        infra: infra.clone(),
    };
    let daemon = Daemon::start(&[]);
    let dir = daemon.dir().join("infra").join(&infra);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("settings.yaml"), "provider: local\nservers: []\n").unwrap();
    let nu = daemon.nu();
    let plan = nu.json(&format!(
        "orch workflow submit cluster etcd-cluster --infra {infra} --check | get waves"
    ));
    assert_eq!(
        plan,
        json!([
            ["create:etcd-1", "create:etcd-2", "create:etcd-3"],
            [
                "install:etcd@etcd-1",
                "install:etcd@etcd-2",
                "install:etcd@etcd-3"
            ],
            [
                "check:etcd@etcd-1",
                "check:etcd@etcd-2",
                "check:etcd@etcd-3"
            ],
            ["setup:etcd-cluster"]
        ])
    );
    let done = nu.json(&format!(
        "orch workflow submit cluster etcd-cluster --infra {infra} --wait | select id status step_list"
    ));
    assert_eq!(done["status"], "succeeded", "{done}\n{}", logs(&nu));
    let setup = done["step_list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "setup:etcd-cluster")
        .unwrap()["task"]
        .clone();
    let output = nu.run(&format!("orch logs {setup}"));
    assert!(
        output.contains("written-on-etcd-1-by-workflow-"),
        "{output}"
    );
    assert_eq!(cleanup.leftovers().0.len(), 3);
    let id = &done["id"];
    let rolled = nu.json(&format!(
        "orch workflow rollback {id} | ignore; orch watch --workflow {id} --all | last | ignore; orch workflow show {id} | get status"
    ));
    assert_eq!(rolled, "rolled_back", "{}", logs(&nu));
    let (containers, network) = cleanup.leftovers();
    assert!(
        containers.is_empty() && !network,
        "left: {containers:?}, network {network}"
    );
}
