//! Wire protocol between the `orch` Nushell plugin (or any client) and the
//! `provisioning-orchestrator` daemon.
//!
//! Layout:
//! - [`frame`]: length-prefixed frames (`u32` big-endian length, then a JSON body) with a
//!   maximum size, and a blocking reader that can be interrupted between reads.
//! - [`ids`]: the identifiers of tasks, workflows and test environments.
//! - [`task`]: a task as submitted (its spec) and as stored; [`state`]: its states and
//!   the outcomes of its attempts; [`task_change`]: stash, enqueue and edit of a task that
//!   has not started.
//! - [`event`]: the event log's entries; [`health`]: the daemon's health report;
//!   [`activity`]: the last hour, minute by minute; [`log_page`]: a piece of a task's log;
//!   [`audit`]: the audit log's entries and its check; [`filters`]: which tasks a list or a
//!   clean is about.
//! - [`cluster`]: the nodes of daemons sharing a PostgreSQL store, and their leader.
//! - [`workflow`]: workflow requests, their stored record, views and plan.
//! - [`extensions`]: the providers, taskservs and clusters workflows are built from.
//! - [`testenv`]: test environments (requests, stored records, topologies).
//! - [`queue`]: groups, their parallel limits, and pausing the queue, a group or a task.
//! - [`schedule`]: tasks and workflows submitted at the times of a cron pattern.
//! - [`signal`]: the signals and input a running task may be sent.
//! - [`notify`]: notifications of events to webhooks and local commands.
//! - [`message`]: the handshake and the typed requests and responses.
//! - [`client`]: a blocking client over a Unix socket (no async runtime, so the plugin
//!   stays small and starts fast).
//! - [`paths`]: where the socket lives by default, and the environment variable that
//!   overrides it.
//!
//! A connection starts with [`message::Hello`] from the client, answered by
//! [`message::Welcome`] (or an error naming both protocol versions). Then each
//! [`message::Request`] gets one [`message::Response`], except the streaming requests
//! (`Watch`, `Logs` with `follow`), which get any number of items ended by
//! [`message::Response::StreamEnd`].

pub mod activity;
pub mod audit;
pub mod client;
pub mod cluster;
pub mod event;
pub mod extensions;
pub mod filters;
pub mod frame;
pub mod health;
pub mod ids;
pub mod log_page;
pub mod message;
pub mod notify;
pub mod paths;
pub mod queue;
pub mod schedule;
pub mod signal;
pub mod state;
pub mod task;
pub mod task_change;
pub mod testenv;
pub mod workflow;

pub use activity::*;
pub use audit::*;
pub use client::{Client, ClientError};
pub use cluster::*;
pub use event::*;
pub use extensions::*;
pub use filters::*;
pub use health::*;
pub use log_page::LogPage;
pub use message::{ErrorKind, ErrorReply, Hello, Request, Response, Welcome};
pub use notify::*;
pub use queue::*;
pub use schedule::*;
pub use signal::{Nudge, SignalError, TaskSignal};
pub use state::*;
pub use task::*;
pub use task_change::*;
pub use testenv::*;
pub use workflow::*;

/// Version of the wire protocol. Bumped on any incompatible change; both sides refuse a
/// peer with another version.
pub const PROTOCOL_VERSION: u32 = 5;

/// The most a [`Request::SendInput`] writes to a task's standard input at once, in bytes.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// The largest frame body either side accepts, in bytes.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;
