//! A task spec from `orch submit`'s flags and from task records: each setting read with
//! an error that points at its value, and the span of each remembered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nu_plugin::EvaluatedCall;
use nu_protocol::{LabeledError, Record, Span, Value};
use orch_protocol::{TaskEdit, TaskKind, TaskSpec};

use super::args;
use crate::json::value_to_json;

/// A task spec being assembled from flags and record fields, with where each setting
/// came from (so that a daemon error about a field points at it).
#[derive(Clone)]
pub struct TaskDraft {
    kind: Option<(TaskKind, Span)>,
    spec: TaskSpec,
    spans: Vec<(&'static str, Span)>,
}

fn bad(span: Span, title: &str, label: impl Into<String>) -> LabeledError {
    LabeledError::new(title.to_string()).with_label(label, span)
}

fn as_string(value: &Value) -> Result<String, LabeledError> {
    match value {
        Value::String { val, .. } | Value::Glob { val, .. } => Ok(val.clone()),
        Value::Int { val, .. } => Ok(val.to_string()),
        Value::Float { val, .. } => Ok(val.to_string()),
        Value::Bool { val, .. } => Ok(val.to_string()),
        other => Err(bad(
            other.span(),
            "invalid argument",
            format!("expected a string, got {}", other.get_type()),
        )),
    }
}

fn command_words(values: &[Value]) -> Result<Vec<String>, LabeledError> {
    let mut words = Vec::new();
    for value in values {
        match value {
            Value::List { vals, .. } => words.extend(command_words(vals)?),
            other => words.push(as_string(other)?),
        }
    }
    Ok(words)
}

fn non_negative(value: &Value, what: &str) -> Result<u64, LabeledError> {
    let n = match value {
        Value::Int { val, .. } => *val,
        Value::Duration { val, .. } => *val / 1_000_000,
        other => {
            return Err(bad(
                other.span(),
                "invalid argument",
                format!(
                    "{what}: expected a number or a duration, got {}",
                    other.get_type()
                ),
            ));
        }
    };
    u64::try_from(n).map_err(|_| {
        bad(
            value.span(),
            "invalid argument",
            format!("{what} must not be negative"),
        )
    })
}

fn millis(value: &Value, what: &str) -> Result<u64, LabeledError> {
    match value {
        Value::Duration { .. } => non_negative(value, what),
        other => Err(bad(
            other.span(),
            "invalid argument",
            format!(
                "{what}: expected a duration such as 500ms or 2min, got {}",
                other.get_type()
            ),
        )),
    }
}

/// The start time flag or field `name` gives: `at`, a datetime; `delay`, a duration from
/// now by this machine's clock.
pub fn start_time(
    name: &str,
    value: &Value,
) -> Result<chrono::DateTime<chrono::Utc>, LabeledError> {
    let span = value.span();
    if name == "at" {
        let at = value.as_date().map_err(|_| {
            bad(
                span,
                "invalid start time",
                format!(
                    "at: expected a datetime such as 2026-12-24T03:00:00+01:00 (or `'tomorrow 3am' | into datetime`), got {}",
                    value.get_type()
                ),
            )
        })?;
        return Ok(at.with_timezone(&chrono::Utc));
    }
    let delay = millis(value, name)?;
    let delay = chrono::Duration::milliseconds(i64::try_from(delay).unwrap_or(i64::MAX));
    chrono::Utc::now()
        .checked_add_signed(delay)
        .ok_or_else(|| bad(span, "invalid delay", "the delay is too long"))
}

fn task_ids(value: &Value) -> Result<Vec<u64>, LabeledError> {
    let mut ids = Vec::new();
    args::ids_from_value(value, &mut ids)?;
    Ok(ids)
}

/// The node labels of `on`: one string, or a list of strings (each label is checked by
/// the daemon, whose error then points at this value).
fn node_labels(value: &Value) -> Result<Vec<String>, LabeledError> {
    let wrong = |value: &Value, expected: &str| {
        bad(
            value.span(),
            "invalid node labels",
            format!("on: expected {expected}, got {}", value.get_type()),
        )
    };
    match value {
        Value::String { val, .. } => Ok(vec![val.clone()]),
        Value::List { vals, .. } => vals
            .iter()
            .map(|item| match item {
                Value::String { val, .. } => Ok(val.clone()),
                other => Err(wrong(other, "each label to be a string")),
            })
            .collect(),
        other => Err(wrong(
            other,
            "a label or a list of labels (docker, [docker region=eu])",
        )),
    }
}

fn env_map(value: &Value) -> Result<BTreeMap<String, String>, LabeledError> {
    let record = value
        .as_record()
        .map_err(|e| bad(value.span(), "invalid env", e.to_string()))?;
    record
        .iter()
        .map(|(k, v)| Ok((k.clone(), as_string(v)?)))
        .collect()
}

/// Refuses more than one of the given ways to say what to run (a command, `nu` code, a
/// script), each with its name and span, instead of silently keeping one of them.
fn one_thing_to_run(given: [Option<(String, Span)>; 3]) -> Result<(), LabeledError> {
    let given: Vec<(String, Span)> = given.into_iter().flatten().collect();
    if let [(first, first_span), (second, second_span), ..] = given.as_slice() {
        return Err(LabeledError::new("two things to run")
            .with_label(format!("{first} here"), *first_span)
            .with_label(
                format!("and {second} here: give a command, Nushell code (--nu) or a script (--script), one of them"),
                *second_span,
            ));
    }
    Ok(())
}

fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    }
}

