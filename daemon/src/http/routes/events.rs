//! `GET /events`: server-sent events, read through the one event stream
//! ([`crate::events::Stream`]): the log after `since`, then the bus, optionally only one
//! task's or one workflow's. It ends when the daemon stops or the client leaves.

use std::convert::Infallible;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use orch_protocol::{ErrorKind, ErrorReply, Event};
use serde::Deserialize;

use super::Ctx;
use crate::events::{EventTypes, Filter};
use crate::http::error::ApiError;
use crate::ops;

/// Filters of `GET /events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    since: Option<u64>,
    task: Option<u64>,
    workflow: Option<u64>,
    /// Event types, comma-separated (`env,workflow`).
    #[serde(rename = "type")]
    types: Option<String>,
}

/// `GET /events`
pub async fn events(
    State(ctx): Ctx,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(query) = query?;
    let types = query
        .types
        .as_deref()
        .map(EventTypes::parse)
        .transpose()
        .map_err(|problem| {
            ApiError::from(ErrorReply::field(ErrorKind::BadRequest, "type", problem))
        })?;
    let filter = Filter {
        task: query.task,
        workflow: query.workflow,
        types,
    };
    let events = ops::watch::follow(&ctx, query.since, filter)?;
    // Ends when the daemon stops, so a graceful stop does not wait for open streams.
    let shutdown = ctx.shutdown.clone();
    let stream = futures_util::stream::unfold(events, move |mut events| {
        let shutdown = shutdown.clone();
        async move {
            let next = tokio::select! {
                next = events.next() => next,
                () = shutdown.cancelled() => return None,
            };
            match next {
                Ok(Some(event)) => Some((Ok(sse(&event)), events)),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "an event stream ended: the event log cannot be read");
                    None
                }
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn sse(event: &Event) -> SseEvent {
    SseEvent::default()
        .id(event.seq.to_string())
        .event(event.kind.name())
        .data(serde_json::to_string(event).unwrap_or_default())
}
