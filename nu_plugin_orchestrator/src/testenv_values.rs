//! Nushell values for test environments and topologies.

use nu_protocol::{LabeledError, Span, Value, record};
use orch_protocol::{EnvState, TestEnv};

use crate::convert::{date, json_to_value};

/// A serializable value as a Nushell value (through JSON).
fn value_of<T: serde::Serialize>(item: &T, span: Span) -> Value {
    json_to_value(&serde_json::to_value(item).unwrap_or_default(), span)
}

/// One test environment: its status, stage and error at the top, then its nodes,
/// probes, test results and (when it failed) diagnostics.
pub fn env(env: &TestEnv, span: Span) -> Value {
    let (stage, error) = match &env.state {
        EnvState::Starting { stage, .. } => (Some(stage.as_str()), None),
        EnvState::Failed { stage, error, .. } => (Some(stage.as_str()), Some(error.as_str())),
        EnvState::Deleting { .. } => (Some("deleting"), None),
        _ => (None, None),
    };
    let opt = |s: Option<&str>| s.map_or(Value::nothing(span), |s| Value::string(s, span));
    let passed = env.results.iter().filter(|r| r.passed).count();
    Value::record(
        record! {
            "id" => Value::int(env.id as i64, span),
            "name" => Value::string(&env.name, span),
            "kind" => Value::string(&env.kind, span),
            "status" => Value::string(env.state.status(), span),
            "stage" => opt(stage),
            "error" => opt(error),
            "tests" => Value::string(format!("{passed}/{} passed", env.results.len()), span),
            "created" => date(env.created_at, span),
            "expires" => date(env.expires_at, span),
            "network" => Value::string(&env.network, span),
            "nodes" => value_of(&env.nodes, span),
            "probes" => value_of(&env.probes, span),
            "results" => value_of(&env.results, span),
            "state" => value_of(&env.state, span),
            "diagnostics" => env.diagnostics.as_ref().map_or(Value::nothing(span), |d| value_of(d, span)),
        },
        span,
    )
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
