//! `orch submit`: add a task (or, from a list of records, many tasks at once).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{
    Category, Example, LabeledError, PipelineData, Record, Signature, Span, SyntaxShape, Type,
    Value,
};
use orch_protocol::{Request, TaskKind, TaskSpec};

use crate::OrchestratorPlugin;
use crate::connection::{expect_tasks, labeled};
use crate::convert::{task_row, value_to_json};

/// `orch submit`
pub struct Submit;

impl PluginCommand for Submit {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        "orch submit"
    }

    fn description(&self) -> &str {
        "Queue a task: a program with its arguments, or Nushell code run by the real `nu`."
    }

    fn extra_description(&self) -> &str {
        r#"The program runs directly, without a shell, in the current directory. Pipe in a record to submit one task, or a list of records to submit many in one durable step; each record takes the same settings as the flags (command, nu, script, priority, retries, backoff, max_backoff, timeout, after, label, params, cwd, env), and the flags give defaults for every record.

A task reports progress by printing a JSON line such as {"progress": 40, "message": "installing"} on its standard output."#
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name())
            .input_output_types(vec![
                (Type::list(Type::Any), Type::table()),
                (Type::record(), Type::record()),
                (Type::Any, Type::record()),
            ])
            .rest(
                "command",
                SyntaxShape::Any,
                "The program and its arguments (a list works too: [sh -c 'exit 3']).",
            )
            .named(
                "nu",
                SyntaxShape::String,
                "Nushell code to run; `$params` holds --params.",
                Some('n'),
            )
            .named(
                "script",
                SyntaxShape::Filepath,
                "A Nushell script file to run (`$env.ORCH_PARAMS` holds --params as JSON).",
                None,
            )
            .named(
                "priority",
                SyntaxShape::Int,
                "Higher runs first (default 0).",
                Some('p'),
            )
            .named(
                "retries",
                SyntaxShape::Int,
                "How often a failed attempt is retried (default 0).",
                Some('r'),
            )
            .named(
                "backoff",
                SyntaxShape::Duration,
                "Delay before the first retry, doubling each time, with jitter (default 1sec).",
                None,
            )
            .named(
                "max-backoff",
                SyntaxShape::Duration,
                "Longest delay between retries (default 1min).",
                None,
            )
            .named(
                "timeout",
                SyntaxShape::Duration,
                "Kill an attempt (its whole process group) after this long.",
                Some('t'),
            )
            .named(
                "after",
                SyntaxShape::Any,
                "Task id(s) that must succeed first.",
                Some('a'),
            )
            .named(
                "label",
                SyntaxShape::String,
                "A label to find the task by.",
                Some('l'),
            )
            .named(
                "params",
                SyntaxShape::Any,
                "Structured parameters handed to the task.",
                None,
            )
            .named(
                "cwd",
                SyntaxShape::Directory,
                "Working directory (default: the current directory).",
                None,
            )
            .named(
                "env",
                SyntaxShape::Record(Default::default()),
                "Extra environment variables.",
                None,
            )
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![
            Example {
                example: "orch submit echo hello",
                description: "Run a program",
                result: None,
            },
            Example {
                example: "orch submit [sh -c 'exit 3'] --retries 2 --backoff 500ms",
                description: "Retry a flaky command twice, waiting 250-500ms then 500ms-1s",
                result: None,
            },
            Example {
                example: "orch submit --nu 'print $\"installing ($params.taskserv)\"' --params {taskserv: postgres} --timeout 10min",
                description: "Run Nushell code with structured parameters and a timeout",
                result: None,
            },
            Example {
                example: "let db = (orch submit --label db --nu 'sleep 1sec'); orch submit --after $db.id --label app echo ready",
                description: "Start one task after another succeeded",
                result: None,
            },
            Example {
                example: "1..100 | each {|i| {command: [echo $i], priority: ($i mod 3)} } | orch submit",
                description: "Submit a hundred tasks in one durable step",
                result: None,
            },
        ]
    }

    fn run(
        &self,
        plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        input: PipelineData,
    ) -> Result<PipelineData, LabeledError> {
        let cwd = PathBuf::from(engine.get_current_dir()?);
        let defaults = Draft::from_flags(call, &cwd)?;
        let input = input.into_value(call.head)?;
        let (specs, batch, spans) = match input {
            Value::Record { .. } => {
                let mut draft = defaults.clone();
                draft.apply_record(&input, &cwd)?;
                let spec = draft.finish(input.span())?;
                (vec![spec], false, defaults.field_spans())
            }
            Value::List { vals, .. } => {
                let mut specs = Vec::with_capacity(vals.len());
                for item in &vals {
                    let mut draft = defaults.clone();
                    draft.apply_record(item, &cwd)?;
                    specs.push(draft.finish(item.span())?);
                }
                (specs, true, defaults.field_spans())
            }
            // Other input (such as the item `each` hands its closure) is not a task:
            // the arguments say what to run.
            _ => {
                let spec = defaults.clone().finish(call.head)?;
                (vec![spec], false, defaults.field_spans())
            }
        };
        if specs.is_empty() {
            return Ok(PipelineData::value(Value::list(vec![], call.head), None));
        }
        let answer = plugin
            .call(engine, &Request::Submit { tasks: specs })
            .map_err(|e| labeled(e, call.head, &spans))?;
        let tasks = expect_tasks(answer, call.head)?;
        let rows: Vec<Value> = tasks.iter().map(|t| task_row(t, call.head)).collect();
        let value = if batch {
            Value::list(rows, call.head)
        } else {
            rows.into_iter().next().unwrap_or(Value::nothing(call.head))
        };
        Ok(PipelineData::value(value, None))
    }
}

