//! The one table of operations, and the look-ups the adapters make in it.
//!
//! Reads need viewer, changes operator, the audit log, tokens and stopping the daemon
//! admin; `/health` and `/openapi.json` need no token (every socket peer is at least a
//! viewer, so `health` is open to all of them too).
//!
//! (Over 400 lines: one row per operation, each with its route, role and answer, kept in
//! one place on purpose.)

use super::operation::{Answer, Operation, Route, RouteId};
use super::request_kind::RequestKind as K;
use crate::policy::Access::{self, Anyone, Needs};
use crate::policy::Role::{Admin, Operator, Viewer};

/// A row.
const fn op(
    name: &'static str,
    request: Option<K>,
    access: Access,
    routes: &'static [Route],
) -> Operation {
    Operation {
        name,
        request,
        access,
        routes,
    }
}

const WORKFLOW: Answer = Answer::Json("WorkflowSubmission");
const ENV: Answer = Answer::Json("TestEnv");
const OBJECT: Answer = Answer::Json("Object");

/// Every operation the daemon offers.
pub const OPERATIONS: &[Operation] = &[
    op(
        "health",
        Some(K::Health),
        Anyone,
        &[Route::get(
            RouteId::Health,
            "/health",
            "Service health: version, uptime, store, task counts",
            Answer::Json("HealthReport"),
        )],
    ),
    op(
        "cluster",
        Some(K::Cluster),
        Needs(Viewer),
        &[Route::get(
            RouteId::Cluster,
            "/cluster",
            "The nodes sharing this daemon's PostgreSQL store (role, heartbeat, lease, capacity, labels), the leader and its term",
            Answer::Json("ClusterView"),
        )],
    ),
    op(
        "openapi",
        None,
        Anyone,
        &[Route::get(
            RouteId::OpenApi,
            "/openapi.json",
            "This document",
            OBJECT,
        )],
    ),
    op("tasks.submit", Some(K::Submit), Needs(Operator), &[]),
    op(
        "tasks.list",
        Some(K::List),
        Needs(Viewer),
        &[Route::get(
            RouteId::Tasks,
            "/tasks",
            "Tasks, newest first (query: status=a,b label limit before; before=ID pages on below the last id of a page)",
            Answer::Json("[Task]"),
        )],
    ),
    op(
        "tasks.get",
        Some(K::Get),
        Needs(Viewer),
        &[Route::get(
            RouteId::Task,
            "/tasks/{id}",
            "One task, or the workflow with that id: its summary and a page of its steps (query: offset, limit; next_offset says where the next page starts)",
            Answer::Json("Task"),
        )],
    ),
    op("tasks.wait", Some(K::Wait), Needs(Viewer), &[]),
    op("tasks.pause", Some(K::PauseTask), Needs(Operator), &[]),
    op("tasks.resume", Some(K::ResumeTask), Needs(Operator), &[]),
    op("tasks.signal", Some(K::SignalTask), Needs(Operator), &[]),
    op("tasks.input", Some(K::SendInput), Needs(Operator), &[]),
    op(
        "schedules.add",
        Some(K::ScheduleAdd),
        Needs(Operator),
        &[Route::post(
            RouteId::ScheduleAdd,
            "/schedules",
            "Create a schedule: a task or a workflow submitted at the times of a cron pattern, in a time zone (201)",
            Some("ScheduleSpec"),
            Answer::Json("Schedule"),
        )],
    ),
    op(
        "schedules.list",
        Some(K::Schedules),
        Needs(Viewer),
        &[Route::get(
            RouteId::Schedules,
            "/schedules",
            "Every schedule, by name, with its upcoming times (query: upcoming, at most 100)",
            Answer::Json("[ScheduleView]"),
        )],
    ),
    op(
        "schedules.change",
        Some(K::ScheduleChange),
        Needs(Operator),
        &[Route::delete(
            RouteId::ScheduleRemove,
            "/schedules/{id}",
            "Remove a schedule by its name (what it submitted stays); the schedule as it was",
            Answer::Json("Schedule"),
        )],
    ),
    op("notify.add", Some(K::NotifierAdd), Needs(Admin), &[]),
    op("notify.list", Some(K::Notifiers), Needs(Admin), &[]),
    op("notify.change", Some(K::NotifierChange), Needs(Admin), &[]),
    op(
        "queue.get",
        Some(K::Queue),
        Needs(Viewer),
        &[Route::get(
            RouteId::Queue,
            "/queue",
            "The queue's controls: whether it is paused, and each group with its parallel limit, pause and running tasks",
            Answer::Json("QueueView"),
        )],
    ),
    op(
        "queue.change",
        Some(K::QueueChange),
        Needs(Operator),
        &[Route::post(
            RouteId::QueueChange,
            "/queue",
            "Change the queue's controls: add_group, remove_group, parallel, pause or resume (the queue, or a group)",
            Some("QueueChange"),
            Answer::Json("QueueView"),
        )],
    ),
    op(
        "tasks.cancel",
        Some(K::Cancel),
        Needs(Operator),
        &[Route::post(
            RouteId::TaskCancel,
            "/tasks/{id}/cancel",
            "Cancel a task: a waiting one ends cancelled, a running attempt is stopped (TERM to its process group, KILL after the grace); answered once durable",
            None,
            Answer::Json("Task"),
        )],
    ),
    op(
        "tasks.retry",
        Some(K::Retry),
        Needs(Operator),
        &[Route::post(
            RouteId::TaskRetry,
            "/tasks/{id}/retry",
            "Queue a failed, cancelled or dependency_failed task again with a fresh retry budget (a workflow's step while its workflow runs); its skipped dependants wait for it again",
            None,
            Answer::Json("Task"),
        )],
    ),
    op("tasks.change", Some(K::ChangeTask), Needs(Operator), &[]),
    op(
        "tasks.logs",
        Some(K::Logs),
        Needs(Viewer),
        &[Route::get(
            RouteId::TaskLog,
            "/tasks/{id}/logs",
            "A page of a task's log by byte offset (query: offset, limit up to 65536; tail=N: the last N bytes); next_offset is where to ask next, complete says the task is final",
            Answer::Json("LogPage"),
        )],
    ),
    op(
        "tasks.dependants",
        None,
        Needs(Viewer),
        &[Route::get(
            RouteId::TaskDependants,
            "/tasks/{id}/dependants",
            "The tasks that name this one in their dependencies (hard or soft), oldest first, among the tasks submitted after it (at most 100 of them, looked for among the next 10,000 ids)",
            Answer::Json("Dependants"),
        )],
    ),
    op("tasks.clean", Some(K::Clean), Needs(Operator), &[]),
    op(
        "events.watch",
        Some(K::Watch),
        Needs(Viewer),
        &[Route::get(
            RouteId::Events,
            "/events",
            "Server-sent events from the event bus (query: since, task, workflow, type: event types, comma-separated)",
            Answer::Events,
        )],
    ),
    op(
        "workflows.submit",
        Some(K::WorkflowSubmit),
        Needs(Operator),
        &[
            Route::post(
                RouteId::ServersCreate,
                "/workflows/servers/create",
                "Submit a server creation workflow (201 with task_id; 200 with the plan in check mode)",
                Some("ServersRequest"),
                WORKFLOW,
            ),
            Route::post(
                RouteId::TaskservCreate,
                "/workflows/taskserv/create",
                "Submit a taskserv creation workflow",
                Some("TaskservRequest"),
                WORKFLOW,
            ),
            Route::post(
                RouteId::ClusterCreate,
                "/workflows/cluster/create",
                "Submit a cluster creation workflow",
                Some("ClusterRequest"),
                WORKFLOW,
            ),
            Route::post(
                RouteId::TaskservInstall,
                "/extensions/taskservs/install",
                "Install a taskserv on servers of an infra (a taskserv workflow)",
                Some("TaskservRequest"),
                WORKFLOW,
            ),
        ],
    ),
    op("workflows.plan", Some(K::WorkflowPlan), Needs(Viewer), &[]),
    op(
        "workflows.list",
        Some(K::Workflows),
        Needs(Viewer),
        &[Route::get(
            RouteId::Workflows,
            "/workflows",
            "Workflows' summaries, newest first (query: limit, at most 1000, default 100; before=ID pages on below the last id of a page)",
            Answer::Json("[WorkflowSummary]"),
        )],
    ),
    op(
        "workflows.get",
        Some(K::Workflow),
        Needs(Viewer),
        &[Route::get(
            RouteId::Workflow,
            "/workflows/{id}",
            "One workflow: its summary and a page of its steps, then its compensations (query: offset, limit; next_offset says where the next page starts)",
            Answer::Json("WorkflowView"),
        )],
    ),
    op(
        "workflows.cancel",
        Some(K::WorkflowCancel),
        Needs(Operator),
        &[Route::post(
            RouteId::WorkflowCancel,
            "/workflows/{id}/cancel",
            "Cancel a workflow's unfinished steps (with rollback enabled, its completed steps are compensated); answered once durable",
            None,
            Answer::Json("WorkflowSummary"),
        )],
    ),
    op(
        "workflows.rollback",
        Some(K::WorkflowRollback),
        Needs(Operator),
        &[Route::post(
            RouteId::WorkflowRollback,
            "/workflows/{id}/rollback",
            "Compensate a finished workflow's completed steps, last first; answered once durable",
            None,
            Answer::Json("WorkflowSummary"),
        )],
    ),
    op(
        "workflows.restart",
        Some(K::WorkflowRestart),
        Needs(Operator),
        &[Route::post(
            RouteId::WorkflowRestart,
            "/workflows/{id}/restart",
            "Run a finished workflow again from one of its steps: a new workflow of that step and every step after it, the steps before it taken as done (each must have succeeded) (201)",
            Some("WorkflowRestart"),
            Answer::Json("WorkflowSummary"),
        )],
    ),
    op(
        "extensions",
        Some(K::Extensions),
        Needs(Viewer),
        &[
            Route::get(
                RouteId::Providers,
                "/extensions/providers",
                "Providers",
                OBJECT,
            ),
            Route::get(
                RouteId::Taskservs,
                "/extensions/taskservs",
                "Taskservs",
                OBJECT,
            ),
            Route::get(
                RouteId::Clusters,
                "/extensions/clusters",
                "Cluster definitions",
                OBJECT,
            ),
        ],
    ),
    op(
        "envs.create",
        Some(K::EnvCreate),
        Needs(Operator),
        &[Route::post(
            RouteId::EnvCreate,
            "/test/environments/create",
            "Create a test environment (answered once settled)",
            Some("EnvRequest"),
            ENV,
        )],
    ),
    op(
        "envs.list",
        Some(K::Envs),
        Needs(Viewer),
        &[Route::get(
            RouteId::Envs,
            "/test/environments",
            "Test environments, newest first (query: before, limit: 1000 by default, at most 10,000; alive=true: not deleted); x-next-before names the next page",
            Answer::Json("[TestEnv]"),
        )],
    ),
    op(
        "envs.get",
        Some(K::Env),
        Needs(Viewer),
        &[Route::get(
            RouteId::Env,
            "/test/environments/{id}",
            "One test environment",
            ENV,
        )],
    ),
    op(
        "envs.run",
        Some(K::EnvRun),
        Needs(Operator),
        &[Route::post(
            RouteId::EnvRun,
            "/test/environments/{id}/run",
            "Run a test environment's tests",
            None,
            ENV,
        )],
    ),
    op(
        "envs.delete",
        Some(K::EnvDelete),
        Needs(Operator),
        &[Route::delete(
            RouteId::EnvDelete,
            "/test/environments/{id}",
            "Delete a test environment's containers and network",
            ENV,
        )],
    ),
    op(
        "envs.logs",
        Some(K::EnvLogs),
        Needs(Viewer),
        &[Route::get(
            RouteId::EnvLogs,
            "/test/environments/{id}/logs",
            "A test environment's log (setup, probes, tests) as text; with offset, tail or limit, a page of it as a LogPage (as /tasks/{id}/logs)",
            Answer::Text,
        )],
    ),
    op(
        "envs.topologies",
        Some(K::Topologies),
        Needs(Viewer),
        &[Route::get(
            RouteId::Topologies,
            "/test/topologies",
            "The topology templates test environments are created from, with any that could not be read",
            Answer::Json("TopologiesReport"),
        )],
    ),
    op(
        "activity",
        None,
        Needs(Viewer),
        &[Route::get(
            RouteId::Activity,
            "/activity",
            "The last hour, minute by minute: tasks submitted, succeeded and failed (counted by this daemon since it started, and read back from the event log at its start)",
            Answer::Json("Activity"),
        )],
    ),
    op(
        "metrics",
        None,
        Needs(Viewer),
        &[Route::get(
            RouteId::Metrics,
            "/metrics",
            "Prometheus metrics",
            Answer::Text,
        )],
    ),
    op(
        "audit.list",
        Some(K::Audit),
        Needs(Admin),
        &[Route::get(
            RouteId::Audit,
            "/audit",
            "Audit log entries, newest first (query: action, uid, ok=true|false, limit; before=SEQ pages on below the last entry of a page)",
            Answer::Json("[AuditEntry]"),
        )],
    ),
    op(
        "audit.verify",
        Some(K::AuditVerify),
        Needs(Admin),
        &[Route::get(
            RouteId::AuditVerify,
            "/audit/verify",
            "Check the audit log's hash chain, archived segments included",
            Answer::Json("AuditReport"),
        )],
    ),
    op(
        "audit.segments",
        Some(K::AuditSegments),
        Needs(Admin),
        &[Route::get(
            RouteId::AuditSegments,
            "/audit/segments",
            "The audit log's archived segments, oldest first",
            Answer::Json("[AuditSegment]"),
        )],
    ),
    op("audit.compact", Some(K::AuditCompact), Needs(Admin), &[]),
    op("audit.export", Some(K::AuditExport), Needs(Admin), &[]),
    op(
        "whoami",
        None,
        Needs(Viewer),
        &[Route::get(
            RouteId::WhoAmI,
            "/whoami",
            "The token the request carries: its name and role (what the dashboard shows and offers)",
            Answer::Json("Caller"),
        )],
    ),
    op(
        "tokens.list",
        None,
        Needs(Admin),
        &[Route::get(
            RouteId::Tokens,
            "/auth/tokens",
            "Every token's id, name, role and creation time (never a secret)",
            Answer::Json("[TokenSummary]"),
        )],
    ),
    op(
        "tokens.create",
        None,
        Needs(Admin),
        &[Route::post(
            RouteId::TokenCreate,
            "/auth/tokens",
            "Make a token ({name, role}); its secret is shown once",
            Some("NewToken"),
            Answer::Json("CreatedToken"),
        )],
    ),
    op(
        "tokens.revoke",
        None,
        Needs(Admin),
        &[Route::delete(
            RouteId::TokenRevoke,
            "/auth/tokens/{id}",
            "Revoke a token at once (409 for the last admin token)",
            Answer::Json("TokenSummary"),
        )],
    ),
    op("daemon.shutdown", Some(K::Shutdown), Needs(Admin), &[]),
    op("daemon.handover", Some(K::Handover), Needs(Admin), &[]),
];