impl TaskDraft {
    /// The draft the command line gives: its positional command and its flags.
    pub fn from_flags(call: &EvaluatedCall, cwd: &Path) -> Result<TaskDraft, LabeledError> {
        TaskDraft::from_call(call, cwd, 0)
    }

    /// [`Self::from_flags`] for a command whose first `skip` positional arguments are its
    /// own (`orch schedule add NAME CRON command...`): the command starts after them.
    pub fn from_call(
        call: &EvaluatedCall,
        cwd: &Path,
        skip: usize,
    ) -> Result<TaskDraft, LabeledError> {
        let command = call.positional.get(skip..).unwrap_or_default();
        let mut draft = TaskDraft {
            kind: None,
            spec: TaskSpec::command("", vec![]),
            spans: Vec::new(),
        };
        draft.spec.cwd = Some(cwd.to_path_buf());
        let flag = |name: &str| {
            call.named
                .iter()
                .find(|(n, v)| n.item == name && v.as_ref().is_some_and(|v| !v.is_nothing()))
                .map(|(n, _)| ("--".to_string() + name, n.span))
        };
        let positional = command.first().map(|v| ("a command".to_string(), v.span()));
        one_thing_to_run([positional, flag("nu"), flag("script")])?;
        if let (Some((_, at)), Some((_, delay))) = (flag("at"), flag("delay")) {
            return Err(LabeledError::new("two start times")
                .with_label("--at here", at)
                .with_label("and --delay here: give one of them", delay));
        }
        if let Some(first) = command.first() {
            draft.set_command(&Value::list(command.to_vec(), first.span()), cwd)?;
        }
        // A flag given `null` (as wrappers forward optional flags) counts as not given.
        for (name, value) in &call.named {
            if let Some(value) = value.as_ref().filter(|v| !v.is_nothing()) {
                draft.set(name.item.as_str(), value, cwd)?;
            }
        }
        if call.has_flag("stdin")? {
            draft.spec.stdin = true;
        }
        Ok(draft)
    }

