//! Parsing and checking one `manifest.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use orch_protocol::{ClusterInfo, ClusterNode, Probe, ProviderInfo, TaskservInfo};
use serde::Deserialize;

/// The fields every manifest has.
fn check_identity(dir: &Path, name: &str, version: &str) -> Result<(), String> {
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    if name != dir_name {
        return Err(format!(
            "`name` is `{name}` but the directory is `{dir_name}`: they must be equal"
        ));
    }
    if version.trim().is_empty() {
        return Err("`version` is empty".into());
    }
    Ok(())
}

/// A script named by a manifest must exist in the extension's directory.
fn check_script(dir: &Path, field: &str, file: &str) -> Result<(), String> {
    if file.contains("..") || Path::new(file).is_absolute() {
        return Err(format!(
            "`{field}` must be a file name inside the directory, not `{file}`"
        ));
    }
    if !dir.join(file).is_file() {
        return Err(format!("`{field}` names `{file}`, which does not exist"));
    }
    Ok(())
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| e.to_string().trim_end().replace('\n', " "))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderManifest {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_module")]
    module: String,
    /// Provider-specific defaults (endpoints, regions): documentation for users, read by
    /// the provider's own module, accepted here.
    #[serde(default, rename = "config")]
    _config: Option<toml::Table>,
}

fn default_module() -> String {
    "mod.nu".into()
}

/// A provider's manifest.
pub fn provider(dir: &Path, text: &str) -> Result<ProviderInfo, String> {
    let m: ProviderManifest = parse(text)?;
    check_identity(dir, &m.name, &m.version)?;
    check_script(dir, "module", &m.module)?;
    Ok(ProviderInfo {
        name: m.name,
        version: m.version,
        description: m.description,
        dir: dir.to_path_buf(),
        module: m.module,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskservManifest {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    dependencies: Vec<String>,
    #[serde(default)]
    addons: Vec<String>,
    scripts: Scripts,
    #[serde(default)]
    probe: Option<Probe>,
    #[serde(default)]
    image: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scripts {
    install: String,
    check: Option<String>,
    test: Option<String>,
    rollback: Option<String>,
}

/// A taskserv's manifest.
pub fn taskserv(dir: &Path, text: &str) -> Result<TaskservInfo, String> {
    let m: TaskservManifest = parse(text)?;
    check_identity(dir, &m.name, &m.version)?;
    let mut scripts = BTreeMap::new();
    let named = [
        ("install", Some(m.scripts.install)),
        ("check", m.scripts.check),
        ("test", m.scripts.test),
        ("rollback", m.scripts.rollback),
    ];
    for (purpose, file) in named {
        if let Some(file) = file {
            check_script(dir, &format!("scripts.{purpose}"), &file)?;
            scripts.insert(purpose.to_string(), file);
        }
    }
    if let Some(own) = m
        .dependencies
        .iter()
        .chain(&m.addons)
        .find(|d| **d == m.name)
    {
        return Err(format!(
            "it lists itself (`{own}`) as a dependency or add-on"
        ));
    }
    if let Some(probe) = &m.probe {
        if probe.command.trim().is_empty() {
            return Err("`probe.command` is empty".into());
        }
        if let Some(t) = &probe.timeout {
            humantime::parse_duration(t)
                .map_err(|e| format!("`probe.timeout` `{t}` is not a duration: {e}"))?;
        }
    }
    Ok(TaskservInfo {
        name: m.name,
        version: m.version,
        description: m.description,
        dir: dir.to_path_buf(),
        dependencies: m.dependencies,
        addons: m.addons,
        scripts,
        probe: m.probe,
        image: m.image,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterManifest {
    name: String,
    version: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    setup: Option<String>,
    nodes: Vec<ClusterNode>,
}

/// A cluster definition's manifest.
pub fn cluster(dir: &Path, text: &str) -> Result<ClusterInfo, String> {
    let m: ClusterManifest = parse(text)?;
    check_identity(dir, &m.name, &m.version)?;
    if m.nodes.is_empty() {
        return Err("`nodes` is empty: a cluster needs at least one node".into());
    }
    if let Some(bad) = m
        .nodes
        .iter()
        .find(|n| !crate::workflows::names::is_hostname(&n.hostname))
    {
        return Err(format!(
            "node hostname `{}` is not valid: {}",
            crate::workflows::names::shown(&bad.hostname),
            crate::workflows::names::HOSTNAME_RULE
        ));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = m.nodes.iter().find(|n| !seen.insert(&n.hostname)) {
        return Err(format!("node hostname `{}` appears twice", dup.hostname));
    }
    if let Some(setup) = &m.setup {
        check_script(dir, "setup", setup)?;
    }
    Ok(ClusterInfo {
        name: m.name,
        version: m.version,
        description: m.description,
        dir: dir.to_path_buf(),
        nodes: m.nodes,
        setup: m.setup,
    })
}
