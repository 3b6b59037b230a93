#!/usr/bin/env bash
# Runs every test: unit tests, the plugin's example tests, and the end-to-end tests that
# drive the real daemon binary, the real plugin, the real `nu` 0.115.1 and, for the local
# provider and its taskservs, real containers on Podman's Docker-compatible API, and, for
# the PostgreSQL store, a real PostgreSQL server.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-nu.sh
# The container engine (installed, configured and started when missing) and the base
# image of the local provider's servers (built from the Debian mirror when missing).
./scripts/ensure-podman.sh >/dev/null
export DOCKER_HOST=unix:///run/podman/podman.sock
./scripts/build-base-image.sh
# The HTTP API is fuzzed from its OpenAPI document with schemathesis (from PyPI).
if ! command -v st >/dev/null 2>&1; then
  # A Debian system Python refuses plain pip installs (PEP 668); a pyenv one does not.
  python3 -m pip install --quiet schemathesis 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages schemathesis
  export PATH="$HOME/.local/bin:$PATH"
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  command -v st >/dev/null || { echo "schemathesis installed but \`st\` is not on PATH" >&2; exit 1; }
fi
# The aws provider is tested through the aws CLI (Debian's awscli) against moto's EC2
# emulator in server mode (moto[server] from PyPI).
if ! command -v aws >/dev/null 2>&1; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq awscli >&2
fi
if ! python3 -c 'import moto.server, boto3' 2>/dev/null; then
  python3 -m pip install --quiet 'moto[server]' 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages 'moto[server]'
  python3 -c 'import moto.server, boto3' || { echo "moto[server] installed but not importable" >&2; exit 1; }
fi
# `orch daemon install`'s unit is checked by systemd's own `systemd-analyze verify`.
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >&2
fi
# The dashboard is tested in the distribution's headless Chromium, driven by
# playwright-core (from npm, pinned in tests/browser/package-lock.json; it downloads no
# browser).
if [[ ! -x /usr/bin/chromium ]]; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
if [[ ! -d tests/browser/node_modules/playwright-core ]]; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
# The PostgreSQL store is tested against a real server of the run's own (PostgreSQL 15
# from the distribution, installed when missing), stopped and removed when the run ends;
# each test makes a database of its own on it.
pg_dir=$(mktemp -d /tmp/orch-test-pg.XXXXXX)
log=$(mktemp)
trap './scripts/postgres.sh stop "$pg_dir"; rm -f "$log"' EXIT
PROVISIONING_TEST_DATABASE_URL=$(./scripts/postgres.sh start "$pg_dir")
export PROVISIONING_TEST_DATABASE_URL
# No incremental cache (gigabytes a fresh clone never reuses); the free space is printed
# first, so a run that fills the disk says so.
export CARGO_INCREMENTAL=0
df -h . | awk 'NR == 2 { print "free disk before the build: " $4 }'
# The end-to-end tests run the binaries from the same target directory.
cargo build --workspace --bins
status=0
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
# One closing line for the whole run (cargo prints one per test binary).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
