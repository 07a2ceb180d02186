#!/usr/bin/env bash
# Creates (or reuses) a Python virtualenv with python-ironic-inspector-client and
# python-openstackclient (`openstack baremetal introspection …`), every dependency pinned in
# tests/inspector-client/requirements.txt. Prints the venv's path on stdout.
#
#   scripts/inspector-client-venv.sh [VENV_DIR]   # default: $HOME/.cache/ferric/inspector-client-venv
#
# Idempotent: the venv keeps a stamp with the hash of the requirements file and the Python
# version and is rebuilt only when either differs. Needs Python >= 3.11; PYTHON chooses it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/inspector-client/requirements.txt"
venv="${1:-${HOME}/.cache/ferric/inspector-client-venv}"
python="${PYTHON:-python3}"

log() { printf 'inspector-client-venv: %s\n' "$*" >&2; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  log "$python is $("$python" --version 2>&1); the clients need Python >= 3.11 (set PYTHON=…)"
  exit 1
}

stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
if [ -x "$venv/bin/openstack" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv"
  exit 0
fi

log "creating $venv (python-ironic-inspector-client, python-openstackclient; about a minute)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
# --no-deps: the file pins the whole closure, so pip has nothing to resolve and cannot drift.
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
"$venv/bin/pip" check >/dev/null || { log "pip check failed in $venv"; "$venv/bin/pip" check >&2; exit 1; }
echo "$stamp" >"$venv/.ferric-stamp"
echo "$venv"
