//! Reading a batch workflow definition: TOML, NUON, JSON, or Nickel through
//! `nickel export`; or a record from the pipeline.

use std::path::{Path, PathBuf};

use nu_protocol::{LabeledError, Spanned, Value};
use orch_protocol::{BatchRequest, BatchWorkflow, WorkflowRequest};

use super::workflow_args::InfraArgs;

use crate::json::value_to_json;

/// A batch definition and the directory its relative script paths are taken from.
pub struct Loaded {
    /// The definition.
    pub workflow: BatchWorkflow,
    /// The file's directory (or the current directory for piped records).
    pub base_dir: PathBuf,
}

impl Loaded {
    /// The batch workflow request for this definition, on the infra of the flags.
    pub fn request(self, infra: InfraArgs, check_mode: bool, wait: bool) -> WorkflowRequest {
        WorkflowRequest::Batch(BatchRequest {
            workflow: self.workflow,
            infra: infra.infra,
            settings: infra.settings,
            workspace: Some(infra.workspace),
            base_dir: Some(self.base_dir),
            check_mode,
            wait,
        })
    }
}

/// Reads `file` (relative to `cwd`).
pub fn from_file(file: &Spanned<String>, cwd: &Path) -> Result<Loaded, LabeledError> {
    let path = cwd.join(&file.item);
    let bad =
        |message: String| LabeledError::new("invalid workflow file").with_label(message, file.span);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| bad(format!("cannot read {}: {e}", path.display())))?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let json: serde_json::Value = match extension {
        "toml" => toml::from_str(&text).map_err(|e| bad(format!("not valid TOML: {e}")))?,
        "json" => serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?,
        "nuon" => {
            let value = nuon::from_nuon(&text, Some(file.span))
                .map_err(|e| bad(format!("not valid NUON: {e}")))?;
            value_to_json(&value)?
        }
        "ncl" => nickel_export(&path).map_err(bad)?,
        other => {
            return Err(bad(format!(
                "unknown format `.{other}`: use .toml, .nuon, .json or .ncl (Nickel)"
            )));
        }
    };
    let workflow = parse(json).map_err(bad)?;
    let base_dir = path
        .parent()
        .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
    Ok(Loaded { workflow, base_dir })
}

/// Reads a definition given as a record.
pub fn from_value(value: &Value, cwd: &Path) -> Result<Loaded, LabeledError> {
    let workflow = parse(value_to_json(value)?).map_err(|message| {
        LabeledError::new("invalid workflow").with_label(message, value.span())
    })?;
    Ok(Loaded {
        workflow,
        base_dir: cwd.to_path_buf(),
    })
}

/// The definition, unwrapped from a top-level `batch_workflow` field if there is one.
fn parse(mut json: serde_json::Value) -> Result<BatchWorkflow, String> {
    if let Some(inner) = json.get_mut("batch_workflow") {
        json = inner.take();
    }
    serde_json::from_value(json).map_err(|e| format!("not a batch workflow: {e}"))
}

/// `nickel export --format json FILE`, with a clear message when Nickel is missing.
fn nickel_export(path: &Path) -> Result<serde_json::Value, String> {
    let output = std::process::Command::new("nickel")
        .args(["export", "--format", "json"])
        .arg(path)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "the `nickel` binary is not installed, so .ncl workflows cannot be read here (install nickel-lang-cli, or export the workflow to JSON or TOML)".to_string(),
            _ => format!("cannot run nickel: {e}"),
        })?;
    if !output.status.success() {
        return Err(format!(
            "nickel export failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("nickel export gave no JSON: {e}"))
}
