//! The one event bus: every committed state change is published here, and every watcher
//! reads from it. Events are published only after the batch that logged them is durable.

use std::sync::Arc;

use orch_protocol::Event;
use tokio::sync::broadcast;

/// How many events a slow subscriber may fall behind before it must re-read the log.
const CAPACITY: usize = 8192;

/// Publishes committed events to any number of subscribers.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            sender: broadcast::channel(CAPACITY).0,
        }
    }
}

impl EventBus {
    /// Publishes committed events, in order.
    pub fn publish(&self, events: Vec<Event>) {
        for event in events {
            // No subscriber is not an error: the log in the store has the event.
            let _ = self.sender.send(Arc::new(event));
        }
    }

    /// A new subscription that sees every event published from now on. A subscriber that
    /// lags gets `RecvError::Lagged` and catches up from the store's event log.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }
}
