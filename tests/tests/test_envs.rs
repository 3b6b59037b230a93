//! Test environments on the real container engine (Podman's Docker-compatible API in
//! CI), driven through the `provisioning test ...` commands and the plugin: a single
//! postgres, a server with redis and postgres, an etcd cluster that reaches quorum and
//! replicates, the postgres_redis topology, kill -9 mid-environment with nothing leaked,
//! time to live, the limit, and clear errors for bad requests.

use std::time::Duration;

use orch_e2e::containers::env_daemon as setup;
use orch_e2e::{Daemon, PROVISIONING_MODULE as MODULE, eventually};
use serde_json::{Value, json};

#[test]
fn a_single_postgres_environment_runs_select_1_and_cleans_up() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let env = nu.provisioning_json(
        "provisioning test env single postgres --auto-start --auto-cleanup | select status state.reason probes.0.ok results",
    );
    assert_eq!(env["status"], "deleted", "{env:#}");
    assert_eq!(env["state.reason"], "auto_cleanup");
    assert_eq!(env["probes.0.ok"], true, "pg_isready answered");
    let result = &env["results"][0];
    assert_eq!(
        (&result["taskserv"], &result["passed"], &result["exit_code"]),
        (&json!("postgres"), &json!(true), &json!(0)),
        "{env:#}"
    );
    assert!(
        result["output"].as_str().unwrap().contains("one,two"),
        "{result}"
    );
    assert!(result["duration_ms"].as_u64().is_some());
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn a_server_environment_installs_redis_and_postgres_in_order_and_runs_their_tests() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let env =
        nu.provisioning_json("provisioning test env server web-01 [redis postgres] --auto-start");
    assert_eq!(env["status"], "ready", "{env:#}");
    assert_eq!(env["nodes"][0]["taskservs"], json!(["postgres", "redis"]));
    let (containers, networks) = sweeper.leftovers();
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_eq!(networks.len(), 1, "{networks:?}");
    let id = &env["id"];
    let run = nu.provisioning_json(&format!(
        "provisioning test env run {id} | select status tests results.passed"
    ));
    assert_eq!(
        run,
        json!({"status": "ready", "tests": {"passed": 2, "failed": 0, "total": 2}, "results.passed": [true, true]})
    );
    let logs = nu.run(&format!("orch test env logs {id}"));
    assert!(logs.contains("install postgres (exit 0"), "{logs}");
    assert!(logs.contains("test redis (exit 0"), "{logs}");
    let deleted = nu.provisioning_json(&format!(
        "provisioning test env delete {id} | get state.reason"
    ));
    assert_eq!(deleted, "requested");
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn an_etcd_cluster_reaches_quorum_and_replicates_a_key() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let env = nu.provisioning_json(
        "provisioning test topology load etcd_cluster | provisioning test env cluster etcd",
    );
    assert_eq!(env["status"], "ready", "{env:#}");
    let checks: Vec<&Value> = env["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["taskserv"] == "cluster")
        .collect();
    assert_eq!(checks.len(), 3, "{env:#}");
    assert!(checks.iter().all(|c| c["ok"] == true));
    assert!(
        checks[0]["output"]
            .as_str()
            .unwrap()
            .matches("is healthy")
            .count()
            == 3,
        "quorum: {}",
        checks[0]["output"]
    );
    assert_eq!(
        checks[2]["output"].as_str().unwrap().trim(),
        "replicated",
        "read on etcd-3 what etcd-1 wrote"
    );
    let (containers, networks) = sweeper.leftovers();
    assert_eq!(
        (containers.len(), networks.len()),
        (3, 1),
        "{containers:?} {networks:?}"
    );
    let run = nu.provisioning_json(&format!("orch test env run {} | get tests", env["id"]));
    assert_eq!(run, json!({"passed": 3, "failed": 0, "total": 3}));
    nu.provisioning_json(&format!("orch test env delete {} | get status", env["id"]));
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn the_postgres_redis_topology_becomes_ready_and_passes_its_tests() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let env = nu.provisioning_json(
        "provisioning test topology load postgres_redis | provisioning test env cluster stack --auto-cleanup | select status tests results.node",
    );
    assert_eq!(env["status"], "deleted", "{env:#}");
    assert_eq!(env["tests"], json!({"passed": 2, "failed": 0, "total": 2}));
    let mut nodes: Vec<String> = serde_json::from_value(env["results.node"].clone()).unwrap();
    nodes.sort();
    assert_eq!(nodes, ["cache", "db"]);
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn kill_9_mid_environment_then_restart_leaves_no_container_or_network() {
    let Some((mut daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let mut creating = nu.spawn(&format!(
        "use {MODULE}; provisioning test topology load etcd_cluster | provisioning test env cluster etcd"
    ));
    eventually(Duration::from_secs(60), "the cluster's containers", || {
        (sweeper.leftovers().0.len() == 3).then_some(())
    });
    daemon.kill9();
    let _ = creating.kill();
    let _ = creating.wait();
    assert_eq!(
        sweeper.leftovers().0.len(),
        3,
        "the containers outlive the daemon"
    );
    daemon.restart();
    eventually(
        Duration::from_secs(60),
        "no leftovers after the restart",
        || (sweeper.leftovers() == (vec![], vec![])).then_some(()),
    );
    let env = nu.json("orch test env list | first | select status state.reason");
    assert_eq!(
        env,
        json!({"status": "deleted", "state.reason": "interrupted"})
    );
}

#[test]
fn an_environment_is_deleted_when_its_time_to_live_ends() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let env = nu.provisioning_json(
        "provisioning test env single redis --auto-start --ttl 8sec --cpus 0.5 --memory 256MiB",
    );
    assert_eq!(env["status"], "ready", "{env:#}");
    assert_eq!(sweeper.leftovers().0.len(), 1);
    // The limits reached the engine.
    let container = env["nodes"][0]["container"].as_str().unwrap();
    let (_, inspect) = orch_e2e::containers::curl(
        &sweeper.socket,
        &[&format!(
            "{}/containers/{container}/json",
            orch_e2e::containers::API
        )],
    );
    let inspect: Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(
        inspect["HostConfig"]["Memory"],
        256 * 1024 * 1024,
        "{inspect:#}"
    );
    assert_eq!(inspect["HostConfig"]["NanoCpus"], 500_000_000);
    let id = &env["id"];
    let reason = eventually(Duration::from_secs(30), "the expiry", || {
        let env = nu.json(&format!("orch test env show {id} | select status state"));
        (env["status"] == "deleted").then(|| env["state"]["reason"].clone())
    });
    assert_eq!(reason, "expired");
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn kubernetes_topologies_are_created_structurally_and_the_limit_holds() {
    let Some((_daemon, nu, sweeper)) = setup(&["--max-test-envs", "1"]) else {
        return;
    };
    let env = nu.provisioning_json(
        "provisioning test topology load kubernetes_3node | provisioning test env cluster k8s --no-start",
    );
    assert_eq!(env["status"], "created", "{env:#}");
    let roles: Vec<(String, String)> = env["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().into(),
                n["role"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        [
            ("k8s-cp".into(), "control-plane".into()),
            ("k8s-worker-1".into(), "worker".into()),
            ("k8s-worker-2".into(), "worker".into())
        ]
    );
    assert_eq!(
        env["nodes"][0]["taskservs"],
        json!(["containerd", "kubernetes", "cilium"])
    );
    assert_eq!(
        env["nodes"][1]["resources"],
        json!({"cpus": 1.0, "memory_mb": 1024 * 1024 * 1024}),
        "memory_mb is a file size: 1 GiB, in bytes as JSON"
    );
    let (containers, networks) = sweeper.leftovers();
    assert_eq!((containers.len(), networks.len()), (3, 1));
    eprintln!(
        "skipped: needs network (installing kubernetes downloads kubeadm and images; only the topology's containers, network, roles and limits are checked)"
    );
    let error = nu
        .try_run(&format!("use {MODULE}; provisioning test quick redis"))
        .unwrap_err();
    assert!(
        error.contains("1 test environments exist and the limit is 1"),
        "{error}"
    );
    nu.provisioning_json(&format!("orch test env delete {} | get status", env["id"]));
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

#[test]
fn bad_requests_are_refused_with_the_problem_named() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    let cases = [
        (
            "orch test env create single mysql",
            "unknown taskserv `mysql`",
        ),
        (
            "provisioning test topology load nope",
            "there is no topology `nope`",
        ),
        (
            "orch test env create cluster x",
            "a cluster needs a topology",
        ),
        ("orch test env create swarm x", "`swarm` is not a kind"),
        ("orch test env show 999", "there is no test environment 999"),
        (
            "orch test env create single redis --ttl 0sec",
            "the time to live must be positive",
        ),
    ];
    for (script, expected) in cases {
        let error = nu.try_run(&format!("use {MODULE}; {script}")).unwrap_err();
        assert!(error.contains(expected), "{script}\n{error}");
    }
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
    let envs = nu.json("orch test env list | length");
    assert_eq!(envs, 0, "nothing was created");
}

#[test]
fn an_engine_that_does_not_answer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nothing.sock");
    let host = format!("unix://{}", socket.display());
    let daemon = Daemon::start_with_env(&[], &[("DOCKER_HOST", &host)]);
    let nu = daemon.nu();
    let error = nu
        .try_run("orch test env create single redis --auto-start")
        .unwrap_err();
    assert!(error.contains("no container engine answers"), "{error}");
    assert!(error.contains("nothing.sock"), "{error}");
}
