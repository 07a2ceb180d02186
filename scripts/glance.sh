#!/usr/bin/env bash
# Runs a real OpenStack Glance (unmodified, from PyPI) behind a Keystone started by
# scripts/keystone.sh, for Ferric's Glance image-source tests and `cargo xtask openstack`.
#
#   scripts/glance.sh install                     # only the venv (idempotent)
#   scripts/glance.sh start [--dir DIR] [--port N] [--keystone-dir KDIR]
#   scripts/glance.sh env|status|stop|purge [--dir DIR]
#
# `start` needs a running Keystone whose directory is KDIR (it reads KDIR/keystone.env for the
# admin's credentials). It creates a fresh database for DIR on the local MariaDB, the `glance`
# service user (roles admin and service on project `service`), the catalog's `image` service
# with public, internal and admin endpoints at http://127.0.0.1:PORT in RegionOne (replacing
# earlier ones), writes DIR/glance-api.conf (keystone auth, the `file` store in DIR/images),
# syncs the database, serves Glance's WSGI application with gunicorn on 127.0.0.1:PORT (a free
# port unless --port), writes DIR/glance.env (GLANCE_URL, GLANCE_IMAGES_DIR, OS_* of the
# admin from KDIR), prints it and returns; Glance keeps running in its own session until `stop`.
#
# Defaults: --dir $HOME/.cache/ferric/glance, --keystone-dir $HOME/.cache/ferric/keystone,
# venv $HOME/.cache/ferric/glance-venv (GLANCE_VENV), Python from PYTHON (>= 3.11), database
# server GLANCE_DB_HOST (127.0.0.1:3306) as GLANCE_DB_USER (root, no password). The service
# user's password is fixed (`ferric-test-glance`): this Glance listens on 127.0.0.1 only and
# holds test images only.
#
# What we found running Glance 31.1.0 this way:
# - Install: ~30 s into an empty venv. The WSGI application is the module `glance.wsgi.api`,
#   which reads glance-api.conf from OS_GLANCE_CONFIG_DIR; the paste pipeline is the one the
#   wheel installs into the venv's etc/glance/glance-api-paste.ini (flavor `keystone`).
# - With `enabled_backends`, Glance needs the reserved staging and tasks stores configured too
#   (`os_glance_staging_store`, `os_glance_tasks_store`), both directories under DIR here.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/glance/requirements.txt"
venv="${GLANCE_VENV:-${HOME}/.cache/ferric/glance-venv}"
python="${PYTHON:-python3}"
dir="${HOME}/.cache/ferric/glance"
keystone_dir="${HOME}/.cache/ferric/keystone"
port=""
service_password="ferric-test-glance"
db_host="${GLANCE_DB_HOST:-127.0.0.1:3306}"
db_user="${GLANCE_DB_USER:-root}"

