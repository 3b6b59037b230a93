#!/usr/bin/env bash
# A cluster of three daemons on one PostgreSQL database (issue 11): what a failover takes
# and what idle nodes cost the database. Three nodes (n1, n2, n3; default --node-lease 5s)
# are started on a fresh database; then:
#   - idle cost: before any task is submitted, the transactions the database counts
#     (pg_stat_database.xact_commit + xact_rollback of the bench database, read from the
#     `postgres` database so that the sampling does not count itself) over 20 s, in total
#     and per node, and the statements pg_stat_statements counts when the server has it
#     loaded (shared_preload_libraries; else skipped); also the connections the nodes hold;
#   - failover, R rounds: the leader is killed (-9); from then the two others are polled
#     every 50 ms (`orch health | get cluster.role`, one nu for the whole poll) until one
#     answers as the leader; then `orch submit --wait true` goes to it. Per round: ms from
#     the kill to a standby answering as leader, to the task's start (its attempt's
#     started_at) and to `orch submit --wait` returning (succeeded). The killed node is
#     then started again (same data dir and --node) as a standby, and the next round waits
#     until all three are up with one leader.
#
#   bench/cluster.sh [--rounds R]        (default R=10)
#
# The database server: $PROVISIONING_TEST_DATABASE_URL if set (a server URL; a database
# bench_cluster_<pid> is created there and dropped at the end), else a private server from
# scripts/postgres.sh. Needs nu 0.115.1 and psql on PATH. Builds the release binaries when
# missing or older than the sources. Each node's log is WORK/nN/data/orchestrator.log;
# ORCH_BENCH_KEEP=1 keeps WORK (and prints where it is) instead of removing it.
set -euo pipefail
ROUNDS=10
while [[ $# -gt 0 ]]; do
  case $1 in
  --rounds) ROUNDS=$2; shift 2 ;;
  --rounds=*) ROUNDS=${1#*=}; shift ;;
  *) echo "usage: $0 [--rounds N]" >&2; exit 2 ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds takes a positive number" >&2; exit 2; }
