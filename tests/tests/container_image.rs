//! The daemon's image (Containerfile, built by scripts/build-image.sh with Podman from
//! the test's own binaries): the daemon starts in it as its own account, serves the
//! socket and HTTP, runs a command and a Nushell task submitted by the plugin inside
//! it, and keeps them in its data volume across a restart of the container. The
//! container, its volume and the image are removed whatever happens.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use orch_e2e::eventually;

/// Removes the test's container (with its volume) and image when dropped.
struct Removal {
    container: String,
    image: String,
}

impl Drop for Removal {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", "-v", &self.container]);
        let _ = podman(&["rmi", "-f", &self.image]);
    }
}

/// Runs `podman ARGS`; its standard output, or its error output when it fails.
fn podman(args: &[&str]) -> Result<String, String> {
    let out = Command::new("podman")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `nu -c SCRIPT` inside the container, as its account; stdout, or stderr on failure.
fn nu_in(container: &str, script: &str) -> Result<String, String> {
    podman(&["exec", container, "nu", "-c", script])
}

#[test]
fn the_image_runs_the_daemon_which_keeps_its_tasks_across_a_restart() {
    if podman(&["info"]).is_err() {
        eprintln!("skipped: the podman CLI does not answer (scripts/ensure-podman.sh)");
        return;
    }
    let name = format!("orch-e2e-image-{}", std::process::id());
    let image = format!("localhost/provisioning-orchestrator:{name}");
    let _removal = Removal {
        container: name.clone(),
        image: image.clone(),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/build-image.sh");
    let built = Command::new(&script)
        .args(["--profile", "debug", "--tag", &image])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    podman(&["run", "-d", "--init", "--name", &name, &image]).unwrap();
    let ready = || nu_in(&name, "orch health | get storage").ok();
    eventually(Duration::from_secs(30), "the plugin is added", || {
        nu_in(&name, "plugin add /usr/local/bin/nu_plugin_orchestrator").ok()
    });
    let storage = eventually(Duration::from_secs(30), "the daemon answers", ready);
    assert_eq!(storage, "redb");
    assert_eq!(nu_in(&name, "id -un | str trim").unwrap(), "orchestrator");

    let done = nu_in(
        &name,
        "[(orch submit --wait echo hi | get status) (orch submit --wait --nu 'print $\"in ($env.HOME)\"' | get status)] | str join ' '",
    )
    .unwrap();
    assert_eq!(done, "succeeded succeeded");
    assert_eq!(
        nu_in(&name, "orch logs 2 | str trim").unwrap(),
        "in /var/lib/provisioning-orchestrator"
    );
    let health = nu_in(
        &name,
        "http get http://127.0.0.1:8080/health | get counts.succeeded",
    )
    .unwrap();
    assert_eq!(health, "2", "HTTP on the image's port");

    podman(&["restart", &name]).unwrap();
    eventually(Duration::from_secs(30), "the daemon answers again", ready);
    let kept = nu_in(&name, "orch tasks | get status | str join ' '").unwrap();
    assert_eq!(
        kept, "succeeded succeeded",
        "the data volume keeps the store"
    );
}
