#!/usr/bin/env bash
# Makes `use provisioning` work from any directory: links the `provisioning` module of the
# extensions directory given (default: where scripts/install.sh copies them) into the
# first directory of nu's library path ($NU_LIB_DIRS, by default
# ~/.config/nushell/scripts). A directory of that name that is not such a link is left
# alone, and the script says so.
set -euo pipefail
MODULES="${1:-${XDG_DATA_HOME:-$HOME/.local/share}/provisioning/nushell-modules}"
module="$MODULES/provisioning"
[[ -f $module/mod.nu ]] || { echo "link-module: no provisioning module in $MODULES" >&2; exit 1; }
lib_dir="$(nu -n -c '$NU_LIB_DIRS | first')"
mkdir -p "$lib_dir"
target="$lib_dir/provisioning"
if [[ -e $target && ! -L $target ]]; then
  echo "link-module: $target exists and is not a link: left as it is (use provisioning from $module)" >&2
  exit 1
fi
ln -sfn "$(cd "$module" && pwd)" "$target"
echo "link-module: use provisioning now loads $target -> $module"
