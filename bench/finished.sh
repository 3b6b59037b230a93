#!/usr/bin/env bash
# What finished tasks in the store cost the daemon (issue 10: "10,000,000 finished tasks →
# RSS unaffected"). For each N (default 0, 10^6, 10^7) the store is filled with N finished
# tasks (`daemon/examples/fill_finished.rs`: each succeeded after one attempt, one in ten
# labelled `bench`; running 10^7 tasks through a daemon would take hours here), then:
#   - start: from the daemon's start to the first answer of GET /health, and its RSS 2 s
#     later (and peak);
#   - reads, median of 20 over loopback HTTP with curl: GET /tasks?limit=10 (`orch tasks
#     --limit 10`), /tasks?status=succeeded&limit=10, /tasks?label=bench&limit=10, /health,
#     /metrics;
#   - 10,000 `/bin/true` tasks enqueued as one list and run to completion (--parallel 8),
#     and the RSS after them;
#   - restart: kill -9, then start → first answer, and its RSS;
#   - the store file's size.
#
#   bench/finished.sh [N...]     (release build; needs about 1.3 GB of disk per 10^6 tasks)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(0 1000000 10000000)
PORT=18098
WORK=$(mktemp -d "${BENCH_TMP:-/tmp}/orch-finished-bench.XXXXXX")
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill -9 "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
if [[ -z ${ORCH_BENCH_NO_BUILD:-} ]]; then
  cargo build --release -p provisioning-orchestrator -p nu_plugin_orchestrator --bins \
    --examples --manifest-path "$ROOT/Cargo.toml" >&2
fi
BIN="$ROOT/target/release"
PLUGIN_CONFIG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$PLUGIN_CONFIG' '$BIN/nu_plugin_orchestrator'"

source "$ROOT/bench/lib.sh"
start_daemon() {
  "$BIN/provisioning-orchestrator" --data-dir "$DIR/data" --socket "$DIR/orch.sock" \
    --port "$PORT" --parallel 8 --log warn >/dev/null 2>>"$DIR/orch.stderr" &
  ORCH_PID=$!
}
stop_daemon() {
  kill "$ORCH_PID" 2>/dev/null || true
  wait "$ORCH_PID" 2>/dev/null || true
  ORCH_PID=
}

echo "| finished tasks | start → answer | RSS after start (peak) | /tasks?limit=10 | ?status=succeeded | ?label=bench | /health | /metrics | 10,000 run (tasks/s) | RSS after them | kill -9 → answer | RSS after restart | store |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for N in "${SIZES[@]}"; do
  DIR="$WORK/n$N"
  mkdir -p "$DIR"
  # A first start creates the store and the tokens; the fill needs the store closed.
  start_daemon
  wait_health
  stop_daemon
  [[ $N -eq 0 ]] || "$BIN/examples/fill_finished" "$DIR/data/orchestrator.redb" "$N"
  S0=$(now_ms)
  start_daemon
  wait_health
  S1=$(now_ms)
  sleep 2
  RSS=$(mib "$(kib "$ORCH_PID" VmRSS)")
  PEAK=$(mib "$(kib "$ORCH_PID" VmHWM)")
  TOKEN=$(python3 -c "import json; print([t['token'] for t in json.load(open('$DIR/data/tokens.json'))['tokens'] if t['role'] == 'viewer'][0])")
  LIST=$(median_ms "/tasks?limit=10")
  BY_STATUS=$(median_ms "/tasks?status=succeeded&limit=10")
  BY_LABEL=$(median_ms "/tasks?label=bench&limit=10")
  HEALTH=$(median_ms "/health")
  METRICS=$(median_ms "/metrics")
  R0=$(now_ms)
  orch_nu "0..<10000 | each { {command: [/bin/true]} } | orch submit | orch wait | ignore"
  R1=$(now_ms)
  RUN_RATE=$(awk -v ms="$((R1 - R0))" 'BEGIN {printf "%.0f", 10000 / (ms / 1000)}')
  sleep 2
  RSS_RUN=$(mib "$(kib "$ORCH_PID" VmRSS)")
  kill -9 "$ORCH_PID"
  wait "$ORCH_PID" 2>/dev/null || true
  K0=$(now_ms)
  start_daemon
  wait_health
  K1=$(now_ms)
  sleep 2
  RSS_RESTART=$(mib "$(kib "$ORCH_PID" VmRSS)")
  STORE=$(du -m "$DIR/data/orchestrator.redb" | cut -f1)
  echo "| $N | $((S1 - S0)) ms | $RSS MiB ($PEAK MiB) | $LIST ms | $BY_STATUS ms | $BY_LABEL ms | $HEALTH ms | $METRICS ms | $RUN_RATE | $RSS_RUN MiB | $((K1 - K0)) ms | $RSS_RESTART MiB | $STORE MiB |"
  stop_daemon
  rm -rf "$DIR"
done
