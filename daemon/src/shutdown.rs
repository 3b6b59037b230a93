//! Graceful shutdown: SIGTERM, SIGINT or a `Shutdown` request cancel one token.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// Cancels `token` on SIGTERM or SIGINT.
pub fn cancel_on_signals(token: CancellationToken) -> std::io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
            () = token.cancelled() => return,
        }
        token.cancel();
    });
    Ok(())
}
