//! Test environments: containers on the local engine in which taskservs are installed,
//! probed and tested (a single taskserv, a server with several, or a cluster topology).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use crate::ids::EnvId;

/// Resource limits of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPUs (fractions allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// Memory in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
}

/// A node of a topology.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TopologyNode {
    /// Its name (container hostname, reachable by it from the other nodes).
    pub name: String,
    /// Its role in the cluster.
    #[serde(default)]
    pub role: String,
    /// Taskservs installed on it (with their dependencies, in dependency order).
    #[serde(default)]
    pub taskservs: Vec<String>,
    /// Its resource limits (default: the request's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Its image (default: the request's, a taskserv's, else the base image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// A check run once every node is ready: a shell command on a node, with the text its
/// output must contain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TopologyCheck {
    /// The node it runs on.
    pub node: String,
    /// The shell command.
    pub command: String,
    /// A text the output must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
}

/// A multi-node topology template (`nushell-modules/topologies/<name>.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// The kind of cluster (`kubernetes`, `etcd`, ...).
    #[serde(default)]
    pub cluster_type: String,
    /// True when its installation needs the internet (it cannot become ready here).
    #[serde(default)]
    pub needs_network: bool,
    /// Its nodes.
    pub nodes: Vec<TopologyNode>,
    /// Cluster-wide readiness checks, in order, after every node's probes pass.
    #[serde(default)]
    pub checks: Vec<TopologyCheck>,
}

/// What kind of environment to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum EnvSpec {
    /// One container, one taskserv.
    Single {
        /// The taskserv.
        taskserv: String,
    },
    /// One container with several taskservs.
    Server {
        /// The server's name.
        name: String,
        /// Its taskservs.
        taskservs: Vec<String>,
    },
    /// Several containers from a topology, on a network of their own.
    Cluster {
        /// The cluster's name.
        name: String,
        /// Its topology (`orch test topology show NAME`).
        topology: Topology,
    },
}

impl EnvSpec {
    /// The environment's name: the taskserv of a single one, else the name given.
    pub fn name(&self) -> &str {
        match self {
            EnvSpec::Single { taskserv } => taskserv,
            EnvSpec::Server { name, .. } | EnvSpec::Cluster { name, .. } => name,
        }
    }
}

/// A request to create a test environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EnvRequest {
    /// What to create.
    pub env: EnvSpec,
    /// Start it (install, wait until ready) right after creating it.
    #[serde(default)]
    pub auto_start: bool,
    /// Run its tests and delete it once it is ready (implies `auto_start`).
    #[serde(default)]
    pub auto_cleanup: bool,
    /// It is deleted this long after its creation (default one hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Resource limits of every node (a topology node's own win).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The image of every node (default: a taskserv's configured image, else the base
    /// image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Why an environment was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeleteReason {
    /// On request.
    Requested,
    /// Its time to live passed.
    Expired,
    /// `auto_cleanup`, after its run.
    AutoCleanup,
    /// The daemon stopped while it was being set up or tested.
    Interrupted,
}

/// A stage of an environment's setup or test, as recorded while it runs and when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EnvStage {
    /// Its network and containers are created.
    Creating,
    /// Its containers are started.
    Starting,
    /// Its taskservs are installed.
    Installing,
    /// Its taskservs are probed, then the topology's checks run.
    Probing,
    /// Its tests run.
    Tests,
}

impl EnvStage {
    /// The stage's name.
    pub fn as_str(self) -> &'static str {
        match self {
            EnvStage::Creating => "creating",
            EnvStage::Starting => "starting",
            EnvStage::Installing => "installing",
            EnvStage::Probing => "probing",
            EnvStage::Tests => "tests",
        }
    }
}

