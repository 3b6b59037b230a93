#!/usr/bin/env bash
# How a cluster's throughput grows with its nodes (issue 11: "1 vs 3 nodes on 600 tasks of
# `sleep 0.5` with `--parallel 4` each, target ≥ 2.7× from 1 to 3 nodes"). For each round
# and each cluster size (default 1 and 3, in turn, so that a change of the machine's load
# touches both alike): that many nodes (n1, n2, ...; all `--parallel 4`, default
# `--node-lease 5s`) are started on a fresh database; once all are up with one leader,
# N tasks of `sleep 0.5` are submitted to the leader as ONE list (`$specs | orch submit`
# from nu, one request, one durable step) and waited for (`orch wait` on their ids). The
# wall time is from just before the submission to `orch wait` returning, measured in that
# nu session (building the list of records is not counted). The nodes are then stopped
# and the database dropped. Printed per size: the median wall time (and min–max of the R
# rounds), tasks/s at the median, the speed-up against 1 node, the ideal time
# N × 0.5 s / (4 × nodes), the tasks that did not succeed, and how many tasks each node
# ran in the last round when a task's record says where it ran (`node` in `orch tasks`
# rows, in `orch task`, or in its attempts); else "n/a". Any task that did not succeed
# makes the script exit 1 once the table is printed.
#
#   bench/cluster-scale.sh [--rounds R] [--tasks N] [--nodes 1,3]   (defaults 3, 600, 1,3)
#
# The database server: $PROVISIONING_TEST_DATABASE_URL if set (a server URL; a database
# bench_cluster_scale_<pid>_<nodes>_<round> is created there for each run and dropped
# after it), else a private server from scripts/postgres.sh. Needs nu 0.115.1 and psql on
# PATH. Builds the release binaries when missing or older than the sources. Every wait is
# bounded: a cluster must be up within 60 s, the tasks done within max(600 s, N/2 s)
# (`orch wait --timeout`; the nu session itself is killed 60 s later). Each node's log is
# WORK/r<round>-<nodes>/nN/data/orchestrator.log; ORCH_BENCH_KEEP=1 keeps WORK (and prints
# where it is) instead of removing it.
set -euo pipefail
ROUNDS=3
TASKS=600
SIZES_ARG=1,3
usage() { echo "usage: $0 [--rounds R] [--tasks N] [--nodes 1,3]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
  --rounds) [[ $# -ge 2 ]] || usage; ROUNDS=$2; shift 2 ;;
  --rounds=*) ROUNDS=${1#*=}; shift ;;
  --tasks) [[ $# -ge 2 ]] || usage; TASKS=$2; shift 2 ;;
  --tasks=*) TASKS=${1#*=}; shift ;;
  --nodes) [[ $# -ge 2 ]] || usage; SIZES_ARG=$2; shift 2 ;;
  --nodes=*) SIZES_ARG=${1#*=}; shift ;;
  *) usage ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds takes a positive number" >&2; exit 2; }
[[ $TASKS =~ ^[1-9][0-9]*$ ]] || { echo "--tasks takes a positive number" >&2; exit 2; }
[[ $SIZES_ARG =~ ^[1-9](,[1-9])*$ ]] || { echo "--nodes takes sizes from 1 to 9, comma-separated (1,3)" >&2; exit 2; }
IFS=, read -r -a SIZES <<<"$SIZES_ARG"
PARALLEL=4
TASK_S=0.5
WAIT_S=$((TASKS / 2 > 600 ? TASKS / 2 : 600))
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-cluster-scale.XXXXXX)
chmod 755 "$WORK" # the PostgreSQL server in $WORK/pg runs as `postgres` when we are root
PG="$WORK/pg"
declare -A PID=()
alive() { # pids: whether one of them runs (a zombie does not)
  local pid
  for pid; do [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) =~ ^[^Z]$ ]] && return 0; done
  return 1
}
stop_nodes() { # dir: stops every node of PID, then the supervisors of dir's data dirs
  local dir=$1 pids=("${PID[@]}") pid _
  # A clean stop first, then kill -9 what is left after 10 s.
  [[ ${#pids[@]} -eq 0 ]] || kill "${pids[@]}" 2>/dev/null
  for _ in $(seq 100); do alive "${pids[@]}" || break; sleep 0.1; done
  [[ ${#pids[@]} -eq 0 ]] || kill -9 "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  PID=()
  # A node's supervisor (`provisioning-orchestrator supervise DATA_DIR`) exits about 2 s
  # after its daemon, idle; one of dir's data dirs still there after 10 s is killed.
  for _ in $(seq 100); do pgrep -f -- "supervise $dir/" >/dev/null || break; sleep 0.1; done
  for pid in $(pgrep -f -- "supervise $dir/"); do kill -9 "$pid" 2>/dev/null || true; done
}
drop_db() {
  [[ -n ${DB:-} ]] || return 0
  psql -X -q -d "$SERVER_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  DB=
}
cleanup() {
  set +e
  if [[ -n ${NU_PID:-} ]]; then # a run's nu session (timeout passes the TERM on to nu)
    kill "$NU_PID" 2>/dev/null
    wait "$NU_PID" 2>/dev/null
  fi
  stop_nodes "$WORK"
  drop_db
  [[ -n ${PG_STARTED:-} ]] && "$ROOT/scripts/postgres.sh" stop "$PG" 2>/dev/null || true
  if [[ -n ${ORCH_BENCH_KEEP:-} ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)

BIN="$ROOT/target/release"
source "$ROOT/bench/lib.sh"
build_release_if_stale
PLUGIN_CONFIG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$PLUGIN_CONFIG' '$BIN/nu_plugin_orchestrator'"

if [[ -n ${PROVISIONING_TEST_DATABASE_URL:-} ]]; then
  SERVER_URL=$PROVISIONING_TEST_DATABASE_URL
else
  PG_STARTED=1
  SERVER_URL=$("$ROOT/scripts/postgres.sh" start "$PG" 2>"$WORK/pg-start.log") || {
    cat "$WORK/pg-start.log" >&2
    exit 1
  }
fi

RUN= # this run's directory: WORK/r<round>-<nodes>
fail() { # message: the message, every node's stderr and the end of its log, then exit
  local node
  echo "$1" >&2
  for node in "${!PID[@]}"; do
    echo "--- $node: end of its stderr" >&2
    tail -n 5 "$RUN/$node/orch.stderr" >&2 2>/dev/null || true
    echo "--- $node: last lines of orchestrator.log" >&2
    tail -n 30 "$RUN/$node/data/orchestrator.log" >&2 2>/dev/null || true
  done
  exit 1
}
start_node() { # name
  local node=$1
  mkdir -p "$RUN/$node"
  "$BIN/provisioning-orchestrator" --storage-type postgres --database-url "$DB_URL" \
    --node "$node" --data-dir "$RUN/$node/data" --socket "$RUN/$node/orch.sock" \
    --parallel "$PARALLEL" >/dev/null 2>>"$RUN/$node/orch.stderr" &
  PID[$node]=$!
}
wait_socket() { # name: until the node's socket exists (a standby serves it too)
  for _ in $(seq 600); do
    [[ -S $RUN/$1/orch.sock ]] && return
    alive "${PID[$1]}" || fail "node $1 exited at its start"
    sleep 0.05
  done
  fail "node $1 has no socket after 30 s"
}
on() { # seconds, node, nu code: runs the code with the plugin against that node's socket,
  # killed (and failing) after that many seconds
  PROVISIONING_ORCHESTRATOR_SOCKET="$RUN/$2/orch.sock" timeout -k 5 "$1" \
    nu -n --plugin-config "$PLUGIN_CONFIG" -c "plugin use --plugin-config '$PLUGIN_CONFIG' orchestrator; $3"
}
wait_cluster() { # nodes: until a live node reports that many up and one leader; prints the leader
  local want=$1 node answer leader up
  for _ in $(seq 300); do # 300 × (up to a few nu calls + 0.1 s): about a minute
    for node in "${!PID[@]}"; do
      answer=$(on 10 "$node" "let c = (orch health | get cluster); \$'(\$c.leader) (\$c.nodes_up)'" 2>/dev/null) || continue
      read -r leader up <<<"$answer"
      if [[ $up == "$want" && -n ${PID[$leader]:-} ]] &&
        [[ $(on 10 "$leader" "orch health | get cluster.role" 2>/dev/null) == leader ]]; then
        echo "$leader"
        return
      fi
    done
    sleep 0.1
  done
  fail "no cluster of $want node(s) with a leader after a minute"
}

# One run, in the leader's nu session: builds the N records, then times one list
# submission and `orch wait` on its ids. Prints "wall_ms not_succeeded per_node", with
# per_node as n1=200,n2=200,... or n/a when no record says which node ran a task.
RUN_NU='
let specs = (1..($env.BENCH_TASKS | into int) | each { {command: [sleep $env.BENCH_TASK_S]} })
let t0 = (date now)
let tasks = ($specs | orch submit)
let done = ($tasks | orch wait --timeout (($env.BENCH_WAIT_S | into int) * 1sec))
let wall = ((date now) - $t0)
let bad = ($done | where status != succeeded | length)
let first = (orch task ($done | first | get id))
let attempts = ($first.attempt_history? | default [])
let nodes = if ("node" in ($done | columns)) {
  $done | get node
} else if ("node" in ($first | columns)) {
  $done | each {|t| orch task $t.id | get node }
} else if (($attempts | length) > 0 and ("node" in ($attempts | columns))) {
  $done | each {|t| orch task $t.id | get attempt_history | last | get node }
} else { null }
let per_node = if $nodes == null { "n/a" } else {
  $nodes | each {|n| $n | default "?" | into string } | uniq -c | sort-by value
  | each {|r| $"($r.value)=($r.count)" } | str join ","
}
print $"($wall / 1ms | math round) ($bad) ($per_node)"
'

declare -A WALLS=() BAD=() PER_NODE=()
for size in "${SIZES[@]}"; do BAD[$size]=0; done
for round in $(seq "$ROUNDS"); do
  for size in "${SIZES[@]}"; do
    RUN="$WORK/r$round-$size"
    DB=bench_cluster_scale_$$_${size}_$round
    psql -X -q -d "$SERVER_URL" -c "CREATE DATABASE $DB"
    DB_URL="${SERVER_URL%/*}/$DB"
    for i in $(seq "$size"); do start_node "n$i"; done
    for i in $(seq "$size"); do wait_socket "n$i"; done
    LEADER=$(wait_cluster "$size")
    sleep 1 # a few heartbeats of every node before the tasks come
    load=$(cut -d' ' -f1 /proc/loadavg)
    # In the background and waited for, so that a signal to this script stops it at once
    # (cleanup ends the nu session too).
    BENCH_TASKS=$TASKS BENCH_TASK_S=$TASK_S BENCH_WAIT_S=$WAIT_S \
      on $((WAIT_S + 60)) "$LEADER" "$RUN_NU" >"$RUN/run.out" 2>"$RUN/run.err" &
    NU_PID=$!
    wait "$NU_PID" || fail "round $round, $size node(s): $(cat "$RUN/run.err")"
    NU_PID=
    answer=$(cat "$RUN/run.out")
    read -r wall bad per_node <<<"$answer"
    [[ $wall =~ ^[0-9]+$ && $bad =~ ^[0-9]+$ ]] || fail "round $round, $size node(s): unexpected answer: $answer"
    WALLS[$size]+="$wall "
    BAD[$size]=$((BAD[$size] + bad))
    PER_NODE[$size]=$per_node
    echo "round $round, $size node(s) ($LEADER leads, load $load): $TASKS tasks in $wall ms, $bad not succeeded, per node: $per_node" >&2
    stop_nodes "$RUN"
    drop_db
  done
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
range() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {printf "%d–%d", a[1], a[NR]}'; }
BASE=
for size in "${SIZES[@]}"; do [[ $size != 1 ]] || { read -r -a w <<<"${WALLS[1]}"; BASE=$(median "${w[@]}"); }; done
FAILED=0
cat <<EOF

| nodes (--parallel $PARALLEL each), $TASKS × \`sleep $TASK_S\` | median wall time, submit → all done (ms; min–max of $ROUNDS) | tasks/s | speed-up vs 1 node | ideal (N × $TASK_S s / ($PARALLEL × nodes)) | not succeeded | tasks per node (last round) |
|---|---|---|---|---|---|---|
EOF
for size in "${SIZES[@]}"; do
  read -r -a w <<<"${WALLS[$size]}"
  med=$(median "${w[@]}")
  rate=$(awk -v n="$TASKS" -v ms="$med" 'BEGIN {printf "%.1f", n * 1000 / ms}')
  if [[ -n $BASE ]]; then
    speedup=$(awk -v b="$BASE" -v m="$med" 'BEGIN {printf "%.2f×", b / m}')
  else
    speedup="n/a (no 1-node run)"
  fi
  ideal=$(awk -v n="$TASKS" -v t="$TASK_S" -v p="$PARALLEL" -v k="$size" 'BEGIN {printf "%.1f s", n * t / (p * k)}')
  echo "| $size | $med ($(range "${w[@]}")) | $rate | $speedup | $ideal | ${BAD[$size]} | ${PER_NODE[$size]} |"
  FAILED=$((FAILED + BAD[$size]))
done
echo
echo "Load average at start: $LOAD"
if [[ $FAILED -gt 0 ]]; then
  echo "$FAILED task(s) did not succeed" >&2
  exit 1
fi
