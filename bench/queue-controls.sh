#!/usr/bin/env bash
# What groups and notifications cost on the hot path: N tasks of `true` run to
# completion 8 at a time, released together (they wait on a gate task), in four
# settings on fresh daemons (release build):
#   plain       no group named, no notifier;
#   group       every task in a group with a limit of 8 (the nodes' 8 slots too);
#   group-of-4  the same group limited to 4 (the group, not the slots, holds them back);
#   notifier    no group, and a command notifier (`true`) of every task's end.
# For the notifier it also gives how long after the last task's end the outbox was empty.
#
#   bench/queue-controls.sh [N]      (default N=5000)
#
# Needs: nu 0.115.1 on PATH. Prints a Markdown table.
set -euo pipefail
N=${1:-5000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$ROOT/target/release"
DIR=$(mktemp -d /tmp/orch-bench-qc.XXXXXX)
PLUGIN_CONFIG="$DIR/plugins.msgpackz"
DAEMON_PID=
cleanup() {
  [[ -n $DAEMON_PID ]] && kill "$DAEMON_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
source "$ROOT/bench/lib.sh"
build_release_if_stale
nu -n -c "plugin add --plugin-config '$PLUGIN_CONFIG' '$BIN/nu_plugin_orchestrator'"

# Runs one setting ($1: its name; $2: nu code run before the tasks are submitted; $3: the
# flags of each task) on a fresh daemon; writes "seconds drain_seconds" to $DIR/result.
run() {
  rm -rf "$DIR/data" "$DIR/orch.sock" "$DIR/gate"
  "$BIN/provisioning-orchestrator" --data-dir "$DIR/data" --socket "$DIR/orch.sock" \
    --parallel 8 --log warn 2>"$DIR/daemon.stderr" &
  DAEMON_PID=$!
  for _ in $(seq 200); do orch_nu "orch health | ignore" 2>/dev/null && break; sleep 0.05; done
  orch_nu "
    $2
    let gate = (orch submit [sh -c 'while [ ! -f $DIR/gate ]; do sleep 0.005; done'])
    1..$N | each { {command: [true], after: [\$gate.id], label: batch $3} } | orch submit | ignore
    let ids = (orch tasks --label batch --limit $N | get id)
    let took = (timeit { touch $DIR/gate; orch wait ...\$ids | ignore })
    let drained = (timeit {
      while ((orch notify list | reduce -f 0 {|n, sum| \$sum + \$n.waiting }) > 0) { sleep 10ms }
    })
    let failed = (orch tasks --status [failed dependency_failed] | length)
    if \$failed > 0 { error make {msg: \$'(\$failed) tasks failed'} }
    \$'(\$took / 1sec) (\$drained / 1sec)' | save -f $DIR/result
  "
  kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
}

declare -A SECONDS_OF DRAIN_OF
for setting in plain group group-of-4 notifier; do
  case $setting in
    plain) setup=""; flags="" ;;
    group) setup="orch group add deploy --parallel 8 | ignore"; flags=", group: deploy" ;;
    group-of-4) setup="orch group add deploy --parallel 4 | ignore"; flags=", group: deploy" ;;
    notifier) setup="orch notify add ends --command [true] | ignore"; flags="" ;;
  esac
  run "$setting" "$setup" "$flags"
  read -r s d <"$DIR/result" || true # (no newline at its end)
  SECONDS_OF[$setting]=$s
  DRAIN_OF[$setting]=$d
done

rate() { echo "scale=0; $N / $1" | bc; }
cat <<TABLE
| setting ($N tasks of \`true\`, 8 slots) | run to completion (tasks/s) | vs plain |
|---|---|---|
| plain | $(rate "${SECONDS_OF[plain]}") | 100% |
| every task in a group limited to 8 | $(rate "${SECONDS_OF[group]}") | $(echo "scale=0; 100 * ${SECONDS_OF[plain]} / ${SECONDS_OF[group]}" | bc)% |
| every task in a group limited to 4 | $(rate "${SECONDS_OF[group-of-4]}") | $(echo "scale=0; 100 * ${SECONDS_OF[plain]} / ${SECONDS_OF[group-of-4]}" | bc)% |
| a command notifier of every task's end | $(rate "${SECONDS_OF[notifier]}") | $(echo "scale=0; 100 * ${SECONDS_OF[plain]} / ${SECONDS_OF[notifier]}" | bc)% |

The notifier's outbox was empty ${DRAIN_OF[notifier]} s after the last task ended ($N notifications, each a run of \`true\`).
TABLE