impl std::fmt::Display for EnvStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an environment is in its life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum EnvState {
    /// Being set up: `stage` is creating, starting, installing or probing.
    Starting {
        /// Since when.
        since: DateTime<Utc>,
        /// What it is doing.
        stage: EnvStage,
    },
    /// Its containers exist and are stopped (created without `auto_start`).
    Created {
        /// Since when.
        at: DateTime<Utc>,
    },
    /// Every node is installed and healthy.
    Ready {
        /// Since when.
        at: DateTime<Utc>,
    },
    /// Its tests run.
    Testing {
        /// Since when.
        since: DateTime<Utc>,
    },
    /// Setting up or testing failed; the containers stay for inspection until deleted.
    Failed {
        /// When.
        at: DateTime<Utc>,
        /// The stage that failed (creating, starting, installing, probing, tests).
        stage: EnvStage,
        /// What went wrong.
        error: String,
    },
    /// Its containers and network are being removed (committed before anything is
    /// removed; a restart finishes it).
    Deleting {
        /// Since when.
        since: DateTime<Utc>,
        /// Why.
        reason: DeleteReason,
        /// How it had failed before (kept for `Deleted`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
    /// Its containers and network are gone.
    Deleted {
        /// When.
        at: DateTime<Utc>,
        /// Why.
        reason: DeleteReason,
        /// How it had failed before it was deleted (an `auto_cleanup` after a failure).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
}

impl EnvState {
    /// The state's name.
    pub fn status(&self) -> &'static str {
        match self {
            EnvState::Starting { .. } => "starting",
            EnvState::Created { .. } => "created",
            EnvState::Ready { .. } => "ready",
            EnvState::Testing { .. } => "testing",
            EnvState::Failed { .. } => "failed",
            EnvState::Deleting { .. } => "deleting",
            EnvState::Deleted { .. } => "deleted",
        }
    }

    /// How the environment failed, in one line (`failed while STAGE: ERROR`), when it did:
    /// failed, or deleted (or being deleted) after a failure.
    pub fn failure(&self) -> Option<String> {
        match self {
            EnvState::Failed { stage, error, .. } => Some(format!("failed while {stage}: {error}")),
            EnvState::Deleting { failure, .. } | EnvState::Deleted { failure, .. } => {
                failure.clone()
            }
            _ => None,
        }
    }

    /// True while the daemon is working on the environment.
    pub fn is_busy(&self) -> bool {
        matches!(self, EnvState::Starting { .. } | EnvState::Testing { .. })
    }
}

/// A node of an environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EnvNode {
    /// Its name (hostname).
    pub name: String,
    /// Its role.
    pub role: String,
    /// Its taskservs in install order (dependencies included).
    pub taskservs: Vec<String>,
    /// Its container's name.
    pub container: String,
    /// Its image.
    pub image: String,
    /// Its resource limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// One readiness probe's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProbeResult {
    /// The node.
    pub node: String,
    /// The taskserv probed (or `cluster` for a topology check).
    pub taskserv: String,
    /// The command.
    pub command: String,
    /// Whether it passed.
    pub ok: bool,
    /// The last attempt's output.
    pub output: String,
    /// How many attempts were made.
    pub attempts: u32,
    /// How long it took.
    pub duration_ms: u64,
}

/// One test's outcome: a taskserv's test script run against its node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TestResult {
    /// The node.
    pub node: String,
    /// The taskserv.
    pub taskserv: String,
    /// Whether it passed.
    pub passed: bool,
    /// The script's exit code.
    pub exit_code: i32,
    /// What it printed (standard output and error).
    pub output: String,
    /// How long it ran.
    pub duration_ms: u64,
}

/// What is kept of a node when its environment fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NodeDiagnostics {
    /// The node.
    pub node: String,
    /// The container's inspect output.
    pub inspect: serde_json::Value,
    /// The container's log.
    pub logs: String,
}

/// Saved when an environment fails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Diagnostics {
    /// Each node's inspect output and log.
    pub nodes: Vec<NodeDiagnostics>,
    /// Every probe's last outcome.
    pub probes: Vec<ProbeResult>,
    /// The output of the step that failed.
    pub output: String,
}

