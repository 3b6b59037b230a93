//! The extensions registry: providers, taskservs and cluster definitions read from the
//! `nushell-modules/` directory (see docs/extensions.md for the manifest formats).
//!
//! Each extension is a directory with a `manifest.toml`. A manifest that cannot be read
//! or is invalid becomes a [`ManifestProblem`] (its path and what is wrong) and the others
//! still load. The registry is read afresh for each request that needs it, so an edited
//! manifest counts at once; reading it takes well under a millisecond per manifest, a
//! few hundred microseconds in all, so a request reads it only when it needs it
//! ([`Extensions`]: a batch of plain commands never does).

mod manifest;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use orch_protocol::{ClusterInfo, ExtensionsReport, ManifestProblem, ProviderInfo, TaskservInfo};

/// The registry of a directory, read the first time it is asked for.
#[derive(Debug)]
pub struct Extensions {
    modules_dir: PathBuf,
    loaded: std::sync::OnceLock<Registry>,
}

impl Extensions {
    /// The extensions under `modules_dir`, not read yet.
    pub fn under(modules_dir: &Path) -> Extensions {
        Extensions {
            modules_dir: modules_dir.to_path_buf(),
            loaded: std::sync::OnceLock::new(),
        }
    }

    /// Extensions already read.
    pub fn read(registry: Registry) -> Extensions {
        Extensions {
            modules_dir: registry.modules_dir.clone(),
            loaded: std::sync::OnceLock::from(registry),
        }
    }

    /// Their directory (without reading them).
    pub fn modules_dir(&self) -> &Path {
        &self.modules_dir
    }

    /// The registry, read now if it was not yet.
    pub fn registry(&self) -> &Registry {
        self.loaded
            .get_or_init(|| Registry::load(&self.modules_dir))
    }

    /// Whether the registry was read.
    #[cfg(test)]
    pub fn was_read(&self) -> bool {
        self.loaded.get().is_some()
    }
}

/// The loaded registry, with lookups by name.
#[derive(Debug, Clone)]
pub struct Registry {
    /// The directory it was read from.
    pub modules_dir: PathBuf,
    providers: BTreeMap<String, ProviderInfo>,
    taskservs: BTreeMap<String, TaskservInfo>,
    clusters: BTreeMap<String, ClusterInfo>,
    problems: Vec<ManifestProblem>,
    load_micros: u64,
}

impl Registry {
    /// Reads every manifest under `modules_dir`.
    pub fn load(modules_dir: &Path) -> Registry {
        let started = Instant::now();
        let mut problems = Vec::new();
        let providers = load_kind(modules_dir, "providers", manifest::provider, &mut problems);
        let mut taskservs = load_kind(modules_dir, "taskservs", manifest::taskserv, &mut problems);
        let mut clusters = load_kind(modules_dir, "clusters", manifest::cluster, &mut problems);
        drop_dangling_taskservs(&mut taskservs, &mut problems);
        clusters.retain(|_, cluster| {
            let unknown = cluster
                .nodes
                .iter()
                .flat_map(|n| n.taskservs.iter().map(move |t| (n, t)))
                .find(|(_, t)| !taskservs.contains_key(*t));
            match unknown {
                Some((node, t)) => {
                    problems.push(ManifestProblem {
                        path: cluster.dir.join("manifest.toml"),
                        problem: format!("node `{}` uses unknown taskserv `{t}`", node.hostname),
                    });
                    false
                }
                None => true,
            }
        });
        Registry {
            modules_dir: modules_dir.to_path_buf(),
            providers,
            taskservs,
            clusters,
            problems,
            load_micros: started.elapsed().as_micros() as u64,
        }
    }

    /// A provider by name, or an error listing the known ones.
    pub fn provider(&self, name: &str) -> Result<&ProviderInfo, String> {
        self.providers
            .get(name)
            .ok_or_else(|| unknown("provider", name, self.providers.keys()))
    }

    /// A taskserv by name, or an error listing the known ones.
    pub fn taskserv(&self, name: &str) -> Result<&TaskservInfo, String> {
        self.taskservs
            .get(name)
            .ok_or_else(|| unknown("taskserv", name, self.taskservs.keys()))
    }

    /// A cluster definition by name, or an error listing the known ones.
    pub fn cluster(&self, name: &str) -> Result<&ClusterInfo, String> {
        self.clusters
            .get(name)
            .ok_or_else(|| unknown("cluster definition", name, self.clusters.keys()))
    }

