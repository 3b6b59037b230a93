#!/usr/bin/env bash
# The daemon's own share of the latency, without nu: a client on the socket (Python, one
# connection, framed JSON as the plugin sends it) times K runs (after 20 warm-up runs) of
#   - health (one round trip),
#   - one task submit -> done (`submit` of `true`, then `wait` on it),
#   - a 3-step sequential workflow of `true` steps (bench/three-steps.json, `wait`),
# and then the store's commits while 10,000 `true` tasks run 8 at a time (their count,
# their time in all, their median bucket, from /metrics), for each daemon binary given,
# one after the other, ROUNDS times (alternating, so that the machine's drift is shared).
#
#   bench/daemon-latency.sh [K] [BIN_DIR...]     (default K=300, target/release;
#                                                 ROUNDS=3)
#
# Prints a Markdown table. Needs python3, curl and nu (for the list submission).
set -euo pipefail
K=${1:-300}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=("$ROOT/target/release")
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d /tmp/orch-daemon-latency.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/client.py" <<'PY'
import json, os, socket, struct, sys, time
def send(o):
    b = json.dumps(o).encode(); s.sendall(struct.pack(">I", len(b)) + b)
def recv():
    def exact(n):
        d = b""
        while len(d) < n:
            c = s.recv(n - len(d))
            if not c: raise SystemExit("the daemon closed the connection")
            d += c
        return d
    (n,) = struct.unpack(">I", exact(4)); r = json.loads(exact(n))
    if r.get("response") == "error": raise SystemExit(json.dumps(r))
    return r
# This protocol, or an earlier build's (for side-by-side runs).
for protocol in (5, 4):
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.environ["PROVISIONING_ORCHESTRATOR_SOCKET"])
    send({"protocol": protocol, "client": "bench/daemon-latency.sh"})
    (n,) = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))
    if "error" not in json.loads(s.recv(n, socket.MSG_WAITALL)):
        break
    s.close()
else:
    raise SystemExit("the daemon speaks neither protocol 5 nor 4")
K, work, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
task = {"kind": {"type": "command", "program": "true", "args": []}, "priority": 0, "retries": 0,
        "backoff": {"initial_ms": 1000, "max_ms": 60000}, "cwd": work}
steps = json.load(open(f"{root}/bench/three-steps.json"))
ops = [dict({"dependencies": [], "soft_dependencies": [], "servers": [], "retries": 0}, **op) for op in steps["operations"]]
workflow = {"request": "workflow_submit", "workflow": {"kind": "batch", "workflow": {
    "name": steps["name"], "rollback_enabled": False, "priority": 0, "operations": ops},
    "workspace": work, "base_dir": f"{root}/bench", "check_mode": False, "wait": True}}
def health(): send({"request": "health"}); recv()
def one_task():
    send({"request": "submit", "tasks": [task]}); i = recv()["tasks"][0]["id"]
    send({"request": "wait", "ids": [i]}); assert recv()["tasks"][0]["state"]["status"] == "succeeded"
def three_steps(): send(workflow); recv()
out = []
for f in (health, one_task, three_steps):
    for _ in range(20): f()
    took = []
    for _ in range(K):
        t = time.perf_counter(); f(); took.append((time.perf_counter() - t) * 1000)
    took.sort(); out.append(f"{took[K // 2]:.2f} ({took[K * 9 // 10]:.2f})")
print(" | ".join(out))
PY

# One round of one binary: prints a table row.
run() {
  local bin=$1 dir="$WORK/run" port=$((20000 + RANDOM % 20000))
  rm -rf "$dir"; mkdir -p "$dir"
  export PROVISIONING_ORCHESTRATOR_SOCKET="$dir/orch.sock"
  "$bin/provisioning-orchestrator" --data-dir "$dir/data" --parallel 8 --port "$port" --log warn >/dev/null 2>>"$WORK/stderr" &
  ORCH_PID=$!
  for _ in $(seq 200); do [[ -S $PROVISIONING_ORCHESTRATOR_SOCKET && -f $dir/data/tokens.json ]] && break; sleep 0.05; done
  local times token metrics
  times=$(python3 "$WORK/client.py" "$K" "$dir" "$ROOT")
  token=$(python3 -c "import json; print([t['token'] for t in json.load(open('$dir/data/tokens.json'))['tokens'] if t['role']=='viewer'][0])")
  local reg="$WORK/plugins.msgpackz"
  [[ -f $reg ]] || nu -n -c "plugin add --plugin-config '$reg' '$ROOT/target/release/nu_plugin_orchestrator'"
  local before after started ended
  before=$(curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics" | awk '/^orchestrator_store_commit_seconds_(sum|count)/ { printf "%s ", $2 }')
  started=$(date +%s.%N)
  nu -n --plugin-config "$reg" -c "plugin use --plugin-config '$reg' orchestrator; let ids = (1..10000 | each {|j| {command: [true]} } | orch submit | get id); orch wait ...(\$ids | last 100) | ignore"
  ended=$(date +%s.%N)
  after=$(curl -sf -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics" | awk '/^orchestrator_store_commit_seconds_(sum|count)/ { printf "%s ", $2 }')
  kill "$ORCH_PID"; wait "$ORCH_PID" 2>/dev/null || true; ORCH_PID=
  read -r sum0 count0 <<<"$before"; read -r sum1 count1 <<<"$after"
  local commits mean
  commits=$(echo "$count1 - $count0" | bc)
  mean=$(echo "scale=3; ($sum1 - $sum0) * 1000 / $commits" | bc)
  printf '| %s | %s | %s | %s ms | %.2f s |\n' "$(basename "$(dirname "$bin")")/$(basename "$bin")" "$times" "$commits" "$mean" "$(echo "$ended - $started" | bc)"
}

echo "| binaries | health, median (p90) ms | one task submit → done | 3-step workflow | commits of 10,000 tasks | mean commit | 10,000 tasks run |"
echo "|---|---|---|---|---|---|---|"
for _ in $(seq "$ROUNDS"); do
  for bin in "${BINS[@]}"; do run "$bin"; done
done
