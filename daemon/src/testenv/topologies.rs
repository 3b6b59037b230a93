//! Topology templates: `nushell-modules/topologies/<name>.toml`, each a [`Topology`].

use std::path::Path;

use orch_protocol::{ErrorKind, ErrorReply, ManifestProblem, TopologiesReport, Topology};

use crate::extensions::Registry;

/// Reads every template; one that cannot be read is reported and the others load.
pub fn load(modules_dir: &Path) -> TopologiesReport {
    let mut report = TopologiesReport::default();
    let Ok(entries) = std::fs::read_dir(modules_dir.join("topologies")) else {
        return report;
    };
    let mut paths: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        match read(&path) {
            Ok(topology) => report.topologies.push(topology),
            Err(problem) => report.problems.push(ManifestProblem { path, problem }),
        }
    }
    report
}

fn read(path: &Path) -> Result<Topology, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let topology: Topology =
        toml::from_str(&text).map_err(|e| e.to_string().trim_end().replace('\n', " "))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    if topology.name != stem {
        return Err(format!(
            "`name` is `{}` but the file is `{stem}.toml`: they must be equal",
            topology.name
        ));
    }
    check(&topology)?;
    Ok(topology)
}

/// Refuses a name from a request that is not a plain name (it may end up in a path, a
/// container name or a script's context): 1 to 63 letters, digits, '-', '_' or '.', not
/// starting with '.' or '-' (so no '/', no '..', no absolute path).
pub fn plain_name(field: &str, name: &str) -> Result<(), ErrorReply> {
    let plain = (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with(['.', '-']);
    if plain {
        return Ok(());
    }
    Err(ErrorReply::field(
        ErrorKind::BadRequest,
        field,
        format!(
            "`{field}` is `{}`: not a plain name (1 to 63 letters, digits, '-', '_' or '.', not starting with '.' or '-'; no '/')",
            name.escape_debug()
        ),
    ))
}

/// Checks a topology on its own: nodes present, names unique and usable as hostnames,
/// checks naming existing nodes.
pub fn check(topology: &Topology) -> Result<(), String> {
    if topology.nodes.is_empty() {
        return Err(format!("topology `{}` has no nodes", topology.name));
    }
    let mut seen = std::collections::HashSet::new();
    for node in &topology.nodes {
        let valid = !node.name.is_empty()
            && node.name.len() <= 63
            && node
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !node.name.starts_with('-');
        if !valid {
            return Err(format!(
                "node name `{}` is not a valid hostname (letters, digits and '-', at most 63)",
                node.name
            ));
        }
        if !seen.insert(&node.name) {
            return Err(format!("node name `{}` appears twice", node.name));
        }
    }
    if let Some(check) = topology.checks.iter().find(|c| !seen.contains(&c.node)) {
        return Err(format!(
            "a check runs on `{}`, which is not a node",
            check.node
        ));
    }
    Ok(())
}

/// Checks that every taskserv a topology uses is known.
pub fn check_taskservs(topology: &Topology, registry: &Registry) -> Result<(), String> {
    for node in &topology.nodes {
        for taskserv in &node.taskservs {
            registry
                .taskserv(taskserv)
                .map_err(|e| format!("node `{}`: {e}", node.name))?;
        }
    }
    Ok(())
}
