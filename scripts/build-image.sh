#!/usr/bin/env bash
# Builds the daemon's container image from Containerfile with Podman:
#   scripts/build-image.sh [--profile release|debug] [--tag TAG]
# The binaries come from target/<profile> (build them first: cargo build --release), nu
# from the first `nu` on PATH (its real binary), the Nushell modules from the repository.
# The base image is built first when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
tag=localhost/provisioning-orchestrator:latest
while (($#)); do
  case $1 in
    --profile) profile=${2:?--profile needs release or debug}; shift 2 ;;
    --tag) tag=${2:?--tag needs a name}; shift 2 ;;
    *) echo "build-image: unknown argument $1 (use --profile, --tag)" >&2; exit 2 ;;
  esac
done
case $profile in
  release) build="cargo build --release" ;;
  debug) build="cargo build" ;;
  *) echo "build-image: --profile is release or debug, not $profile" >&2; exit 2 ;;
esac
target=${CARGO_TARGET_DIR:-target}/$profile
for binary in provisioning-orchestrator nu_plugin_orchestrator; do
  [[ -x $target/$binary ]] || { echo "build-image: no $target/$binary (build it: $build)" >&2; exit 1; }
done
nu=$(readlink -f "$(command -v nu)") || { echo "build-image: no nu on PATH (scripts/ensure-nu.sh)" >&2; exit 1; }
if ! podman image exists localhost/provisioning-base:bookworm; then
  ./scripts/build-base-image.sh
fi
context=$(mktemp -d /tmp/orch-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
mkdir "$context/bin"
cp "$target/provisioning-orchestrator" "$target/nu_plugin_orchestrator" "$nu" "$context/bin/"
cp -r nushell-modules "$context/nushell-modules"
podman build --quiet -f Containerfile -t "$tag" "$context" >/dev/null
echo "$tag"
