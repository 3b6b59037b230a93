//! Wake-ups from the store's LISTEN/NOTIFY, with polling as the fallback: every loop of
//! a node that waits for another node's writes (events, placements, outcomes, forwarded
//! requests and their answers) waits on one of these.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::StoreError;

/// A listening connection's wake-ups (while it works), and how often to look anyway.
pub struct Wakeups {
    receiver: Option<watch::Receiver<u64>>,
    /// How often to look while the connection listens (a missed wake-up costs this).
    poll: Duration,
    /// How often to look without it.
    unheard: Duration,
    /// What the wake-ups announce, for the warnings.
    what: &'static str,
}

impl Wakeups {
    /// The wake-ups of `opened` (or polling only, when it could not be opened), looking
    /// every `poll` while it listens and every `unheard` without it; `what` names them.
    pub fn new(
        opened: Result<watch::Receiver<u64>, StoreError>,
        poll: Duration,
        unheard: Duration,
        what: &'static str,
    ) -> Wakeups {
        let receiver = match opened {
            Ok(receiver) => Some(receiver),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for {what}; polling every {unheard:?}");
                None
            }
        };
        Wakeups {
            receiver,
            poll,
            unheard,
            what,
        }
    }

    /// Returns at the next wake-up, or once the poll interval has passed.
    pub async fn next(&mut self) {
        self.next_within(None).await;
    }

    /// Like [`Wakeups::next`], after `sooner` at the latest when it is shorter than the
    /// poll interval.
    pub async fn next_within(&mut self, sooner: Option<Duration>) {
        let poll = if self.receiver.is_some() {
            self.poll
        } else {
            self.unheard
        };
        let poll = sooner.map_or(poll, |sooner| sooner.min(poll));
        let woken = async {
            match &mut self.receiver {
                Some(receiver) => receiver.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            listening = woken => if !listening {
                tracing::warn!("the wake-ups for {} stopped; polling every {:?}", self.what, self.unheard);
                self.receiver = None;
            },
            () = tokio::time::sleep(poll) => {}
        }
    }
}
