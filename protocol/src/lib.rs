//! Wire protocol between the `orch` Nushell plugin (or any client) and the
//! `provisioning-orchestrator` daemon.
//!
//! Layout:
//! - [`frame`]: length-prefixed frames (`u32` big-endian length, then a JSON body) with a
//!   maximum size, and a blocking reader that can be interrupted between reads.
//! - [`types`]: the task model shared by both sides (specs, states, attempts, events).
//! - [`workflow`]: workflow requests, their stored record and plan, and the extensions
//!   (providers, taskservs, clusters) they are built from.
//! - [`testenv`]: test environments (requests, stored records, topologies).
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

pub mod client;
pub mod frame;
pub mod message;
pub mod paths;
pub mod testenv;
pub mod types;
pub mod workflow;

pub use client::{Client, ClientError};
pub use message::{ErrorKind, ErrorReply, Hello, Request, Response, Welcome};
pub use testenv::*;
pub use types::*;
pub use workflow::*;

/// Version of the wire protocol. Bumped on any incompatible change; both sides refuse a
/// peer with another version.
pub const PROTOCOL_VERSION: u32 = 3;

/// The largest frame body either side accepts, in bytes.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024;
