//! Why an operation failed, in the application's terms: a kind, a message for a person
//! and the request field at fault. The socket adapter sends it as an error frame, the
//! HTTP adapter as a status code with a JSON body; both word it with [`AppError::reply`].

use orch_protocol::{ErrorKind, ErrorReply};

use crate::store::StoreError;
use crate::workflows::ExpandError;

/// The classes of failure an operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppErrorKind {
    /// The request asks for something invalid (an unknown infra, a cycle, no ids).
    Invalid,
    /// What it names does not exist.
    NotFound,
    /// It conflicts with the current state (cancelling a finished task).
    Conflict,
    /// The caller may not do this.
    PermissionDenied,
    /// The daemon cannot serve it now (stopping, no container engine).
    Unavailable,
    /// Something failed inside the daemon (the store).
    Internal,
}

/// A failed operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// Its class.
    pub kind: AppErrorKind,
    /// A message for a person, naming the problem.
    pub message: String,
    /// The request field at fault, when there is one.
    pub field: Option<String>,
    /// The socket of the node on this host that serves the request, when this one does
    /// not (see [`ErrorReply::leader_socket`]).
    pub elsewhere: Option<std::path::PathBuf>,
}

impl AppError {
    /// A failure of the request as a whole.
    pub fn new(kind: AppErrorKind, message: impl Into<String>) -> AppError {
        AppError {
            kind,
            message: message.into(),
            field: None,
            elsewhere: None,
        }
    }

    /// A failure about one field of the request.
    pub fn field(kind: AppErrorKind, field: &str, message: impl Into<String>) -> AppError {
        AppError {
            kind,
            message: message.into(),
            field: Some(field.to_string()),
            elsewhere: None,
        }
    }

    /// The error for an unknown task id.
    pub fn no_such_task(id: u64) -> AppError {
        AppError::field(
            AppErrorKind::NotFound,
            "id",
            format!("there is no task {id}"),
        )
    }

    /// The refusal of a request that would wait past the daemon's stop.
    pub fn shutting_down() -> AppError {
        AppError::new(AppErrorKind::Unavailable, "the daemon is shutting down")
    }

    /// How both interfaces word it: the protocol's error answer.
    pub fn reply(&self) -> ErrorReply {
        let kind = match self.kind {
            AppErrorKind::Invalid => ErrorKind::BadRequest,
            AppErrorKind::NotFound => ErrorKind::NotFound,
            AppErrorKind::Conflict => ErrorKind::Conflict,
            AppErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
            AppErrorKind::Unavailable => ErrorKind::Unavailable,
            AppErrorKind::Internal => ErrorKind::Internal,
        };
        ErrorReply {
            kind,
            message: self.message.clone(),
            field: self.field.clone(),
            leader_socket: self.elsewhere.clone(),
        }
    }
}

/// The engine and the test environment service answer in the protocol's terms; they never
/// report a version mismatch or an oversized frame (those belong to the socket), which
/// would read as an invalid request.
impl From<ErrorReply> for AppError {
    fn from(reply: ErrorReply) -> AppError {
        let kind = match reply.kind {
            ErrorKind::BadRequest | ErrorKind::VersionMismatch | ErrorKind::TooLarge => {
                AppErrorKind::Invalid
            }
            ErrorKind::NotFound => AppErrorKind::NotFound,
            ErrorKind::Conflict => AppErrorKind::Conflict,
            ErrorKind::PermissionDenied => AppErrorKind::PermissionDenied,
            ErrorKind::Unavailable => AppErrorKind::Unavailable,
            ErrorKind::Internal => AppErrorKind::Internal,
        };
        AppError {
            kind,
            message: reply.message,
            field: reply.field,
            elsewhere: reply.leader_socket,
        }
    }
}

/// Every expansion failure is a request that is well-formed but asks for something
/// invalid (HTTP 422), about the field `workflow`.
impl From<ExpandError> for AppError {
    fn from(error: ExpandError) -> AppError {
        AppError::field(AppErrorKind::Invalid, "workflow", error.to_string())
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> AppError {
        AppError::new(AppErrorKind::Internal, e.to_string())
    }
}

impl From<std::io::Error> for AppError {
    fn from(e: std::io::Error) -> AppError {
        AppError::new(AppErrorKind::Internal, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_expansion_failure_is_answered_as_an_invalid_workflow() {
        let reply = AppError::from(ExpandError::Unknown("unknown infra `nope`".into())).reply();
        assert_eq!(reply.kind, ErrorKind::BadRequest);
        assert_eq!(reply.field.as_deref(), Some("workflow"));
        assert_eq!(reply.message, "unknown infra `nope`");
    }

    #[test]
    fn an_error_keeps_its_kind_message_and_field_through_the_protocol() {
        for kind in [
            AppErrorKind::Invalid,
            AppErrorKind::NotFound,
            AppErrorKind::Conflict,
            AppErrorKind::PermissionDenied,
            AppErrorKind::Unavailable,
            AppErrorKind::Internal,
        ] {
            let error = AppError::field(kind, "id", "named");
            assert_eq!(AppError::from(error.reply()), error);
        }
        let reply = AppError::no_such_task(7).reply();
        assert_eq!(
            (reply.kind, reply.message.as_str(), reply.field.as_deref()),
            (ErrorKind::NotFound, "there is no task 7", Some("id"))
        );
    }
}
