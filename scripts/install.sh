#!/usr/bin/env bash
# Installs the orchestrator for the current user and starts it:
# nu 0.115.1, the release binaries in ~/.cargo/bin, the plugin registered in nu's plugin
# registry, and the daemon running on the default socket with the embedded redb store.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-nu.sh
cargo install --locked --path daemon
cargo install --locked --path nu_plugin_orchestrator
BIN="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
nu -c "plugin add '$BIN/nu_plugin_orchestrator'"
nu -c "plugin use orchestrator; orch daemon start --binary '$BIN/provisioning-orchestrator' | select running pid socket data_dir storage | table"
