#!/usr/bin/env bash
# Runs every test: unit tests, the plugin's example tests, and the end-to-end tests that
# drive the real daemon binary, the real plugin and the real `nu` 0.115.1.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-nu.sh
# The end-to-end tests run the binaries from the same target directory.
cargo build --workspace --bins
cargo test --workspace "$@"
