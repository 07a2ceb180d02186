#!/usr/bin/env bash
# Refreshes the vendored xterm.js of the web UI (crates/ferric-ui/assets/vendor) from the npm
# package @xterm/xterm. Not run by the build: the files are committed, so `cargo build` needs
# neither npm nor a network.
#
#   scripts/vendor-xterm.sh [VERSION]     # default: 6.0.0
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${1:-6.0.0}"
vendor="$root/crates/ferric-ui/assets/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "@xterm/xterm@$version" >/dev/null && tar xzf ./*.tgz)
grep -v 'sourceMappingURL' "$work/package/lib/xterm.mjs" >"$vendor/xterm.mjs"
cp "$work/package/css/xterm.css" "$vendor/xterm.css"
cp "$work/package/LICENSE" "$vendor/LICENSE-xterm"
sed -i "s/@xterm\/xterm\` [0-9.]*/@xterm\/xterm\` $version/" "$vendor/README.md"
echo "vendored @xterm/xterm $version into $vendor"
