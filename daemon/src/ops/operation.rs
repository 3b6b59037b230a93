//! The shape of a row of the operations table ([`super::OPERATIONS`]).

use super::RequestKind;
use crate::policy::Access;

/// One operation: what it is called, how each interface asks for it, who may.
#[derive(Debug)]
pub struct Operation {
    /// Its name, for people (`tasks.get`).
    pub name: &'static str,
    /// The socket request that asks for it (none: HTTP only).
    pub request: Option<RequestKind>,
    /// Who may do it, on every interface.
    pub access: Access,
    /// The HTTP routes that ask for it (none: socket only).
    pub routes: &'static [Route],
}

/// One HTTP route of an operation, with what its OpenAPI entry says.
#[derive(Debug)]
pub struct Route {
    /// Which handler serves it (the HTTP adapter binds one to each).
    pub id: RouteId,
    /// Its method.
    pub method: Method,
    /// Its path, with `{id}` for a path parameter.
    pub path: &'static str,
    /// The OpenAPI summary.
    pub summary: &'static str,
    /// The name of the request body's schema, if it takes one.
    pub body: Option<&'static str>,
    /// What it answers with.
    pub answer: Answer,
}

impl Route {
    /// A `GET` route.
    pub const fn get(
        id: RouteId,
        path: &'static str,
        summary: &'static str,
        answer: Answer,
    ) -> Route {
        Route::new(id, Method::Get, path, summary, None, answer)
    }

    /// A `POST` route, taking a body of the schema `body` when there is one.
    pub const fn post(
        id: RouteId,
        path: &'static str,
        summary: &'static str,
        body: Option<&'static str>,
        answer: Answer,
    ) -> Route {
        Route::new(id, Method::Post, path, summary, body, answer)
    }

    /// A `DELETE` route.
    pub const fn delete(
        id: RouteId,
        path: &'static str,
        summary: &'static str,
        answer: Answer,
    ) -> Route {
        Route::new(id, Method::Delete, path, summary, None, answer)
    }

    const fn new(
        id: RouteId,
        method: Method,
        path: &'static str,
        summary: &'static str,
        body: Option<&'static str>,
        answer: Answer,
    ) -> Route {
        Route {
            id,
            method,
            path,
            summary,
            body,
            answer,
        }
    }
}

/// The HTTP methods the routes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET` (and `HEAD`).
    Get,
    /// `POST`.
    Post,
    /// `DELETE`.
    Delete,
}

impl Method {
    /// Its name in lower case, as OpenAPI writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Delete => "delete",
        }
    }
}

/// What a route answers with.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    /// A JSON value of a schema (`[X]` for an array of X).
    Json(&'static str),
    /// Plain text.
    Text,
    /// Server-sent events.
    Events,
}

/// Each HTTP route's handler, by name (one route each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteId {
    /// `GET /health`
    Health,
    /// `GET /openapi.json`
    OpenApi,
    /// `GET /cluster`
    Cluster,
    /// `GET /tasks`
    Tasks,
    /// `GET /tasks/{id}`
    Task,
    /// `POST /tasks/{id}/cancel`
    TaskCancel,
    /// `POST /tasks/{id}/retry`
    TaskRetry,
    /// `GET /tasks/{id}/logs`
    TaskLog,
    /// `GET /tasks/{id}/dependants`
    TaskDependants,
    /// `GET /workflows`
    Workflows,
    /// `GET /workflows/{id}`
    Workflow,
    /// `POST /workflows/{id}/cancel`
    WorkflowCancel,
    /// `POST /workflows/{id}/rollback`
    WorkflowRollback,
    /// `POST /workflows/{id}/restart`
    WorkflowRestart,
    /// `GET /test/topologies`
    Topologies,
    /// `GET /activity`
    Activity,
    /// `GET /events`
    Events,
    /// `POST /workflows/servers/create`
    ServersCreate,
    /// `POST /workflows/taskserv/create`
    TaskservCreate,
    /// `POST /workflows/cluster/create`
    ClusterCreate,
    /// `POST /extensions/taskservs/install`
    TaskservInstall,
    /// `GET /extensions/providers`
    Providers,
    /// `GET /extensions/taskservs`
    Taskservs,
    /// `GET /extensions/clusters`
    Clusters,
    /// `POST /test/environments/create`
    EnvCreate,
    /// `GET /test/environments`
    Envs,
    /// `GET /test/environments/{id}`
    Env,
    /// `POST /test/environments/{id}/run`
    EnvRun,
    /// `DELETE /test/environments/{id}`
    EnvDelete,
    /// `GET /test/environments/{id}/logs`
    EnvLogs,
    /// `GET /metrics`
    Metrics,
    /// `GET /queue`
    Queue,
    /// `POST /queue`
    QueueChange,
    /// `POST /schedules`
    ScheduleAdd,
    /// `GET /schedules`
    Schedules,
    /// `DELETE /schedules/{id}`
    ScheduleRemove,
    /// `GET /audit`
    Audit,
    /// `GET /audit/verify`
    AuditVerify,
    /// `GET /audit/segments`
    AuditSegments,
    /// `GET /whoami`
    WhoAmI,
    /// `GET /auth/tokens`
    Tokens,
    /// `POST /auth/tokens`
    TokenCreate,
    /// `DELETE /auth/tokens/{id}`
    TokenRevoke,
}
