#!/usr/bin/env bash
# Enqueue N trivial `true` tasks, then run them to completion 8 at a time, in the
# orchestrator and in pueue 4.0.4, on this machine; plus the machine's raw rate for
# spawning `true` 8 at a time, and the latency of a warm `orch task <id>` from nu.
#
#   bench/queue-vs-pueue.sh [N]        (default N=10000)
#   PUEUE_RUN_SECONDS=600 bench/queue-vs-pueue.sh   (longer pueue run phase; default 180)
#
# Needs: nu 0.115.1 on PATH, pueue/pueued 4.0.4 (`cargo install pueue@4.0.4`), bc.
# Builds the release binaries first. Prints a Markdown table.
set -euo pipefail
N=${1:-10000}
PARALLEL=8
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  pueue -c "$WORK/pueue.yml" shutdown >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
rate() { echo "scale=0; $1 / ($3 - $2)" | bc; }
secs() { echo "scale=3; ($2 - $1) / 1" | bc; }

cargo build --release --workspace --bins --manifest-path "$ROOT/Cargo.toml" >&2
BIN="$ROOT/target/release"

# --- raw spawn rate -----------------------------------------------------------------
t0=$(now); seq "$N" | xargs -P "$PARALLEL" -n 1 true; t1=$(now)
RAW_RATE=$(rate "$N" "$t0" "$t1")

# --- orchestrator -------------------------------------------------------------------
export PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock"
"$BIN/provisioning-orchestrator" --data-dir "$WORK/orch" --parallel "$PARALLEL" --log warn 2>"$WORK/orch.stderr" &
ORCH_PID=$!
REG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$REG' '$BIN/nu_plugin_orchestrator'"
ORCH_NU=(nu -n --plugin-config "$REG" -c)
for _ in $(seq 100); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET ]] && break; sleep 0.05; done

# One nu session: a gate task holds the N tasks (they depend on it), so enqueueing and
# running are measured apart, like pausing pueue's group.
"${ORCH_NU[@]}" "
plugin use --plugin-config '$REG' orchestrator
let gate_file = '$WORK/gate'
let gate = (orch submit [sh -c \$'while [ ! -f (\$gate_file) ]; do sleep 0.005; done'])
let specs = (1..$N | each { {command: [true], after: [\$gate.id], label: batch} })
let enqueue = (timeit { \$specs | orch submit | ignore })
let batch_ids = (orch tasks --label batch | get id)
let run = (timeit { touch \$gate_file; orch wait ...\$batch_ids | ignore })
let gate2_file = '$WORK/gate2'
let gate2 = (orch submit [sh -c \$'while [ ! -f (\$gate2_file) ]; do sleep 0.005; done'])
let per_call = (timeit { for i in 1..2000 { orch submit --label single --after \$gate2.id true | ignore } })
touch \$gate2_file
orch wait ...(orch tasks --label single | get id) | ignore
let id = (orch tasks --limit 1 | get 0.id)
orch task \$id | ignore
let lat = (1..1000 | each { timeit { orch task \$id } } | sort)
let failed = (orch tasks --status [failed dependency_failed] | length)
{
  enqueue_batch_s: (\$enqueue / 1sec)
  run_s: (\$run / 1sec)
  per_call_s: (\$per_call / 1sec)
  task_p50_us: ((\$lat | get 499) / 1us)
  task_p99_us: ((\$lat | get 989) / 1us)
  failed: \$failed
} | to json -r | save -f '$WORK/orch.json'
"
kill "$ORCH_PID"; wait "$ORCH_PID" 2>/dev/null || true; ORCH_PID=
read -r O_ENQ O_RUN O_CALL O_P50 O_P99 O_FAILED < <(python3 -c "
import json; d=json.load(open('$WORK/orch.json'))
print(d['enqueue_batch_s'], d['run_s'], d['per_call_s'], d['task_p50_us'], d['task_p99_us'], d['failed'])")
O_ENQ_RATE=$(echo "scale=0; $N / $O_ENQ" | bc)
O_CALL_RATE=$(echo "scale=0; 2000 / $O_CALL" | bc)
O_RUN_RATE=$(echo "scale=0; $N / $O_RUN" | bc)

# --- pueue ----------------------------------------------------------------------------
mkdir -p "$WORK/pueue"
cat >"$WORK/pueue.yml" <<YML
shared:
  pueue_directory: $WORK/pueue
  runtime_directory: $WORK/pueue
  use_unix_socket: true
  unix_socket_path: $WORK/pueue/pueue.sock
YML
P=(pueue -c "$WORK/pueue.yml")
pueued -c "$WORK/pueue.yml" -d >/dev/null 2>&1
for _ in $(seq 100); do "${P[@]}" status >/dev/null 2>&1 && break; sleep 0.05; done
"${P[@]}" parallel "$PARALLEL" >/dev/null
"${P[@]}" pause >/dev/null
t0=$(now); for _ in $(seq "$N"); do "${P[@]}" add -- true >/dev/null; done; t1=$(now)
P_ENQ_RATE=$(rate "$N" "$t0" "$t1")
# pueue rewrites its whole state file on every change, so with thousands of tasks its run
# phase takes very long: it is measured for at most PUEUE_RUN_SECONDS, and the rate is the
# finished tasks over the span of their start and end times (from pueue's own state).
"${P[@]}" start >/dev/null
timeout "${PUEUE_RUN_SECONDS:-180}" "${P[@]}" wait >/dev/null || true
"${P[@]}" shutdown >/dev/null
sleep 1
read -r P_DONE P_RUN_RATE < <(python3 - "$WORK/pueue/state.json" <<'PY'
import json, sys
from datetime import datetime
def ts(s):
    s = s.rstrip("Z")
    head, _, frac = s.partition(".")
    return datetime.fromisoformat(head + "." + (frac + "000000")[:6])
tasks = json.load(open(sys.argv[1]))["tasks"].values()
done = [t["status"]["Done"] for t in tasks if "Done" in t["status"]]
span = (max(ts(d["end"]) for d in done) - min(ts(d["start"]) for d in done)).total_seconds()
print(len(done), int(len(done) / span))
PY
)

cat <<TABLE
| measure ($N tasks of \`true\`, $PARALLEL at a time) | orchestrator | pueue 4.0.4 | ratio |
|---|---|---|---|
| enqueue, one \`orch submit\` of a list (tasks/s) | $O_ENQ_RATE | $P_ENQ_RATE (\`pueue add\` per task) | $(echo "scale=1; $O_ENQ_RATE / $P_ENQ_RATE" | bc)x |
| enqueue, one \`orch submit\` per task from nu (tasks/s, 2000 tasks) | $O_CALL_RATE | $P_ENQ_RATE | $(echo "scale=1; $O_CALL_RATE / $P_ENQ_RATE" | bc)x |
| run to completion (tasks/s) | $O_RUN_RATE | $P_RUN_RATE ($P_DONE of $N finished in the time allowed) | $(echo "scale=1; $O_RUN_RATE / $P_RUN_RATE" | bc)x |
| raw spawn rate, \`xargs -P $PARALLEL true\` (tasks/s) | $RAW_RATE | | orchestrator at $(echo "scale=0; 100 * $O_RUN_RATE / $RAW_RATE" | bc)% |
| warm \`orch task <id>\` from nu, p50 / p99 (µs, 1000 calls) | $O_P50 / $O_P99 | | |
| tasks that did not succeed | $O_FAILED | | |
TABLE
