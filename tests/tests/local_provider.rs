//! The `local` provider and the taskservs for real: servers are containers on the local
//! Podman or Docker engine (image `localhost/provisioning-base:bookworm`, built by
//! scripts/build-base-image.sh), and the taskserv scripts run real services in them.
//!
//! Each test runs one Nushell script from `local_provider/` (after `prelude.nu`) in the
//! real `nu`, with its own infra `t-<tag>-<random>`. A guard removes the infra's containers
//! and network through the engine's API even when the test fails. The tests are skipped
//! only when DOCKER_HOST is unset and no engine socket answers (CI starts Podman first).
//! The provider drives the engine with `docker` when it is on PATH, else `podman`; one
//! test runs a short script with each client that is there.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use orch_e2e::containers::{Cleanup, candidate_sockets, engine_socket};

#[test]
fn two_servers_run_redis_and_postgres_then_are_deleted() {
    let Some(result) = run("rp", include_str!("local_provider/redis_postgres.nu")) else {
        return;
    };
    assert_eq!(result["postgres"]["test"], "one,two", "{result:#}");
    assert_eq!(result["redis"][0]["check"], "PONG", "{result:#}");
}

#[test]
fn three_servers_form_an_etcd_cluster() {
    let Some(result) = run("etcd", include_str!("local_provider/etcd_cluster.nu")) else {
        return;
    };
    assert_eq!(result["read_on_etcd_3"], "written-on-etcd-1", "{result:#}");
    assert_eq!(
        result["members"],
        serde_json::json!(["etcd-1", "etcd-2", "etcd-3"])
    );
}

#[test]
fn containerd_runs_and_kubernetes_and_cilium_say_they_need_network() {
    let Some(result) = run(
        "k8s",
        include_str!("local_provider/containerd_kubernetes.nu"),
    ) else {
        return;
    };
    let kubernetes = result["kubernetes_error"].as_str().unwrap_or_default();
    assert!(kubernetes.contains("needs network:"), "{kubernetes}");
}

#[test]
fn docker_and_podman_both_drive_the_engine() {
    for client in ["docker", "podman"] {
        let on_path = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {client}"))
            .output()
            .is_ok_and(|o| o.status.success());
        if !on_path {
            eprintln!("skipped for {client}: not on PATH");
            continue;
        }
        let body = include_str!("local_provider/clients.nu");
        let tag = format!("cli-{client}");
        let Some(result) = run_with(&tag, body, &[("PROVISIONING_LOCAL_CLI", client)]) else {
            return;
        };
        assert_eq!(result["client"], client);
    }
}

/// Runs one test script for a new infra; returns the JSON it prints last, or None when
/// no engine is there (the test is skipped).
fn run(tag: &str, body: &str) -> Option<serde_json::Value> {
    run_with(tag, body, &[])
}

/// [`run`] with more environment variables for the script.
fn run_with(tag: &str, body: &str, env: &[(&str, &str)]) -> Option<serde_json::Value> {
    let Some(socket) = engine_socket() else {
        eprintln!(
            "skipped: no container engine (DOCKER_HOST is unset and none of {} answers /_ping)",
            candidate_sockets()
                .iter()
                .map(|s| s.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return None;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .subsec_nanos();
    let infra = format!("t-{tag}-{:05x}", (nanos ^ std::process::id()) & 0xfffff);
    let cleanup = Cleanup {
        socket: socket.clone(),
        infra: infra.clone(),
    };

    let modules = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../nushell-modules")
        .canonicalize()
        .expect("nushell-modules exists");
    let script = include_str!("local_provider/prelude.nu")
        .replace("@MODULES@", &modules.display().to_string())
        .replace("@INFRA@", &infra)
        + body;
    let dir = tempfile::Builder::new()
        .prefix("orch-local-")
        .tempdir()
        .expect("a temp dir");
    let file = dir.path().join(format!("{tag}.nu"));
    std::fs::write(&file, script).expect("the script is written");

    let output = Command::new(orch_e2e::nu_binary())
        .arg("-n")
        .arg(&file)
        .env("DOCKER_HOST", format!("unix://{}", socket.display()))
        // A command hanging in a server fails its step instead of the whole test run.
        .env("PROVISIONING_LOCAL_EXEC_TIMEOUT", "180")
        .envs(env.iter().copied())
        .output()
        .expect("nu runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the {tag} script failed for infra {infra} ({}):\n{stderr}\n{stdout}",
        output.status
    );
    let result: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the script's last line is not JSON ({e}):\n{stdout}"));

    // The script deleted its servers: nothing of the infra is left in the engine.
    let (containers, network) = cleanup.leftovers();
    assert!(
        containers.is_empty() && !network,
        "left behind by {infra}: containers {containers:?}, network {network}"
    );
    Some(result)
}

/// A task running `server-exec` (the engine's client under `timeout`) is cancelled: every
/// process of the attempt is gone (the client stays in the attempt's process group, which
/// the cancel stops), nothing carrying the attempt's markers is left running.
#[test]
fn a_cancelled_server_exec_leaves_no_process_behind() {
    let Some(socket) = engine_socket() else {
        eprintln!("skipped: no container engine");
        return;
    };
    let infra = format!("t-cancel-{:05x}", std::process::id() & 0xfffff);
    let _cleanup = Cleanup {
        socket: socket.clone(),
        infra: infra.clone(),
    };
    let daemon = orch_e2e::Daemon::start_with_env(
        &[],
        &[("DOCKER_HOST", &format!("unix://{}", socket.display()))],
    );
    let nu = daemon.nu();
    let modules = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../nushell-modules")
        .canonicalize()
        .expect("nushell-modules exists");
    let marker = daemon.dir().join("exec-started");
    let code = format!(
        "use '{modules}/providers/local'\nlet web = {{hostname: web-01, provider: local, infra: '{infra}'}}\nlocal create-server $web {{workflow: null, infra: {{name: '{infra}'}}}} | ignore\ntouch '{marker}'\nlocal server-exec $web 'sleep 600'",
        modules = modules.display(),
        marker = marker.display(),
    );
    let id = nu.json(&format!("orch submit --nu {} | get id", nu_string(&code)));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !marker.exists() {
        let status = nu.json(&format!("orch task {id} | get status"));
        assert!(
            std::time::Instant::now() < deadline && status == "running",
            "the server was not created, or the exec did not start:\n{}",
            nu.task_logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        !processes_of(&daemon.data_dir(), &id.to_string()).is_empty(),
        "the attempt's processes are visible while it runs"
    );
    nu.run(&format!(
        "orch cancel {id} | ignore; orch wait {id} | ignore"
    ));
    let left = orch_e2e::eventually(
        std::time::Duration::from_secs(15),
        "no process of the cancelled attempt",
        || {
            let left = processes_of(&daemon.data_dir(), &id.to_string());
            left.is_empty().then_some(left)
        },
    );
    assert!(left.is_empty());
}

/// A Nushell string literal holding `text`.
fn nu_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

/// The pids of live processes whose environment carries the daemon's data dir and the
/// task id (the markers every process of an attempt inherits).
fn processes_of(data_dir: &Path, task: &str) -> Vec<u32> {
    let dir_marker = format!("ORCH_DATA_DIR={}", data_dir.display());
    let task_marker = format!("ORCH_TASK_ID={task}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
            vars.contains(&dir_marker.as_bytes()) && vars.contains(&task_marker.as_bytes())
        })
        .collect()
}
