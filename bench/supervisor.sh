#!/usr/bin/env bash
# The cost of the per-attempt supervisor: run-to-completion of N `true` tasks (8 at a
# time, held by a gate task while they are enqueued, as in queue-vs-pueue.sh) and the
# 1,000-step layered DAG of workflow-dag.sh (--parallel 8), each with supervisors (the
# default) and with --no-supervisor; plus the machine's raw rate for spawning `true`
# 8 at a time.
#
#   bench/supervisor.sh [N]        (default N=10000)
#   BACKLOG=1000000 bench/supervisor.sh   the same with that many finished tasks already in
#                                         each daemon's store (they depend on a task that
#                                         is cancelled, so nothing is spawned for them)
#
# Also printed: the rate of the list enqueue of the N tasks (one `orch submit`).
#
# Needs nu 0.115.1 on PATH, bc. Builds the release binaries first (ORCH_BENCH_NO_BUILD=1:
# uses those in target/release as they are). Prints a Markdown table.
set -euo pipefail
N=${1:-10000}
STEPS=1000
LEVELS=10
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-sup-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

[[ -n ${ORCH_BENCH_NO_BUILD:-} ]] || cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
BIN=${ORCH_BENCH_BIN:-$ROOT/target/release}
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"

start_daemon() { # extra flags
  rm -rf "$WORK/data" "$PROVISIONING_ORCHESTRATOR_SOCKET"
  "$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --parallel 8 --log warn "$@" >/dev/null 2>>"$WORK/orch.stderr" &
  ORCH_PID=$!
  for _ in $(seq 600); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done
  [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] || { cat "$WORK/orch.stderr" >&2; exit 1; }
}
stop_daemon() { kill "$ORCH_PID"; wait "$ORCH_PID" 2>/dev/null || true; ORCH_PID=; }

nu -n -c "
let per_level = ($STEPS / $LEVELS | math ceil)
let ops = (0..<$STEPS | each {|i|
  let level = (\$i // \$per_level)
  let deps = if \$level == 0 { [] } else {
    let prev = ((\$level - 1) * \$per_level)
    [(\$prev + (\$i mod \$per_level)) (\$prev + ((\$i * 7) mod \$per_level)) (\$prev + ((\$i * 13) mod \$per_level))]
    | uniq | each {|d| \$'s(\$d)' }
  }
  {id: \$'s(\$i)', type: command, command: ['true'], dependencies: \$deps}
})
{name: dag-bench, operations: \$ops} | to json -r | save -f '$WORK/dag.json'
"

BACKLOG=${BACKLOG:-0}

# Fills the store with $BACKLOG finished tasks, in lists of 10,000 behind a task that is
# then cancelled; waits until they are all final.
fill_backlog() {
  [[ $BACKLOG -gt 0 ]] || return 0
  nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
let hold = (orch submit sleep 1000)
for _ in 1..($BACKLOG // 10000) { 1..10000 | each { {command: [true], after: [\$hold.id], label: backlog} } | orch submit | ignore }
orch cancel \$hold.id | ignore
loop { if (orch health | get tasks.dependency_failed) >= $BACKLOG { break }; sleep 200ms }
" >/dev/null
}

measure() { # extra daemon flags; prints "run_s dag_ms failed enqueue_s"
  start_daemon "$@"
  fill_backlog
  nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
let gate_file = '$WORK/gate'
rm -f \$gate_file
let gate = (orch submit [sh -c \$'while [ ! -f (\$gate_file) ]; do sleep 0.005; done'])
let specs = (1..$N | each { {command: [true], after: [\$gate.id], label: batch} })
let enqueue = (timeit { \$specs | orch submit | ignore })
let ids = (orch tasks --label batch | get id)
let run = (timeit { touch \$gate_file; orch wait ...\$ids | ignore })
let dag = (timeit { orch workflow submit batch '$WORK/dag.json' --wait | ignore })
let counts = (orch health | get tasks)
let failed = (\$counts.failed + \$counts.dependency_failed - $BACKLOG)
print \$'(\$run / 1sec) (\$dag / 1ms | math round) (\$failed) (\$enqueue / 1sec)'
"
  stop_daemon
}

t0=$(date +%s.%N); seq "$N" | xargs -P 8 -n 1 true; t1=$(date +%s.%N)
RAW=$(echo "scale=0; $N / ($t1 - $t0)" | bc)
# Each measure's figures go through a file, not a process substitution: the daemon it
# starts must be this shell's child (stop_daemon waits for it).
measure >"$WORK/with"
measure --no-supervisor >"$WORK/without"
read -r S_RUN S_DAG S_FAILED S_ENQ <"$WORK/with"
read -r D_RUN D_DAG D_FAILED D_ENQ <"$WORK/without"
S_RATE=$(echo "scale=0; $N / $S_RUN" | bc)
D_RATE=$(echo "scale=0; $N / $D_RUN" | bc)
pct() { echo "scale=0; 100 * $1 / $2" | bc; }
cat <<EOF
| $N tasks of \`true\` / $STEPS-step DAG, 8 at a time, $BACKLOG finished tasks in the store | with the supervisor | --no-supervisor |
|---|---|---|
| list enqueue, one \`orch submit\` (tasks/s) | $(echo "scale=0; $N / $S_ENQ" | bc) | $(echo "scale=0; $N / $D_ENQ" | bc) |
| run to completion (tasks/s) | $S_RATE ($(pct "$S_RATE" "$RAW")% of raw) | $D_RATE ($(pct "$D_RATE" "$RAW")% of raw) |
| $STEPS-step DAG, submit → done (ms) | $S_DAG | $D_DAG |
| raw spawn rate, \`xargs -P 8 true\` (tasks/s) | $RAW | |
| tasks that did not succeed | $S_FAILED | $D_FAILED |
EOF
