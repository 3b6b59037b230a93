//! Hostile input (issue 9): the names, paths and files a workflow request can reach, and
//! what one request can make the daemon allocate. The real daemon over real HTTP (curl)
//! and over its socket (the plugin in `nu` as the owner, a raw client as a granted local
//! user), and Podman for the `local` provider.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use orch_e2e::Daemon;
use orch_e2e::containers::{API, Cleanup, curl, engine_socket};
use orch_e2e::http::Shim;
use orch_e2e::local_infra::unique_infra;
use orch_e2e::peer;
use serde_json::{Value, json};

/// The infra `lab` of these tests: one local server `h1`.
const LAB: &str = "provider = \"local\"\n[[servers]]\nhostname = \"h1\"\n";

/// A daemon serving HTTP on a free port; its workspace is its directory (where the
/// harness starts it), with the infra `lab`.
struct Api(Shim);

impl Api {
    fn start() -> Api {
        Api(Shim::start(&[]).with_infra("lab", LAB))
    }

    fn token(&self, role: &str) -> &str {
        self.0.token(role)
    }

    /// A request as `role` with a JSON body: (status, body as JSON).
    fn call(&self, role: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.0.call_json(role, method, path, body)
    }

    fn daemon(&self) -> &Daemon {
        &self.0.daemon
    }

    /// Submits a cluster workflow as the operator; (status, error message or body).
    fn cluster(&self, request: Value) -> (u16, String) {
        let (status, body) = self.call(
            "operator",
            "POST",
            "/workflows/cluster/create",
            Some(&request),
        );
        let text = body["error"]["message"]
            .as_str()
            .map_or_else(|| body.to_string(), str::to_string);
        (status, text)
    }

    /// The daemon's peak resident memory so far, in KiB.
    fn peak_kib(&self) -> u64 {
        orch_e2e::raw::status_kib(self.daemon().pid().unwrap(), "VmHWM")
    }
}

/// `<dir>/infra/lab/settings.toml`: [`LAB`].
fn write_lab(dir: &Path) {
    let infra = dir.join("infra/lab");
    std::fs::create_dir_all(&infra).unwrap();
    std::fs::write(infra.join("settings.toml"), LAB).unwrap();
}

#[test]
fn an_operator_cannot_make_the_daemon_read_files_outside_its_workspace() {
    let api = Api::start();
    let data = api.daemon().data_dir();
    let admin = api.token("admin").to_string();
    // The reproduction, verbatim.
    let (status, message) = api.cluster(json!({"infra": data, "settings": "tokens.json",
        "cluster": "etcd-cluster", "provider": "local"}));
    assert_eq!(status, 422, "{message}");
    assert!(
        message.contains("`infra`") && message.contains("not a plain name"),
        "{message}"
    );
    // The data dir inside the workspace is no infra; a symlink out of the workspace and a
    // missing infra get the same message.
    std::os::unix::fs::symlink(&data, api.daemon().dir().join("infra/evil")).unwrap();
    let unknown = |name: &str| {
        let (status, message) = api.cluster(json!({"infra": name, "settings": "tokens.json",
            "cluster": "etcd-cluster", "provider": "local"}));
        assert_eq!(status, 422, "{message}");
        message.replace(name, "NAME")
    };
    let missing = unknown("missing");
    assert!(missing.starts_with("unknown infra `NAME`"), "{missing}");
    assert_eq!(unknown("data"), missing);
    assert_eq!(unknown("evil"), missing);
    // Settings: plain file names in the infra directory only; a link out reads as missing.
    let lab = api.daemon().dir().join("infra/lab");
    std::os::unix::fs::symlink(data.join("tokens.json"), lab.join("leak.json")).unwrap();
    for settings in [
        "../../data/tokens.json".to_string(),
        data.join("tokens.json").display().to_string(),
    ] {
        let (status, message) = api.cluster(json!({"infra": "lab", "settings": settings,
            "cluster": "etcd-cluster", "provider": "local"}));
        assert_eq!(status, 422, "{message}");
        assert!(message.contains("`settings`"), "{message}");
    }
    let no_file = |name: &str| {
        let (status, message) = api.cluster(json!({"infra": "lab", "settings": name,
            "cluster": "etcd-cluster", "provider": "local"}));
        assert_eq!(status, 422, "{message}");
        message.replace(name, "NAME")
    };
    assert_eq!(no_file("leak.json"), no_file("absent.json"));
    // Another workspace is refused over HTTP, the daemon's own is accepted.
    let (status, body) = api.call(
        "operator",
        "POST",
        "/workflows/servers/create",
        Some(&json!({"infra": "lab", "workspace": data, "check_mode": true})),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["field"], "workspace", "{body}");
    let (status, body) = api.call(
        "operator",
        "POST",
        "/workflows/servers/create",
        Some(
            &json!({"infra": "lab", "workspace": api.daemon().dir(), "settings": "./settings.toml",
                     "check_mode": true}),
        ),
    );
    assert_eq!(status, 200, "{body}");
    // Nothing was created, and no reader sees the admin token anywhere.
    let (status, tasks) = api.call("viewer", "GET", "/tasks", None);
    assert_eq!(status, 200);
    assert_eq!(tasks, json!([]), "no workflow was created");
    let (_, task) = api.call("viewer", "GET", "/tasks/1", None);
    assert!(!task.to_string().contains(&admin), "{task}");
}