/// The operation a socket request asks for.
pub fn for_request(kind: K) -> &'static Operation {
    OPERATIONS
        .iter()
        .find(|op| op.request == Some(kind))
        .expect("every request kind has its row (a unit test checks)")
}

/// The operations a standby node of a cluster serves itself: reads of the shared store,
/// of the files every node has (the extensions, the topologies, the plan they give), the
/// logs of the attempts it ran, its health, the cluster, and its own stop. Every other
/// one is the leader's (its test environments and metrics are the leader's own too).
const ON_STANDBY: &[&str] = &[
    "health",
    "cluster",
    "openapi",
    "tasks.list",
    "tasks.get",
    "tasks.wait",
    "tasks.logs",
    "tasks.dependants",
    "whoami",
    "queue.get",
    "schedules.list",
    "notify.list",
    "events.watch",
    "workflows.plan",
    "workflows.list",
    "workflows.get",
    "extensions",
    "envs.topologies",
    "audit.list",
    "audit.verify",
    "audit.segments",
    "daemon.shutdown",
    "daemon.handover",
];

/// The operations a standby forwards to the leader for its socket clients (through the
/// store: [`crate::cluster::relay`]): the changes and the test environments, which have
/// one answer each. The streams it does not serve (a test environment's log, the audit
/// log's export) are refused, naming the leader.
const FORWARDED: &[&str] = &[
    "tasks.submit",
    "tasks.cancel",
    "tasks.retry",
    "tasks.change",
    "tasks.clean",
    "tasks.pause",
    "tasks.resume",
    "tasks.signal",
    "tasks.input",
    "queue.change",
    "schedules.add",
    "schedules.change",
    "notify.add",
    "notify.change",
    "workflows.submit",
    "workflows.cancel",
    "workflows.rollback",
    "workflows.restart",
    "envs.create",
    "envs.list",
    "envs.get",
    "envs.run",
    "envs.delete",
    "audit.compact",
];