IDLE_S=20
NODES=(n1 n2 n3)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-cluster-bench.XXXXXX)
chmod 755 "$WORK" # the PostgreSQL server in $WORK/pg runs as `postgres` when we are root
PG="$WORK/pg"
declare -A PID=()
alive() { # pids: whether one of them runs (a zombie does not)
  local pid
  for pid; do [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) =~ ^[^Z]$ ]] && return 0; done
  return 1
}
cleanup() {
  set +e
  local pids=("${PID[@]}") _
  # A clean stop first (a standby's is quick), then kill -9 what is left after 10 s.
  [[ ${#pids[@]} -eq 0 ]] || kill "${pids[@]}" 2>/dev/null
  for _ in $(seq 100); do alive "${pids[@]}" || break; sleep 0.1; done
  [[ ${#pids[@]} -eq 0 ]] || kill -9 "${pids[@]}" 2>/dev/null || true
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  # A node's supervisor (`provisioning-orchestrator supervise DATA_DIR`) exits about 2 s
  # after its daemon, idle; one of this run's data dirs still there after 10 s is killed.
  for _ in $(seq 100); do pgrep -f -- "supervise $WORK/" >/dev/null || break; sleep 0.1; done
  for pid in $(pgrep -f -- "supervise $WORK/"); do kill -9 "$pid" 2>/dev/null || true; done
  if [[ -n ${DB_URL:-} ]]; then
    psql -X -q -d "$SERVER_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  fi
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
DB=bench_cluster_$$
psql -X -q -d "$SERVER_URL" -c "CREATE DATABASE $DB"
DB_URL="${SERVER_URL%/*}/$DB"
sql() { psql -X -qAt -d "$SERVER_URL" -c "$1"; } # on the server's own database, not $DB

fail() { # message: the message, every node's stderr and the end of its log, then exit
  echo "$1" >&2
  for node in "${NODES[@]}"; do
    echo "--- $node: end of its stderr" >&2
    tail -n 5 "$WORK/$node/orch.stderr" >&2 2>/dev/null || true
    echo "--- $node: last lines of orchestrator.log" >&2
    tail -n 30 "$WORK/$node/data/orchestrator.log" >&2 2>/dev/null || true
  done
  exit 1
}
start_node() { # name
  local node=$1
  mkdir -p "$WORK/$node"
  "$BIN/provisioning-orchestrator" --storage-type postgres --database-url "$DB_URL" \
    --node "$node" --data-dir "$WORK/$node/data" --socket "$WORK/$node/orch.sock" \
    --parallel 8 >/dev/null 2>>"$WORK/$node/orch.stderr" &
  PID[$node]=$!
}
wait_socket() { # name: until the node's socket exists (a standby serves it too)
  for _ in $(seq 600); do
    [[ -S $WORK/$1/orch.sock ]] && return
    kill -0 "${PID[$1]}" 2>/dev/null || fail "node $1 exited at its start"
    sleep 0.05
  done
  fail "node $1 has no socket after 30 s"
}
on() { DIR="$WORK/$1" orch_nu "$2"; } # node, nu code: orch_nu against that node's socket
wait_cluster() { # until a live node reports one leader and three nodes up; prints the leader
  local node answer leader up
  for _ in $(seq 300); do
    for node in "${!PID[@]}"; do
      answer=$(on "$node" "let c = (orch health | get cluster); \$'(\$c.leader) (\$c.nodes_up)'" 2>/dev/null) || continue
      read -r leader up <<<"$answer"
      if [[ $up == 3 && -n ${PID[$leader]:-} ]] &&
        [[ $(on "$leader" "orch health | get cluster.role" 2>/dev/null) == leader ]]; then
        echo "$leader"
        return
      fi
    done
    sleep 0.1
  done
  fail "no cluster of three nodes with a leader after 30 s"
}
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {printf "%d / %d / %d", a[1], a[int((NR + 1) / 2)], a[NR]}'; }

for node in "${NODES[@]}"; do start_node "$node"; done
for node in "${NODES[@]}"; do wait_socket "$node"; done
LEADER=$(wait_cluster)
echo "cluster up: $LEADER leads" >&2
sleep 2 # the start-up's own queries out of the window

# Idle cost: no task was ever submitted.
xacts() { sql "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$DB'"; }
STATEMENTS=
if [[ $(sql "SHOW shared_preload_libraries") == *pg_stat_statements* ]]; then
  psql -X -q -d "$DB_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
  STATEMENTS=1
fi
calls() { sql "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$DB'"; }
sleep 1.5 # the statistics of a backend reach pg_stat_database within a second or so
X0=$(xacts)
[[ -z $STATEMENTS ]] || C0=$(calls)
T0=$(now_ms)
sleep "$IDLE_S"
X1=$(xacts)
[[ -z $STATEMENTS ]] || C1=$(calls)
T1=$(now_ms)
CONNS=$(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = '$DB'")
IDLE_TPS=$(awk -v x="$((X1 - X0))" -v ms="$((T1 - T0))" 'BEGIN {printf "%.1f", x * 1000 / ms}')
IDLE_TPS_NODE=$(awk -v t="$IDLE_TPS" -v n="${#NODES[@]}" 'BEGIN {printf "%.1f", t / n}')
if [[ -n $STATEMENTS ]]; then
  IDLE_QPS=$(awk -v c="$((C1 - C0))" -v ms="$((T1 - T0))" 'BEGIN {printf "%.1f", c * 1000 / ms}')
  IDLE_QPS_NODE=$(awk -v t="$IDLE_QPS" -v n="${#NODES[@]}" 'BEGIN {printf "%.1f", t / n}')
else
  IDLE_QPS="n/a (pg_stat_statements not loaded)"
  IDLE_QPS_NODE="n/a"
fi
echo "idle: $((X1 - X0)) transactions in $((T1 - T0)) ms ($IDLE_TPS/s), $CONNS connections" >&2

# Failover rounds.
TO_LEADER=() TO_START=() TO_DONE=()
for round in $(seq "$ROUNDS"); do
  LEADER=$(wait_cluster)
  sleep 1 # a few heartbeats of the restarted node before the kill
  others=()
  for node in "${NODES[@]}"; do [[ $node == "$LEADER" ]] || others+=("'$WORK/$node/orch.sock'"); done
  kill -9 "${PID[$LEADER]}"
  T_KILL=$(now_ms)
  wait "${PID[$LEADER]}" 2>/dev/null || true
  unset "PID[$LEADER]"
  rm -f "$WORK/$LEADER/orch.sock" # so that wait_socket sees the restarted daemon's
  # One nu: the poll, then the submit on the new leader's socket. Prints
  # "new_leader leader_ms started_ms done_ms status" (epoch ms).
  answer=$(on "${NODES[0]}" "
let sockets = [${others[*]}]
let deadline = (date now) + 60sec
mut found: any = null
while \$found == null and (date now) < \$deadline {
  for s in \$sockets {
    let c = (try { with-env {PROVISIONING_ORCHESTRATOR_SOCKET: \$s} { orch health | get cluster } } catch { null })
    if \$c != null and \$c.role == leader { \$found = {node: \$c.node, socket: \$s, at: (date now)}; break }
  }
  if \$found == null { sleep 50ms }
}
if \$found == null { error make {msg: 'no standby answered as the leader within 60 s of the kill'} }
let ms = {|t| \$t | into int | \$in // 1_000_000 }
let task = (with-env {PROVISIONING_ORCHESTRATOR_SOCKET: \$found.socket} { orch submit --wait true })
let done = (date now)
print \$'(\$found.node) (do \$ms \$found.at) (do \$ms \$task.started) (do \$ms \$done) (\$task.status)'
" 2>"$WORK/round-$round.err") || fail "round $round: $(cat "$WORK/round-$round.err")"
  read -r new at started done status <<<"$answer"
  [[ $status == succeeded ]] || fail "round $round: the task after the takeover ended $status"
  TO_LEADER+=($((at - T_KILL)))
  TO_START+=($((started - T_KILL)))
  TO_DONE+=($((done - T_KILL)))
  echo "round $round: killed $LEADER; $new leads after ${TO_LEADER[-1]} ms; task started after ${TO_START[-1]} ms, succeeded (--wait returned) after ${TO_DONE[-1]} ms" >&2
  start_node "$LEADER"
  wait_socket "$LEADER"
done
wait_cluster >/dev/null

cat <<EOF

| 3 nodes on one PostgreSQL database, --node-lease 5s | figure |
|---|---|
| failover, kill -9 → a standby answers as leader (ms, min / median / max of $ROUNDS) | $(stats "${TO_LEADER[@]}") |
| failover, kill -9 → next task started (ms, min / median / max) | $(stats "${TO_START[@]}") |
| failover, kill -9 → next task succeeded, \`orch submit --wait true\` returned (ms) | $(stats "${TO_DONE[@]}") |
| idle, database transactions/s over ${IDLE_S} s: all 3 nodes / per node | $IDLE_TPS / $IDLE_TPS_NODE |
| idle, statements/s (pg_stat_statements): all / per node | $IDLE_QPS / $IDLE_QPS_NODE |
| idle, connections the 3 nodes hold | $CONNS |

Load average at start: $LOAD
EOF
