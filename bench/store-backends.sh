#!/usr/bin/env bash
# The two stores side by side: the embedded redb store (the default) and PostgreSQL
# (--storage-type postgres, on a private PostgreSQL 15 server from scripts/postgres.sh).
# For each, on a fresh daemon with --parallel 8 --log warn (and an empty database):
#   - list enqueue: N `/bin/true` tasks submitted as one list from nu, while 8 gate tasks
#     (`sleep 100000`, priority 100) hold every slot, so nothing runs during the submit;
#   - run to completion: the gates cancelled, the time until all N tasks are final;
#   - latency from nu: median and 90th percentile of K runs, after 20 warm-up runs, in
#     one `nu`, of `orch submit --wait true` and of the 3-step sequential workflow of
#     bench/latency.sh (`orch workflow submit batch bench/three-steps.json --wait`).
#
#   bench/store-backends.sh [N] [K]      (default N=10000, K=200)
#
# Needs nu 0.115.1, psql and bc on PATH (PostgreSQL 15 is installed by scripts/postgres.sh
# when missing). Builds the release binaries first (ORCH_BENCH_NO_BUILD=1: uses those in
# target/release as they are). Prints a Markdown table and the load average at the start.
set -euo pipefail
N=${1:-10000}
K=${2:-200}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-store-bench.XXXXXX)
chmod 755 "$WORK" # the PostgreSQL server in $WORK/pg runs as `postgres` when we are root
PG="$WORK/pg"
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  [[ -n ${PG_STARTED:-} ]] && "$ROOT/scripts/postgres.sh" stop "$PG" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

[[ -n ${ORCH_BENCH_NO_BUILD:-} ]] || cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
BIN="$ROOT/target/release"
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"

start_daemon() { # name, extra flags
  local name=$1
  shift
  DATA="$WORK/data-$name"
  export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/$name.sock"
  "$BIN/provisioning-orchestrator" --data-dir "$DATA" --parallel 8 --log warn "$@" >/dev/null 2>>"$WORK/$name.stderr" &
  ORCH_PID=$!
  for _ in $(seq 600); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done
  [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] || { cat "$WORK/$name.stderr" >&2; exit 1; }
}
stop_daemon() { kill "$ORCH_PID"; wait "$ORCH_PID" 2>/dev/null || true; ORCH_PID=; }

# Prints "enqueue_s run_s not_succeeded task_median task_p90 wf_median wf_p90" (ms).
measure() { # name, extra daemon flags
  local name=$1
  start_daemon "$@"
  nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
1..8 | each { orch submit --priority 100 --label gate sleep 100000 } | ignore
loop { if (orch tasks --label gate --status running | length) == 8 { break }; sleep 20ms }
let specs = (0..<$N | each { {command: [/bin/true], label: bulk} })
let enqueue = (timeit { \$specs | orch submit | ignore })
let ids = (orch tasks --label bulk | get id)
let run = (timeit {
  orch tasks --label gate | get id | each {|id| orch cancel \$id } | ignore
  \$ids | orch wait --timeout 10min | ignore
})
let bad = (orch tasks --label bulk | where status != succeeded | length) + ($N - (\$ids | length))
def lat [code: closure] {
  for _ in 1..20 { do \$code | ignore }
  mut runs = []
  for _ in 1..$K { \$runs = (\$runs | append (timeit { do \$code | ignore } | into int)) }
  let runs = (\$runs | sort)
  [(\$runs | get ($K // 2)) (\$runs | get (($K * 9) // 10))] | each { \$in / 1e6 | math round --precision 3 } | str join ' '
}
let task = (lat { orch submit --wait true })
let wf = (lat { orch workflow submit batch '$ROOT/bench/three-steps.json' --wait })
print \$'(\$enqueue / 1sec) (\$run / 1sec) (\$bad) (\$task) (\$wf)'
" >"$WORK/$name.out" || {
    echo "the $name run failed; daemon stderr:" >&2
    cat "$WORK/$name.stderr" >&2
    echo "last lines of $DATA/orchestrator.log:" >&2
    tail -n 50 "$DATA/orchestrator.log" >&2 || true
    exit 1
  }
  stop_daemon
}

measure redb
PG_STARTED=1
SERVER_URL=$("$ROOT/scripts/postgres.sh" start "$PG" 2>"$WORK/pg-start.log") || { cat "$WORK/pg-start.log" >&2; exit 1; }
psql -X -q -d "$SERVER_URL" -c "CREATE DATABASE bench_1"
measure postgres --storage-type postgres --database-url "${SERVER_URL%/*}/bench_1"

read -r R_ENQ R_RUN R_BAD R_TM R_TP R_WM R_WP <"$WORK/redb.out"
read -r P_ENQ P_RUN P_BAD P_TM P_TP P_WM P_WP <"$WORK/postgres.out"
rate() { echo "scale=0; $N / $1" | bc; }
cat <<EOF
| $N tasks of \`/bin/true\`, --parallel 8; latency: median / p90 of $K runs | redb | postgres |
|---|---|---|
| list enqueue, one \`orch submit\` (tasks/s) | $(rate "$R_ENQ") | $(rate "$P_ENQ") |
| run to completion, gates cancelled → all final (tasks/s) | $(rate "$R_RUN") | $(rate "$P_RUN") |
| tasks that did not succeed | $R_BAD | $P_BAD |
| \`orch submit --wait true\` (ms) | $R_TM / $R_TP | $P_TM / $P_TP |
| 3-step sequential workflow \`--wait\` (ms) | $R_WM / $R_WP | $P_WM / $P_WP |

Load average at start: $LOAD
EOF