/// The answers to `requests` sent to the socket as uid 65534 (granted `operator`).
fn as_granted_user(socket: &Path, requests: &[Value]) -> Vec<Value> {
    let mut messages = vec![peer::hello("granted")];
    messages.extend_from_slice(requests);
    peer::socket_as(65534, socket, &messages)
        .into_iter()
        .skip(1)
        .map(|frames| frames[0].clone())
        .collect()
}

#[test]
fn on_the_socket_only_the_owner_may_choose_the_workspace() {
    if !peer::is_root() {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    let daemon = Daemon::start(&["--allow-user", "65534:operator"]);
    std::fs::set_permissions(daemon.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    write_lab(daemon.dir());
    let other = daemon.dir().join("other");
    write_lab(&other);
    let data = daemon.data_dir().display().to_string();
    // The owner (the plugin sends its own workspace) may name another one, but still only
    // plain infra and settings names.
    let nu = daemon.nu();
    let plan = nu.json(
        "orch workflow submit servers --infra lab --workspace other --check | get steps.step",
    );
    assert_eq!(plan, json!(["create:h1"]));
    let err = nu
        .try_run(&format!("orch workflow submit cluster etcd-cluster --infra '{data}' --settings tokens.json --check"))
        .unwrap_err();
    assert!(err.contains("not a plain name"), "{err}");
    let err = nu
        .try_run(
            "orch workflow submit servers --infra lab --settings ../../data/tokens.json --check",
        )
        .unwrap_err();
    assert!(err.contains("`settings`"), "{err}");
    // Batch scripts are relative paths inside the workflow file's directory.
    std::fs::create_dir_all(daemon.dir().join("wf")).unwrap();
    std::fs::write(daemon.dir().join("outside.nu"), "print hi").unwrap();
    std::fs::write(
        daemon.dir().join("wf/deploy.toml"),
        "name = \"d\"\n[[operations]]\nid = \"s\"\ntype = \"script\"\nscript = \"../outside.nu\"\n",
    )
    .unwrap();
    let err = nu
        .try_run("orch workflow submit batch wf/deploy.toml --check")
        .unwrap_err();
    assert!(err.contains("`script`") && err.contains("no `..`"), "{err}");
    // A granted user is confined to the daemon's workspace, like HTTP.
    let plan = |workflow: Value| json!({"request": "workflow_plan", "workflow": workflow});
    let answers = as_granted_user(
        &daemon.socket(),
        &[
            plan(json!({"kind": "servers", "infra": "lab", "workspace": other})),
            plan(
                json!({"kind": "cluster", "infra": data, "settings": "tokens.json",
                        "cluster": "etcd-cluster", "provider": "local"}),
            ),
            plan(json!({"kind": "servers", "infra": "lab", "workspace": daemon.dir()})),
            plan(
                json!({"kind": "batch", "base_dir": "/", "workflow": {"name": "b",
                "operations": [{"id": "s", "type": "script", "script": "etc/hostname"}]}}),
            ),
        ],
    );
    assert_eq!(answers.len(), 4, "{answers:?}");
    assert_eq!(answers[3]["field"], "base_dir", "{}", answers[3]);
    assert_eq!(answers[0]["kind"], "permission_denied", "{}", answers[0]);
    assert_eq!(answers[0]["field"], "workspace", "{}", answers[0]);
    assert!(
        answers[1]["message"]
            .as_str()
            .unwrap()
            .contains("not a plain name"),
        "{}",
        answers[1]
    );
    assert_eq!(answers[2]["response"], "plan", "{}", answers[2]);
}

#[test]
fn a_request_of_half_a_million_duplicate_servers_is_refused_quickly_and_small() {
    let api = Api::start();
    let before = api.peak_kib();
    for (count, expected) in [
        (500_000, "more than 100000 entries"),
        (90_000, "named twice"),
    ] {
        let names = vec!["h1"; count];
        let started = Instant::now();
        let (status, body) = api.call(
            "operator",
            "POST",
            "/workflows/servers/create",
            Some(&json!({"infra": "lab", "servers": names})),
        );
        assert_eq!(status, 422, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(expected),
            "{body}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "answered in {:?}",
            started.elapsed()
        );
        let peak = api.peak_kib();
        assert!(
            peak < 200 * 1024,
            "the daemon's peak memory went from {before} KiB to {peak} KiB"
        );
    }
    let (_, tasks) = api.call("viewer", "GET", "/tasks", None);
    assert_eq!(tasks, json!([]));
}

/// Whether the container exists.
fn exists(socket: &Path, name: &str) -> bool {
    curl(socket, &[&format!("{API}/containers/{name}/json")]).0 == 200
}

#[test]
fn a_hostname_cannot_reach_another_container_through_the_engine_api() {
    let Some(socket) = engine_socket() else {
        eprintln!("skipped: no container engine");
        return;
    };
    let infra = unique_infra("t-hostile");
    let _cleanup = Cleanup {
        socket: socket.clone(),
        infra: infra.clone(),
    };
    let host = format!("unix://{}", socket.display());
    let daemon = Daemon::start_with_env(&[], &[("DOCKER_HOST", &host)]);
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nushell-modules/providers/local");
    let provider = |script: &str| {
        let out = Command::new(orch_e2e::nu_binary())
            .args(["-n", "-c"])
            .arg(format!("use '{}'\n{script}", modules.display()))
            .env("DOCKER_HOST", &host)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let victim = format!("{infra}-victim");
    let (ok, stderr) = provider(&format!(
        "local create-server {{hostname: victim, provider: local, infra: '{infra}'}} {{}} | ignore"
    ));
    assert!(ok, "the victim is created: {stderr}");
    assert!(exists(&socket, &victim));
    let hostile = format!("x/../../containers/{victim}");
    // The settings parser refuses the hostname, naming the file, the field and the value.
    let dir = daemon.dir().join("infra").join(&infra);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.toml"),
        format!("provider = \"local\"\n[[servers]]\nhostname = \"{hostile}\"\n"),
    )
    .unwrap();
    let err = daemon
        .nu()
        .try_run(&format!(
            "orch workflow submit servers --infra {infra} --wait"
        ))
        .unwrap_err();
    for part in [
        "settings.toml",
        "servers[0].hostname",
        hostile.as_str(),
        "RFC 1123",
    ] {
        assert!(err.contains(part), "{part} in {err}");
    }
    assert_eq!(
        daemon.nu().json("orch tasks | length"),
        0,
        "nothing was submitted"
    );
    // The provider itself refuses a name that is not a hostname before any engine call.
    let (_ok, stderr) = provider(&format!(
        "local delete-server {{hostname: '{hostile}', provider: local, infra: '{infra}'}} {{}}"
    ));
    assert!(exists(&socket, &victim), "the victim was deleted: {stderr}");
}
