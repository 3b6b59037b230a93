//! Turning a workflow request into steps: reading the infra, resolving providers and
//! taskservs (with their dependencies and add-ons), and writing each step's task. One
//! file per kind of workflow; [`steps`] holds the steps they share (a server's creation,
//! a taskserv's install).

mod batch;
mod cluster;
mod servers;
mod steps;
mod taskserv;

use std::path::{Path, PathBuf};

use orch_protocol::{InfraTarget, RunOptions, WorkflowKind, WorkflowRequest};

use super::infra::{Infra, Place};
use super::{Draft, ExpandError};
use crate::extensions::Extensions;

/// What expansion reads besides the request.
pub struct Sources<'a> {
    /// The extensions (read only if the request needs them).
    pub extensions: &'a Extensions,
    /// The workspace used when the request names none.
    pub workspace: &'a Path,
    /// The daemon's data directory (never an infra, nor a script's directory).
    pub data_dir: &'a Path,
}

/// Expands a request into its steps (not yet ordered or checked for cycles). The number
/// of steps is computed, and checked against [`MAX_STEPS`](super::checks::MAX_STEPS), before any step is
/// built.
pub fn expand(request: &WorkflowRequest, sources: &Sources) -> Result<Draft, ExpandError> {
    let mut draft = match request {
        WorkflowRequest::Servers(r) => servers::expand(r, sources)?,
        WorkflowRequest::Taskserv(r) => taskserv::expand(r, sources)?,
        WorkflowRequest::Cluster(r) => cluster::expand(r, sources)?,
        WorkflowRequest::Batch(r) => batch::expand(r, sources)?,
    };
    draft.request = serde_json::to_value(request).expect("requests serialize");
    Ok(draft)
}

/// Where the request's infra is looked up: its workspace (already confined to the
/// daemon's when the submitter may not choose) or the daemon's.
fn place<'a>(given: &'a Option<PathBuf>, sources: &'a Sources) -> Place<'a> {
    Place {
        workspace: given.as_deref().unwrap_or(sources.workspace),
        data_dir: sources.data_dir,
    }
}

/// The infra an infra request acts on, with its settings.
fn load_infra(target: &InfraTarget, sources: &Sources) -> Result<Infra, ExpandError> {
    Infra::load(
        place(&target.workspace, sources),
        &target.infra,
        target.settings.as_deref(),
    )
}

/// A draft without steps yet, run as `run` says.
fn empty_draft(name: String, kind: WorkflowKind, run: &RunOptions) -> Draft {
    Draft {
        name,
        kind,
        request: serde_json::Value::Null,
        priority: run.priority,
        parallel_limit: run.parallel_limit,
        group: run.group.clone(),
        rollback_enabled: run.rollback_enabled,
        steps: Vec::new(),
        restart_of: None,
    }
}

#[cfg(test)]
mod tests {
    use orch_protocol::{BatchRequest, ClusterRequest, InfraTarget, ServersRequest};

    use super::*;
    use crate::extensions::Registry;

    /// A workspace with infra `lab` (web-01 with kubernetes, web-02), the repository's
    /// extensions, and a data directory.
    struct Fixture {
        workspace: tempfile::TempDir,
        extensions: Extensions,
    }

    impl Fixture {
        fn new() -> Fixture {
            let workspace = tempfile::tempdir().unwrap();
            let infra = workspace.path().join("infra/lab");
            std::fs::create_dir_all(&infra).unwrap();
            std::fs::write(
                infra.join("settings.toml"),
                "provider = \"local\"\n[[servers]]\nhostname = \"web-01\"\ntaskservs = [\"kubernetes\"]\n[[servers]]\nhostname = \"web-02\"\n",
            )
            .unwrap();
            let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nushell-modules");
            Fixture {
                workspace,
                extensions: Extensions::read(Registry::load(&modules)),
            }
        }

        fn expand(&self, request: WorkflowRequest) -> Result<Vec<String>, ExpandError> {
            let draft = self.draft(request)?;
            Ok(draft.steps.into_iter().map(|s| s.id).collect())
        }

        fn draft(&self, request: WorkflowRequest) -> Result<Draft, ExpandError> {
            let data_dir = self.workspace.path().join("data");
            let sources = Sources {
                extensions: &self.extensions,
                workspace: self.workspace.path(),
                data_dir: &data_dir,
            };
            expand(&request, &sources)
        }
    }

    fn target() -> InfraTarget {
        InfraTarget {
            infra: "lab".into(),
            settings: None,
            workspace: None,
        }
    }

