#!/usr/bin/env bash
# A batch workflow of N no-op steps (`true`) in a layered DAG: LEVELS levels, each step
# depending on up to 3 steps of the level before. Measures, through the real plugin:
#   - plan computation (`orch workflow plan`, the whole round trip from nu),
#   - submit → done (`orch workflow submit batch --wait`), at --parallel 8 and 1,
#   - the same number of independent `true` tasks as plain tasks (the queue alone),
#   - the machine's raw rate for spawning `true`.
# Scheduling overhead per step = (workflow time − plain tasks time) / N.
#
#   bench/workflow-dag.sh [N] [LEVELS]      (default 1000 steps in 10 levels)
#
# Needs nu 0.115.1 on PATH. Builds the release binaries first. Prints a Markdown table.
set -euo pipefail
N=${1:-1000}
LEVELS=${2:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-dag-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
BIN="$ROOT/target/release"
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"

start_daemon() { # $1 = parallel
  rm -rf "$WORK/data" "$PROVISIONING_ORCHESTRATOR_SOCKET"
  "$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --parallel "$1" --log warn >/dev/null 2>>"$WORK/orch.stderr" &
  ORCH_PID=$!
  for _ in $(seq 200); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done
  [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] || { cat "$WORK/orch.stderr" >&2; exit 1; }
}
stop_daemon() { kill "$ORCH_PID"; wait "$ORCH_PID" 2>/dev/null || true; ORCH_PID=; }

# The workflow, written once as JSON.
nu -n -c "
let per_level = ($N / $LEVELS | math ceil)
let ops = (0..<$N | each {|i|
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

measure() { # $1 = parallel; prints "plan_ms workflow_ms tasks_ms"
  start_daemon "$1"
  nu -n --plugin-config "$REG" -c "
plugin use --plugin-config '$REG' orchestrator
let plan = (timeit { orch workflow plan '$WORK/dag.json' | ignore })
let wf = (timeit { orch workflow submit batch '$WORK/dag.json' --wait | ignore })
let tasks = (timeit { 1..$N | each { {command: ['true']} } | orch submit | orch wait | ignore })
print ([(\$plan | into int) (\$wf | into int) (\$tasks | into int)] | each { \$in / 1_000_000 | math round --precision 1 } | str join ' ')
"
  stop_daemon
}

measure 8 >"$WORK/p8"
measure 1 >"$WORK/p1"
read -r PLAN8 WF8 TASKS8 <"$WORK/p8"
read -r PLAN1 WF1 TASKS1 <"$WORK/p1"
t0=$(date +%s%N); seq "$N" | xargs -P 8 -n 1 true; t1=$(date +%s%N)
RAW8=$(( (t1 - t0) / 1000000 ))
t0=$(date +%s%N); seq "$N" | xargs -P 1 -n 1 true; t1=$(date +%s%N)
RAW1=$(( (t1 - t0) / 1000000 ))

per_step() { echo "scale=3; ($1 - $2) / $N" | bc; }
cat <<EOF
| $N no-op steps, $LEVELS levels | --parallel 8 | --parallel 1 |
|---|---|---|
| \`orch workflow plan\` (round trip from nu) | ${PLAN8} ms | ${PLAN1} ms |
| workflow submit → done (\`--wait\`) | ${WF8} ms | ${WF1} ms |
| same number of plain \`true\` tasks, submit → done | ${TASKS8} ms | ${TASKS1} ms |
| raw \`xargs -P\` spawn of \`true\` | ${RAW8} ms | ${RAW1} ms |
| scheduling overhead per step (workflow − plain tasks) / N | $(per_step "$WF8" "$TASKS8") ms | $(per_step "$WF1" "$TASKS1") ms |
| orchestration cost per step (workflow − raw spawn) / N | $(per_step "$WF8" "$RAW8") ms | $(per_step "$WF1" "$RAW1") ms |
EOF