    /// Applies a task record's fields over the draft; an unknown field is an error.
    pub fn apply_record(&mut self, item: &Value, cwd: &Path) -> Result<(), LabeledError> {
        let record: &Record = match item {
            Value::Record { val, .. } => val,
            other => {
                return Err(bad(
                    other.span(),
                    "not a task record",
                    format!(
                        "expected a record such as {{command: [echo hi]}}, got {}",
                        other.get_type()
                    ),
                ));
            }
        };
        let field = |name: &str| {
            record
                .get(name)
                .map(|value| (format!("`{name}`"), value.span()))
        };
        one_thing_to_run([field("command"), field("nu"), field("script")])?;
        if let (Some((_, at)), Some((_, delay))) = (field("at"), field("delay")) {
            return Err(LabeledError::new("two start times")
                .with_label("`at` here", at)
                .with_label("and `delay` here: give one of them", delay));
        }
        for (name, value) in record.iter() {
            let field = name.replace('_', "-");
            if !self.set(&field, value, cwd)? {
                return Err(bad(
                    value.span(),
                    "unknown task field",
                    format!(
                        "`{name}` is not a task setting (use command, nu, script, priority, retries, backoff, max_backoff, timeout, at, delay, after, label, group, on, params, cwd, env, stdin)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Sets a program and its arguments from a word or a list of words.
    fn set_command(&mut self, value: &Value, _cwd: &Path) -> Result<(), LabeledError> {
        let words = command_words(std::slice::from_ref(value))?;
        let mut words = words.into_iter();
        let Some(program) = words.next() else {
            return Err(bad(
                value.span(),
                "empty command",
                "the command has no program",
            ));
        };
        let kind = TaskKind::Command {
            program,
            args: words.collect(),
        };
        self.kind = Some((kind, value.span()));
        Ok(())
    }

    /// Applies one setting; false when `name` is not a setting.
    fn set(&mut self, name: &str, value: &Value, cwd: &Path) -> Result<bool, LabeledError> {
        let span = value.span();
        let field = match name {
            "command" => {
                self.set_command(value, cwd)?;
                "command"
            }
            "nu" => {
                self.kind = Some((
                    TaskKind::Nu {
                        code: as_string(value)?,
                    },
                    span,
                ));
                "command"
            }
            "script" => {
                let path = resolve(cwd, &as_string(value)?);
                if !path.is_file() {
                    let problem = match path.exists() {
                        true => "it is not a file",
                        false => "no such file",
                    };
                    return Err(bad(
                        span,
                        "script not found",
                        format!("{}: {problem}", path.display()),
                    ));
                }
                self.kind = Some((TaskKind::NuFile { path }, span));
                "command"
            }
            "priority" => {
                let p = value
                    .as_int()
                    .map_err(|e| bad(span, "invalid priority", e.to_string()))?;
                self.spec.priority = i32::try_from(p).map_err(|_| {
                    bad(span, "invalid priority", "the priority must fit in 32 bits")
                })?;
                "priority"
            }
            "retries" => {
                let r = non_negative(value, "retries")?;
                self.spec.retries = u32::try_from(r)
                    .map_err(|_| bad(span, "invalid retries", "too many retries"))?;
                "retries"
            }
            "backoff" => {
                self.spec.backoff.initial_ms = millis(value, "backoff")?;
                "backoff"
            }
            "max-backoff" => {
                self.spec.backoff.max_ms = millis(value, "max-backoff")?;
                "backoff"
            }
            "timeout" => {
                self.spec.timeout_ms = Some(millis(value, "timeout")?);
                "timeout"
            }
            "at" | "delay" => {
                self.spec.not_before = Some(start_time(name, value)?);
                "not_before"
            }
            "after" => {
                self.spec.after = task_ids(value)?;
                "after"
            }
            "label" => {
                self.spec.label = Some(as_string(value)?);
                "label"
            }
            "on" => {
                self.spec.on = node_labels(value)?;
                "on"
            }
            "group" => {
                self.spec.group = Some(as_string(value)?);
                "group"
            }
            "params" => {
                self.spec.params = value_to_json(value)?;
                "params"
            }
            "cwd" => {
                self.spec.cwd = Some(resolve(cwd, &as_string(value)?));
                "cwd"
            }
            "env" => {
                self.spec.env = env_map(value)?;
                "env"
            }
            "stdin" => {
                self.spec.stdin = value.as_bool()?;
                "stdin"
            }
            _ => return Ok(false),
        };
        self.spans.retain(|(f, _)| *f != field);
        self.spans.push((field, span));
        Ok(true)
    }

    /// Where each setting came from, by request field (`nu` errors point at the command).
    pub fn field_spans(&self) -> Vec<(&'static str, Span)> {
        let mut spans = self.spans.clone();
        if let Some(command) = spans.iter().find(|(f, _)| *f == "command").copied() {
            spans.push(("nu", command.1));
        }
        spans
    }

    /// The edit the settings given name (`orch edit`): what to run, priority, label,
    /// env, params and after; a setting an edit does not change is refused at its value.
    pub fn into_edit(self) -> Result<TaskEdit, LabeledError> {
        let mut edit = TaskEdit {
            kind: self.kind.map(|(kind, _)| kind),
            ..TaskEdit::default()
        };
        for (field, span) in &self.spans {
            match *field {
                "command" => {} // what to run: `kind`, given by a command, --nu or --script
                "priority" => edit.priority = Some(self.spec.priority),
                "label" => edit.label = Some(self.spec.label.clone()),
                "env" => edit.env = Some(self.spec.env.clone()),
                "params" => edit.params = Some(self.spec.params.clone()),
                "after" => edit.after = Some(self.spec.after.clone()),
                other => {
                    return Err(bad(
                        *span,
                        "not editable",
                        format!(
                            "{other} cannot be edited (edit command, nu, script, priority, label, env, params or after; or cancel the task and submit it again)"
                        ),
                    ));
                }
            }
        }
        Ok(edit)
    }

    /// The task spec, or an error at `span` when nothing to run was given.
    pub fn finish(mut self, span: Span) -> Result<TaskSpec, LabeledError> {
        let Some((kind, _)) = self.kind.take() else {
            return Err(bad(
                span,
                "nothing to run",
                "give a command (orch submit echo hi), Nushell code (--nu '...') or a script (--script file.nu)",
            ));
        };
        self.spec.kind = kind;
        if self.spec.backoff.initial_ms > self.spec.backoff.max_ms {
            self.spec.backoff.max_ms = self.spec.backoff.initial_ms;
        }
        Ok(self.spec)
    }
}

#[cfg(test)]
mod tests {
    use nu_protocol::{Record, Span, Value};

    use super::*;

    fn span(n: usize) -> Span {
        Span::new(n, n + 1)
    }

    fn draft() -> TaskDraft {
        TaskDraft {
            kind: None,
            spec: TaskSpec::command("", vec![]),
            spans: Vec::new(),
        }
    }

    /// The spec of a record `{command: [true], on: <on>}`, or its error.
    fn with_on(on: Value) -> Result<TaskDraft, LabeledError> {
        let mut record = Record::new();
        record.push(
            "command",
            Value::list(vec![Value::string("true", span(1))], span(1)),
        );
        record.push("on", on);
        let mut draft = draft();
        draft.apply_record(&Value::record(record, span(0)), Path::new("/"))?;
        Ok(draft)
    }

    fn label_span(error: &LabeledError) -> (String, Span) {
        let label = &error.labels[0];
        (label.text.clone(), label.span)
    }

    #[test]
    fn on_takes_a_label_or_a_list_of_labels() {
        let one = with_on(Value::string("docker", span(5))).unwrap();
        assert!(one.field_spans().contains(&("on", span(5))));
        assert_eq!(one.finish(span(0)).unwrap().on, ["docker"]);
        let labels = vec![
            Value::string("docker", span(6)),
            Value::string("region=eu", span(7)),
        ];
        let many = with_on(Value::list(labels, span(5))).unwrap();
        assert_eq!(many.finish(span(0)).unwrap().on, ["docker", "region=eu"]);
        let none = with_on(Value::list(vec![], span(5))).unwrap();
        assert!(none.finish(span(0)).unwrap().on.is_empty());
    }

    #[test]
    fn a_wrong_on_is_refused_at_its_value() {
        let error = with_on(Value::int(3, span(5))).err().unwrap();
        assert_eq!(error.msg, "invalid node labels");
        assert_eq!(
            label_span(&error),
            (
                "on: expected a label or a list of labels (docker, [docker region=eu]), got int"
                    .into(),
                span(5)
            )
        );
        let labels = vec![Value::string("docker", span(6)), Value::bool(true, span(7))];
        let error = with_on(Value::list(labels, span(5))).err().unwrap();
        assert_eq!(
            label_span(&error),
            (
                "on: expected each label to be a string, got bool".into(),
                span(7)
            )
        );
    }

    #[test]
    fn unknown_record_keys_are_still_refused() {
        let mut record = Record::new();
        record.push("command", Value::string("true", span(1)));
        record.push("node", Value::string("docker", span(2)));
        let error = draft()
            .apply_record(&Value::record(record, span(0)), Path::new("/"))
            .err()
            .unwrap();
        assert_eq!(error.msg, "unknown task field");
        let (text, at) = label_span(&error);
        assert!(text.starts_with("`node` is not a task setting"), "{text}");
        assert!(text.contains("label, group, on, params"), "{text}");
        assert_eq!(at, span(2));
    }
}
