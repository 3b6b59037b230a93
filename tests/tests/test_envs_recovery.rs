//! Test environments across crashes, on the real daemon, the real `nu` with the plugin
//! and the real container engine (Podman in CI): kill -9 in the middle of a deletion
//! (explicit and `--auto-cleanup`), installer scripts left by a crash, a failed
//! environment as a Nushell error, and hostile names. Sick engines are in
//! test_envs_engine.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use orch_e2e::containers::{TestEnvSweeper, env_daemon as setup};
use orch_e2e::{Daemon, Nu, PROVISIONING_MODULE as MODULE, eventually};
use orch_protocol::{
    ClientError, EnvRequest, EnvSpec, ErrorKind, Request, Response, Topology, TopologyNode,
};
use serde_json::{Value, json};

/// How often a scenario is tried when the kill came after the whole deletion (it is
/// quick: a removal is forced, and the engine is asked about what is left between polls).
const TRIES: usize = 3;

/// Waits until the first of the environment's three containers is gone, then kills the
/// daemon; whether the deletion was caught halfway (something of it remained).
fn kill_mid_deletion(daemon: &mut Daemon, sweeper: &TestEnvSweeper) -> bool {
    eventually(
        Duration::from_secs(120),
        "the first container removed",
        || (sweeper.leftovers().0.len() < 3).then_some(()),
    );
    daemon.kill9();
    let (containers, networks) = sweeper.leftovers();
    let caught = !containers.is_empty() || !networks.is_empty();
    if !caught {
        eprintln!("the deletion ended before the kill: trying again");
    }
    caught
}

/// After a restart: environment `id` ends `deleted` for `reason`, and nothing of it
/// remains on the engine.
fn assert_deletion_finished(nu: &Nu, sweeper: &TestEnvSweeper, id: &Value, reason: &str) {
    let env = eventually(Duration::from_secs(60), "the deletion finished", || {
        let env = nu.json(&format!(
            "orch test env show {id} | select status state.reason"
        ));
        (env["status"] == "deleted").then_some(env)
    });
    assert_eq!(env["state.reason"], reason, "{env}");
    eventually(Duration::from_secs(60), "no leftovers", || {
        (sweeper.leftovers() == (vec![], vec![])).then_some(())
    });
}