    /// Everything, for `orch extensions` and `GET /extensions/...`.
    pub fn report(&self) -> ExtensionsReport {
        ExtensionsReport {
            modules_dir: self.modules_dir.clone(),
            providers: self.providers.values().cloned().collect(),
            taskservs: self.taskservs.values().cloned().collect(),
            clusters: self.clusters.values().cloned().collect(),
            problems: self.problems.clone(),
            load_micros: self.load_micros,
        }
    }
}

/// "unknown taskserv `x` (known: a, b, c)", or, for a name that could not name an
/// extension directory at all, why.
fn unknown<'a>(what: &str, name: &str, known: impl Iterator<Item = &'a String>) -> String {
    if !crate::workflows::names::is_plain(name) {
        return format!(
            "`{}` is not a valid {what} name (a plain name: letters, digits, `-`, `_` or `.`; no `/`)",
            crate::workflows::names::shown(name)
        );
    }
    let known: Vec<&str> = known.map(String::as_str).collect();
    if known.is_empty() {
        format!("unknown {what} `{name}`: none is installed")
    } else {
        format!("unknown {what} `{name}` (known: {})", known.join(", "))
    }
}

/// Loads every `<modules>/<kind>/<name>/manifest.toml` with `parse`.
fn load_kind<T>(
    modules_dir: &Path,
    kind: &str,
    parse: fn(&Path, &str) -> Result<T, String>,
    problems: &mut Vec<ManifestProblem>,
) -> BTreeMap<String, T> {
    let mut loaded = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(modules_dir.join(kind)) else {
        return loaded;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let path = dir.join("manifest.toml");
        if !path.exists() {
            continue; // a helper directory (templates, shared code), not an extension
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|text| parse(&dir, &text))
        {
            Ok(item) => {
                loaded.insert(name, item);
            }
            Err(problem) => problems.push(ManifestProblem { path, problem }),
        }
    }
    loaded
}

/// Removes taskservs whose dependencies or add-ons are unknown (repeatedly, since a
/// removed one may be another's dependency), reporting each.
fn drop_dangling_taskservs(
    taskservs: &mut BTreeMap<String, TaskservInfo>,
    problems: &mut Vec<ManifestProblem>,
) {
    loop {
        let dangling = taskservs.values().find_map(|t| {
            t.dependencies
                .iter()
                .map(|d| ("dependency", d))
                .chain(t.addons.iter().map(|a| ("add-on", a)))
                .find(|(_, name)| !taskservs.contains_key(*name))
                .map(|(role, name)| (t.name.clone(), t.dir.clone(), role, name.clone()))
        });
        let Some((taskserv, dir, role, missing)) = dangling else {
            return;
        };
        taskservs.remove(&taskserv);
        problems.push(ManifestProblem {
            path: dir.join("manifest.toml"),
            problem: format!("its {role} `{missing}` is not a known taskserv"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_bad_manifest_is_reported_and_the_others_load() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "taskservs/redis/manifest.toml",
            "name = \"redis\"\nversion = \"7\"\n[scripts]\ninstall = \"install.nu\"\n",
        );
        write(
            root,
            "taskservs/redis/install.nu",
            "export def main [exec, ctx] {}\n",
        );
        write(
            root,
            "taskservs/broken/manifest.toml",
            "name = \"broken\"\nversion = \n",
        );
        write(
            root,
            "taskservs/typo/manifest.toml",
            "name = \"typo\"\nversion = \"1\"\ndependncies = []\n[scripts]\ninstall = \"install.nu\"\n",
        );
        write(
            root,
            "taskservs/orphan/manifest.toml",
            "name = \"orphan\"\nversion = \"1\"\ndependencies = [\"nope\"]\n[scripts]\ninstall = \"install.nu\"\n",
        );
        write(root, "taskservs/orphan/install.nu", "");
        let registry = Registry::load(root);
        let report = registry.report();
        let names: Vec<_> = report.taskservs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["redis"]);
        let problems: Vec<String> = report
            .problems
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p.path.strip_prefix(root).unwrap().display(),
                    p.problem
                )
            })
            .collect();
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("taskservs/broken/manifest.toml: "),
            "{problems:#?}"
        );
        assert!(problems[1].contains("dependncies"), "{problems:#?}");
        assert!(
            problems[2].contains("`nope` is not a known taskserv"),
            "{problems:#?}"
        );
        assert!(
            registry
                .taskserv("postgres")
                .unwrap_err()
                .contains("known: redis")
        );
    }
}
