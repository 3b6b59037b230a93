#!/usr/bin/env bash
# Makes `nu` 0.115.1 available on PATH: installs the npm package when missing and links
# its real binary (the package's own `nu` is a Node.js launcher that adds ~300 ms a start).
set -euo pipefail
WANT=0.115.1
if command -v nu >/dev/null 2>&1 && [[ $(nu --version) == "$WANT" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-nu: npm is needed to install nushell@$WANT" >&2
  exit 1
fi
npm install -g "nushell@$WANT" >&2
real="$(npm root -g)/nushell/node_modules/@nushell/linux-x64/bin/nu"
if [[ ! -x $real ]]; then
  echo "ensure-nu: expected the nu binary at $real" >&2
  exit 1
fi
target_dir=/usr/local/bin
[[ -w $target_dir ]] || target_dir="$HOME/.local/bin"
mkdir -p "$target_dir"
ln -sf "$real" "$target_dir/nu"
hash -r
echo "ensure-nu: nu $(nu --version) at $target_dir/nu" >&2
