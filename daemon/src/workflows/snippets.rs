//! The Nushell code each kind of step runs. Paths are resolved by the daemon and written
//! into the code, because `use` needs a constant path; everything else reaches the code
//! as `$params` (the step context, docs/extensions.md).

use std::path::Path;

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

/// Deletes `$params.servers` (in parallel) with the provider module.
pub fn delete_servers(provider_module: &Path) -> String {
    format!(
        "use {} *\n$params.servers | par-each {{|server| delete-server $server $params }} | ignore\nprint $\"deleted ($params.servers | get hostname | str join ', ')\"\n",
        quoted(provider_module)
    )
}

/// Runs taskserv scripts on `$params.servers` (in parallel across servers, in the given
/// order on each): for each `(taskserv name, scripts)`, every script of `scripts` in turn.
/// Each script gets `ctx` with `server` and `taskserv` set to the current ones.
pub fn run_taskserv_scripts(provider_module: &Path, plan: &[(String, Vec<&Path>)]) -> String {
    let mut code = format!("use {} *\n", quoted(provider_module));
    code.push_str("$params.servers | par-each {|server|\n");
    code.push_str("    let exec = {|command| server-exec $server $command }\n");
    for (taskserv, scripts) in plan {
        for script in scripts {
            code.push_str(&format!(
                "    do {{\n        use {}\n        let ctx = ($params | upsert server $server | upsert taskserv ($params.taskservs | get {}))\n        let out = ({} $exec $ctx)\n        if $out != null {{ print ($out | to text) }}\n    }}\n",
                quoted(script),
                nu_string(taskserv),
                command_of(script),
            ));
        }
    }
    code.push_str("} | ignore\n");
    code
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
}
