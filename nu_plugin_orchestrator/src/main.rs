//! The `nu_plugin_orchestrator` binary: serves the `orch` commands to Nushell.

use nu_plugin::{MsgPackSerializer, serve_plugin};
use nu_plugin_orchestrator::OrchestratorPlugin;

fn main() {
    serve_plugin(&OrchestratorPlugin::default(), MsgPackSerializer {})
}
