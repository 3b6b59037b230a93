#!/usr/bin/env bash
# How the daemon's costs grow with the number of tasks in its store (issue 10): for each N
# (default 10^4, 10^5, 10^6), N queued `/bin/true` tasks are enqueued from nu as lists of
# 10,000 while one gate task holds the only slot, then the daemon is killed (-9) and
# started again. Printed per N:
#   - enqueue rate (tasks/s, nu → socket → one durable commit per list);
#   - RSS after the enqueue, and its peak while enqueueing (VmHWM);
#   - restart time: from the kill -9 to the first answer of GET /health (polled every 5 ms),
#     and the CPU time the new daemon used until then (user + system, 10 ms ticks: the
#     figure to trust on a loaded machine);
#   - RSS 2 s after the restart, and its peak during the restart;
#   - latency of GET /tasks?limit=10 (what `orch tasks --limit 10` asks) and GET /health
#     (`orch health`), median of 20, over loopback HTTP with curl (nu's own start-up is
#     not counted);
#   - the store file's size.
# After the restart the queue starts draining at one task at a time; that does not change
# what is measured (each start reads one record).
#
#   bench/scale.sh [N...]        (release build; the figures go into docs/benchmarks.md)
#   PROFILE=debug bench/scale.sh  uses the debug binaries already built instead
#   PLUGIN_PROFILE=debug ...      the debug plugin (with a release daemon built beforehand)
#   ORCH_BENCH_BIN=DIR ...        the daemon of DIR (an earlier build), with PLUGIN_PROFILE set
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(10000 100000 1000000)
LIST=10000
PORT=18097
WORK=$(mktemp -d /tmp/orch-scale-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill -9 "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
PROFILE=${PROFILE:-release}
if [[ $PROFILE == release && -z ${PLUGIN_PROFILE:-} ]]; then
  cargo build --release -p provisioning-orchestrator -p nu_plugin_orchestrator --bins \
    --manifest-path "$ROOT/Cargo.toml" >&2
fi
BIN=${ORCH_BENCH_BIN:-$ROOT/target/$PROFILE}
PLUGIN_BIN="$ROOT/target/${PLUGIN_PROFILE:-$PROFILE}"
PLUGIN_CONFIG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$PLUGIN_CONFIG' '$PLUGIN_BIN/nu_plugin_orchestrator'"

source "$ROOT/bench/lib.sh"
start_daemon() {
  "$BIN/provisioning-orchestrator" --data-dir "$DIR/data" --socket "$DIR/orch.sock" \
    --port "$PORT" --parallel 1 --log warn >/dev/null 2>>"$DIR/orch.stderr" &
  ORCH_PID=$!
}
cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; }

echo "| tasks queued | enqueue (tasks/s) | RSS after enqueue (peak) | restart (kill -9 → answer; its CPU) | RSS after restart (peak) | GET /tasks?limit=10 | GET /health | store |"
echo "|---|---|---|---|---|---|---|---|"
for N in "${SIZES[@]}"; do
  DIR="$WORK/n$N"
  mkdir -p "$DIR"
  start_daemon
  wait_health
  TOKEN=$(python3 -c "import json; print([t['token'] for t in json.load(open('$DIR/data/tokens.json'))['tokens'] if t['role'] == 'viewer'][0])")
  orch_nu "orch submit --priority 100 [sleep 100000] | ignore"
  LISTS=$(( (N + LIST - 1) / LIST ))
  T0=$(now_ms)
  orch_nu "for b in 0..<$LISTS { 0..<$LIST | each { {command: [/bin/true]} } | orch submit | ignore }"
  T1=$(now_ms)
  RATE=$(awk -v n="$((LISTS * LIST))" -v ms="$((T1 - T0))" 'BEGIN {printf "%.0f", n / (ms / 1000)}')
  RSS=$(mib "$(kib "$ORCH_PID" VmRSS)")
  PEAK=$(mib "$(kib "$ORCH_PID" VmHWM)")
  kill -9 "$ORCH_PID"
  wait "$ORCH_PID" 2>/dev/null || true
  K0=$(now_ms)
  start_daemon
  wait_health
  K1=$(now_ms)
  CPU=$(cpu_ms "$ORCH_PID")
  sleep 2
  RSS2=$(mib "$(kib "$ORCH_PID" VmRSS)")
  PEAK2=$(mib "$(kib "$ORCH_PID" VmHWM)")
  LIST_MS=$(median_ms "/tasks?limit=10")
  HEALTH_MS=$(median_ms "/health")
  STORE=$(du -m "$DIR/data/orchestrator.redb" | cut -f1)
  echo "| $N | $RATE | $RSS MiB ($PEAK MiB) | $((K1 - K0)) ms ($CPU ms) | $RSS2 MiB ($PEAK2 MiB) | $LIST_MS ms | $HEALTH_MS ms | $STORE MiB |"
  kill "$ORCH_PID" 2>/dev/null || true
  wait "$ORCH_PID" 2>/dev/null || true
  ORCH_PID=
  rm -rf "$DIR"
done
