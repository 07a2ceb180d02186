#!/usr/bin/env bash
# Runs a real OpenStack Keystone (unmodified, from PyPI) for Ferric's `auth_strategy = keystone`
# tests, the `ferric` CLI's clouds.yaml tests and the Tempest harness. `cargo xtask keystone`
# wraps it (docs/keystone.md).
#
#   scripts/keystone.sh install                     # only the venv (idempotent)
#   scripts/keystone.sh start [--dir DIR] [--port N] [--baremetal-url URL] [--keep-db]
#                             [--token-expiration SECONDS]
#   scripts/keystone.sh env|status|stop|purge [--dir DIR]
#
# `start` creates a fresh database and fernet keys in DIR, bootstraps Keystone (the
# `admin` user with the admin role on project `admin` and on the system, region RegionOne),
# creates the test identities with tests/keystone/setup_identities.py (the `ferric` service
# user, projects `project-a` and `project-b` with member and reader users, a system reader and
# member; the catalog's `baremetal` service pointing at --baremetal-url), serves it with
# gunicorn on 127.0.0.1:PORT (a free port unless --port), writes DIR/keystone.env (OS_* for
# the admin, FERRIC_KEYSTONE_* for Ferric's service user), DIR/clouds.yaml (one cloud per
# user) and DIR/identities.json (IDs), prints keystone.env and returns; Keystone keeps running
# in its own session until `stop`. With --keep-db an earlier DIR's database, keys and port are
# reused (a restart: tokens issued before stay valid).
#
# Defaults: --dir $HOME/.cache/ferric/keystone, --baremetal-url http://127.0.0.1:6385,
# venv $HOME/.cache/ferric/keystone-venv (KEYSTONE_VENV), Python from PYTHON (>= 3.11).
# Test passwords are fixed and documented (docs/keystone.md): this Keystone listens on
# 127.0.0.1 only and holds nothing but test identities.
#
# What we found running Keystone 28.0.2 this way:
# - Install: ~30 s into an empty venv. Keystone 27+ ships no `keystone-wsgi-public` script;
#   the WSGI application is the module `keystone.wsgi.api`, which reads its configuration from
#   OS_KEYSTONE_CONFIG_FILES.
# - On SQLite, Keystone answers 500 "database is locked" even to one client making requests in
#   turn, with one gunicorn worker of one thread: so the database is MariaDB (or MySQL), the
#   machine's local server by default (KEYSTONE_DB_HOST, KEYSTONE_DB_USER; root without a
#   password, as on the project's machines), one database per DIR.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/keystone/requirements.txt"
setup_identities="$root/tests/keystone/setup_identities.py"
venv="${KEYSTONE_VENV:-${HOME}/.cache/ferric/keystone-venv}"
python="${PYTHON:-python3}"
dir="${HOME}/.cache/ferric/keystone"
port=""
baremetal_url="http://127.0.0.1:6385"
keep_db=""
token_expiration=3600
admin_password="ferric-test-admin"
db_host="${KEYSTONE_DB_HOST:-127.0.0.1:3306}"
db_user="${KEYSTONE_DB_USER:-root}"

log() { printf 'keystone: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --baremetal-url) baremetal_url="$2"; shift 2 ;;
    --keep-db) keep_db=1; shift ;;
    --token-expiration) token_expiration="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