/// A task spec being assembled from flags and record fields.
#[derive(Clone)]
struct Draft {
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

fn task_ids(value: &Value) -> Result<Vec<u64>, LabeledError> {
    let mut ids = Vec::new();
    super::ids_from_value(value, &mut ids)?;
    Ok(ids)
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

fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    if path.is_absolute() {
        path
    } else {
        cwd.join(path)
    }
}

impl Draft {
    fn from_flags(call: &EvaluatedCall, cwd: &Path) -> Result<Draft, LabeledError> {
        let mut draft = Draft {
            kind: None,
            spec: TaskSpec::command("", vec![]),
            spans: Vec::new(),
        };
        draft.spec.cwd = Some(cwd.to_path_buf());
        if !call.positional.is_empty() {
            let span = call.positional[0].span();
            draft.set_command(&Value::list(call.positional.clone(), span), cwd)?;
        }
        // A flag given `null` (as wrappers forward optional flags) counts as not given.
        for (name, value) in &call.named {
            if let Some(value) = value.as_ref().filter(|v| !v.is_nothing()) {
                draft.set(name.item.as_str(), value, cwd)?;
            }
        }
        Ok(draft)
    }

    fn apply_record(&mut self, item: &Value, cwd: &Path) -> Result<(), LabeledError> {
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
        for (name, value) in record.iter() {
            let field = name.replace('_', "-");
            if !self.set(&field, value, cwd)? {
                return Err(bad(
                    value.span(),
                    "unknown task field",
                    format!(
                        "`{name}` is not a task setting (use command, nu, script, priority, retries, backoff, max_backoff, timeout, after, label, params, cwd, env)"
                    ),
                ));
            }
        }
        Ok(())
    }

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
            "after" => {
                self.spec.after = task_ids(value)?;
                "after"
            }
            "label" => {
                self.spec.label = Some(as_string(value)?);
                "label"
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
            _ => return Ok(false),
        };
        self.spans.retain(|(f, _)| *f != field);
        self.spans.push((field, span));
        Ok(true)
    }

    fn field_spans(&self) -> Vec<(&'static str, Span)> {
        let mut spans = self.spans.clone();
        if let Some(command) = spans.iter().find(|(f, _)| *f == "command").copied() {
            spans.push(("nu", command.1));
        }
        spans
    }

    fn finish(mut self, span: Span) -> Result<TaskSpec, LabeledError> {
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

#[test]
fn test_examples() {
    crate::commands::test_examples(&Submit);
}
