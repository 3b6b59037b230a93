//! The taskservs a request brings: the ones it names with their dependencies and add-ons,
//! in the one install order ([`super::graph::order`]), and what their steps are told of
//! them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use orch_protocol::TaskservInfo;
use serde_json::{Value, json};

use super::{ExpandError, graph};
use crate::extensions::Registry;

/// Every taskserv `requested` brings, in install order: dependencies first, add-ons
/// after what they extend, otherwise by name.
pub fn install_order<'r>(
    requested: &[String],
    registry: &'r Registry,
) -> Result<Vec<&'r TaskservInfo>, ExpandError> {
    let mut needed: BTreeMap<&str, &TaskservInfo> = BTreeMap::new();
    let mut stack: Vec<&str> = requested.iter().map(String::as_str).collect();
    while let Some(name) = stack.pop() {
        if needed.contains_key(name) {
            continue;
        }
        let t = registry.taskserv(name).map_err(ExpandError::Unknown)?;
        stack.extend(t.dependencies.iter().map(String::as_str));
        stack.extend(t.addons.iter().map(String::as_str));
        needed.insert(&t.name, t);
    }
    let taskservs: Vec<&TaskservInfo> = needed.into_values().collect();
    let position: BTreeMap<&str, usize> = taskservs
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i))
        .collect();
    // What must be installed before each: its dependencies, and what it is an add-on of.
    let before: Vec<Vec<usize>> = taskservs
        .iter()
        .map(|t| {
            let extended = taskservs
                .iter()
                .filter(|o| o.addons.contains(&t.name))
                .map(|o| &o.name);
            let mut deps: Vec<usize> = Vec::new();
            for name in t.dependencies.iter().chain(extended) {
                let i = position[name.as_str()];
                if !deps.contains(&i) {
                    deps.push(i);
                }
            }
            deps
        })
        .collect();
    let order = graph::order(&before).map_err(|cycle| ExpandError::TaskservCycle {
        path: cycle
            .into_iter()
            .map(|i| taskservs[i].name.clone())
            .collect(),
    })?;
    Ok(order.into_iter().map(|i| taskservs[i]).collect())
}

/// `ctx.taskservs`: every taskserv of `order` by name.
pub fn context(order: &[&TaskservInfo]) -> Value {
    Value::Object(
        order
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    json!({"name": t.name, "version": t.version, "dir": t.dir}),
                )
            })
            .collect(),
    )
}

/// The path of `t`'s script for `purpose` (`install`, `check`, `rollback`), if it has one.
pub fn script(t: &TaskservInfo, purpose: &str) -> Option<PathBuf> {
    t.scripts.get(purpose).map(|f| t.dir.join(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry of the repository's own taskservs.
    fn registry() -> Registry {
        Registry::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../nushell-modules"))
    }

    fn names(requested: &[&str], registry: &Registry) -> Vec<String> {
        let requested: Vec<String> = requested.iter().map(|s| s.to_string()).collect();
        install_order(&requested, registry)
            .unwrap()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    #[test]
    fn dependencies_come_first_and_add_ons_after() {
        let registry = registry();
        assert_eq!(
            names(&["kubernetes"], &registry),
            ["containerd", "kubernetes", "cilium"]
        );
        assert_eq!(
            names(&["redis", "postgres"], &registry),
            ["postgres", "redis"]
        );
        assert_eq!(
            names(&["cilium", "redis"], &registry),
            ["containerd", "redis", "kubernetes", "cilium"]
        );
    }

    #[test]
    fn an_unknown_taskserv_and_a_cycle_are_named() {
        let registry = registry();
        let error = install_order(&["mysql".into()], &registry).unwrap_err();
        assert!(
            matches!(&error, ExpandError::Unknown(m) if m.starts_with("unknown taskserv `mysql` (known: ")),
            "{error}"
        );
        let dir = tempfile::tempdir().unwrap();
        for (name, deps) in [("a", "b"), ("b", "a")] {
            let t = dir.path().join("taskservs").join(name);
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("install.nu"), "").unwrap();
            std::fs::write(
                t.join("manifest.toml"),
                format!("name = \"{name}\"\nversion = \"1\"\ndescription = \"x\"\ndependencies = [\"{deps}\"]\n[scripts]\ninstall = \"install.nu\"\n"),
            )
            .unwrap();
        }
        let registry = Registry::load(dir.path());
        assert_eq!(registry.report().problems, []);
        let error = install_order(&["a".into()], &registry)
            .unwrap_err()
            .to_string();
        assert!(
            error == "the taskservs' dependencies form a cycle: a → b → a"
                || error == "the taskservs' dependencies form a cycle: b → a → b",
            "{error}"
        );
    }
}
