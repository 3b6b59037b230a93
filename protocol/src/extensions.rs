//! The extensions registry as the daemon reports it: providers, taskservs and cluster
//! definitions read from the modules' manifests, and the manifests that could not be read.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A problem with one extension's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ManifestProblem {
    /// The manifest's path.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: String,
}

/// A provider, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProviderInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its Nushell module, relative to `dir`.
    pub module: String,
}

/// A taskserv, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskservInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Taskservs installed before it on the same server.
    pub dependencies: Vec<String>,
    /// Taskservs installed after it whenever it is requested.
    pub addons: Vec<String>,
    /// Its scripts by purpose (`install`, `check`, `test`, `rollback`), relative to `dir`.
    pub scripts: std::collections::BTreeMap<String, String>,
    /// Its readiness probe, a shell command run on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
    /// The image its test environments use (pulled when a registry is reachable); none:
    /// the base image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A readiness probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// The shell command.
    pub command: String,
    /// A text the output must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
    /// How long to keep trying (`30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// A node of a cluster definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClusterNode {
    /// Its hostname.
    pub hostname: String,
    /// Its role.
    #[serde(default)]
    pub role: String,
    /// The taskservs it runs.
    #[serde(default)]
    pub taskservs: Vec<String>,
}

/// A cluster definition, as its manifest describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClusterInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is.
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
    /// Its nodes.
    pub nodes: Vec<ClusterNode>,
    /// Its setup script, relative to `dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
}

/// The whole extensions registry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ExtensionsReport {
    /// The directory they were read from.
    pub modules_dir: PathBuf,
    /// Providers, by name.
    pub providers: Vec<ProviderInfo>,
    /// Taskservs, by name.
    pub taskservs: Vec<TaskservInfo>,
    /// Cluster definitions, by name.
    pub clusters: Vec<ClusterInfo>,
    /// Manifests that could not be loaded.
    pub problems: Vec<ManifestProblem>,
    /// How long reading them took, in microseconds.
    pub load_micros: u64,
}
