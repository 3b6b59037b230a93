//! A workflow on real containers: the `local` provider creates two servers on the
//! container engine (Podman's Docker-compatible API in CI), redis is installed and
//! checked on both, and the workflow's rollback removes them again.

use orch_e2e::local_infra::LocalInfra;
use serde_json::json;

#[test]
fn local_servers_get_redis_and_the_rollback_removes_them() {
    let Some(local) = LocalInfra::start(
        "wf",
        "settings.toml",
        "provider = \"local\"\n\n[[servers]]\nhostname = \"web-01\"\ntaskservs = [\"redis\"]\n\n[[servers]]\nhostname = \"web-02\"\ntaskservs = [\"redis\"]\n",
    ) else {
        return;
    };
    let (daemon, infra) = (&local.daemon, &local.name);
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
    assert_eq!(done["status"], "succeeded", "{done}\n{}", nu.task_logs());
    let (containers, network) = local.leftovers();
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
    let rolled = nu.roll_back(id);
    assert_eq!(
        rolled["status"],
        "rolled_back",
        "{rolled}\n{}",
        nu.task_logs()
    );
    let mut compensated: Vec<&str> = rolled["rollback"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["step"].as_str().unwrap())
        .collect();
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
    local.assert_nothing_left();
}

#[test]
fn an_etcd_cluster_workflow_reaches_quorum_replicates_and_rolls_back() {
    let Some(local) = LocalInfra::start("cl", "settings.yaml", "provider: local\nservers: []\n")
    else {
        return;
    };
    let (daemon, infra) = (&local.daemon, &local.name);
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
    assert_eq!(done["status"], "succeeded", "{done}\n{}", nu.task_logs());
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
    assert_eq!(local.leftovers().0.len(), 3);
    let id = &done["id"];
    let rolled = nu.roll_back(id);
    assert_eq!(rolled["status"], "rolled_back", "{}", nu.task_logs());
    local.assert_nothing_left();
}