log() { printf 'glance: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --keystone-dir) keystone_dir="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

install_venv() {
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" --version 2>&1); Glance 31 needs Python >= 3.10 (set PYTHON=…)"
  local stamp
  stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
  if [ -x "$venv/bin/glance-manage" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  log "installing Glance into $venv (about 30 s)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  # --no-deps: the file pins the whole closure (a pip freeze), so nothing is resolved.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$venv/bin/pip" check >/dev/null || { "$venv/bin/pip" check >&2; die "pip check failed in $venv"; }
  [ -f "$venv/etc/glance/glance-api-paste.ini" ] || die "no etc/glance/glance-api-paste.ini in $venv"
  echo "$stamp" >"$venv/.ferric-stamp"
}

running_pid() {
  local pid
  pid="$(cat "$dir/glance.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# The database of DIR: one per directory, so tests in parallel each have their own.
db_name() {
  echo "ferric_glance_$(printf '%s' "$dir" | sha256sum | cut -c1-12)"
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

# Reads one variable of KDIR/keystone.env (written by scripts/keystone.sh).
keystone_var() {
  sed -n "s/^export $1=//p" "$keystone_dir/keystone.env" | head -n 1
}

write_config() {
  local auth_url="$1"
  cat >"$dir/glance-api.conf" <<EOF
# Written by scripts/glance.sh: a test Glance for Ferric.
[DEFAULT]
log_file = $dir/glance-api.log
debug = false
bind_host = 127.0.0.1
bind_port = $port
public_endpoint = http://127.0.0.1:$port
worker_self_reference_url = http://127.0.0.1:$port
enabled_backends = file:file
show_image_direct_url = false
show_multiple_locations = false

[database]
connection = mysql+pymysql://$db_user@$db_host/$(db_name)

[glance_store]
default_backend = file

[file]
filesystem_store_datadir = $dir/images

[os_glance_staging_store]
filesystem_store_datadir = $dir/staging

[os_glance_tasks_store]
filesystem_store_datadir = $dir/tasks

[paste_deploy]
flavor = keystone
config_file = $venv/etc/glance/glance-api-paste.ini

[keystone_authtoken]
www_authenticate_uri = $auth_url
auth_url = $auth_url
auth_type = password
username = glance
password = $service_password
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne

[oslo_concurrency]
lock_path = $dir/locks
EOF
}

# Creates Glance's service user and the catalog's `image` service and endpoints in Keystone.
register_in_keystone() {
  local auth_url="$1" admin_password="$2"
  "$venv/bin/python" - "$auth_url" "$admin_password" "$service_password" "http://127.0.0.1:$port" <<'PY' \
    >>"$dir/setup.log" 2>&1 || { tail -n 20 "$dir/setup.log" >&2; die "registering Glance in Keystone failed"; }
import sys

import requests

auth_url, admin_password, service_password, glance_url = sys.argv[1:]
auth_url = auth_url.rstrip("/")
body = {
    "auth": {
        "identity": {
            "methods": ["password"],
            "password": {
                "user": {"name": "admin", "domain": {"id": "default"}, "password": admin_password}
            },
        },
        "scope": {"system": {"all": True}},
    }
}
response = requests.post(auth_url + "/auth/tokens", json=body, timeout=30)
response.raise_for_status()
token = response.headers["X-Subject-Token"]


def call(method, path, body=None):
    response = requests.request(
        method, auth_url + path, json=body, headers={"X-Auth-Token": token}, timeout=30
    )
    if response.status_code >= 400:
        sys.exit(f"{method} {path}: {response.status_code} {response.text}")
    return response.json() if response.content else None


def ensure(collection, singular, body, query):
    found = call("GET", f"/{collection}?{query}")[collection]
    if found:
        return found[0]["id"]
    return call("POST", f"/{collection}", {singular: body})[singular]["id"]


roles = {name: ensure("roles", "role", {"name": name}, f"name={name}") for name in ["admin", "service"]}
project = ensure("projects", "project", {"name": "service", "domain_id": "default"}, "name=service")
user = ensure(
    "users",
    "user",
    {"name": "glance", "domain_id": "default", "password": service_password,
     "default_project_id": project},
    "name=glance",
)
call("PATCH", f"/users/{user}", {"user": {"password": service_password}})
for role in roles.values():
    call("PUT", f"/projects/{project}/users/{user}/roles/{role}")
service = ensure(
    "services", "service", {"name": "glance", "type": "image", "enabled": True}, "type=image"
)
for endpoint in call("GET", f"/endpoints?service_id={service}")["endpoints"]:
    call("DELETE", f"/endpoints/{endpoint['id']}")
for interface in ["public", "internal", "admin"]:
    call(
        "POST",
        "/endpoints",
        {"endpoint": {"service_id": service, "interface": interface, "region_id": "RegionOne",
                      "url": glance_url, "enabled": True}},
    )
print(f"glance user {user}, image service {service} at {glance_url}")
PY
}

print_env() {
  [ -f "$dir/glance.env" ] || die "no $dir/glance.env: start Glance first"
  cat "$dir/glance.env"
}

start() {
  install_venv
  if pid="$(running_pid)"; then
    die "already running (pid $pid, $dir); stop it first"
  fi
  [ -f "$keystone_dir/keystone.env" ] ||
    die "no $keystone_dir/keystone.env: start Keystone first (scripts/keystone.sh start --dir $keystone_dir)"
  local auth_url admin_password
  auth_url="$(keystone_var OS_AUTH_URL)"
  admin_password="$(keystone_var OS_PASSWORD)"
  curl -sf "$auth_url" >/dev/null 2>&1 || die "Keystone does not answer on $auth_url"
  rm -rf "$dir"
  mkdir -p "$dir/images" "$dir/staging" "$dir/tasks" "$dir/locks"
  [ -n "$port" ] || port="$(free_port)"
  echo "$port" >"$dir/port"
  write_config "$auth_url"
  sql "DROP DATABASE IF EXISTS $(db_name)" || die "cannot reach the database server at $db_host as $db_user"
  sql "CREATE DATABASE $(db_name) CHARACTER SET utf8mb4"
  "$venv/bin/glance-manage" --config-file "$dir/glance-api.conf" db_sync >>"$dir/manage.log" 2>&1 ||
    { tail -n 20 "$dir/manage.log" >&2; die "glance-manage db_sync failed (log: $dir/manage.log)"; }
  register_in_keystone "$auth_url" "$admin_password"
  local url="http://127.0.0.1:$port"
  rm -f "$dir/gunicorn.log"
  cat >"$dir/gunicorn.conf.py" <<GUNICORN
wsgi_app = "glance.wsgi.api:application"
bind = "127.0.0.1:$port"
workers = 1
threads = 8
worker_class = "gthread"
timeout = 120
errorlog = "$dir/gunicorn.log"
GUNICORN
  (cd "$dir" && OS_GLANCE_CONFIG_DIR="$dir" PYTHONWARNINGS=ignore exec setsid \
    "$venv/bin/gunicorn" >"$dir/stdout.log" 2>&1 </dev/null) &
  echo $! >"$dir/glance.pid"
  for _ in $(seq 1 120); do
    if ! running_pid >/dev/null || grep -q 'exited with code' "$dir/gunicorn.log" 2>/dev/null; then
      tail -n 20 "$dir/stdout.log" "$dir/gunicorn.log" "$dir/glance-api.log" >&2 || true
      stop
      die "glance exited during start-up (logs: $dir/gunicorn.log, $dir/glance-api.log)"
    fi
    curl -sf "$url/versions" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -sf "$url/versions" >/dev/null 2>&1 || { stop; die "glance did not answer on $url within 60 s"; }
  {
    echo "export GLANCE_URL=$url"
    echo "export GLANCE_IMAGES_DIR=$dir/images"
    grep '^export OS_' "$keystone_dir/keystone.env"
  } >"$dir/glance.env"
  print_env
}

stop() {
  local pid
  pid="$(running_pid)" || { rm -f "$dir/glance.pid"; return 0; }
  # setsid made gunicorn the leader of its own process group: signal the group (its worker).
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "glance (pid $pid) ignored SIGTERM for 10 s; killing it"
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$dir/glance.pid"
}

# Stops Glance and removes DIR and its database (the Keystone entries stay).
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
  *) die "usage: $0 install|start|stop|purge|env|status [--dir DIR] [--port N] [--keystone-dir KDIR]" ;;
esac
