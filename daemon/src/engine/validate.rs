//! Checks a task spec on its own, before anything is created: what it runs, its limits
//! (timeout, backoff, label, size) and what the system's `exec` would refuse (so that a
//! task accepted can start). Dependencies are checked by the engine's state.

use orch_protocol::{ErrorKind, ErrorReply, TaskKind, TaskSpec};

/// The longest timeout, retry delay or wait for a start time accepted: a year.
pub const MAX_DELAY_MS: u64 = 365 * 24 * 3600 * 1000;

/// The largest task spec accepted, as JSON: far enough below the frame limit that any
/// answer carrying the task (with its history) still fits in a frame.
const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;

/// Checks spec number `index` of a submission; the error names the field.
pub fn validate(spec: &TaskSpec, index: usize) -> Result<(), ErrorReply> {
    validate_as(spec, &format!("task #{index}"))
}

/// Checks `spec`, which the error's message calls `subject` (`task #2` of a submission,
/// `task 41` of an edit); the error names the field.
pub fn validate_as(spec: &TaskSpec, subject: &str) -> Result<(), ErrorReply> {
    let bad = |field: &str, message: String| {
        Err(ErrorReply::field(
            ErrorKind::BadRequest,
            field,
            format!("{subject}: {message}"),
        ))
    };
    match &spec.kind {
        TaskKind::Command { program, .. } if program.trim().is_empty() => {
            bad("command", "the program is empty".into())
        }
        TaskKind::Nu { code } if code.trim().is_empty() => {
            bad("nu", "the Nushell snippet is empty".into())
        }
        TaskKind::NuFile { path } if path.as_os_str().is_empty() => {
            bad("nu", "the script path is empty".into())
        }
        _ if spec.timeout_ms == Some(0) => bad("timeout", "the timeout must be positive".into()),
        _ if spec.timeout_ms.is_some_and(|t| t > MAX_DELAY_MS) => {
            bad("timeout", "the timeout must not exceed a year".into())
        }
        _ if spec.backoff.max_ms > MAX_DELAY_MS => {
            bad("backoff", "the backoff must not exceed a year".into())
        }
        _ if spec.backoff.initial_ms > spec.backoff.max_ms => bad(
            "backoff",
            format!(
                "the initial backoff ({} ms) exceeds the maximum ({} ms)",
                spec.backoff.initial_ms, spec.backoff.max_ms
            ),
        ),
        _ if spec.label.as_deref().is_some_and(|l| l.trim().is_empty()) => {
            bad("label", "the label is empty".into())
        }
        _ if spec.on.len() > MAX_NODE_LABELS => bad(
            "on",
            format!(
                "{} node labels are required; at most {MAX_NODE_LABELS} may be",
                spec.on.len()
            ),
        ),
        _ if let Some((label, why)) = bad_node_label(&spec.on) => bad(
            "on",
            format!("the node label {label:?} is not valid: {why}"),
        ),
        _ if spec_size(spec) > MAX_SPEC_BYTES => bad(
            "params",
            format!(
                "the task is {} bytes as JSON; the limit is {MAX_SPEC_BYTES} (pass large data as a file)",
                spec_size(spec)
            ),
        ),
        _ => match exec_limits(spec) {
            Err((field, message)) => bad(field, message),
            Ok(()) => Ok(()),
        },
    }
}

/// The most node labels one task may require.
const MAX_NODE_LABELS: usize = 16;

/// The first of `labels` that is not a valid label, with why.
fn bad_node_label(labels: &[String]) -> Option<(&str, String)> {
    labels.iter().find_map(|l| {
        crate::cluster::parse_label(l)
            .err()
            .map(|why| (l.as_str(), why))
    })
}

/// The longest single argument or environment entry (`KEY=value`) Linux passes to a
/// program (MAX_ARG_STRLEN, 128 KiB with its terminating NUL).
const MAX_EXEC_STRING: usize = 128 * 1024 - 1;

/// The most the environment entries of `--env` may take together: well inside the
/// system's limit on arguments and environment together (ARG_MAX, usually 2 MiB), which
/// the daemon's own environment and the task's arguments share.
const MAX_ENV_BYTES: usize = 1024 * 1024;

/// The most a task's arguments may take together (the same shared limit).
const MAX_ARGS_BYTES: usize = 512 * 1024;

