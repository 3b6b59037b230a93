//! Notifications: at the end of each turn, every event the step logs that a notifier's
//! filter passes becomes an outbox entry in the same step, so that the entry is durable
//! exactly when the event is. The deliverer (`crate::notify`) sends the entries and
//! reports each try back ([`Command::Delivered`](crate::engine::Command::Delivered)):
//! a delivered entry leaves the outbox, a failed one is tried again with a backoff, and
//! one that failed [`MAX_TRIES`] times is given up on.

use std::collections::BTreeMap;

use chrono::Duration;
use orch_protocol::{
    Actor, ErrorKind, ErrorReply, Event, MAX_NOTIFIERS, MAX_WAITING, Notifier, NotifierChange,
    NotifierSpec, OutboxEntry,
};

use super::{EngineState, Outcome, Reply};

/// How many times a notification is tried before it is given up on.
pub const MAX_TRIES: u32 = 10;

/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::minutes(5);

impl EngineState {
    /// Takes the stored notifiers in at start.
    pub(super) fn recover_notifiers(&mut self, notifiers: Vec<Notifier>) {
        self.notifiers = notifiers
            .into_iter()
            .map(|n| (n.spec.name.clone(), n))
            .collect();
    }

    /// Puts in the step's outbox a notification of each event of the step that a
    /// notifier's filter passes.
    pub(super) fn queue_notifications(&mut self) {
        if self.notifiers.is_empty() || self.step.batch.events.is_empty() {
            return;
        }
        let mut entries = Vec::new();
        for event in &self.step.batch.events {
            let label = self
                .tasks
                .get(&event.task)
                .and_then(|t| t.spec.label.as_deref());
            for notifier in self.notifiers.values() {
                if notifier.spec.filter.passes(event, label) {
                    entries.push(self.entry(notifier, event, label));
                }
            }
        }
        let mut changed = std::collections::BTreeSet::new();
        for entry in entries {
            let notifier = self
                .notifiers
                .get_mut(&entry.notifier)
                .expect("a known notifier");
            changed.insert(entry.notifier.clone());
            if notifier.waiting >= MAX_WAITING {
                notifier.given_up += 1;
                notifier.last_error = Some(format!(
                    "{MAX_WAITING} notifications wait already: {} was dropped",
                    entry.key
                ));
                continue;
            }
            notifier.waiting += 1;
            self.step.batch.put_outbox(entry);
            self.step.effects.outbox_changed = true;
        }
        for name in changed {
            let notifier = self.notifiers[&name].clone();
            self.step.batch.put_notifier(notifier);
        }
    }

    /// The outbox entry of `event` for `notifier`.
    fn entry(&self, notifier: &Notifier, event: &Event, label: Option<&str>) -> OutboxEntry {
        let name = &notifier.spec.name;
        let key = format!("{:020}.{name}", event.seq);
        let body = serde_json::json!({
            "delivery": key,
            "notifier": name,
            "type": event.kind.name(),
            "task": event.task,
            "label": label,
            "event": event,
        });
        OutboxEntry {
            key,
            notifier: name.clone(),
            body: body.to_string(),
            event: event.kind.name().to_string(),
            attempts: 0,
            due: self.now,
        }
    }

    /// Creates a notifier (its target was checked by the caller).
    pub(super) fn add_notifier(
        &mut self,
        actor: Actor,
        spec: NotifierSpec,
        reply: Reply<Notifier>,
    ) -> Outcome {
        let name = spec.name.clone();
        if self.notifiers.contains_key(&name) {
            let error = ErrorReply::field(
                ErrorKind::Conflict,
                "name",
                format!("the notifier {name:?} exists already"),
            );
            return self.refuse(reply, error);
        }
        if self.notifiers.len() >= MAX_NOTIFIERS {
            let error = ErrorReply::field(
                ErrorKind::BadRequest,
                "name",
                format!("there are {MAX_NOTIFIERS} notifiers already, the most a daemon keeps"),
            );
            return self.refuse(reply, error);
        }
        let notifier = Notifier {
            spec,
            created_by: actor,
            created_at: self.now,
            delivered: 0,
            given_up: 0,
            waiting: 0,
            last_error: None,
        };
        self.store_notifier(notifier.clone());
        self.answer(reply, Ok(notifier));
        Ok(format!("notifier {name} added"))
    }

