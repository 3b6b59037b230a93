//! Workflow submissions: servers, taskserv and cluster requests on an infra, and the
//! request enum that also carries batch workflows.
//!
//! The three infra requests share where they act ([`InfraTarget`]) and how they run
//! ([`RunOptions`]). Both are flattened, so on the wire a request stays one flat object
//! (`{"infra": "production", "servers": [...], "wait": true}`); unknown fields are still
//! refused, by the outer request.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::WorkflowKind;
use super::batch::BatchRequest;
use super::fields::{bounded_list, named};

/// Where an infra request acts: the infra, its settings file and the workspace holding it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InfraTarget {
    /// The infra: a plain name (no `/`, no `..`) looked up as `<workspace>/infra/<name>` or
    /// `<workspace>/<name>`.
    #[serde(deserialize_with = "named::infra")]
    pub infra: String,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "named::settings"
    )]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "named::workspace"
    )]
    pub workspace: Option<PathBuf>,
}

/// How an infra request runs: plan or run, wait or not, priority, limit and rollback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunOptions {
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default, deserialize_with = "named::check_mode")]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default, deserialize_with = "named::wait")]
    pub wait: bool,
    /// Queue priority of every step (higher first).
    #[serde(default, deserialize_with = "named::priority")]
    pub priority: i32,
    /// How many of its steps may run at once (on top of the daemon's limit).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "named::parallel_limit"
    )]
    pub parallel_limit: Option<u32>,
    /// When a step fails, compensate the completed steps with their rollback scripts.
    #[serde(default, deserialize_with = "named::rollback_enabled")]
    pub rollback_enabled: bool,
    /// The group its steps run in (`orch group list`; default: the default group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// Create servers of an infra (and install the taskservs its settings list for them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServersRequest {
    /// Where it acts.
    #[serde(flatten)]
    pub target: InfraTarget,
    /// Hostnames from the settings (all of them when empty), each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// How it runs.
    #[serde(flatten)]
    pub run: RunOptions,
}

/// Install a taskserv (with its dependencies and add-ons) on servers of an infra.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskservRequest {
    /// Where it acts.
    #[serde(flatten)]
    pub target: InfraTarget,
    /// The taskserv's name.
    pub taskserv: String,
    /// Hostnames from the settings (all of them when empty), each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// How it runs.
    #[serde(flatten)]
    pub run: RunOptions,
}

/// Create a cluster from a cluster definition: its nodes, their taskservs, its setup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClusterRequest {
    /// Where it acts.
    #[serde(flatten)]
    pub target: InfraTarget,
    /// The cluster definition's name (`orch extensions clusters`).
    pub cluster: String,
    /// The provider of its nodes (default: the infra's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// How it runs.
    #[serde(flatten)]
    pub run: RunOptions,
}

/// A workflow submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkflowRequest {
    /// See [`ServersRequest`].
    Servers(ServersRequest),
    /// See [`TaskservRequest`].
    Taskserv(TaskservRequest),
    /// See [`ClusterRequest`].
    Cluster(ClusterRequest),
    /// See [`BatchRequest`].
    Batch(BatchRequest),
}

impl WorkflowRequest {
    /// The kind's name.
    pub fn kind(&self) -> WorkflowKind {
        match self {
            WorkflowRequest::Servers(_) => WorkflowKind::Servers,
            WorkflowRequest::Taskserv(_) => WorkflowKind::Taskserv,
            WorkflowRequest::Cluster(_) => WorkflowKind::Cluster,
            WorkflowRequest::Batch(_) => WorkflowKind::Batch,
        }
    }

    /// Whether only a plan is asked for.
    pub fn check_mode(&self) -> bool {
        match self {
            WorkflowRequest::Servers(r) => r.run.check_mode,
            WorkflowRequest::Taskserv(r) => r.run.check_mode,
            WorkflowRequest::Cluster(r) => r.run.check_mode,
            WorkflowRequest::Batch(r) => r.check_mode,
        }
    }

    /// Whether the answer waits for the end of the workflow.
    pub fn wait(&self) -> bool {
        match self {
            WorkflowRequest::Servers(r) => r.run.wait,
            WorkflowRequest::Taskserv(r) => r.run.wait,
            WorkflowRequest::Cluster(r) => r.run.wait,
            WorkflowRequest::Batch(r) => r.wait,
        }
    }

    /// Sets whether the answer waits for the end of the workflow.
    pub fn set_wait(&mut self, wait: bool) {
        match self {
            WorkflowRequest::Servers(r) => r.run.wait = wait,
            WorkflowRequest::Taskserv(r) => r.run.wait = wait,
            WorkflowRequest::Cluster(r) => r.run.wait = wait,
            WorkflowRequest::Batch(r) => r.wait = wait,
        }
    }

    /// The workspace the request names, if any.
    pub fn workspace(&self) -> Option<&Path> {
        match self {
            WorkflowRequest::Servers(r) => r.target.workspace.as_deref(),
            WorkflowRequest::Taskserv(r) => r.target.workspace.as_deref(),
            WorkflowRequest::Cluster(r) => r.target.workspace.as_deref(),
            WorkflowRequest::Batch(r) => r.workspace.as_deref(),
        }
    }

    /// The directory a batch request takes its scripts from, if it names one.
    pub fn base_dir(&self) -> Option<&Path> {
        match self {
            WorkflowRequest::Batch(r) => r.base_dir.as_deref(),
            _ => None,
        }
    }
}
