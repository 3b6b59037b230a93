#!/usr/bin/env bash
# Builds the base image of the `local` provider's servers from the Debian mirror (no image
# registry is reachable here): a debootstrap minbase root with the services the taskservs
# run, imported into Podman. Reuses the image when the tag already exists.
#   PROVISIONING_BASE_IMAGE   image name (default localhost/provisioning-base:bookworm)
#   PROVISIONING_BUILD_LOG    where the debootstrap log is kept (default below)
set -euo pipefail

IMAGE=${PROVISIONING_BASE_IMAGE:-localhost/provisioning-base:bookworm}
LOG=${PROVISIONING_BUILD_LOG:-/tmp/provisioning-base-image.log}
SUITE=bookworm
# Services the taskservs start, their clients, and the tools their checks use.
# containerd comes from the same mirror (~100 MB installed, seconds to add).
PACKAGES=postgresql-15,redis-server,etcd-server,etcd-client,containerd,iproute2,procps

say() { echo "build-base-image: $*" >&2; }

if podman image exists "$IMAGE"; then
  say "$IMAGE already exists; reusing it"
  exit 0
fi
command -v debootstrap >/dev/null || { say "debootstrap is missing (run scripts/ensure-podman.sh)"; exit 1; }

rootfs=$(mktemp -d /var/tmp/provisioning-base.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
start=$SECONDS
say "debootstrap $SUITE into $rootfs (log: $LOG)"
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" >"$LOG" 2>&1; then
  say "debootstrap failed; last lines of $LOG:"
  tail -n 30 "$LOG" >&2
  exit 1
fi
# Caches only make the image bigger.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
say "importing as $IMAGE"
tar -C "$rootfs" -c . | podman import - "$IMAGE" >>"$LOG"
say "built $IMAGE in $((SECONDS - start)) s ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
