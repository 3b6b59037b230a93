//! A Nushell plugin whose `orch ...` commands drive the provisioning orchestrator daemon.
//!
//! Layout:
//! - [`audit_values`]: the audit log's entries, segments and check as Nushell values.
//! - [`commands`]: one file per command (`orch submit`, `orch tasks`, ...), their registry,
//!   and the modules they share (arguments, the command-by-id shape, the workflow flags).
//! - [`connection`]: finding the socket, a cached connection for quick commands, fresh
//!   connections for streams, and daemon errors as `LabeledError`s pointing at the
//!   offending argument.
//! - [`convert`]: tasks, events and health reports as Nushell values with real types
//!   (datetime, duration): rows are structs deriving `IntoValue`.
//! - [`json`]: Nushell values as JSON (task parameters, request records).
//! - [`progress`]: the live display on the terminal while a command waits for tasks.
//! - [`testenv_values`]: test environments and topologies as Nushell values.
//! - [`typed`]: the daemon's nested JSON with real types (durations, file sizes,
//!   datetimes) by one rule, and back.
//! - [`workflow_values`]: workflows, plans and the extensions registry as Nushell values.

pub mod audit_values;
pub mod commands;
pub mod completions;
pub mod connection;
pub mod convert;
pub mod json;
pub mod progress;
pub mod queue_values;
pub mod schedule_values;
pub mod testenv_values;
pub mod typed;
pub mod workflow_values;

use std::sync::Mutex;

use nu_plugin::{Plugin, PluginCommand};
use orch_protocol::Client;

/// The plugin. It keeps one connection to the daemon open between commands, so a warm
/// `orch task 42` costs one round trip.
#[derive(Default)]
pub struct OrchestratorPlugin {
    cached: Mutex<Option<Client>>,
}

impl Plugin for OrchestratorPlugin {
    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").into()
    }

    fn commands(&self) -> Vec<Box<dyn PluginCommand<Plugin = Self>>> {
        commands::all()
    }
}
