//! Notifiers: create one, list them with the notifications waiting, remove one or send
//! it a test notification. For admins only (they hold secrets and reach out of the host).

use orch_protocol::{Actor, Notifier, NotifierChange, NotifierSpec, OutboxEntry};

use super::{AppError, Context};
use crate::engine::Command;

/// How many waiting notifications a list shows.
const WAITING_SHOWN: usize = 100;

/// `NotifierAdd`.
pub async fn add(ctx: &Context, actor: Actor, spec: NotifierSpec) -> Result<Notifier, AppError> {
    crate::notify::check(&spec)?;
    let add = |reply| Command::AddNotifier { actor, spec, reply };
    Ok(ctx.engine.request(add).await?)
}

/// `Notifiers`: every notifier, and the first notifications waiting in the outbox.
pub fn list(ctx: &Context) -> Result<(Vec<Notifier>, Vec<OutboxEntry>), AppError> {
    Ok((ctx.store.notifiers()?, ctx.store.outbox(WAITING_SHOWN)?))
}

/// `NotifierChange`: removes a notifier, or queues a test notification for it.
pub async fn change(
    ctx: &Context,
    actor: Actor,
    name: String,
    change: NotifierChange,
) -> Result<Notifier, AppError> {
    let change = |reply| Command::ChangeNotifier {
        actor,
        name,
        change,
        reply,
    };
    Ok(ctx.engine.request(change).await?)
}
