#!/usr/bin/env bash
# The daemon's retention over a backlog: N finished tasks (they depend on a cancelled task,
# so they are final without spawning anything), then a restart with --retain-finished 1s.
# Prints how long until all are removed, the rate, and the batches (each one durable
# commit of at most 10,000 removals with its audit record) from the daemon's log.
#
#   bench/retention.sh [N] [PROFILE]     (default 100000 tasks, release)
set -euo pipefail
N=${1:-100000}
PROFILE=${2:-release}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-retention-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  [[ -n ${KEEP:-} ]] && cp "$WORK/data/orchestrator.log" "$KEEP"; rm -rf "$WORK"
}
trap cleanup EXIT
if [[ $PROFILE == release ]]; then
  cargo build --release -p provisioning-orchestrator -p nu_plugin_orchestrator --bins --manifest-path "$ROOT/Cargo.toml" >&2
fi
BIN="$ROOT/target/$PROFILE"
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"
start() {
  "$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --socket "$WORK/orch.sock" --quiet "$@" &
  ORCH_PID=$!
  for _ in $(seq 400); do [[ -S $WORK/orch.sock ]] && break; sleep 0.05; done
}
orch() { nu -n --plugin-config "$WORK/p.msgpackz" -c "plugin use --plugin-config '$WORK/p.msgpackz' orchestrator; $1"; }
nu -n -c "plugin add --plugin-config '$WORK/p.msgpackz' '$BIN/nu_plugin_orchestrator'"
start
orch "orch submit sleep 1000 | ignore; 1..$N | each {|i| {command: [true], after: [1]} } | orch submit | ignore; orch cancel 1 | ignore"
kill "$ORCH_PID"; wait "$ORCH_PID" || true
sleep 1.1
started=$(date +%s.%N)
start --retain-finished 1s
until [[ $(orch "orch health | get tasks | values | math sum") == 0 ]]; do sleep 0.05; done
ended=$(date +%s.%N)
batches=$(grep -c "finished records past the retention removed" "$WORK/data/orchestrator.log" || true)
python3 - "$started" "$ended" "$N" "$batches" <<'PY'
import sys
start, end, n, batches = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]) + 1, int(sys.argv[4])
took = end - start
print(f"| retention of {n} finished tasks ({sys.argv[4]} batches) | {took:.2f} s from the start | {n / took:,.0f} removals/s | {took / max(batches, 1) * 1000:.0f} ms per batch |")
PY
