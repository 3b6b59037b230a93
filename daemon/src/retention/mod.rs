//! The daemon's own retention (`--retain-finished`, `--retain-label`, `--retain-events`):
//! at start and then periodically, it removes the finished tasks and workflows past their
//! retention (through the engine, as `orch clean` does: one durable commit with its
//! audit record and `removed` events per batch of at most
//! [`MAX_CLEAN_BATCH`](orch_protocol::MAX_CLEAN_BATCH) records, logs deleted after the
//! commit), then the events past theirs (also in bounded, audited commits).
//!
//! - [`policy`]: the flags, their parsing, the rule of a run;
//! - [`sweep`]: at start, the logs whose task is gone (a kill -9 between a removal's
//!   commit and its log deletion) are deleted.
//!
//! Which records go is decided by [`crate::engine::retention`], the pure rule shared
//! with `orch clean`.

pub mod policy;
pub mod sweep;

use std::sync::Arc;

use orch_protocol::{Actor, MAX_CLEAN_BATCH};
use tokio_util::sync::CancellationToken;

use crate::engine::{Command, EngineHandle, Keep};
use crate::store::{Store, StoreError};
pub use policy::Policy;

/// Why a run stopped early.
#[derive(Debug, thiserror::Error)]
enum RunError {
    /// The engine refused or is stopping.
    #[error("{0}")]
    Engine(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Applies `policy` at start and then every [`Policy::period`] until `stop` is cancelled.
pub fn spawn(
    engine: EngineHandle,
    store: Arc<dyn Store>,
    policy: Arc<Policy>,
    actor: Actor,
    stop: CancellationToken,
) {
    if policy.is_idle() {
        return;
    }
    let every = policy.period();
    tokio::spawn(async move {
        loop {
            if let Err(e) = run(&engine, &store, &policy, &actor).await {
                tracing::warn!(error = %e, "the retention could not run");
            }
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = stop.cancelled() => return,
            }
        }
    });
}

/// One run: finished records in batches until none is left, then events likewise.
async fn run(
    engine: &EngineHandle,
    store: &Arc<dyn Store>,
    policy: &Policy,
    actor: &Actor,
) -> Result<(), RunError> {
    loop {
        let rule = policy.rule();
        let actor = actor.clone();
        let removed = engine
            .request(|reply| Command::Clean { actor, rule, reply })
            .await
            .map_err(|e| RunError::Engine(e.message))?;
        if removed.is_empty() {
            break;
        }
        tracing::info!(
            tasks = removed.tasks.len(),
            workflows = removed.workflows.len(),
            "finished records past the retention removed"
        );
        tokio::task::yield_now().await;
    }
    let Keep::For(age) = policy.events else {
        return Ok(());
    };
    let params = serde_json::json!({ "retention": policy.events.to_string() });
    loop {
        let cutoff = chrono::Utc::now() - chrono::Duration::from_std(age).unwrap_or_default();
        let Some(through) = events_cut(store.as_ref(), cutoff)? else {
            return Ok(());
        };
        let (actor, params) = (actor.clone(), params.clone());
        engine
            .request(|reply| Command::TrimEvents {
                actor,
                through,
                params,
                reply,
            })
            .await
            .map_err(|e| RunError::Engine(e.message))?;
        tracing::info!(through, "events past the retention removed");
        tokio::task::yield_now().await;
    }
}

/// The last of the oldest (at most [`MAX_CLEAN_BATCH`]) events logged at or before
/// `cutoff`, if any is.
fn events_cut(
    store: &dyn Store,
    cutoff: chrono::DateTime<chrono::Utc>,
) -> Result<Option<u64>, StoreError> {
    let from = store.events_removed_through()?;
    let page = store.events_after(from, MAX_CLEAN_BATCH)?;
    Ok(page
        .iter()
        .take_while(|e| e.at <= cutoff)
        .last()
        .map(|e| e.seq))
}