    #[test]
    fn servers_are_created_then_given_their_taskservs() {
        let steps = Fixture::new().expand(WorkflowRequest::Servers(ServersRequest {
            target: target(),
            servers: Vec::new(),
            run: RunOptions::default(),
        }));
        assert_eq!(
            steps.unwrap(),
            [
                "create:web-01",
                "install:containerd@web-01",
                "install:kubernetes@web-01",
                "install:cilium@web-01",
                "create:web-02"
            ]
        );
    }

    #[test]
    fn a_cluster_has_the_steps_it_was_counted_with() {
        let steps = Fixture::new().expand(WorkflowRequest::Cluster(ClusterRequest {
            target: target(),
            cluster: "etcd-cluster".into(),
            provider: None,
            run: RunOptions::default(),
        }));
        let steps = steps.unwrap();
        assert_eq!(steps.len(), 3 + 3 + 3 + 1, "{steps:?}");
        assert_eq!(steps.last().map(String::as_str), Some("setup:etcd-cluster"));
    }

    #[test]
    fn failures_say_what_and_where() {
        let fixture = Fixture::new();
        let mut request = ServersRequest {
            target: target(),
            servers: vec!["web-09".into()],
            run: RunOptions::default(),
        };
        let error = fixture
            .expand(WorkflowRequest::Servers(request.clone()))
            .unwrap_err();
        assert!(
            matches!(&error, ExpandError::Unknown(m) if m == "unknown server `web-09` in infra `lab` (its servers: web-01, web-02)"),
            "{error}"
        );
        request.target.infra = "../etc".into();
        let error = fixture
            .expand(WorkflowRequest::Servers(request))
            .unwrap_err();
        assert!(matches!(error, ExpandError::Invalid(_)), "{error}");
        let batch: BatchRequest = serde_json::from_value(serde_json::json!({
            "workflow": {"name": "b", "operations": [{"id": "a", "type": "nu"}]}
        }))
        .unwrap();
        let error = fixture.expand(WorkflowRequest::Batch(batch)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "operation `a`: a `nu` operation needs `nu` (the code)"
        );
    }

    #[test]
    fn a_batch_of_commands_does_not_read_the_extensions_and_a_taskserv_step_does() {
        let workspace = tempfile::tempdir().unwrap();
        let data_dir = workspace.path().join("data");
        let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../nushell-modules");
        let commands: BatchRequest = serde_json::from_value(serde_json::json!({
            "workflow": {"name": "b", "operations": [
                {"id": "a", "type": "command", "command": ["true"]},
                {"id": "b", "type": "nu", "nu": "print hi", "dependencies": ["a"]}
            ]}
        }))
        .unwrap();
        let extensions = Extensions::under(&modules);
        let sources = Sources {
            extensions: &extensions,
            workspace: workspace.path(),
            data_dir: &data_dir,
        };
        expand(&WorkflowRequest::Batch(commands), &sources).unwrap();
        assert!(!extensions.was_read(), "no step needed the extensions");
        let fixture = Fixture::new();
        let taskserv = WorkflowRequest::Taskserv(orch_protocol::TaskservRequest {
            target: target(),
            taskserv: "redis".into(),
            servers: Vec::new(),
            run: RunOptions::default(),
        });
        let extensions = Extensions::under(&modules);
        let sources = Sources {
            extensions: &extensions,
            workspace: fixture.workspace.path(),
            data_dir: &data_dir,
        };
        expand(&taskserv, &sources).unwrap();
        assert!(extensions.was_read(), "a taskserv step reads them");
    }

    #[test]
    fn a_batch_operation_runs_on_its_labelled_nodes() {
        let batch: BatchRequest = serde_json::from_value(serde_json::json!({
            "workflow": {"name": "b", "operations": [
                {"id": "one", "type": "command", "command": ["docker", "ps"], "on": "docker"},
                {"id": "many", "type": "nu", "nu": "ls", "rollback": "print undo",
                 "on": ["docker", "region=eu"]},
                {"id": "servers", "type": "server_create", "on": ["region=eu"]},
                {"id": "anywhere", "type": "command", "command": ["true"]}
            ]},
            "infra": "lab"
        }))
        .unwrap();
        let draft = Fixture::new().draft(WorkflowRequest::Batch(batch)).unwrap();
        let on = |id: &str| {
            let step = draft.steps.iter().find(|s| s.id == id).unwrap();
            let rollback = step.rollback.as_ref().map(|r| r.on.clone());
            (step.spec.on.clone(), rollback)
        };
        assert_eq!(on("one"), (vec!["docker".to_string()], None));
        let both = vec!["docker".to_string(), "region=eu".to_string()];
        assert_eq!(on("many"), (both.clone(), Some(both)));
        let eu = vec!["region=eu".to_string()];
        assert_eq!(on("servers"), (eu.clone(), Some(eu)));
        assert_eq!(on("anywhere"), (vec![], None));
    }
}
