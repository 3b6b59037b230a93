//! Batch workflows: operations with hard and soft dependencies, from a definition file.

use std::path::PathBuf;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use super::fields::{bounded_list, node_labels};

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OperationType {
    /// Create its servers with their providers.
    ServerCreate,
    /// The same as `server_create` (the seed's name for several servers).
    ServerBatch,
    /// Install its taskserv (with its dependencies and add-ons) on its servers.
    TaskservCreate,
    /// The same as `taskserv_create` (the seed's name for several servers).
    TaskservBatch,
    /// Run its Nushell code.
    Nu,
    /// Run its Nushell script file.
    Script,
    /// Run its program with its arguments.
    Command,
}

impl OperationType {
    /// Every operation type, in the order messages list them.
    pub const ALL: [OperationType; 7] = [
        OperationType::ServerCreate,
        OperationType::ServerBatch,
        OperationType::TaskservCreate,
        OperationType::TaskservBatch,
        OperationType::Nu,
        OperationType::Script,
        OperationType::Command,
    ];

    /// The snake_case name used in definitions.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationType::ServerCreate => "server_create",
            OperationType::ServerBatch => "server_batch",
            OperationType::TaskservCreate => "taskserv_create",
            OperationType::TaskservBatch => "taskserv_batch",
            OperationType::Nu => "nu",
            OperationType::Script => "script",
            OperationType::Command => "command",
        }
    }

    /// Parses the snake_case name.
    pub fn parse(name: &str) -> Option<OperationType> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// Read by name, with an error that names the field and lists the known types.
impl<'de> Deserialize<'de> for OperationType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(deserializer)?;
        OperationType::parse(&name).ok_or_else(|| {
            let known: Vec<&str> = OperationType::ALL.iter().map(|t| t.as_str()).collect();
            D::Error::custom(format_args!(
                "`type`: unknown operation type `{name}` (known: {})",
                known.join(", ")
            ))
        })
    }
}

/// One operation of a batch workflow: one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// Its id, unique in the workflow; dependencies name it.
    pub id: String,
    /// What it does.
    #[serde(rename = "type")]
    pub op_type: OperationType,
    /// The provider of its servers (default: each server's, then the infra's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Operations that must succeed first; when one fails, this one is skipped.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Operations that must finish first, whatever their outcome.
    #[serde(default)]
    pub soft_dependencies: Vec<String>,
    /// Servers it acts on (server and taskserv operations; all of the infra's when empty),
    /// each at most once.
    #[serde(default, deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<String>"))]
    pub servers: Vec<String>,
    /// The taskserv to install (taskserv operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskserv: Option<String>,
    /// Nushell code (`nu` operations); `$params` holds `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nu: Option<String>,
    /// A Nushell script file (`script` operations), a relative path inside the workflow
    /// file's directory (no `..`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// A program and its arguments (`command` operations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Nushell code that compensates this operation in a rollback (`nu`, `script` and
    /// `command` operations; server and taskserv operations use their extensions').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
    /// Parameters for the operation's code.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub params: serde_json::Value,
    /// How often a failed attempt is retried.
    #[serde(default)]
    pub retries: u32,
    /// Kill an attempt after this long (`30s`, `5min`, `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Labels the node that runs its step (and its compensation) must have, all of them:
    /// one label (`on = "docker"`) or a list (`on = ["docker", "region=eu"]`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "node_labels"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "super::fields::NodeLabels"))]
    pub on: Vec<String>,
}

/// A batch workflow definition (from a TOML, NUON, JSON or Nickel file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchWorkflow {
    /// Its name.
    pub name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How many operations may run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_limit: Option<u32>,
    /// Compensate completed operations when one fails.
    #[serde(default)]
    pub rollback_enabled: bool,
    /// Queue priority of its operations.
    #[serde(default)]
    pub priority: i32,
    /// The group its operations run in (default: the default group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The operations.
    #[serde(deserialize_with = "bounded_list")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<Operation>"))]
    pub operations: Vec<Operation>,
}

/// A batch workflow with where it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The definition.
    pub workflow: BatchWorkflow,
    /// The infra its server and taskserv operations use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<String>,
    /// The settings file: a plain file name in the infra directory (default: the first of
    /// `settings.toml`, `.yaml`, `.yml`, `.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<String>,
    /// The workspace directory (default: the daemon's `--workspace`). Only the daemon's
    /// owner on its socket may name another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// Directory that relative `script` paths are taken from (the workflow file's); inside
    /// the daemon's workspace unless the daemon's owner submits on its socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_dir: Option<PathBuf>,
    /// Plan only: answer with the waves that would run, run nothing.
    #[serde(default)]
    pub check_mode: bool,
    /// Answer only once the workflow has finished.
    #[serde(default)]
    pub wait: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_types_are_read_by_name_and_unknown_ones_are_listed() {
        let read =
            |json: &str| serde_json::from_str::<OperationType>(json).map_err(|e| e.to_string());
        assert_eq!(
            read(r#""taskserv_batch""#),
            Ok(OperationType::TaskservBatch)
        );
        for t in OperationType::ALL {
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
        }
        let workflow = r#"{"name": "w", "operations": [
            {"id": "a", "type": "command", "command": ["true"]},
            {"id": "b", "type": "teleport"}]}"#;
        let error = serde_json::from_str::<BatchWorkflow>(workflow)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("entry 1: `type`: unknown operation type `teleport`"),
            "the failing operation is named by its place: {error}"
        );
        let error = read(r#""teleport""#).unwrap_err();
        assert!(
            error.contains("`type`: unknown operation type `teleport` (known: server_create, server_batch, taskserv_create, taskserv_batch, nu, script, command)"),
            "{error}"
        );
    }

    #[test]
    fn on_is_one_label_or_a_list_of_them() {
        let on = |on: &str| {
            let json = format!(r#"{{"id": "a", "type": "command", "command": ["true"]{on}}}"#);
            serde_json::from_str::<Operation>(&json)
                .map(|op| op.on)
                .map_err(|e| e.to_string())
        };
        assert_eq!(on(""), Ok(vec![]));
        assert_eq!(on(r#", "on": "docker""#), Ok(vec!["docker".to_string()]));
        assert_eq!(
            on(r#", "on": ["docker", "region=eu"]"#),
            Ok(vec!["docker".to_string(), "region=eu".to_string()])
        );
        for bad in [r#", "on": 3"#, r#", "on": ["docker", 3]"#, r#", "on": {}"#] {
            let error = on(bad).unwrap_err();
            assert!(error.starts_with("`on`: invalid type"), "{bad}: {error}");
        }
        let error = on(r#", "on": 3"#).unwrap_err();
        assert!(
            error.contains("expected a node label or a list of node labels"),
            "{error}"
        );
        // Written back as a list, which reads again as the same operation.
        let op: Operation =
            serde_json::from_str(r#"{"id": "a", "type": "nu", "nu": "ls", "on": "docker"}"#)
                .unwrap();
        let json = serde_json::to_value(&op).unwrap();
        assert_eq!(json["on"], serde_json::json!(["docker"]));
        assert_eq!(serde_json::from_value::<Operation>(json).unwrap(), op);
        assert!(
            on(r#", "on": "docker", "node": "x""#)
                .unwrap_err()
                .contains("unknown field `node`")
        );
    }
}
