#!/usr/bin/env bash
# Builds the servers' and test environments' base image (see the script it runs, which
# ships with the Nushell modules so `provisioning test image build` finds it installed).
exec "$(dirname "$0")/../nushell-modules/provisioning/images/build-base-image.sh" "$@"
