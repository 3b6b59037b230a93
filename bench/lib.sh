# Helpers shared by the benchmarks (build_release_if_stale uses ROOT and BIN; the others
# drive one daemon over its socket and HTTP
# (bench/scale.sh, bench/finished.sh). Sourced, not run. They use the caller's variables:
# DIR (the run's directory: orch.sock is there), PLUGIN_CONFIG (the private plugin
# registry), PORT (the daemon's HTTP port) and TOKEN (a viewer token).

orch_nu() { # runs nu code with the plugin, against this run's daemon
  PROVISIONING_ORCHESTRATOR_SOCKET="$DIR/orch.sock" nu -n --plugin-config "$PLUGIN_CONFIG" \
    -c "plugin use --plugin-config '$PLUGIN_CONFIG' orchestrator; $1"
}
wait_health() { # waits until GET /health answers
  until curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$PORT/health"; do sleep 0.005; done
}
kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.0f", k / 1024}'; }
now_ms() { date +%s%3N; }
median_ms() { # median of 20 curl total times of GET $1 (with the viewer token); an error answer stops the run
  for _ in $(seq 20); do
    curl -sf -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $TOKEN" \
      "http://127.0.0.1:$PORT$1"
  done | sort -n | awk '{a[NR] = $1} END {printf "%.1f", a[int((NR + 1) / 2)] * 1000}'
}
build_release_if_stale() { # builds the release daemon and plugin into $BIN when missing or older than the sources
  local b stale=0
  for b in provisioning-orchestrator nu_plugin_orchestrator; do
    [[ -x $BIN/$b ]] || { stale=1; break; }
    if [[ -n $(find "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" "$ROOT/daemon" "$ROOT/protocol" \
      "$ROOT/nu_plugin_orchestrator" -newer "$BIN/$b" \( -name target -prune -o -type f -print \) | head -n 1) ]]; then
      stale=1
      break
    fi
  done
  if [[ $stale -eq 1 ]]; then
    cargo build --release -p provisioning-orchestrator -p nu_plugin_orchestrator \
      --manifest-path "$ROOT/Cargo.toml" >&2
  fi
}
