//! One file per `orch` command.

mod audit;
mod audit_verify;
mod batch_file;
mod cancel;
mod clean;
mod daemon_start;
mod daemon_status;
mod daemon_stop;
mod extensions;
mod group;
mod health;
pub mod logs;
mod retry;
mod submit;
mod task;
mod tasks;
mod test_env_by_id;
mod test_env_create;
mod test_topology_show;
mod wait;
mod watch;
mod workflow_args;
mod workflow_batch;
mod workflow_cluster;
mod workflow_list;
mod workflow_plan;
mod workflow_servers;
mod workflow_show;
mod workflow_taskserv;

use nu_plugin::{EngineInterface, EvaluatedCall, PluginCommand};
use nu_protocol::{LabeledError, Spanned, Value};
use orch_protocol::{Request, Task, TaskStatus};

use crate::OrchestratorPlugin;
use crate::connection::{expect_task, labeled};

/// Every command of the plugin.
pub fn all() -> Vec<Box<dyn PluginCommand<Plugin = OrchestratorPlugin>>> {
    vec![
        Box::new(group::ORCH),
        Box::new(health::Health),
        Box::new(submit::Submit),
        Box::new(tasks::Tasks),
        Box::new(task::TaskCommand),
        Box::new(wait::Wait),
        Box::new(cancel::Cancel),
        Box::new(retry::Retry),
        Box::new(watch::Watch),
        Box::new(logs::Logs),
        Box::new(clean::Clean),
        Box::new(audit::Audit),
        Box::new(audit_verify::AuditVerify),
        Box::new(group::DAEMON),
        Box::new(daemon_start::DaemonStart),
        Box::new(daemon_stop::DaemonStop),
        Box::new(daemon_status::DaemonStatus),
        Box::new(group::WORKFLOW),
        Box::new(group::WORKFLOW_SUBMIT),
        Box::new(workflow_servers::SubmitServers),
        Box::new(workflow_taskserv::SubmitTaskserv),
        Box::new(workflow_cluster::SubmitCluster),
        Box::new(workflow_batch::SubmitBatch),
        Box::new(workflow_list::WorkflowList),
        Box::new(workflow_show::WorkflowShow),
        Box::new(workflow_plan::WorkflowPlan),
        Box::new(workflow_show::CANCEL),
        Box::new(workflow_show::ROLLBACK),
        Box::new(group::EXTENSIONS),
        Box::new(extensions::PROVIDERS),
        Box::new(extensions::TASKSERVS),
        Box::new(extensions::CLUSTERS),
        Box::new(group::TEST),
        Box::new(group::TEST_ENV),
        Box::new(test_env_create::TestEnvCreate),
        Box::new(test_env_by_id::EnvList),
        Box::new(test_env_by_id::SHOW),
        Box::new(test_env_by_id::RUN),
        Box::new(test_env_by_id::EnvLogs),
        Box::new(test_env_by_id::DELETE),
        Box::new(group::TEST_TOPOLOGY),
        Box::new(test_topology_show::TopologyList),
        Box::new(test_topology_show::TopologyShow),
    ]
}

/// A named flag's value, where `--flag null` (what a wrapper passes for an unset
/// optional flag of its own) counts as not given.
pub fn flag<T: nu_protocol::FromValue>(
    call: &EvaluatedCall,
    name: &str,
) -> Result<Option<T>, LabeledError> {
    match call.get_flag_value(name) {
        None | Some(Value::Nothing { .. }) => Ok(None),
        Some(value) => Ok(Some(T::from_value(value)?)),
    }
}

/// A task id argument: a non-negative integer.
pub fn task_id(value: Spanned<i64>) -> Result<u64, LabeledError> {
    u64::try_from(value.item).map_err(|_| {
        LabeledError::new("invalid task id")
            .with_label("task ids are positive integers", value.span)
    })
}

/// Sends the request that `make` builds for the task named by the first argument, and
/// returns the task it answers with; errors about the id point at that argument.
pub fn request_for_task(
    plugin: &OrchestratorPlugin,
    engine: &EngineInterface,
    call: &EvaluatedCall,
    make: impl FnOnce(u64) -> Request,
) -> Result<Task, LabeledError> {
    let id_arg: Spanned<i64> = call.req(0)?;
    let id = task_id(id_arg)?;
    let answer = plugin
        .call(engine, &make(id))
        .map_err(|e| labeled(e, call.head, &[("id", id_arg.span)]))?;
    expect_task(answer, call.head)
}

