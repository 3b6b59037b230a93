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

#[test]
fn use_provisioning_works_from_any_directory_once_linked_into_the_library_path() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let config = daemon.dir().join("config");
    let elsewhere = daemon.dir().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let xdg = [("XDG_CONFIG_HOME", config.as_path())];
    let script = "use provisioning; provisioning | length";
    let before = nu.try_run_in(script, &elsewhere, &xdg).unwrap_err();
    assert!(before.contains("provisioning"), "{before}");
    let modules = concat!(env!("CARGO_MANIFEST_DIR"), "/../nushell-modules");
    let linked = std::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/link-module.sh"
    ))
    .arg(modules)
    .env("XDG_CONFIG_HOME", &config)
    .output()
    .unwrap();
    assert!(linked.status.success(), "{linked:?}");
    let count = nu.try_run_in(script, &elsewhere, &xdg).unwrap();
    assert!(count.trim().parse::<u32>().unwrap() > 20, "{count}");
    // Linking again is harmless; a directory of the user's own is left alone.
    let again = std::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/link-module.sh"
    ))
    .arg(modules)
    .env("XDG_CONFIG_HOME", &config)
    .status()
    .unwrap();
    assert!(again.success());
    let own = daemon.dir().join("config2/nushell/scripts/provisioning");
    std::fs::create_dir_all(&own).unwrap();
    let refused = std::process::Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/link-module.sh"
    ))
    .arg(modules)
    .env("XDG_CONFIG_HOME", daemon.dir().join("config2"))
    .output()
    .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("left as it is"),
        "{refused:?}"
    );
    assert!(own.read_dir().unwrap().next().is_none(), "untouched");
}

#[test]
fn the_modules_wrappers_report_errors_at_the_users_call() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nushell-modules/provisioning"
    );
    for call in [
        "provisioning test env show 999",
        "provisioning test env delete 999",
        "provisioning test env logs 999",
        "provisioning test topology load no-such-topology",
    ] {
        let error = nu.try_run(&format!("use {module}\n{call}")).unwrap_err();
        // The snippet shown is the user's line, pointing at the argument.
        assert!(!error.contains("mod.nu"), "{call}: {error}");
        let argument = call.rsplit(' ').next().unwrap();
        assert!(
            error.contains(&format!("{call}\n")) && error.contains(argument),
            "{call}: {error}"
        );
    }
}
