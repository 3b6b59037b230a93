//! Notifications: the events of tasks and workflows sent to a webhook (signed with
//! HMAC-SHA256) or handed to a local command, through a durable outbox committed with the
//! events, so that a crash never loses one (delivery is at least once, each with an
//! idempotency key).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::audit::Actor;
use crate::event::Event;

/// The most notifiers a daemon keeps.
pub const MAX_NOTIFIERS: usize = 64;

/// The most notifications of one notifier the outbox holds; later ones are given up on
/// at once (a receiver down for long does not make the outbox grow without bound).
pub const MAX_WAITING: u64 = 10_000;

/// The longest webhook URL.
pub const MAX_URL: usize = 2048;

/// The events a notifier sends when its filter names none: the ends of tasks and the
/// changes of workflows.
pub const DEFAULT_EVENTS: [&str; 5] = [
    "succeeded",
    "failed",
    "cancelled",
    "dependency_failed",
    "workflow",
];

/// Where notifications go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum NotifyTarget {
    /// An HTTP endpoint: each notification is a POST of JSON, signed in
    /// `X-Orch-Signature: sha256=<hex HMAC-SHA256 of the body with the secret>`.
    Webhook {
        /// `http://host[:port]/path` (plain HTTP: a receiver on the host or its network;
        /// an HTTPS endpoint is reached through a command hook such as curl).
        url: String,
        /// The HMAC key (shown to admins only).
        secret: String,
    },
    /// A local program, run with the notification's JSON on its standard input (exit 0:
    /// delivered).
    Command {
        /// The program and its arguments.
        command: Vec<String>,
    },
}

/// Which events a notifier sends: all of these that are given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NotifyFilter {
    /// Event types (`succeeded`, `failed`, `workflow`, `paused`, ...; default
    /// [`DEFAULT_EVENTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// Only events of tasks with this label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Only events of this workflow and its steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<u64>,
}

impl NotifyFilter {
    /// Whether `event`, of a task labelled `label`, passes.
    pub fn passes(&self, event: &Event, label: Option<&str>) -> bool {
        let name = event.kind.name();
        let typed = if self.events.is_empty() {
            DEFAULT_EVENTS.contains(&name)
        } else {
            self.events.iter().any(|e| e == name)
        };
        typed
            && self.label.as_deref().is_none_or(|l| Some(l) == label)
            && self.workflow.is_none_or(|w| event.workflow == Some(w))
    }
}

/// A notifier as submitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NotifierSpec {
    /// Its name (letters, digits, `_`, `-` and `.`).
    pub name: String,
    /// Where it sends.
    pub target: NotifyTarget,
    /// What it sends.
    #[serde(default)]
    pub filter: NotifyFilter,
}

/// A notifier as stored, with how its deliveries went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Notifier {
    /// What was submitted.
    pub spec: NotifierSpec,
    /// Who created it.
    pub created_by: Actor,
    /// When.
    pub created_at: DateTime<Utc>,
    /// How many notifications it delivered.
    #[serde(default)]
    pub delivered: u64,
    /// How many it gave up on (after every retry failed, or dropped when
    /// [`MAX_WAITING`] were waiting already).
    #[serde(default)]
    pub given_up: u64,
    /// How many wait in the outbox.
    #[serde(default)]
    pub waiting: u64,
    /// The last failure of a delivery (retried or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// A notification waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OutboxEntry {
    /// Its idempotency key (`<event seq>.<notifier>`, or `test.<ms>.<notifier>`): sent
    /// with every try as `X-Orch-Delivery`.
    pub key: String,
    /// The notifier.
    pub notifier: String,
    /// The JSON it sends.
    pub body: String,
    /// The event's type.
    pub event: String,
    /// Tries so far.
    #[serde(default)]
    pub attempts: u32,
    /// When the next try is due.
    pub due: DateTime<Utc>,
}

/// A change to a notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NotifierChange {
    /// Remove it (its waiting notifications go too).
    Remove,
    /// Send it a test notification (through the outbox, as any other).
    Test,
}