/// Which test environments a list gives: newest first, those below `before`, at most
/// `limit` of them ([`EnvFilter::DEFAULT_LIMIT`] when not given), only those not deleted
/// with `alive`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EnvFilter {
    /// Only environments with a lower id (the next page below the last one shown).
    #[serde(default)]
    pub before: Option<EnvId>,
    /// At most this many (1 to [`EnvFilter::MAX_LIMIT`]).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only environments that are not deleted.
    #[serde(default)]
    pub alive: bool,
}

impl EnvFilter {
    /// How many a list gives when the filter sets no limit.
    pub const DEFAULT_LIMIT: usize = 1000;
    /// The most a list gives.
    pub const MAX_LIMIT: usize = 10_000;

    /// Whether `env` passes the filter (its limit aside).
    pub fn passes(&self, env: &TestEnv) -> bool {
        self.before.is_none_or(|before| env.id < before)
            && !(self.alive && matches!(env.state, EnvState::Deleted { .. }))
    }
}

/// A test environment as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TestEnv {
    /// Its id.
    pub id: EnvId,
    /// Its name.
    pub name: String,
    /// `single`, `server` or `cluster`.
    pub kind: String,
    /// The request it was created from.
    pub request: EnvRequest,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When its time to live ends.
    pub expires_at: DateTime<Utc>,
    /// Its network.
    pub network: String,
    /// Its nodes.
    pub nodes: Vec<EnvNode>,
    /// Where it is.
    pub state: EnvState,
    /// Readiness probes, from the last start.
    #[serde(default)]
    pub probes: Vec<ProbeResult>,
    /// Test results, from the last run.
    #[serde(default)]
    pub results: Vec<TestResult>,
    /// Saved when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    /// The node of a cluster whose container engine holds it (none on a single daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// The topology templates, with any that could not be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TopologiesReport {
    /// The templates, by name.
    pub topologies: Vec<Topology>,
    /// Files that could not be read.
    pub problems: Vec<crate::extensions::ManifestProblem>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    fn env(id: EnvId, state: serde_json::Value) -> TestEnv {
        serde_json::from_value(serde_json::json!({
            "id": id, "name": "redis", "kind": "single",
            "request": {"env": {"type": "single", "taskserv": "redis"}},
            "created_at": "2026-12-06T00:00:00Z", "expires_at": "2026-12-06T01:00:00Z",
            "network": "", "nodes": [], "state": state
        }))
        .expect("an environment")
    }

    #[test]
    fn a_filter_passes_those_below_its_cursor_and_with_alive_those_not_deleted() {
        let ready = env(
            5,
            serde_json::json!({"status": "ready", "at": "2026-12-06T00:00:00Z"}),
        );
        let deleted = env(
            4,
            serde_json::json!({"status": "deleted", "at": "2026-12-06T00:00:00Z", "reason": "requested"}),
        );
        let every = EnvFilter::default();
        assert!(every.passes(&ready) && every.passes(&deleted));
        let alive = EnvFilter {
            alive: true,
            ..EnvFilter::default()
        };
        assert!(alive.passes(&ready) && !alive.passes(&deleted));
        let below_5 = EnvFilter {
            before: Some(5),
            ..EnvFilter::default()
        };
        assert!(!below_5.passes(&ready) && below_5.passes(&deleted));
        // A deletion is an environment's final event.
        let ends = |e: &TestEnv| {
            EventKind::Env {
                state: e.state.clone(),
            }
            .is_final()
        };
        assert!(ends(&deleted) && !ends(&ready));
        // An old client's `{"request": "envs"}` still reads as every environment.
        let request: crate::Request = serde_json::from_str(r#"{"request":"envs"}"#).unwrap();
        assert_eq!(request, crate::Request::Envs { filter: every });
    }
}