#[test]
fn kill_9_during_a_delete_then_restart_finishes_the_deletion() {
    let Some((mut daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    for attempt in 1..=TRIES {
        let env = nu.provisioning_json(
            "provisioning test topology load etcd_cluster | provisioning test env cluster etcd | select id status",
        );
        assert_eq!(env["status"], "ready", "{env}");
        let id = &env["id"];
        let mut deleting = nu.spawn(&format!("orch test env delete {id}"));
        let caught = kill_mid_deletion(&mut daemon, &sweeper);
        let _ = deleting.kill();
        let _ = deleting.wait();
        daemon.restart();
        assert_deletion_finished(&nu, &sweeper, id, "requested");
        if caught {
            return;
        }
        assert!(attempt < TRIES, "the kill never came during the deletion");
    }
}

#[test]
fn kill_9_during_an_auto_cleanup_removal_then_restart_finishes_the_deletion() {
    let Some((mut daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    for attempt in 1..=TRIES {
        let mut creating = nu.spawn(&format!(
            "use {MODULE}; provisioning test topology load etcd_cluster | provisioning test env cluster etcd --auto-cleanup"
        ));
        eventually(Duration::from_secs(120), "the cluster's containers", || {
            (sweeper.leftovers().0.len() == 3).then_some(())
        });
        let id = nu.json("orch test env list | first | get id");
        let caught = kill_mid_deletion(&mut daemon, &sweeper);
        let _ = creating.kill();
        let _ = creating.wait();
        daemon.restart();
        assert_deletion_finished(&nu, &sweeper, &id, "auto_cleanup");
        let tests = nu.json(&format!("orch test env show {id} | get tests"));
        assert_eq!(
            tests,
            json!({"passed": 3, "failed": 0, "total": 3}),
            "it was being removed after its run"
        );
        if caught {
            return;
        }
        assert!(attempt < TRIES, "the kill never came during the deletion");
    }
}

/// Live (not zombie) processes started for a test environment by the daemon whose test
/// directory is `dir` (they carry its data directory and an environment id).
fn env_scripts(dir: &Path) -> Vec<i32> {
    let owner = format!("ORCH_DATA_DIR={}/", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let live = stat
                .rfind(')')
                .is_some_and(|end| !stat[end + 1..].trim_start().starts_with('Z'));
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let mut entries = environ.split(|b| *b == 0);
            let ours = entries.clone().any(|e| e.starts_with(owner.as_bytes()));
            live && ours && entries.any(|e| e.starts_with(b"ORCH_TEST_ENV_ID="))
        })
        .collect()
}

/// A copy of the extensions with a taskserv whose install takes ten minutes.
fn modules_with_a_slow_install(dir: &Path) -> PathBuf {
    let modules = dir.join("modules");
    let status = Command::new("cp")
        .arg("-r")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../nushell-modules"))
        .arg(&modules)
        .status()
        .unwrap();
    assert!(status.success());
    let slow = modules.join("taskservs/slowinstall");
    std::fs::create_dir_all(&slow).unwrap();
    std::fs::write(
        slow.join("manifest.toml"),
        "name = \"slowinstall\"\nversion = \"1.0\"\ndescription = \"An install that takes ten minutes (tests)\"\n[scripts]\ninstall = \"install.nu\"\n",
    )
    .unwrap();
    std::fs::write(
        slow.join("install.nu"),
        "export def main [exec: closure, ctx: record] { sleep 10min }\n",
    )
    .unwrap();
    modules
}

#[test]
fn installer_scripts_do_not_survive_a_restart() {
    let extensions = tempfile::tempdir().unwrap();
    let modules = modules_with_a_slow_install(extensions.path());
    let Some((mut daemon, nu, sweeper)) = setup(&["--modules", modules.to_str().unwrap()]) else {
        return;
    };
    let mut creating = nu.spawn("orch test env create single slowinstall --auto-start");
    eventually(Duration::from_secs(60), "the installer running", || {
        (!env_scripts(daemon.dir()).is_empty()).then_some(())
    });
    daemon.kill9();
    let _ = creating.kill();
    let _ = creating.wait();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !env_scripts(daemon.dir()).is_empty(),
        "the installer outlives the daemon"
    );
    daemon.restart();
    // Stopped before the daemon serves (and before its containers are removed).
    let survivors = env_scripts(daemon.dir());
    assert!(survivors.is_empty(), "installers survived: {survivors:?}");
    let env = eventually(
        Duration::from_secs(60),
        "the interrupted env deleted",
        || {
            let env = nu.json("orch test env list | first | select status state.reason");
            (env["status"] == "deleted").then_some(env)
        },
    );
    assert_eq!(env["state.reason"], "interrupted");
    eventually(Duration::from_secs(60), "no leftovers", || {
        (sweeper.leftovers() == (vec![], vec![])).then_some(())
    });
}

#[test]
fn a_failed_environment_is_an_error_naming_the_stage_the_node_and_the_cause() {
    let Some((_daemon, nu, sweeper)) = setup(&[]) else {
        return;
    };
    // kubernetes needs the internet to install here: "needs network".
    let error = nu
        .try_run(&format!("use {MODULE}; provisioning test quick kubernetes"))
        .unwrap_err();
    // Nushell wraps the one-line message at its width: join it again.
    let message = error
        .lines()
        .map(|l| l.trim_start().trim_start_matches(['x', '|']).trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        message.contains(
            "failed while installing: node kubernetes: installing kubernetes failed (exit code 1)"
        ),
        "{error}"
    );
    assert!(
        message.contains("needs network: kubernetes needs kubeadm"),
        "{error}"
    );
    let env = nu.json("orch test env list | first | select id status state.failure");
    assert_eq!(env["status"], "deleted", "auto_cleanup still deleted it");
    let failure = env["state.failure"].as_str().unwrap();
    assert!(failure.contains("needs network"), "{failure}");
    assert!(!failure.contains("`----"), "{failure}");
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
    let error = nu
        .try_run(&format!(
            "use {MODULE}; provisioning test env single kubernetes --auto-start"
        ))
        .unwrap_err();
    assert!(error.contains("failed while installing"), "{error}");
    let env = nu.json("orch test env list | first | select id status");
    assert_eq!(env["status"], "failed", "kept for inspection");
    nu.run(&format!("orch test env delete {}", env["id"]));
    assert_eq!(sweeper.leftovers(), (vec![], vec![]));
}

fn cluster_request(name: &str, topology: &str) -> Request {
    let topology = Topology {
        name: topology.into(),
        description: String::new(),
        cluster_type: String::new(),
        needs_network: false,
        nodes: vec![TopologyNode {
            name: "node-1".into(),
            role: "server".into(),
            taskservs: vec!["redis".into()],
            resources: None,
            image: None,
        }],
        checks: Vec::new(),
    };
    Request::EnvCreate {
        env: EnvRequest {
            env: EnvSpec::Cluster {
                name: name.into(),
                topology,
            },
            auto_start: false,
            auto_cleanup: false,
            ttl_ms: None,
            resources: None,
            image: None,
        },
    }
}

#[test]
fn hostile_topology_and_cluster_names_are_refused_over_the_socket() {
    let daemon = Daemon::start(&[]);
    let mut client = daemon.client();
    let cases = [
        ("c", "../../../etc/passwd", "topology.name"),
        ("c", "/etc/passwd", "topology.name"),
        ("c", "..", "topology.name"),
        ("../x", "etcd_cluster", "name"),
        ("a/b", "etcd_cluster", "name"),
    ];
    for (name, topology, field) in cases {
        match client.call(&cluster_request(name, topology)) {
            Err(ClientError::Daemon(error)) => {
                assert_eq!(error.kind, ErrorKind::BadRequest, "{error:?}");
                assert_eq!(error.field.as_deref(), Some(field), "{error:?}");
                assert!(error.message.contains("not a plain name"), "{error:?}");
            }
            other => panic!("{name} / {topology} accepted: {other:?}"),
        }
    }
    let every = orch_protocol::EnvFilter::default();
    match client.call(&Request::Envs { filter: every }).unwrap() {
        Response::Envs { envs } => assert!(envs.is_empty(), "{envs:?}"),
        other => panic!("{other:?}"),
    }
}