/// Parses `--status` (a name or a list of names).
pub fn statuses(value: Option<Value>) -> Result<Vec<TaskStatus>, LabeledError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let values = match value {
        Value::List { vals, .. } => vals.into_owned(),
        other => vec![other],
    };
    values
        .iter()
        .map(|v| {
            let name = v.as_str().map_err(|e| {
                LabeledError::new("invalid status").with_label(e.to_string(), v.span())
            })?;
            TaskStatus::parse(name).ok_or_else(|| {
                let known: Vec<_> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
                LabeledError::new("unknown status").with_label(
                    format!("`{name}` is not a status; use one of {}", known.join(", ")),
                    v.span(),
                )
            })
        })
        .collect()
}

/// The `--limit` flag: a count that must not be negative.
pub fn limit_flag(call: &EvaluatedCall) -> Result<Option<usize>, LabeledError> {
    let Some(n) = call.get_flag::<i64>("limit")? else {
        return Ok(None);
    };
    usize::try_from(n).map(Some).map_err(|_| {
        LabeledError::new("invalid limit").with_label(
            "the limit must not be negative",
            call.get_flag_span("limit").unwrap_or(call.head),
        )
    })
}

/// The most ids a range of task ids may expand to.
const MAX_RANGE_IDS: usize = 1_000_000;

/// Task ids from pipeline input: ints, task records (with `id`), or lists of either.
pub fn ids_from_value(value: &Value, out: &mut Vec<u64>) -> Result<(), LabeledError> {
    match value {
        Value::Int {
            val, internal_span, ..
        } => out.push(task_id(Spanned {
            item: *val,
            span: *internal_span,
        })?),
        Value::Record {
            val, internal_span, ..
        } => match val.get("id") {
            Some(id) => ids_from_value(id, out)?,
            None => {
                return Err(LabeledError::new("no task id in record")
                    .with_label("expected a task record with an `id` column", *internal_span));
            }
        },
        Value::List { vals, .. } => {
            for v in vals {
                ids_from_value(v, out)?;
            }
        }
        Value::Range { val, .. } => {
            let span = value.span();
            // An open range (`1..`) never ends: refuse it rather than loop forever.
            let ids = val.into_range_iter(span, nu_protocol::Signals::empty());
            for (n, v) in ids.enumerate() {
                if n == MAX_RANGE_IDS {
                    return Err(LabeledError::new("range too long").with_label(
                        format!("a range of task ids may hold at most {MAX_RANGE_IDS} ids"),
                        span,
                    ));
                }
                ids_from_value(&v, out)?;
            }
        }
        Value::Nothing { .. } => {}
        other => {
            return Err(LabeledError::new("not a task id").with_label(
                format!("expected an int or a task record, got {}", other.get_type()),
                other.span(),
            ));
        }
    }
    Ok(())
}

/// Parse errors caused by builtins the test harness does not load (`where`, and the
/// closure parameters of `each`).
#[cfg(test)]
fn caused_by_missing_builtin(error: &nu_protocol::ParseError) -> bool {
    use nu_protocol::ParseError;
    match error {
        ParseError::UnknownState(message, _) => message.contains("declaration not found"),
        ParseError::VariableNotFound(..) => true,
        _ => false,
    }
}

/// Checks a command's examples: every example must parse against the plugin's real
/// signatures (flags, their types, arity), and those with an expected value must produce it.
#[cfg(test)]
pub fn test_examples(command: &impl PluginCommand<Plugin = OrchestratorPlugin>) {
    let mut test = nu_plugin_test_support::PluginTest::new(
        "orchestrator",
        OrchestratorPlugin::default().into(),
    )
    .expect("the plugin loads in the test harness");
    for example in command.examples() {
        let mut working_set = nu_protocol::engine::StateWorkingSet::new(test.engine_state());
        nu_parser::parse(&mut working_set, None, example.example.as_bytes(), false);
        // The harness knows the language core and this plugin, not filters such as `where`
        // or `each`: errors that only come from those missing commands are not the
        // example's fault. Everything about our own commands (flags, types, arity) counts.
        let errors: Vec<_> = working_set
            .parse_errors
            .iter()
            .filter(|e| !caused_by_missing_builtin(e))
            .collect();
        assert!(
            errors.is_empty(),
            "example `{}` of `{}` does not parse: {errors:?}",
            example.example,
            command.name(),
        );
    }
    test.test_command_examples(command)
        .expect("the examples with expected values pass");
}
