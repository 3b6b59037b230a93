//! What a request becomes: its topology (a single taskserv and a server are one-node
//! topologies) and, for each node, its taskservs in install order, its image and its
//! limits.

use orch_protocol::{EnvNode, EnvRequest, EnvSpec, ProviderInfo, Topology, TopologyNode};

use super::contract::PROVIDER;
use crate::extensions::Registry;
use crate::workflows::install_order;

/// The environment variable naming the base image (a node's image when nothing else
/// names one) instead of the `local` provider's default.
pub const BASE_IMAGE_ENV: &str = "PROVISIONING_BASE_IMAGE";

/// The kind of environment a request asks for (its record's `kind`).
pub fn kind(spec: &EnvSpec) -> &'static str {
    match spec {
        EnvSpec::Single { .. } => "single",
        EnvSpec::Server { .. } => "server",
        EnvSpec::Cluster { .. } => "cluster",
    }
}

/// The environment's nodes and checks, as a topology.
pub fn topology(spec: &EnvSpec) -> Topology {
    match spec {
        EnvSpec::Single { taskserv } => single_node(taskserv, std::slice::from_ref(taskserv)),
        EnvSpec::Server { name, taskservs } => single_node(name, taskservs),
        EnvSpec::Cluster { topology, .. } => topology.clone(),
    }
}

fn single_node(name: &str, taskservs: &[String]) -> Topology {
    Topology {
        name: name.into(),
        description: String::new(),
        cluster_type: String::new(),
        needs_network: false,
        nodes: vec![TopologyNode {
            name: name.into(),
            role: "server".into(),
            taskservs: taskservs.to_vec(),
            resources: None,
            image: None,
        }],
        checks: Vec::new(),
    }
}

/// A node's install order, image and limits (its container is named once the
/// environment has its id).
pub fn node(
    node: &TopologyNode,
    request: &EnvRequest,
    registry: &Registry,
) -> Result<EnvNode, String> {
    let order = install_order(&node.taskservs, registry)?;
    let configured = order.iter().find_map(|t| t.image.as_deref());
    let named = [request.image.as_deref(), node.image.as_deref(), configured]
        .into_iter()
        .flatten()
        .next();
    // The base image is looked up only for a node that names none.
    let image = match named {
        Some(image) => image.to_string(),
        None => base_image(registry)?,
    };
    Ok(EnvNode {
        name: node.name.clone(),
        role: node.role.clone(),
        taskservs: order.iter().map(|t| t.name.clone()).collect(),
        container: String::new(),
        image,
        resources: node.resources.clone().or_else(|| request.resources.clone()),
    })
}

/// The base image: [`BASE_IMAGE_ENV`], else the `local` provider's default (its
/// manifest's `[config] image`, which the provider reads too: one value for both).
fn base_image(registry: &Registry) -> Result<String, String> {
    match std::env::var(BASE_IMAGE_ENV) {
        Ok(image) if !image.is_empty() => Ok(image),
        _ => provider_image(registry.provider(PROVIDER)?),
    }
}

/// `[config] image` of a provider's manifest.
fn provider_image(provider: &ProviderInfo) -> Result<String, String> {
    let path = provider.dir.join("manifest.toml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let manifest: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    manifest
        .get("config")
        .and_then(|c| c.get("image"))
        .and_then(|i| i.as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{} sets no `[config] image`", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(local_manifest: &str) -> (tempfile::TempDir, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("providers/local");
        std::fs::create_dir_all(&local).unwrap();
        std::fs::write(local.join("manifest.toml"), local_manifest).unwrap();
        std::fs::write(local.join("mod.nu"), "").unwrap();
        let redis = dir.path().join("taskservs/redis");
        std::fs::create_dir_all(&redis).unwrap();
        std::fs::write(
            redis.join("manifest.toml"),
            "name = \"redis\"\nversion = \"7\"\n[scripts]\ninstall = \"install.nu\"\n",
        )
        .unwrap();
        std::fs::write(redis.join("install.nu"), "").unwrap();
        let registry = Registry::load(dir.path());
        (dir, registry)
    }

    const LOCAL: &str = "name = \"local\"\nversion = \"1\"\n[config]\nimage = \"base:1\"\n";

    fn request(image: Option<&str>) -> EnvRequest {
        EnvRequest {
            env: EnvSpec::Single {
                taskserv: "redis".into(),
            },
            auto_start: false,
            auto_cleanup: false,
            ttl_ms: None,
            resources: None,
            image: image.map(str::to_string),
        }
    }

    #[test]
    fn the_default_image_is_the_local_providers() {
        let (_dir, registry) = modules(LOCAL);
        assert_eq!(
            provider_image(registry.provider("local").unwrap()).unwrap(),
            "base:1"
        );
        let (_dir, registry) = modules("name = \"local\"\nversion = \"1\"\n");
        let error = provider_image(registry.provider("local").unwrap()).unwrap_err();
        assert!(error.contains("sets no `[config] image`"), "{error}");
    }

    #[test]
    fn the_requests_image_wins_then_the_nodes_then_the_base() {
        let (_dir, registry) = modules(LOCAL);
        let mut topology = topology(&request(None).env);
        let planned = node(&topology.nodes[0], &request(None), &registry).unwrap();
        assert_eq!(
            (planned.image.as_str(), planned.taskservs.len()),
            ("base:1", 1)
        );
        topology.nodes[0].image = Some("node:2".into());
        let planned = node(&topology.nodes[0], &request(None), &registry).unwrap();
        assert_eq!(planned.image, "node:2");
        let planned = node(&topology.nodes[0], &request(Some("req:3")), &registry).unwrap();
        assert_eq!(planned.image, "req:3");
        // A manifest without a default image matters only to a node that names none.
        let (_dir, bare) = modules("name = \"local\"\nversion = \"1\"\n");
        let planned = node(&topology.nodes[0], &request(Some("req:3")), &bare).unwrap();
        assert_eq!(planned.image, "req:3");
        topology.nodes[0].image = None;
        let error = node(&topology.nodes[0], &request(None), &bare).unwrap_err();
        assert!(error.contains("sets no `[config] image`"), "{error}");
    }

    #[test]
    fn single_and_server_requests_are_one_node_topologies() {
        let server = EnvSpec::Server {
            name: "web-01".into(),
            taskservs: vec!["redis".into(), "postgres".into()],
        };
        let topology = topology(&server);
        assert_eq!((kind(&server), server.name()), ("server", "web-01"));
        assert_eq!(topology.nodes.len(), 1);
        assert_eq!(topology.nodes[0].role, "server");
        assert_eq!(topology.nodes[0].taskservs, ["redis", "postgres"]);
        assert_eq!(kind(&request(None).env), "single");
    }
}
