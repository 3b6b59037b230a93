//! What a socket request asks for, without its data: the key that finds a request's row
//! in the operations table.

use orch_protocol::Request;

/// One per [`Request`] variant, each named after it (so each variant's doc is its
/// request's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    Health,
    Cluster,
    Submit,
    List,
    Get,
    Wait,
    Cancel,
    Retry,
    Watch,
    Logs,
    Shutdown,
    Handover,
    Clean,
    Audit,
    AuditVerify,
    AuditSegments,
    AuditCompact,
    AuditExport,
    WorkflowSubmit,
    WorkflowPlan,
    Workflows,
    Workflow,
    WorkflowCancel,
    WorkflowRollback,
    Extensions,
    EnvCreate,
    Envs,
    Env,
    EnvRun,
    EnvDelete,
    EnvLogs,
    Topologies,
    Queue,
    QueueChange,
    PauseTask,
    ResumeTask,
}

impl RequestKind {
    /// The kind of `request`.
    pub fn of(request: &Request) -> RequestKind {
        match request {
            Request::Health => RequestKind::Health,
            Request::Cluster => RequestKind::Cluster,
            Request::Submit { .. } => RequestKind::Submit,
            Request::List { .. } => RequestKind::List,
            Request::Get { .. } => RequestKind::Get,
            Request::Wait { .. } => RequestKind::Wait,
            Request::Cancel { .. } => RequestKind::Cancel,
            Request::Retry { .. } => RequestKind::Retry,
            Request::Watch { .. } => RequestKind::Watch,
            Request::Logs { .. } => RequestKind::Logs,
            Request::Shutdown => RequestKind::Shutdown,
            Request::Handover => RequestKind::Handover,
            Request::Clean { .. } => RequestKind::Clean,
            Request::Audit { .. } => RequestKind::Audit,
            Request::AuditVerify => RequestKind::AuditVerify,
            Request::AuditSegments => RequestKind::AuditSegments,
            Request::AuditCompact { .. } => RequestKind::AuditCompact,
            Request::AuditExport { .. } => RequestKind::AuditExport,
            Request::WorkflowSubmit { .. } => RequestKind::WorkflowSubmit,
            Request::WorkflowPlan { .. } => RequestKind::WorkflowPlan,
            Request::Workflows { .. } => RequestKind::Workflows,
            Request::Workflow { .. } => RequestKind::Workflow,
            Request::WorkflowCancel { .. } => RequestKind::WorkflowCancel,
            Request::WorkflowRollback { .. } => RequestKind::WorkflowRollback,
            Request::Extensions => RequestKind::Extensions,
            Request::EnvCreate { .. } => RequestKind::EnvCreate,
            Request::Envs => RequestKind::Envs,
            Request::Env { .. } => RequestKind::Env,
            Request::EnvRun { .. } => RequestKind::EnvRun,
            Request::EnvDelete { .. } => RequestKind::EnvDelete,
            Request::EnvLogs { .. } => RequestKind::EnvLogs,
            Request::Topologies => RequestKind::Topologies,
            Request::Queue => RequestKind::Queue,
            Request::QueueChange { .. } => RequestKind::QueueChange,
            Request::PauseTask { .. } => RequestKind::PauseTask,
            Request::ResumeTask { .. } => RequestKind::ResumeTask,
        }
    }
}
