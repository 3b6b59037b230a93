#!/usr/bin/env bash
# Makes a Docker-compatible container engine answer on /run/podman/podman.sock: installs
# Podman from the Debian packages, configures it for this sandbox (runc instead of crun,
# cgroupfs, file events, no raising of rlimits) and starts `podman system service` in the
# background. Idempotent; runs as root. Prints the DOCKER_HOST to use on stdout
# (everything else goes to stderr).
set -euo pipefail

SOCK=/run/podman/podman.sock
DOCKER_HOST_VALUE="unix://$SOCK"
LOG=/tmp/podman-service.log
CONF=/etc/containers/containers.conf

say() { echo "ensure-podman: $*" >&2; }
ping_ok() { [[ $(curl -s --max-time 2 --unix-socket "$SOCK" http://d/_ping 2>/dev/null) == OK ]]; }

# 1. Packages (skip apt entirely when everything is already there). podman is also the
#    local provider's client where docker is not installed; curl pings the API here
#    and in the tests.
missing=()
for bin in podman runc debootstrap curl; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
done
if ((${#missing[@]})); then
  say "installing podman runc debootstrap curl (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq podman runc debootstrap curl >&2
fi

# 2. Configuration: crun fails on this hybrid cgroup layout, and the sandbox forbids
#    raising rlimits, which podman's defaults try to do.
if ! grep -qs '^runtime *= *"runc"' "$CONF"; then
  say "writing $CONF"
  mkdir -p "$(dirname "$CONF")"
  cat >"$CONF" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=1000:1000"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
fi

# 3. The API service (Docker-compatible, API 1.41), unless it already answers.
if ! ping_ok; then
  say "starting podman system service on $SOCK (log: $LOG)"
  mkdir -p "$(dirname "$SOCK")"
  # Started in /: the service outlives this run, and conmon inherits its working
  # directory (one that is removed later, a test clone's, makes every container start
  # fail with "Failed to get working directory").
  (cd / && setsid nohup podman system service --time=0 "$DOCKER_HOST_VALUE" >>"$LOG" 2>&1 </dev/null &)
  for _ in $(seq 60); do # bounded: ~30 s
    ping_ok && break
    sleep 0.5
  done
  if ! ping_ok; then
    say "podman did not answer on $SOCK within 30 s; last lines of $LOG:"
    tail -n 20 "$LOG" >&2 || true
    exit 1
  fi
fi
say "podman $(podman --version | awk '{print $3}') answers on $SOCK"
echo "DOCKER_HOST=$DOCKER_HOST_VALUE"