/// Checks what the system's `exec` would refuse (so that a task accepted can start):
/// the environment and the arguments. Parameters are not limited here: large ones are
/// passed in a file.
fn exec_limits(spec: &TaskSpec) -> Result<(), (&'static str, String)> {
    let mut env_bytes = 0;
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err((
                "env",
                format!("the variable name {key:?} is empty or has `=` or a NUL byte"),
            ));
        }
        if value.contains('\0') {
            return Err(("env", format!("the value of {key} has a NUL byte")));
        }
        let entry = key.len() + 1 + value.len();
        if entry > MAX_EXEC_STRING {
            return Err((
                "env",
                format!(
                    "{key} is {entry} bytes; one variable may hold at most {MAX_EXEC_STRING} (pass large data in params)"
                ),
            ));
        }
        env_bytes += entry + 1;
    }
    if env_bytes > MAX_ENV_BYTES {
        return Err((
            "env",
            format!(
                "the environment variables take {env_bytes} bytes; the limit is {MAX_ENV_BYTES} (pass large data in params)"
            ),
        ));
    }
    let (field, args): (&'static str, Vec<&str>) = match &spec.kind {
        TaskKind::Command { program, args } => (
            "command",
            std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect(),
        ),
        TaskKind::Nu { code } => ("nu", vec![code.as_str()]),
        TaskKind::NuFile { .. } => return Ok(()),
    };
    if args.iter().any(|a| a.contains('\0')) {
        return Err((field, "an argument has a NUL byte".into()));
    }
    if let Some(long) = args
        .iter()
        .find(|a| a.len() + crate::nu_command::PRELUDE.len() > MAX_EXEC_STRING)
    {
        return Err((
            field,
            format!(
                "an argument is {} bytes; one argument may hold at most {} (use a script file, or pass data in params)",
                long.len(),
                MAX_EXEC_STRING - crate::nu_command::PRELUDE.len()
            ),
        ));
    }
    let total: usize = args.iter().map(|a| a.len() + 1).sum();
    if total > MAX_ARGS_BYTES {
        return Err((
            field,
            format!(
                "the arguments take {total} bytes; the limit is {MAX_ARGS_BYTES} (pass data in params)"
            ),
        ));
    }
    Ok(())
}

fn spec_size(spec: &TaskSpec) -> usize {
    serde_json::to_vec(spec).map_or(usize::MAX, |v| v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field named by the refusal of `spec`.
    fn refused_field(spec: &TaskSpec) -> Option<String> {
        validate(spec, 0).err().and_then(|e| e.field)
    }

    #[test]
    fn each_refusal_names_its_field() {
        let ok = TaskSpec::command("true", vec![]);
        assert!(validate(&ok, 0).is_ok());
        let empty = TaskSpec::command(" ", vec![]);
        assert_eq!(refused_field(&empty).as_deref(), Some("command"));
        let mut backwards = ok.clone();
        backwards.backoff.initial_ms = backwards.backoff.max_ms + 1;
        assert_eq!(refused_field(&backwards).as_deref(), Some("backoff"));
        let mut zero_timeout = ok.clone();
        zero_timeout.timeout_ms = Some(0);
        assert_eq!(refused_field(&zero_timeout).as_deref(), Some("timeout"));
        let mut bad_env = ok.clone();
        bad_env.env.insert("A=B".into(), "x".into());
        assert_eq!(refused_field(&bad_env).as_deref(), Some("env"));
    }

    #[test]
    fn node_labels_are_checked_and_bounded() {
        let mut on = TaskSpec::command("true", vec![]);
        on.on = vec!["docker".into(), "region=eu-west".into()];
        assert!(validate(&on, 0).is_ok());
        for bad in ["", "-x", "a b", "../etc", "a;b", &"x".repeat(64), "ä"] {
            on.on = vec!["docker".into(), bad.to_string()];
            let error = validate(&on, 0).unwrap_err();
            assert_eq!(error.field.as_deref(), Some("on"), "{bad:?}");
            assert!(error.message.contains("is not valid"), "{}", error.message);
        }
        on.on = (0..=MAX_NODE_LABELS).map(|i| format!("l{i}")).collect();
        let error = validate(&on, 0).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("on"));
        assert!(error.message.contains("at most 16"), "{}", error.message);
    }

    #[test]
    fn what_exec_would_refuse_is_refused_at_submission() {
        let long = "x".repeat(MAX_EXEC_STRING);
        let too_long = TaskSpec::command("echo", vec![long]);
        let error = validate(&too_long, 3).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("command"));
        assert!(
            error.message.starts_with("task #3: an argument is"),
            "{}",
            error.message
        );
        let nul = TaskSpec::command("echo", vec!["a\0b".into()]);
        assert_eq!(refused_field(&nul).as_deref(), Some("command"));
    }
}
