#!/usr/bin/env bash
# wrk against the HTTP shim on loopback: GET /health and GET /tasks/{id} (with a bearer
# token, through the authentication layer and the store), and GET /health of a minimal
# axum server on the same machine as the ceiling. Requests per second and p99.
#
#   bench/http-wrk.sh [SECONDS] [CONNECTIONS]     (default 10 s, 50 connections, 2 threads)
set -euo pipefail
SECONDS_=${1:-10}
CONNS=${2:-50}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/orch-http-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  [[ -n ${MIN_PID:-} ]] && kill "$MIN_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
command -v wrk >/dev/null || { apt-get install -y -qq wrk >&2; }
cargo build --release -p provisioning-orchestrator --bins --examples --manifest-path "$ROOT/Cargo.toml" >&2
BIN="$ROOT/target/release"
"$BIN/provisioning-orchestrator" --data-dir "$WORK/data" --socket "$WORK/orch.sock" --port 18089 --log warn >/dev/null 2>"$WORK/orch.stderr" &
ORCH_PID=$!
"$BIN/examples/minimal_http" 18090 &
MIN_PID=$!
for _ in $(seq 200); do [[ -f $WORK/data/tokens.json ]] && curl -s http://127.0.0.1:18089/health >/dev/null && break; sleep 0.05; done
TOKEN=$(python3 -c "import json,sys; print([t['token'] for t in json.load(open('$WORK/data/tokens.json'))['tokens'] if t['role']=='viewer'][0])")
# One task to read.
nu -n -c "plugin add --plugin-config '$WORK/p.msgpackz' '$BIN/nu_plugin_orchestrator'"
PROVISIONING_ORCHESTRATOR_SOCKET="$WORK/orch.sock" nu -n --plugin-config "$WORK/p.msgpackz" -c "plugin use --plugin-config '$WORK/p.msgpackz' orchestrator; orch submit true | orch wait | ignore"

run() { # $1 = label, rest = wrk args
  local label=$1; shift
  local out
  out=$(wrk -t2 -c"$CONNS" -d"${SECONDS_}s" --latency "$@")
  local rps p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  echo "| $label | $rps | $p99 |"
}
echo "| wrk -t2 -c$CONNS -d${SECONDS_}s, loopback | requests/s | p99 |"
echo "|---|---|---|"
run "orchestrator GET /health" http://127.0.0.1:18089/health
run "orchestrator GET /tasks/1 (bearer token, redb read)" -H "Authorization: Bearer $TOKEN" http://127.0.0.1:18089/tasks/1
run "minimal axum GET /health (ceiling)" http://127.0.0.1:18090/health
