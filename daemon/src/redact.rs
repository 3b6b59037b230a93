//! Secrets hidden from readers below admin.
//!
//! Every answer that carries what a client submitted (task params and env, a workflow's
//! request and its compensation specs, a test environment's container inspect output)
//! passes through [`for_role`] once, at the point where each interface sends it: the
//! socket's [`crate::server::Connection`] and the HTTP routes. Readers who do not
//! [`Role::sees_secrets`] get a copy with the audit log's rule applied ([`crate::audit::redact`]:
//! keys containing password, secret, token, credential, api_key, private_key, at any
//! depth; environment variables by their names); admins get the record as stored. Events
//! carry no params or env, so the event streams need nothing hidden.

use std::borrow::Cow;

use orch_protocol::{
    Response, Schedule, ScheduleView, ScheduledWork, Task, TaskSpec, TestEnv, Workflow,
    WorkflowView,
};

use crate::audit::{REDACTED, is_secret_name, redact};
use crate::policy::Role;

/// A record that may hold secrets.
pub trait Redact {
    /// Replaces every secret in it with `[redacted]`.
    fn redact(&mut self);
}

/// `value` as a reader with `role` may see it: unchanged for an admin, otherwise a copy
/// with its secrets redacted.
pub fn for_role<T: Redact + Clone>(role: Role, value: &T) -> Cow<'_, T> {
    if role.sees_secrets() {
        return Cow::Borrowed(value);
    }
    let mut copy = value.clone();
    copy.redact();
    Cow::Owned(copy)
}

/// `value` as a reader with `role` may see it, redacted in place below admin (for answers
/// the caller owns; no copy is made).
pub fn into_role<T: Redact>(role: Role, mut value: T) -> T {
    if !role.sees_secrets() {
        value.redact();
    }
    value
}

impl Redact for TaskSpec {
    fn redact(&mut self) {
        redact(&mut self.params);
        for (name, value) in self.env.iter_mut() {
            if is_secret_name(name) {
                *value = REDACTED.to_string();
            }
        }
    }
}

impl Redact for Task {
    fn redact(&mut self) {
        self.spec.redact();
    }
}

impl Redact for Workflow {
    fn redact(&mut self) {
        redact(&mut self.request);
        for spec in self.steps.iter_mut().filter_map(|s| s.rollback.as_mut()) {
            spec.redact();
        }
    }
}

impl Redact for WorkflowView {
    fn redact(&mut self) {
        if let Some(request) = self.request.as_mut() {
            redact(request);
        }
    }
}

impl Redact for Schedule {
    fn redact(&mut self) {
        match &mut self.spec.work {
            ScheduledWork::Task { task } => task.redact(),
            ScheduledWork::Workflow { workflow } => {
                let mut value = serde_json::to_value(&**workflow).unwrap_or_default();
                redact(&mut value);
                // No typed field of a request is named like a secret, so the redacted
                // request reads back; were it not to, nothing of it is shown.
                match serde_json::from_value(value) {
                    Ok(redacted) => *workflow = redacted,
                    Err(_) => {
                        self.spec.work = ScheduledWork::Task {
                            task: Box::new(TaskSpec::command(REDACTED, Vec::new())),
                        }
                    }
                }
            }
        }
    }
}

impl Redact for ScheduleView {
    fn redact(&mut self) {
        self.schedule.redact();
    }
}

impl Redact for TestEnv {
    fn redact(&mut self) {
        for node in self.diagnostics.iter_mut().flat_map(|d| d.nodes.iter_mut()) {
            redact(&mut node.inspect);
        }
    }
}

impl<T: Redact> Redact for Vec<T> {
    fn redact(&mut self) {
        self.iter_mut().for_each(Redact::redact);
    }
}

impl Redact for Response {
    fn redact(&mut self) {
        match self {
            Response::Task { task } => task.redact(),
            Response::Tasks { tasks, .. } => tasks.redact(),
            Response::Workflow(view) => view.redact(),
            Response::Env(env) => env.redact(),
            Response::Envs { envs } => envs.redact(),
            Response::Schedule(schedule) => schedule.redact(),
            Response::Schedules { schedules } => schedules.redact(),
            // No submitted values in these (the audit log is admin-only and redacted when
            // written).
            Response::Health(_)
            | Response::Cluster(_)
            | Response::Event { .. }
            | Response::Log { .. }
            | Response::StreamEnd
            | Response::ShuttingDown
            | Response::Removed { .. }
            | Response::Audit { .. }
            | Response::AuditReport(_)
            | Response::AuditSegments { .. }
            | Response::AuditCompacted { .. }
            | Response::Plan(_)
            | Response::WorkflowSubmitted(_)
            | Response::Workflows { .. }
            | Response::WorkflowSummary(_)
            | Response::Extensions(_)
            | Response::Topologies(_)
            | Response::Queue(_)
            // Notifiers (their secrets and endpoints) are for admins only.
            | Response::Notifier(_)
            | Response::Notifiers { .. }
            | Response::Error(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task() -> Task {
        let mut spec = TaskSpec::command("true", vec![]);
        spec.params = json!({"db_password": "s3cret", "nested": [{"apiToken": "t"}], "host": "h"});
        spec.env.insert("API_TOKEN".into(), "tok".into());
        spec.env.insert("HOME".into(), "/root".into());
        Task {
            id: 1,
            spec,
            state: orch_protocol::TaskState::Queued {
                since: chrono::Utc::now(),
            },
            submitted_at: chrono::Utc::now(),
            attempts: vec![],
            attempts_before_retry: 0,
            progress: None,
        }
    }

    #[test]
    fn readers_below_admin_get_secrets_redacted_and_admins_do_not() {
        let task = task();
        for role in [Role::Viewer, Role::Operator] {
            let seen = for_role(role, &task);
            assert_eq!(
                seen.spec.params,
                json!({"db_password": "[redacted]", "nested": [{"apiToken": "[redacted]"}], "host": "h"})
            );
            assert_eq!(seen.spec.env["API_TOKEN"], "[redacted]");
            assert_eq!(seen.spec.env["HOME"], "/root");
        }
        assert_eq!(*for_role(Role::Admin, &task), task);
    }
}