install_venv() {
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" --version 2>&1); Keystone 28 needs Python >= 3.10 (set PYTHON=…)"
  local stamp
  stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
  if [ -x "$venv/bin/keystone-manage" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  log "installing Keystone into $venv (about 30 s)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  # --no-deps: the file pins the whole closure (a pip freeze), so nothing is resolved.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$venv/bin/pip" check >/dev/null || { "$venv/bin/pip" check >&2; die "pip check failed in $venv"; }
  echo "$stamp" >"$venv/.ferric-stamp"
}

running_pid() {
  local pid
  pid="$(cat "$dir/keystone.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# The database of DIR: one per directory, so tests in parallel each have their own.
db_name() {
  echo "ferric_keystone_$(printf '%s' "$dir" | sha256sum | cut -c1-12)"
}

# Runs one SQL statement on the database server (with the venv's PyMySQL).
sql() {
  "$venv/bin/python" - "$db_host" "$db_user" "$1" <<'PY'
import sys, pymysql
host, _, port = sys.argv[1].partition(":")
connection = pymysql.connect(host=host, port=int(port or 3306), user=sys.argv[2])
connection.cursor().execute(sys.argv[3])
connection.commit()
PY
}

free_port() {
  "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() {
  cat >"$dir/keystone.conf" <<EOF
# Written by scripts/keystone.sh: a test Keystone for Ferric.
[DEFAULT]
log_file = $dir/keystone.log
debug = false

[database]
connection = mysql+pymysql://$db_user@$db_host/$(db_name)

[token]
provider = fernet
expiration = $token_expiration

[fernet_tokens]
key_repository = $dir/fernet-keys

[fernet_receipts]
key_repository = $dir/fernet-receipts

[credential]
key_repository = $dir/credential-keys
EOF
}

manage() {
  "$venv/bin/keystone-manage" --config-file "$dir/keystone.conf" "$@" >>"$dir/manage.log" 2>&1 ||
    { tail -n 20 "$dir/manage.log" >&2; die "keystone-manage $1 failed (log: $dir/manage.log)"; }
}

print_env() {
  [ -f "$dir/keystone.env" ] || die "no $dir/keystone.env: start Keystone first"
  cat "$dir/keystone.env"
}

start() {
  install_venv
  if pid="$(running_pid)"; then
    die "already running (pid $pid, $dir); stop it first"
  fi
  if [ -n "$keep_db" ] && [ -f "$dir/identities.json" ]; then
    port="$(cat "$dir/port")"
    # The token lifetime may change between runs; the database and keys stay.
    write_config
  else
    rm -rf "$dir"
    mkdir -p "$dir"
    [ -n "$port" ] || port="$(free_port)"
    echo "$port" >"$dir/port"
    write_config
    sql "DROP DATABASE IF EXISTS $(db_name)" || die "cannot reach the database server at $db_host as $db_user"
    sql "CREATE DATABASE $(db_name) CHARACTER SET utf8mb4"
    local public="http://127.0.0.1:$port/v3"
    manage db_sync
    manage fernet_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
    manage credential_setup --keystone-user "$(id -un)" --keystone-group "$(id -gn)"
    # fernet_receipts shares the fernet key format; MFA receipts are not used here.
    cp -a "$dir/fernet-keys" "$dir/fernet-receipts"
    manage bootstrap --bootstrap-password "$admin_password" \
      --bootstrap-admin-url "$public" --bootstrap-public-url "$public" \
      --bootstrap-internal-url "$public" --bootstrap-region-id RegionOne
  fi
  local auth_url="http://127.0.0.1:$port/v3"
  rm -f "$dir/gunicorn.log"
  # Keystone parses the process's command line with oslo.config, which refuses gunicorn's
  # flags: gunicorn reads its settings from gunicorn.conf.py in its working directory instead.
  cat >"$dir/gunicorn.conf.py" <<GUNICORN
wsgi_app = "keystone.wsgi.api:application"
bind = "127.0.0.1:$port"
workers = 1
threads = 8
worker_class = "gthread"
timeout = 120
errorlog = "$dir/gunicorn.log"
GUNICORN
  (cd "$dir" && OS_KEYSTONE_CONFIG_FILES="$dir/keystone.conf" PYTHONWARNINGS=ignore exec setsid \
    "$venv/bin/gunicorn" >"$dir/stdout.log" 2>&1 </dev/null) &
  echo $! >"$dir/keystone.pid"
  for _ in $(seq 1 120); do
    if ! running_pid >/dev/null || grep -q 'exited with code' "$dir/gunicorn.log" 2>/dev/null; then
      tail -n 20 "$dir/stdout.log" "$dir/gunicorn.log" >&2 || true
      stop
      die "keystone exited during start-up (logs: $dir/gunicorn.log, $dir/keystone.log)"
    fi
    curl -sf "$auth_url" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -sf "$auth_url" >/dev/null 2>&1 || { stop; die "keystone did not answer on $auth_url within 60 s"; }
  if [ ! -f "$dir/identities.json" ]; then
    "$venv/bin/python" "$setup_identities" --auth-url "$auth_url" \
      --admin-password "$admin_password" --baremetal-url "$baremetal_url" --dir "$dir" \
      >>"$dir/setup.log" 2>&1 ||
      { tail -n 20 "$dir/setup.log" >&2; stop; die "creating the test identities failed (log: $dir/setup.log)"; }
  fi
  print_env
}

stop() {
  local pid
  pid="$(running_pid)" || { rm -f "$dir/keystone.pid"; return 0; }
  # setsid made gunicorn the leader of its own process group: signal the group (its worker).
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "keystone (pid $pid) ignored SIGTERM for 10 s; killing it"
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$dir/keystone.pid"
}

# Stops Keystone and removes DIR and its database.
purge() {
  stop
  if [ -x "$venv/bin/python" ]; then
    sql "DROP DATABASE IF EXISTS $(db_name)" || true
  fi
  rm -rf "$dir"
}

case "$command" in
  install) install_venv; echo "$venv" ;;
  start) start ;;
  stop) stop ;;
  purge) purge ;;
  env) print_env ;;
  status)
    if pid="$(running_pid)"; then echo "running (pid $pid, $dir)"; else echo "stopped"; exit 3; fi ;;
  *) die "usage: $0 install|start|stop|purge|env|status [--dir DIR] [--port N] [--baremetal-url URL] [--keep-db]" ;;
esac
