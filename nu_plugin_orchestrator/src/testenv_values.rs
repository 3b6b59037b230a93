//! Nushell values for test environments and topologies (rows derive [`IntoValue`], as in
//! [`crate::convert`]; what the daemon sends as nested JSON is [`Typed`]).

use chrono::{DateTime, FixedOffset};
use nu_protocol::{IntoValue, LabeledError, Span, Value};
use orch_protocol::{EnvState, TestEnv};

use crate::convert::{date, joined};
use crate::typed::Typed;

/// What `orch test env show` (and `create`, `run`) add to an environment's summary: its
/// network, nodes, probes, test results and (when it failed) diagnostics, typed
/// ([`Typed`]).
#[derive(IntoValue)]
struct EnvDetails {
    network: String,
    nodes: Typed,
    probes: Typed,
    results: Typed,
    diagnostics: Option<Typed>,
}

/// One test environment as `orch test env list` shows it: what it is and how it stands.
#[derive(IntoValue)]
struct EnvSummary {
    id: i64,
    name: String,
    kind: String,
    status: &'static str,
    stage: Option<&'static str>,
    error: Option<String>,
    tests: TestCounts,
    nodes: i64,
    created: DateTime<FixedOffset>,
    expires: DateTime<FixedOffset>,
    /// The daemon's node whose container engine holds it (in a cluster).
    cluster_node: Option<String>,
    state: Typed,
}

/// How an environment's tests went.
#[derive(IntoValue)]
struct TestCounts {
    passed: i64,
    failed: i64,
    total: i64,
}

/// One test environment as a row of `orch test env list`.
pub fn env_summary(env: &TestEnv, span: Span) -> Value {
    let (stage, error) = match &env.state {
        EnvState::Starting { stage, .. } => (Some(stage.as_str()), None),
        EnvState::Failed { stage, error, .. } => (Some(stage.as_str()), Some(error.clone())),
        EnvState::Deleting { .. } => (Some("deleting"), None),
        _ => (None, None),
    };
    let passed = env.results.iter().filter(|r| r.passed).count() as i64;
    let total = env.results.len() as i64;
    EnvSummary {
        id: env.id as i64,
        name: env.name.clone(),
        kind: env.kind.clone(),
        status: env.state.status(),
        stage,
        error,
        tests: TestCounts {
            passed,
            failed: total - passed,
            total,
        },
        nodes: env.nodes.len() as i64,
        created: date(env.created_at),
        expires: date(env.expires_at),
        cluster_node: env.node.clone(),
        state: Typed::of(&env.state),
    }
    .into_value(span)
}

/// One test environment in full: its summary, then its network, nodes, probes, test
/// results and (when it failed) diagnostics.
pub fn env(env: &TestEnv, span: Span) -> Value {
    let details = EnvDetails {
        network: env.network.clone(),
        nodes: Typed::of(&env.nodes),
        probes: Typed::of(&env.probes),
        results: Typed::of(&env.results),
        diagnostics: env.diagnostics.as_ref().map(Typed::of),
    };
    // The summary's node count gives way to the nodes themselves.
    let mut summary = env_summary(env, span);
    if let Value::Record { val, .. } = &mut summary {
        val.to_mut().remove("nodes");
    }
    joined(summary, details, span)
}

/// A topology template, typed ([`Typed`]).
pub fn topology<T: serde::Serialize>(topology: &T, span: Span) -> Value {
    Typed::of(topology).into_value(span)
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
