//! Nushell values for test environments and topologies (rows derive [`IntoValue`], as in
//! [`crate::convert`]).

use chrono::{DateTime, FixedOffset};
use nu_protocol::{IntoValue, LabeledError, Span, Value};
use orch_protocol::{EnvState, TestEnv};

use crate::convert::date;

/// A serializable value as a Nushell value (through JSON).
fn value_of<T: serde::Serialize>(item: &T, span: Span) -> Value {
    serde_json::to_value(item)
        .unwrap_or_default()
        .into_value(span)
}

/// One test environment: its status, stage and error at the top, then its nodes,
/// probes, test results and (when it failed) diagnostics.
#[derive(IntoValue)]
struct EnvRow {
    id: i64,
    name: String,
    kind: String,
    status: &'static str,
    stage: Option<&'static str>,
    error: Option<String>,
    tests: String,
    created: DateTime<FixedOffset>,
    expires: DateTime<FixedOffset>,
    network: String,
    /// The daemon's node whose container engine holds it (in a cluster).
    cluster_node: Option<String>,
    nodes: Value,
    probes: Value,
    results: Value,
    state: Value,
    diagnostics: Option<Value>,
}

/// One test environment: its status, stage and error at the top, then its nodes,
/// probes, test results and (when it failed) diagnostics.
pub fn env(env: &TestEnv, span: Span) -> Value {
    let (stage, error) = match &env.state {
        EnvState::Starting { stage, .. } => (Some(stage.as_str()), None),
        EnvState::Failed { stage, error, .. } => (Some(stage.as_str()), Some(error.clone())),
        EnvState::Deleting { .. } => (Some("deleting"), None),
        _ => (None, None),
    };
    let passed = env.results.iter().filter(|r| r.passed).count();
    EnvRow {
        id: env.id as i64,
        name: env.name.clone(),
        kind: env.kind.clone(),
        status: env.state.status(),
        stage,
        error,
        tests: format!("{passed}/{} passed", env.results.len()),
        created: date(env.created_at),
        expires: date(env.expires_at),
        network: env.network.clone(),
        cluster_node: env.node.clone(),
        nodes: value_of(&env.nodes, span),
        probes: value_of(&env.probes, span),
        results: value_of(&env.results, span),
        state: value_of(&env.state, span),
        diagnostics: env.diagnostics.as_ref().map(|d| value_of(d, span)),
    }
    .into_value(span)
}
/// A topology template.
pub fn topology<T: serde::Serialize>(topology: &T, span: Span) -> Value {
    value_of(topology, span)
}

/// The environment as a value, or an error when it failed (also when it was deleted after
/// failing, as `--auto-cleanup` does): one line with the stage, the node and the root
/// cause, so that scripts and CI stop on it.
pub fn env_or_failure(env: &TestEnv, span: Span) -> Result<Value, LabeledError> {
    let Some(failure) = env.state.failure() else {
        return Ok(self::env(env, span));
    };
    let status = match &env.state {
        EnvState::Failed { .. } => format!(
            "its containers stay for inspection: `orch test env show {}` has the diagnostics, `orch test env delete {}` removes it",
            env.id, env.id
        ),
        state => format!(
            "it is {} (`orch test env show {}` has the diagnostics)",
            state.status(),
            env.id
        ),
    };
    Err(
        LabeledError::new(format!("test environment {} {failure}", env.id))
            .with_label(status, span),
    )
}