impl Operation {
    /// Whether a standby node serves this operation itself (else it forwards it to the
    /// leader, or refuses it naming the leader).
    pub fn served_on_standby(&self) -> bool {
        ON_STANDBY.contains(&self.name)
    }

    /// Whether a standby forwards this operation to the leader.
    pub fn forwarded(&self) -> bool {
        FORWARDED.contains(&self.name)
    }
}

/// Every HTTP route, with its operation.
pub fn routes() -> impl Iterator<Item = (&'static Operation, &'static Route)> {
    OPERATIONS
        .iter()
        .flat_map(|op| op.routes.iter().map(move |route| (op, route)))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::ops::Method;

    /// The wire names of every socket request (`health`, `submit`, ...), from the
    /// protocol's own schema.
    fn request_tags() -> Vec<String> {
        let schema = schemars::schema_for!(orch_protocol::Request).to_value();
        let variants = schema["oneOf"]
            .as_array()
            .expect("an internally tagged enum");
        variants
            .iter()
            .map(|v| {
                let tag = &v["properties"]["request"];
                tag["const"]
                    .as_str()
                    .or_else(|| tag["enum"][0].as_str())
                    .expect("each variant names its tag")
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn every_socket_request_has_exactly_one_row() {
        let kinds: Vec<K> = OPERATIONS.iter().filter_map(|op| op.request).collect();
        let unique: HashSet<K> = kinds.iter().copied().collect();
        assert_eq!(unique.len(), kinds.len(), "a request kind has two rows");
        assert_eq!(kinds.len(), request_tags().len(), "{:?}", request_tags());
        for kind in kinds {
            assert_eq!(for_request(kind).request, Some(kind));
        }
    }

    #[test]
    fn names_are_unique_and_each_route_has_one_handler_and_one_method_and_path() {
        let names: HashSet<&str> = OPERATIONS.iter().map(|op| op.name).collect();
        assert_eq!(names.len(), OPERATIONS.len());
        let ids: HashSet<RouteId> = routes().map(|(_, r)| r.id).collect();
        let endpoints: HashSet<(Method, &str)> =
            routes().map(|(_, r)| (r.method, r.path)).collect();
        assert_eq!(ids.len(), routes().count());
        assert_eq!(endpoints.len(), routes().count());
    }

    #[test]
    fn a_standby_serves_forwards_or_refuses_as_a_stream_every_socket_request() {
        for op in OPERATIONS.iter().filter(|op| op.request.is_some()) {
            let refused = !op.served_on_standby() && !op.forwarded();
            assert!(
                !(op.served_on_standby() && op.forwarded()),
                "{} is served and forwarded",
                op.name
            );
            assert_eq!(
                refused,
                matches!(op.name, "envs.logs" | "audit.export"),
                "{} is neither served nor forwarded on a standby",
                op.name
            );
        }
        for name in FORWARDED {
            assert!(
                OPERATIONS
                    .iter()
                    .any(|op| op.name == *name && op.request.is_some())
            );
        }
        // A path whose methods a standby treats differently would answer the refused one
        // with 405 rather than the refusal naming the leader.
        let refused = |op: &Operation| !op.served_on_standby() && !op.forwarded();
        for (_, route) in routes() {
            let on_path: Vec<bool> = routes()
                .filter(|(_, r)| r.path == route.path)
                .map(|(op, _)| refused(op))
                .collect();
            assert!(
                on_path.iter().all(|r| *r == on_path[0]),
                "{} mixes refused and answered methods on a standby",
                route.path
            );
        }
    }

    #[test]
    fn reads_need_viewer_changes_operator_and_the_audit_log_and_tokens_admin() {
        for (op, route) in routes() {
            let expected = match (route.method, route.path) {
                (_, "/health" | "/openapi.json") => None,
                (_, path) if path.starts_with("/audit") || path.starts_with("/auth") => Some(Admin),
                (Method::Get, _) => Some(Viewer),
                _ => Some(Operator),
            };
            assert_eq!(
                op.access.role(),
                expected,
                "{} {}",
                route.method.as_str(),
                route.path
            );
        }
    }
}
