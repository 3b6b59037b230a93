#!/usr/bin/env bash
# Test environments against doing the same by hand with the podman CLI, on this machine:
#   - a single redis environment: create → ready (installed and `redis-cli ping` answers)
#     and destroy, through `orch test env create/delete`, and the same steps by hand
#     (network, container, start redis, poll the ping, remove both);
#   - a 3-member etcd cluster (etcd_cluster topology: nodes set up in parallel, quorum
#     and replication checked) against a single etcd node.
# Medians of RUNS runs (default 5). Needs the engine (scripts/ensure-podman.sh), the base
# image (scripts/build-base-image.sh) and nu 0.115.1. Builds the release binaries first.
#
#   bench/testenv-vs-podman.sh [RUNS]
set -euo pipefail
RUNS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-testenv-bench.XXXXXX)
IMAGE=${PROVISIONING_BASE_IMAGE:-localhost/provisioning-base:bookworm}
export DOCKER_HOST=${DOCKER_HOST:-unix:///run/podman/podman.sock}
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  podman rm -f bench-redis >/dev/null 2>&1 || true
  podman network rm bench-net >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
BIN="$ROOT/target/release"
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"
"$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --modules "$ROOT/nushell-modules" --log warn >/dev/null 2>"$WORK/orch.stderr" &
ORCH_PID=$!
for _ in $(seq 200); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done

ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# --- by hand: the same steps with the podman CLI --------------------------------------
by_hand() {
  local t0 t1 t2
  t0=$(date +%s%N)
  podman network create bench-net >/dev/null
  podman run -d --name bench-redis --network bench-net --hostname redis --init "$IMAGE" sleep infinity >/dev/null
  podman exec bench-redis sh -c 'redis-server --daemonize yes --bind 0.0.0.0 --protected-mode no >/dev/null'
  until podman exec bench-redis redis-cli ping 2>/dev/null | grep -q PONG; do sleep 0.1; done
  t1=$(date +%s%N)
  podman rm -f bench-redis >/dev/null
  podman network rm bench-net >/dev/null
  t2=$(date +%s%N)
  echo "$(ms "$t0" "$t1") $(ms "$t1" "$t2")"
}

# --- through the orchestrator ---------------------------------------------------------
orch_env() { # $1 = nu expression that creates the environment (ready)
  nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
let t0 = (date now)
let created = ($1)
let t1 = (date now)
if \$created.status != ready { error make {msg: \$'not ready: (\$created.error)'} }
orch test env delete \$created.id | ignore
let t2 = (date now)
print $'(((\$t1 - \$t0) / 1ms) | math round) (((\$t2 - \$t1) / 1ms) | math round)'
"
}

for _ in $(seq "$RUNS"); do by_hand; done >"$WORK/hand"
for _ in $(seq "$RUNS"); do orch_env "orch test env create single redis --auto-start"; done >"$WORK/redis"
for _ in $(seq "$RUNS"); do orch_env "orch test env create single etcd --auto-start"; done >"$WORK/etcd1"
for _ in $(seq "$RUNS"); do orch_env "orch test topology show etcd_cluster | orch test env create cluster etcd --auto-start"; done >"$WORK/etcd3"

col() { awk "{print \$$2}" "$WORK/$1" | median; }
cat <<EOF
| median of $RUNS runs | create → ready | destroy |
|---|---|---|
| redis by hand (podman CLI: network, run, start redis, poll ping; rm, network rm) | $(col hand 1) ms | $(col hand 2) ms |
| redis, \`orch test env create single redis --auto-start\` / \`delete\` | $(col redis 1) ms | $(col redis 2) ms |
| etcd, single node | $(col etcd1 1) ms | $(col etcd1 2) ms |
| etcd_cluster, 3 nodes (parallel setup, quorum + replication checks) | $(col etcd3 1) ms | $(col etcd3 2) ms |
EOF