    /// Removes a notifier, or queues a test notification for it.
    pub(super) fn change_notifier(
        &mut self,
        name: &str,
        change: NotifierChange,
        reply: Reply<Notifier>,
    ) -> Outcome {
        let Some(notifier) = self.notifiers.get(name).cloned() else {
            let error = ErrorReply::field(
                ErrorKind::NotFound,
                "name",
                format!("the notifier {name:?} does not exist (`orch notify list` shows them)"),
            );
            return self.refuse(reply, error);
        };
        let outcome = match change {
            NotifierChange::Remove => {
                self.notifiers.remove(name);
                self.step.batch.remove_notifier(name.to_string());
                // Its notifications go with it (a notifier added again under the name
                // does not send them).
                self.step.batch.outbox_purges.push(name.to_string());
                format!("notifier {name} removed")
            }
            NotifierChange::Test => {
                let nanos = self.now.timestamp_nanos_opt().unwrap_or_default();
                let key = format!("test.{nanos}.{name}");
                let body = serde_json::json!({
                    "delivery": key,
                    "notifier": name,
                    "type": "test",
                    "at": self.now,
                });
                self.step.batch.put_outbox(OutboxEntry {
                    key: key.clone(),
                    notifier: name.to_string(),
                    body: body.to_string(),
                    event: "test".into(),
                    attempts: 0,
                    due: self.now,
                });
                self.step.effects.outbox_changed = true;
                let notifier = self.notifiers.get_mut(name).expect("checked above");
                notifier.waiting += 1;
                let notifier = notifier.clone();
                self.store_notifier(notifier);
                format!("notifier {name}: test notification {key} queued")
            }
        };
        self.answer(reply, Ok(notifier));
        Ok(outcome)
    }

    /// A try of `entry` ended with `result`: the entry leaves the outbox, or is tried
    /// again later, or is given up on.
    pub(super) fn delivered(&mut self, mut entry: OutboxEntry, result: Result<(), String>) {
        let Some(notifier) = self.notifiers.get_mut(&entry.notifier) else {
            // Its notifier was removed: its notifications went with it.
            self.step.batch.remove_outbox(entry.key);
            return;
        };
        entry.attempts += 1;
        match result {
            Ok(()) => {
                notifier.delivered += 1;
                notifier.waiting = notifier.waiting.saturating_sub(1);
                self.step.batch.remove_outbox(entry.key);
            }
            Err(error) => {
                tracing::warn!(notifier = %entry.notifier, key = %entry.key, attempt = entry.attempts, %error, "a notification was not delivered");
                notifier.last_error = Some(error);
                if entry.attempts >= MAX_TRIES {
                    notifier.given_up += 1;
                    notifier.waiting = notifier.waiting.saturating_sub(1);
                    self.step.batch.remove_outbox(entry.key);
                } else {
                    entry.due = self.now + backoff(entry.attempts);
                    self.step.batch.put_outbox(entry);
                    self.step.effects.outbox_changed = true;
                }
            }
        }
        let notifier = notifier.clone();
        self.store_notifier(notifier);
    }

    /// Writes `notifier` with the step.
    fn store_notifier(&mut self, notifier: Notifier) {
        self.step.batch.put_notifier(notifier.clone());
        self.notifiers.insert(notifier.spec.name.clone(), notifier);
    }
}

/// The wait before try `attempts + 1`: a second, doubling, at most [`MAX_BACKOFF`].
fn backoff(attempts: u32) -> Duration {
    let seconds = 1i64 << attempts.saturating_sub(1).min(20);
    Duration::seconds(seconds).min(MAX_BACKOFF)
}

/// The notifiers by name, as the engine holds them.
pub(super) type Notifiers = BTreeMap<String, Notifier>;
