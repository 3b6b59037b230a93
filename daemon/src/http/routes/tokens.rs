//! `/auth/tokens`: list, make and revoke HTTP tokens (each change in the audit log, never
//! with the secret); `/whoami`: the caller's own token.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, Caller, Ctx};
use crate::http::auth::{TokenError, TokenSummary, Tokens};
use crate::http::error::ApiError;
use crate::ops::{AppError, AppErrorKind, Context};
use crate::policy::Role;

/// A new token (`POST /auth/tokens`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    name: String,
    role: Role,
}

/// The caller, as `GET /whoami` names it.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct CallerView {
    /// The token's name.
    pub token: String,
    /// Its role: what it may do.
    pub role: Role,
}

/// `GET /whoami`: the token's name and role.
pub async fn whoami(Extension(caller): Extension<Caller>) -> Answer {
    Ok(Json(CallerView {
        token: caller.token,
        role: caller.role,
    })
    .into_response())
}

/// `GET /auth/tokens`: every token's id, name, role and creation time, never a secret.
pub async fn list(Extension(tokens): Extension<Arc<Tokens>>) -> Answer {
    Ok(Json(tokens.list()).into_response())
}

/// `POST /auth/tokens`: makes a token (its secret is shown once).
pub async fn create(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(tokens): Extension<Arc<Tokens>>,
    body: Result<Json<NewToken>, JsonRejection>,
) -> Answer {
    let Json(request) = body?;
    if request.name.trim().is_empty() {
        let empty = AppError::field(AppErrorKind::Invalid, "name", "`name` is empty");
        return Err(empty.into());
    }
    let token = tokens
        .create(&request.name, request.role)
        .map_err(token_error)?;
    let summary = token.summary();
    audit(&ctx, caller, "token_create", &summary).await?;
    let mut body = serde_json::to_value(&summary).unwrap_or_default();
    body["token"] = Value::String(token.token);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `DELETE /auth/tokens/{id}`: revokes a token at once (refused for the last admin token).
pub async fn revoke(
    State(ctx): Ctx,
    Extension(caller): Extension<Caller>,
    Extension(tokens): Extension<Arc<Tokens>>,
    Path(id): Path<String>,
) -> Answer {
    let summary = tokens.revoke(&id).map_err(token_error)?.summary();
    audit(&ctx, caller, "token_revoke", &summary).await?;
    Ok(Json(summary).into_response())
}

/// Records a token change in the audit log (the token's id, name and role; no secret).
async fn audit(
    ctx: &Context,
    caller: Caller,
    action: &'static str,
    token: &TokenSummary,
) -> Result<(), AppError> {
    let record = crate::audit::AuditRecord::new(
        caller.actor,
        action,
        json!({"id": token.id, "name": token.name, "role": token.role}),
        Ok(format!(
            "token {} ({}, {})",
            token.name,
            token.id,
            token.role.as_str()
        )),
    );
    ctx.engine
        .request(|reply| crate::engine::Command::Audit { record, reply })
        .await?;
    Ok(())
}

/// A token failure as an error answer naming the field.
fn token_error(e: TokenError) -> ApiError {
    let error = match &e {
        TokenError::NotFound(_) => AppError::field(AppErrorKind::NotFound, "id", e.to_string()),
        TokenError::LastAdmin(_) => AppError::field(AppErrorKind::Conflict, "id", e.to_string()),
        TokenError::Random(_) | TokenError::Io(_) => {
            AppError::new(AppErrorKind::Internal, e.to_string())
        }
    };
    error.into()
}
