//! Delivering notifications: the leader's deliverer reads the outbox (by key: the oldest
//! events first, [`BATCH`] at a time), sends each entry that is due to its notifier
//! ([`send`]), at most [`IN_FLIGHT`] at once, and reports each try to the engine, which
//! commits its end (delivered: out of the outbox; failed: tried again later, or given up
//! on). It wakes when the engine committed new entries, when the next retry is due, and
//! every [`POLL`] as a fallback. A crash between a send and its commit sends the entry
//! again: delivery is at least once, and receivers tell repeats by `X-Orch-Delivery`.
//!
//! [`check`] refuses a notifier that could not be delivered to, before it is stored.

pub mod send;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use orch_protocol::{
    ErrorKind, ErrorReply, EventKind, MAX_URL, NotifierSpec, NotifyTarget, OutboxEntry,
    check_group_name,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::engine::{Command, EngineHandle};
use crate::store::Store;

/// How many due notifications of each notifier one look reads.
const PER_NOTIFIER: usize = 4;

/// How many tries of one notifier run at once (a receiver that does not answer holds no
/// more slots than this).
const IN_FLIGHT_PER_NOTIFIER: usize = 2;

/// How many tries run at once.
const IN_FLIGHT: usize = 8;

/// The longest the deliverer sleeps without a wake-up.
const POLL: Duration = Duration::from_secs(30);

/// The most arguments a command hook may have, and the longest each may be.
const MAX_ARGS: usize = 64;
const MAX_ARG: usize = 4096;

/// The longest webhook secret.
const MAX_SECRET: usize = 1024;

/// The most event types a filter names.
const MAX_EVENTS: usize = 16;

/// Starts the deliverer of the engine's outbox; it stops with `shutdown`.
pub fn spawn(
    store: Arc<dyn Store>,
    engine: EngineHandle,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let deliverer = Deliverer {
        store,
        engine,
        flight: Arc::new(Mutex::new(Flight::default())),
        wake,
    };
    tokio::spawn(async move { deliverer.run(shutdown).await });
}

/// The tries under way, and those whose end was committed since the outbox was last
/// read.
#[derive(Default)]
struct Flight {
    /// Key → its notifier, and whether its try's end is committed. A key stays until the
    /// next read of the outbox begins: the read under way when the end was committed
    /// still has the entry as it was, and must not send it again.
    keys: HashMap<String, (String, bool)>,
}

impl Flight {
    /// How many tries run, in all and of `notifier`.
    fn running(&self, notifier: &str) -> (usize, usize) {
        let tried = self.keys.values().filter(|(_, done)| !done);
        let (mut all, mut its) = (0, 0);
        for (name, _) in tried {
            all += 1;
            its += usize::from(name == notifier);
        }
        (all, its)
    }
}

/// The deliverer's state.
struct Deliverer {
    store: Arc<dyn Store>,
    engine: EngineHandle,
    flight: Arc<Mutex<Flight>>,
    wake: Arc<Notify>,
}

impl Deliverer {
    async fn run(self, shutdown: CancellationToken) {
        loop {
            let wait = match self.look().await {
                Ok(wait) => wait,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the notifications' outbox");
                    POLL
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn flight(&self) -> std::sync::MutexGuard<'_, Flight> {
        self.flight.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a try of each due notification that may start now; how long until the
    /// next one is due.
    async fn look(&self) -> Result<Duration, String> {
        // The ends committed so far are in the read that follows: those keys may be read
        // (and tried) again.
        self.flight().keys.retain(|_, (_, done)| !*done);
        let store = self.store.clone();
        let read = tokio::task::spawn_blocking(move || {
            let now = Utc::now();
            let due = store.outbox_due(now, PER_NOTIFIER)?;
            let next = store.outbox_next_due()?;
            let notifiers = store.notifiers()?;
            Ok::<_, crate::store::StoreError>((due, next, notifiers))
        });
        let (due, next, notifiers) = read
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let targets: HashMap<String, NotifyTarget> = notifiers
            .into_iter()
            .map(|n| (n.spec.name, n.spec.target))
            .collect();
        for entry in due {
            {
                let mut flight = self.flight();
                let (all, its) = flight.running(&entry.notifier);
                if all >= IN_FLIGHT || its >= IN_FLIGHT_PER_NOTIFIER {
                    continue; // a try that ends wakes the deliverer
                }
                if flight.keys.contains_key(&entry.key) {
                    continue;
                }
                let held = (entry.notifier.clone(), false);
                flight.keys.insert(entry.key.clone(), held);
            }
            let target = targets.get(&entry.notifier).cloned();
            self.try_one(entry, target);
        }
        // A due entry was started, or waits for a try under way, whose end wakes us.
        let later = next.and_then(|next| (next - Utc::now()).to_std().ok());
        Ok(later.map_or(POLL, |wait| wait.clamp(Duration::from_millis(10), POLL)))
    }

    /// Tries `entry` (its notifier's target: none once it was removed), then reports it.
    fn try_one(&self, entry: OutboxEntry, target: Option<NotifyTarget>) {
        let (engine, flight, wake) = (self.engine.clone(), self.flight.clone(), self.wake.clone());
        tokio::spawn(async move {
            let result = match &target {
                Some(target) => send::send(target, &entry).await,
                None => Err("its notifier was removed".into()),
            };
            let key = entry.key.clone();
            let entry = Box::new(entry);
            // Until the try's end is durable the entry is in the outbox as it was: it
            // stays in flight (and after, until a read that follows the commit).
            let committed = engine
                .request(|reply| Command::Delivered {
                    entry,
                    result,
                    reply,
                })
                .await;
            if let Err(e) = committed {
                tracing::debug!(key, error = %e.message, "a try's end was not recorded");
            }
            if let Some((_, done)) = flight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys
                .get_mut(&key)
            {
                *done = true;
            }
            wake.notify_one();
        });
    }
}

/// Refuses a notifier that cannot be stored or delivered to; the error names the field.
pub fn check(spec: &NotifierSpec) -> Result<(), ErrorReply> {
    let bad = |field: &str, message: String| {
        Err(ErrorReply::field(ErrorKind::BadRequest, field, message))
    };
    if let Err(why) = check_group_name(&spec.name) {
        return bad("name", why.replace("group name", "notifier name"));
    }
    match &spec.target {
        NotifyTarget::Webhook { url, secret } => {
            if let Err(why) = webhook_url(url) {
                return bad("url", why);
            }
            if secret.is_empty() || secret.len() > MAX_SECRET {
                return bad("secret", format!("a secret has 1 to {MAX_SECRET} bytes"));
            }
        }
        NotifyTarget::Command { command } => {
            if command.first().is_none_or(|p| p.trim().is_empty()) {
                return bad("command", "the command has no program".into());
            }
            if command.len() > MAX_ARGS || command.iter().any(|a| a.len() > MAX_ARG) {
                return bad(
                    "command",
                    format!("a command has at most {MAX_ARGS} words of {MAX_ARG} bytes"),
                );
            }
        }
    }
    if spec.filter.events.len() > MAX_EVENTS {
        return bad(
            "events",
            format!("a filter names at most {MAX_EVENTS} event types"),
        );
    }
    if let Some(unknown) = spec
        .filter
        .events
        .iter()
        .find(|e| !EventKind::NAMES.contains(&e.as_str()))
    {
        return bad(
            "events",
            format!(
                "{unknown:?} is not an event type ({})",
                EventKind::NAMES.join(", ")
            ),
        );
    }
    if spec
        .filter
        .label
        .as_ref()
        .is_some_and(|l| l.is_empty() || l.len() > 256)
    {
        return bad("label", "a label has 1 to 256 characters".into());
    }
    Ok(())
}

/// Checks a webhook URL: `http://host[:port][/path]`, at most [`MAX_URL`] long.
fn webhook_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL {
        return Err(format!(
            "the URL is {} bytes long; at most {MAX_URL}",
            url.len()
        ));
    }
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(
                "HTTPS is not sent directly (the daemon bundles no TLS): use a command hook, such as [curl -sf -X POST --data-binary @- https://...]".into(),
            );
        }
        _ => return Err(format!("{url:?}: the URL starts with http://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    if url.contains('@') {
        return Err("credentials in the URL are not sent: use the secret".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use orch_protocol::NotifyFilter;

    use super::*;

    fn webhook(url: &str) -> NotifierSpec {
        NotifierSpec {
            name: "hook".into(),
            target: NotifyTarget::Webhook {
                url: url.into(),
                secret: "s".into(),
            },
            filter: NotifyFilter::default(),
        }
    }

    #[test]
    fn bad_notifiers_are_refused_naming_the_field() {
        assert!(check(&webhook("http://127.0.0.1:8080/hook")).is_ok());
        let field = |spec: NotifierSpec| check(&spec).unwrap_err().field.unwrap();
        assert_eq!(field(webhook("https://example.com/x")), "url");
        assert_eq!(field(webhook("ftp://example.com/x")), "url");
        assert_eq!(field(webhook("http://user:pw@example.com/x")), "url");
        assert_eq!(
            field(webhook(&format!("http://h/{}", "x".repeat(3000)))),
            "url"
        );
        let mut named = webhook("http://h/");
        named.name = "a b".into();
        assert_eq!(field(named), "name");
        let mut events = webhook("http://h/");
        events.filter.events = vec!["exploded".into()];
        assert_eq!(field(events), "events");
        let empty = NotifierSpec {
            target: NotifyTarget::Command {
                command: Vec::new(),
            },
            ..webhook("http://h/")
        };
        assert_eq!(field(empty), "command");
    }
}
