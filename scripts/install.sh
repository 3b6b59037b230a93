#!/usr/bin/env bash
# Installs the orchestrator for the current user and starts it: nu 0.115.1, the release
# binaries in $PREFIX/bin (default ~/.cargo/bin), the extensions and the `provisioning`
# module in ${XDG_DATA_HOME:-~/.local/share}/provisioning/nushell-modules (where the daemon
# reads them), the plugin registered in nu's plugin registry, and the daemon running on
# the default socket with the embedded redb store; `use provisioning` works from any
# directory (the module linked into nu's library path).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-nu.sh
cargo build --release --locked --workspace --bins
BIN="${PREFIX:-${CARGO_HOME:-$HOME/.cargo}}/bin"
mkdir -p "$BIN"
install -m 0755 target/release/provisioning-orchestrator target/release/nu_plugin_orchestrator "$BIN/"
MODULES="${XDG_DATA_HOME:-$HOME/.local/share}/provisioning/nushell-modules"
mkdir -p "$MODULES"
cp -a nushell-modules/. "$MODULES/"
# `use provisioning` from any directory (a link on nu's library path).
./scripts/link-module.sh "$MODULES" || true
nu -c "plugin add '$BIN/nu_plugin_orchestrator'"
nu -c "plugin use orchestrator; orch daemon start --binary '$BIN/provisioning-orchestrator' | select running pid socket data_dir storage | table"
