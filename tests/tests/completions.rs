//! Completions through `nu --ide-complete` with the real plugin and daemon: the commands
//! that take task ids offer the daemon's tasks (with their status and command as the
//! description, which the IDE output leaves out), filtered by what is typed.

use orch_e2e::Daemon;

#[test]
fn the_commands_that_take_task_ids_complete_them_from_the_daemon() {
    let daemon = Daemon::start(&["--parallel", "1"]);
    let nu = daemon.nu();
    nu.run(
        "orch submit sleep 600 | ignore; 1..11 | each { {command: [true]} } | orch submit | ignore",
    );
    let all: Vec<String> = (1..=12).map(|id| id.to_string()).collect();
    for line in [
        "orch cancel ",
        "orch retry ",
        "orch task ",
        "orch logs ",
        "orch wait ",
        "orch stash ",
        "orch enqueue ",
        "orch edit ",
    ] {
        let mut offered = nu.complete(line);
        offered.sort_by_key(|id| id.parse::<u64>().unwrap_or(u64::MAX));
        assert_eq!(offered, all, "{line}");
    }
    let mut ones = nu.complete("orch cancel 1");
    ones.sort();
    assert_eq!(ones, ["1", "10", "11", "12"]);
    // After a switch, the ids again; a flag's value is not a task id.
    assert!(
        nu.complete("orch logs --follow ")
            .contains(&"12".to_string())
    );
    assert!(
        !nu.complete("orch wait --timeout ")
            .contains(&"12".to_string())
    );
    nu.run("orch cancel 1 | ignore");
}

#[test]
fn workflow_and_environment_ids_and_task_statuses_complete() {
    let Some((_daemon, nu, _sweeper)) = orch_e2e::containers::env_daemon(&[]) else {
        return;
    };
    let submit = |name: &str| {
        let workflow = format!(
            r#"{{"name": "{name}", "operations": [{{"id": "a", "type": "nu", "nu": "sleep 0ms"}}]}}"#
        );
        nu.json(&format!(
            "'{workflow}' | from json | orch workflow submit batch | get id"
        ))
    };
    let (first, second) = (submit("one"), submit("two"));
    let mut workflows = nu.complete("orch workflow show ");
    workflows.sort();
    assert_eq!(workflows, [first.to_string(), second.to_string()]);
    assert_eq!(nu.complete("orch workflow cancel ").len(), 2);
    assert_eq!(nu.complete("orch workflow rollback ").len(), 2);
    // A created environment (no container started): its id, for each command about one.
    let env = nu
        .json("orch test env create single redis | get id")
        .to_string();
    for line in [
        "orch test env show ",
        "orch test env run ",
        "orch test env delete ",
        "orch test env logs ",
    ] {
        assert_eq!(nu.complete(line), std::slice::from_ref(&env), "{line}");
    }
    let mut statuses = nu.complete("orch tasks --status ");
    statuses.sort();
    assert_eq!(
        statuses,
        [
            "blocked",
            "cancelled",
            "delayed",
            "dependency_failed",
            "failed",
            "queued",
            "retry_waiting",
            "running",
            "stashed",
            "succeeded"
        ]
    );
    assert_eq!(nu.complete("orch tasks --status re"), ["retry_waiting"]);
    nu.run(&format!("orch test env delete {env} | ignore"));
}

#[test]
fn the_daemons_completion_script_for_nu_completes_its_flags_and_tools() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    let out = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .args(["completions", "nu"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let script = daemon.dir().join("orchestrator-completions.nu");
    std::fs::write(&script, &out.stdout).unwrap();
    let source = format!("source '{}'\n", script.display());
    let mut stores = nu.complete(&format!(
        "{source}provisioning-orchestrator --storage-type "
    ));
    stores.sort();
    assert_eq!(stores, ["postgres", "redb"]);
    let mut shells = nu.complete(&format!("{source}provisioning-orchestrator completions "));
    shells.sort();
    assert_eq!(
        shells,
        ["bash", "elvish", "fish", "nu", "powershell", "zsh"]
    );
    // Another shell's script, and a shell it does not know (named with the choices).
    let bash = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bash.stdout).contains("--data-dir"));
    let unknown = std::process::Command::new(orch_e2e::binary("provisioning-orchestrator"))
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("possible values: nu, bash"),
        "{unknown:?}"
    );
}

#[test]
fn arguments_that_name_extensions_topologies_labels_and_infras_complete() {
    let daemon = Daemon::start(&[]);
    let nu = daemon.nu();
    // A workspace with an infra in infra/ and one beside it with its settings.
    let workspace = daemon.dir().join("workspace");
    std::fs::create_dir_all(workspace.join("infra/lab")).unwrap();
    std::fs::create_dir_all(workspace.join("prod")).unwrap();
    std::fs::write(workspace.join("prod/settings.toml"), "").unwrap();
    std::fs::create_dir_all(workspace.join("notes")).unwrap();
    nu.run("orch submit --label db true | ignore; orch submit --label web true | ignore");
    let sorted = |line: &str| {
        let mut offered = nu.complete(line);
        offered.sort();
        offered
    };
    let taskservs = sorted("orch workflow submit taskserv ");
    for name in ["etcd", "postgres", "redis"] {
        assert!(taskservs.contains(&name.to_string()), "{taskservs:?}");
    }
    assert_eq!(
        sorted("orch test env create "),
        ["cluster", "server", "single"]
    );
    assert_eq!(sorted("orch test env create single red"), ["redis"]);
    assert!(
        sorted("orch test env create server red").is_empty(),
        "a server's name is free"
    );
    let clusters = sorted("orch workflow submit cluster ");
    assert!(
        clusters.contains(&"etcd-cluster".to_string()),
        "{clusters:?}"
    );
    let providers = sorted("orch workflow submit cluster etcd-cluster --provider ");
    assert!(providers.contains(&"local".to_string()), "{providers:?}");
    let topologies = sorted("orch test topology show ");
    assert!(
        topologies.contains(&"etcd_cluster".to_string()),
        "{topologies:?}"
    );
    assert_eq!(
        sorted("orch test env create cluster x --topology etcd_c"),
        ["etcd_cluster"]
    );
    assert_eq!(sorted("orch tasks --label "), ["db", "web"]);
    assert_eq!(sorted("orch clean --label w"), ["web"]);
    // The workspace: $env.PROVISIONING_WORKSPACE, else the current directory.
    let in_workspace = |line: &str, env: &[(&str, &std::path::Path)], cwd: &std::path::Path| {
        let mut offered = nu.complete_in(line, cwd, env);
        offered.sort();
        offered
    };
    let line = "orch workflow submit servers --infra ";
    let set = [("PROVISIONING_WORKSPACE", workspace.as_path())];
    assert_eq!(in_workspace(line, &set, daemon.dir()), ["lab", "prod"]);
    assert_eq!(in_workspace(line, &[], &workspace), ["lab", "prod"]);
    // The module's wrappers complete the same names.
    let module = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../nushell-modules/provisioning"
    );
    let quick = sorted(&format!("use {module}\nprovisioning test quick "));
    assert!(quick.contains(&"redis".to_string()), "{quick:?}");
    let topology = sorted(&format!(
        "use {module}\nprovisioning test topology load etcd_c"
    ));
    assert_eq!(topology, ["etcd_cluster"]);
    let module_infras = format!("use {module}\nprovisioning taskserv create redis --infra ");
    assert_eq!(
        in_workspace(&module_infras, &set, daemon.dir()),
        ["lab", "prod"]
    );
}
