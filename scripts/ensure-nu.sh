#!/usr/bin/env bash
# Makes the real `nu` 0.115.1 binary the first `nu` on PATH. Installs the npm package when
# needed and links its native binary: the package's own `nu` is a Node.js launcher that
# adds ~300 ms to every start.
set -euo pipefail
WANT=0.115.1

is_native_nu() { # the path is an ELF binary of the wanted version
  local path
  path=$(readlink -f "$1") || return 1
  [[ $(head -c 4 "$path" | od -An -c | tr -d ' ') == '177ELF' ]] && [[ $("$path" --version) == "$WANT" ]]
}

if current=$(command -v nu) && is_native_nu "$current"; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "ensure-nu: npm is needed to install nushell@$WANT" >&2
  exit 1
fi
real="$(npm root -g)/nushell/node_modules/@nushell/linux-x64/bin/nu"
if [[ ! -x $real ]] || ! is_native_nu "$real"; then
  npm install -g "nushell@$WANT" >&2
fi
if ! is_native_nu "$real"; then
  echo "ensure-nu: expected nu $WANT at $real" >&2
  exit 1
fi
link_dir=/usr/local/bin
[[ -w $link_dir ]] || link_dir="$HOME/.local/bin"
mkdir -p "$link_dir"
ln -sf "$real" "$link_dir/nu"
hash -r
if [[ $(command -v nu) != "$link_dir/nu" ]]; then
  echo "ensure-nu: linked $link_dir/nu, but $(command -v nu) comes first on PATH" >&2
  exit 1
fi
echo "ensure-nu: nu $(nu --version) at $link_dir/nu" >&2
