//! Wake-ups through LISTEN/NOTIFY: a connection of its own per listener, each
//! notification on its channel turned into a tick of a watch channel. Used for the event
//! log (standbys), the placements (every node's worker) and the outcomes (the leader).

use std::sync::Arc;

use super::PostgresStore;
use super::bridge::pg;
use crate::store::StoreError;

/// The channel every commit that adds events notifies (see [`PostgresStore::event_wakeups`]).
pub(super) const EVENTS_CHANNEL: &str = "orch_events";

impl PostgresStore {
    /// A connection of its own that listens on the events channel: each commit that
    /// adds events sends one wake-up on the returned channel (coalesced when the reader
    /// is behind). It closes when the connection does (the reader then falls back to
    /// polling), and the connection closes once the receiver is dropped.
    pub fn event_wakeups(&self) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        self.wakeups(EVENTS_CHANNEL)
    }

    /// A connection of its own that listens on `channel`: each notification sends one
    /// wake-up on the returned channel (coalesced when the reader is behind). It closes
    /// when the connection does, and the connection closes once the receiver is dropped.
    pub(super) fn wakeups(
        &self,
        channel: &'static str,
    ) -> Result<tokio::sync::watch::Receiver<u64>, StoreError> {
        let target = self.bridge.target.clone();
        self.bridge.run(async move {
            let (client, mut connection) = target
                .config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(pg)?;
            let client = Arc::new(client);
            let (tx, rx) = tokio::sync::watch::channel(0u64);
            let holder = client.clone();
            tokio::spawn(async move {
                // The client lives as long as its connection is read.
                let _client = holder;
                let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                futures_util::pin_mut!(messages);
                loop {
                    let message = tokio::select! {
                        // Nobody follows any more: the connection closes.
                        () = tx.closed() => break,
                        message = futures_util::StreamExt::next(&mut messages) => message,
                    };
                    match message {
                        Some(Ok(tokio_postgres::AsyncMessage::Notification(_))) => {
                            tx.send_modify(|n| *n = n.wrapping_add(1));
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    }
                }
            });
            client
                .batch_execute(&format!("LISTEN {channel}"))
                .await
                .map_err(pg)?;
            Ok(rx)
        })
    }
}
