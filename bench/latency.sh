#!/usr/bin/env bash
# Latency from nu, side by side with the raw cost it cannot avoid:
#   - a 3-step sequential workflow of `true` steps (`orch workflow submit batch bench/three-steps.json --wait`),
#   - one task submit → done (`orch submit --wait true`),
#   - the raw cost of each: as many spawns of `true` and as many fsyncs as the daemon made
#     durable commits for it (counted from /metrics), by bench/raw-cost.c.
# Each figure is the median (and 90th percentile) of K runs in one `nu`, after 20 warm-up
# runs. Run it on a quiet machine: an fsync costs ~0.15 ms here when idle and several ms
# while other builds write.
#
#   bench/latency.sh [K]      (default 300; ORCH_DAEMON_ARGS=--no-supervisor: without supervisors;
#                              ORCH_BENCH_BIN=DIR: the binaries of DIR, e.g. an earlier build's)
#
# Needs nu 0.115.1, curl, python3 and cc on PATH. Builds the release binaries first
# (ORCH_BENCH_NO_BUILD=1: uses those in target/release as they are).
set -euo pipefail
K=${1:-300}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-latency.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[[ -n ${ORCH_BENCH_NO_BUILD:-} ]] || cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
cc -O2 -o "$WORK/raw-cost" "$ROOT/bench/raw-cost.c"
BIN=${ORCH_BENCH_BIN:-$ROOT/target/release}
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"
PORT=$((20000 + RANDOM % 20000))
"$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --port "$PORT" --log warn ${ORCH_DAEMON_ARGS:-} >/dev/null 2>>"$WORK/orch.stderr" &
ORCH_PID=$!
for _ in $(seq 200); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done
[[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] || { cat "$WORK/orch.stderr" >&2; exit 1; }
for _ in $(seq 200); do [[ -f $WORK/data/tokens.json ]] && break; sleep 0.05; done
TOKEN=$(python3 -c "import json; print([t['token'] for t in json.load(open('$WORK/data/tokens.json'))['tokens'] if t['role']=='viewer'][0])")
commits() {
  curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/metrics" |
    awk '/^orchestrator_store_commit_seconds_count/ { print $2 }'
}

# Prints "median_ms p90_ms commits_per_run" for K runs of the nu expression $1.
measure() {
  local before after times
  nu -n --plugin-config "$REG" -c "plugin use --plugin-config '$REG' orchestrator; for _ in 1..20 { $1 | ignore }" >/dev/null
  before=$(commits)
  times=$(nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
mut runs = []
for _ in 1..$K { \$runs = (\$runs | append (timeit { $1 | ignore } | into int)) }
let runs = (\$runs | sort)
let median = (\$runs | get ($K // 2))
let p90 = (\$runs | get (($K * 9) // 10))
print \$'(\$median / 1e6 | math round --precision 3) (\$p90 / 1e6 | math round --precision 3)'
")
  after=$(commits)
  echo "$times $(((after - before) / K))"
}

read -r wf_median wf_p90 wf_commits < <(measure "orch workflow submit batch '$ROOT/bench/three-steps.json' --wait")
read -r task_median task_p90 task_commits < <(measure "orch submit --wait true")
read -r raw_wf_median raw_wf_p90 < <("$WORK/raw-cost" 3 "$wf_commits" "$K" "$WORK/data")
read -r raw_task_median raw_task_p90 < <("$WORK/raw-cost" 1 "$task_commits" "$K" "$WORK/data")

echo "| from nu | median | p90 | durable commits | raw cost (spawns + fsyncs), median | p90 |"
echo "|---|---|---|---|---|---|"
echo "| 3-step sequential workflow | $wf_median ms | $wf_p90 ms | $wf_commits | 3 + $wf_commits: $raw_wf_median ms | $raw_wf_p90 ms |"
echo "| one task submit → done | $task_median ms | $task_p90 ms | $task_commits | 1 + $task_commits: $raw_task_median ms | $raw_task_p90 ms |"
