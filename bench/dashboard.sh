#!/usr/bin/env bash
# The dashboard with many tasks in the store (issue 13): page weight and time to first
# render of the overview, the tasks view and a workflow's view, for each N (default 0
# and 100,000) tasks queued behind one gate task (enqueued from nu as lists of 10,000),
# plus one finished 4-step workflow. Measured in the distribution's headless Chromium
# (tests/browser/dashboard.mjs, scenario `render`): from navigation to the view's data
# drawn (`main[data-loaded]`), median / min / max of 5 loads with the cache disabled,
# and the bytes transferred for one load (page, scripts, styles and the API answers).
#
#   bench/dashboard.sh [N...]     (release build; needs nu, node with tests/browser's
#                                  node_modules (npm ci), and /usr/bin/chromium)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(0 100000)
LIST=10000
PORT=18098
WORK=$(mktemp -d /tmp/orch-dashboard-bench.XXXXXX)
cleanup() {
  [[ -n ${ORCH_PID:-} ]] && kill -9 "$ORCH_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
BIN="$ROOT/target/release"
source "$ROOT/bench/lib.sh"
build_release_if_stale
[[ -d $ROOT/tests/browser/node_modules/playwright-core ]] ||
  (cd "$ROOT/tests/browser" && npm ci --no-audit --no-fund --loglevel=error) >&2
PLUGIN_CONFIG="$WORK/plugins.msgpackz"
nu -n -c "plugin add --plugin-config '$PLUGIN_CONFIG' '$BIN/nu_plugin_orchestrator'"

echo "| tasks in the store | view | first render, median (min–max) | transferred |"
echo "|---|---|---|---|"
for N in "${SIZES[@]}"; do
  DIR="$WORK/n$N"
  mkdir -p "$DIR"
  "$BIN/provisioning-orchestrator" --data-dir "$DIR/data" --socket "$DIR/orch.sock" \
    --port "$PORT" --parallel 1 --log warn >/dev/null 2>>"$DIR/orch.stderr" &
  ORCH_PID=$!
  wait_health
  cat >"$DIR/deploy.json" <<'EOF'
{"name": "deploy", "operations": [
  {"id": "servers", "type": "command", "command": ["true"]},
  {"id": "cache", "type": "command", "command": ["true"], "dependencies": ["servers"]},
  {"id": "db", "type": "command", "command": ["true"], "dependencies": ["servers"]},
  {"id": "notify", "type": "command", "command": ["true"], "dependencies": ["cache", "db"]}
]}
EOF
  WORKFLOW=$(orch_nu "(orch workflow submit batch '$DIR/deploy.json' --wait).id")
  orch_nu "orch submit --priority 100 [sleep 100000] | ignore"
  for ((done = 0; done < N; done += LIST)); do
    n=$((N - done < LIST ? N - done : LIST))
    orch_nu "1..$n | each { {command: [/bin/true]} } | orch submit | ignore"
  done
  TOKENS=$(python3 -c "import json; print(json.dumps({t['role']: t['token'] for t in json.load(open('$DIR/data/tokens.json'))['tokens']}))")
  RESULT=$(cd "$ROOT/tests/browser" && ORCH_URL="http://127.0.0.1:$PORT" ORCH_TOKENS="$TOKENS" \
    ORCH_DATA="{\"workflow\": $WORKFLOW, \"runs\": 5}" node dashboard.mjs render | head -n 1)
  python3 - "$N" "$RESULT" <<'EOF'
import json, sys
n, result = int(sys.argv[1]), json.loads(sys.argv[2])
for view, r in result.items():
    print(f"| {n:,} | {view} | {r['median_ms']} ms ({r['min_ms']}–{r['max_ms']}) | {r['bytes'] / 1024:.1f} KiB |")
EOF
  kill -9 "$ORCH_PID"
  wait "$ORCH_PID" 2>/dev/null || true
  ORCH_PID=
done
