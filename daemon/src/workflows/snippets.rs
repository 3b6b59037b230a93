//! The Nushell code each kind of step runs. Paths are resolved by the daemon and written
//! into the code, because `use` needs a constant path; everything else reaches the code
//! as `$params` (the step context, docs/extensions.md).

use std::path::Path;

use orch_protocol::TaskservInfo;

/// A path as a single-quoted Nushell string literal (raw string when it holds a quote).
fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    if text.contains('\'') {
        format!("r#'{text}'#")
    } else {
        format!("'{text}'")
    }
}

/// The command a script module defines: its file stem (`install.nu` → `install`).
fn command_of(script: &Path) -> String {
    script
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Creates `$params.servers` (in parallel) with the provider module.
pub fn create_servers(provider_module: &Path) -> String {
    format!(
        "use {} *\n$params.servers | par-each {{|server| create-server $server $params }} | to json -r | print\n",
        quoted(provider_module)
    )
}

/// Deletes `$params.servers` (in parallel) with the provider module: in a workflow, the
/// provider deletes only what this step created and keeps what it found (docs/extensions.md);
/// prints what it did with each server.
pub fn delete_servers(provider_module: &Path) -> String {
    format!(
        "use {} *\n$params.servers | par-each {{|server| delete-server $server $params }} | each {{|r| $\"($r.hostname): ($r.reason)\" }} | str join \"\\n\" | print\n",
        quoted(provider_module)
    )
}

/// Runs taskserv scripts on `$params.servers` (in parallel across servers, in the given
/// order on each): for each `(taskserv name, scripts)`, every script of `scripts` in turn.
/// Each script gets `ctx` with `server` and `taskserv` set to the current ones.
pub fn run_taskserv_scripts(provider_module: &Path, plan: &[(String, Vec<&Path>)]) -> String {
    let parts: Vec<String> = plan
        .iter()
        .map(|(name, scripts)| script_calls(name, scripts))
        .collect();
    on_each_server(provider_module, &parts)
}

/// Where a server records which workflow step installed a taskserv (`<name>.created-by`).
const OWNERS_DIR: &str = "/var/lib/provisioning/taskservs";

/// Installs taskservs on `$params.servers` like [`run_taskserv_scripts`], each claiming
/// the taskserv on its server first: unless the server already records an owner, it
/// records this step (`<workflow>/<step>`), or `preexisting` when the taskserv's probe
/// passes already (installed outside any workflow). The record is written before the
/// install runs (a crash leaves the claim, which the step's retry finds as its own), with
/// an exclusive create, so two workflows cannot both claim it.
pub fn install_taskservs(provider_module: &Path, plan: &[(&TaskservInfo, Vec<&Path>)]) -> String {
    let parts: Vec<String> = plan
        .iter()
        .map(|(t, scripts)| {
            let claim = format!(
                "    let owner = (do $exec ($\"m=(sh-quote $mark)\\n\" + {}) | str trim)\n    if $owner != $mark {{ print $\"{}: already installed on ($server.hostname) \\(($owner)\\): adopted, this step's rollback keeps it\" }}\n",
                nu_raw(&claim_script(t)),
                t.name,
            );
            claim + &script_calls(&t.name, scripts)
        })
        .collect();
    on_each_server(provider_module, &parts)
}

/// Runs taskservs' rollback scripts on `$params.servers`, each only where the server
/// records this step as the taskserv's owner (see [`install_taskservs`]), then drops the
/// record; a taskserv another workflow installed, or found already there, is kept.
pub fn rollback_taskservs(provider_module: &Path, plan: &[(&TaskservInfo, Vec<&Path>)]) -> String {
    let parts: Vec<String> = plan
        .iter()
        .map(|(t, scripts)| {
            let file = sh_quote(&format!("{OWNERS_DIR}/{}.created-by", t.name));
            let calls = script_calls(&t.name, scripts).replace("\n    ", "\n        ");
            let code = format!(
                "    let owner = (do $exec {} | str trim)\n    if $owner == $mark {{\n    {calls}        do $exec {} | ignore\n    }} else {{\n        print $\"{}: kept on ($server.hostname): installed by ($owner | default -e 'something else'), not by this step \\(($mark)\\)\"\n    }}\n",
                nu_raw(&format!("cat {file} 2>/dev/null || true")),
                nu_raw(&format!("rm -f {file}")),
                t.name,
            );
            code
        })
        .collect();
    on_each_server(provider_module, &parts)
}

/// The shell script claiming a taskserv on a server; `$m` holds the step's mark. Prints
/// the owner.
fn claim_script(t: &TaskservInfo) -> String {
    let file = sh_quote(&format!("{OWNERS_DIR}/{}.created-by", t.name));
    let found = match &t.probe {
        Some(p) => format!(
            "out=$(timeout 20 sh -c {} 2>&1) && printf '%s' \"$out\" | grep -qF -- {}",
            sh_quote(&p.command),
            sh_quote(p.expect.as_deref().unwrap_or(""))
        ),
        None => "false".into(),
    };
    format!(
        "mkdir -p {OWNERS_DIR}\nif [ ! -e {file} ]; then\n  if {found}; then v=preexisting; else v=\"$m\"; fi\n  ( set -C; printf '%s\\n' \"$v\" > {file} ) 2>/dev/null || true\nfi\ncat {file}\n"
    )
}

/// The calls of a taskserv's scripts, one `do` block each.
fn script_calls(taskserv: &str, scripts: &[&Path]) -> String {
    scripts
        .iter()
        .map(|script| {
            format!(
                "    do {{\n        use {}\n        let ctx = ($params | upsert server $server | upsert taskserv ($params.taskservs | get {}))\n        let out = ({} $exec $ctx)\n        if $out != null {{ print ($out | to text) }}\n    }}\n",
                quoted(script),
                nu_string(taskserv),
                command_of(script),
            )
        })
        .collect()
}

/// Runs each part's code on every server of `$params.servers` (in parallel across
/// servers), with `$exec`, `$mark` (this step's mark) and `sh-quote` defined.
fn on_each_server(provider_module: &Path, parts: &[String]) -> String {
    let mut code = format!("use {} *\n", quoted(provider_module));
    code.push_str("def sh-quote [s: string]: nothing -> string { $\"'($s | str replace --all \"'\" \"'\\\\''\")'\" }\n");
    code.push_str(
        "let mark = $\"($params.workflow? | default '')/($params.step? | default '')\"\n",
    );
    code.push_str("$params.servers | par-each {|server|\n");
    code.push_str("    let exec = {|command| server-exec $server $command }\n");
    for part in parts {
        code.push_str(part);
    }
    code.push_str("} | ignore\n");
    code
}

/// A string quoted for `sh`.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A string as a Nushell raw string literal (`r#'...'#`, with enough `#`).
fn nu_raw(text: &str) -> String {
    let mut hashes = String::from("#");
    while text.contains(&format!("'{hashes}")) {
        hashes.push('#');
    }
    format!("r{hashes}'{text}'{hashes}")
}

/// Runs a cluster's setup script with a closure that executes on a node by hostname.
pub fn cluster_setup(provider_module: &Path, setup: &Path) -> String {
    format!(
        "use {} *\nuse {}\nlet exec = {{|host, command| server-exec ($params.node_servers | get $host) $command }}\nlet out = ({} $exec $params)\nif $out != null {{ print ($out | to text) }}\n",
        quoted(provider_module),
        quoted(setup),
        command_of(setup),
    )
}

/// A string as a Nushell double-quoted literal.
fn nu_string(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_names_are_quoted_for_nushell() {
        assert_eq!(quoted(Path::new("/a b/mod.nu")), "'/a b/mod.nu'");
        assert_eq!(quoted(Path::new("/it's/mod.nu")), "r#'/it's/mod.nu'#");
        assert_eq!(command_of(Path::new("/x/install.nu")), "install");
        let code = run_taskserv_scripts(
            Path::new("/p/mod.nu"),
            &[("redis".into(), vec![Path::new("/t/redis/install.nu")])],
        );
        assert!(code.contains("use '/t/redis/install.nu'"), "{code}");
        assert!(code.contains("get \"redis\""), "{code}");
    }

    #[test]
    fn installs_claim_before_they_run_and_rollbacks_need_the_claim() {
        let redis = TaskservInfo {
            name: "redis".into(),
            version: "7".into(),
            description: String::new(),
            dir: "/t/redis".into(),
            dependencies: Vec::new(),
            addons: Vec::new(),
            scripts: Default::default(),
            probe: Some(orch_protocol::Probe {
                command: "redis-cli ping".into(),
                expect: Some("PONG".into()),
                timeout: None,
            }),
            image: None,
        };
        let install = install_taskservs(
            Path::new("/p/mod.nu"),
            &[(&redis, vec![Path::new("/t/redis/install.nu")])],
        );
        let claim = install.find("set -C").expect("an exclusive claim");
        assert!(claim < install.find("use '/t/redis/install.nu'").unwrap());
        assert!(install.contains("sh -c 'redis-cli ping'"), "{install}");
        let rollback = rollback_taskservs(
            Path::new("/p/mod.nu"),
            &[(&redis, vec![Path::new("/t/redis/rollback.nu")])],
        );
        let owned = rollback.find("if $owner == $mark").expect("a check");
        assert!(owned < rollback.find("use '/t/redis/rollback.nu'").unwrap());
        assert_eq!(nu_raw("a'#b"), "r##'a'#b'##");
    }
}
