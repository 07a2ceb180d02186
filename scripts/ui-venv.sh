#!/usr/bin/env bash
# Creates (or reuses) a Python virtualenv with Playwright for the web UI's browser test
# (tests/ui/test_ui.py), every dependency pinned in tests/ui/requirements.txt. Playwright
# drives Debian's chromium by its executable path: `playwright install` is never run, so no
# browser is downloaded. Prints the venv's path on stdout.
#
#   scripts/ui-venv.sh [VENV_DIR]     # default: $HOME/.cache/ferric/ui-venv
#
# Idempotent and quick when nothing changed: the venv keeps a stamp with the hash of the
# requirements file and the Python version, and is rebuilt only when either differs.
# Needs Python >= 3.9 (Playwright 1.65); set PYTHON to choose the interpreter. Packages come from PyPI through plain pip.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/ui/requirements.txt"
venv="${1:-${HOME}/.cache/ferric/ui-venv}"
python="${PYTHON:-python3}"

log() { printf 'ui-venv: %s\n' "$*" >&2; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || {
  log "$python is $("$python" --version 2>&1); Playwright needs Python >= 3.9 (set PYTHON=…)"
  exit 1
}

stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$venv"
  exit 0
fi

log "creating $venv (playwright; about 20 s)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
# --no-deps: the file pins the whole closure, so pip has nothing to resolve and cannot drift.
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
"$venv/bin/python" -c 'import playwright.sync_api'
"$venv/bin/pip" check >/dev/null || { log "pip check failed in $venv"; "$venv/bin/pip" check >&2; exit 1; }
echo "$stamp" >"$venv/.ferric-stamp"
echo "$venv"
