#!/usr/bin/env bash
# Runs a real OpenStack Placement, Nova and Neutron API (unmodified, from PyPI) in front of
# Ferric, beside a Keystone of scripts/keystone.sh: nova-api, nova-conductor, nova-scheduler
# and nova-compute with `compute_driver = ironic.IronicDriver`, which finds Ferric as the
# catalog's `baremetal` endpoint. `cargo xtask openstack` drives it (docs/openstack.md).
# Neutron because Nova cannot do without it even for `--nic none` servers: every server view
# asks Neutron for the server's ports and security groups (500 EndpointNotFound without a
# `network` endpoint); only its API runs, ML2 with no mechanism driver and no agents.
#
#   scripts/openstack.sh install                       # only the venv (idempotent)
#   scripts/openstack.sh start --auth-url URL [--dir DIR]
#   scripts/openstack.sh stop|purge [--dir DIR]
#
# `start` creates fresh databases on the local MariaDB (placement, nova_api, nova_cell0,
# nova, neutron), registers the `nova`, `placement` and `neutron` users and the `compute`,
# `placement` and `network` catalog entries in Keystone (tests/openstack/setup_services.py;
# Keystone's bootstrap admin password is scripts/keystone.sh's), writes placement.conf,
# nova.conf and neutron/neutron.conf into DIR, syncs the schemas, maps cell0 and cell1, starts
# every service in its own session on 127.0.0.1 (the three APIs with gunicorn on free ports),
# waits for the APIs and the three RPC services, maps nova-compute's host, and writes
# DIR/openstack.env (OS_* for the admin, project scope; the APIs' URLs). Logs:
# DIR/logs/. `stop` ends every process it started (their process groups); `purge` also drops
# DIR and its databases.
#
# Defaults: --dir $HOME/.cache/ferric/openstack, venv $HOME/.cache/ferric/openstack-venv
# (OPENSTACK_VENV), RabbitMQ guest:guest@127.0.0.1:5672 (OPENSTACK_TRANSPORT_URL), MariaDB
# root@127.0.0.1:3306 (KEYSTONE_DB_HOST, KEYSTONE_DB_USER, as scripts/keystone.sh).
#
# What we found running Nova 32.2.1, Placement 14.0.0 and Neutron 27.0.4 this way:
# - Install: ~90 s into an empty venv (os-vif builds `ovs` from source).
# - nova-api under gunicorn's threads hangs on its first authenticated request with eventlet's
#   monkey patching: it runs with OS_NOVA_DISABLE_EVENTLET_PATCHING=true.
# - nova-api and Placement parse the process's command line with oslo.config: gunicorn reads
#   its settings from gunicorn.conf.py in its working directory instead (as for Keystone).
# - RPC topics are isolated per DIR by `control_exchange`, so runs in parallel on one RabbitMQ
#   do not answer each other.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/openstack/requirements.txt"
setup_services="$root/tests/openstack/setup_services.py"
venv="${OPENSTACK_VENV:-${HOME}/.cache/ferric/openstack-venv}"
python="${PYTHON:-python3}"
dir="${HOME}/.cache/ferric/openstack"
auth_url=""
admin_password="ferric-test-admin"
db_host="${KEYSTONE_DB_HOST:-127.0.0.1:3306}"
db_user="${KEYSTONE_DB_USER:-root}"
transport_url="${OPENSTACK_TRANSPORT_URL:-rabbit://guest:guest@127.0.0.1:5672/}"

log() { printf 'openstack: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --auth-url) auth_url="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

install_venv() {
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" --version 2>&1); Nova 32 needs Python >= 3.10 (set PYTHON=…)"
  local stamp
  stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
  if [ -x "$venv/bin/nova-compute" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  log "installing Placement and Nova into $venv (about a minute)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  # --no-deps: the file pins the whole closure (a pip freeze), so nothing is resolved.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$venv/bin/pip" check >/dev/null || { "$venv/bin/pip" check >&2; die "pip check failed in $venv"; }
  echo "$stamp" >"$venv/.ferric-stamp"
}

# One name per DIR, so runs in parallel each have their own databases and RPC exchange.
tag() { printf '%s' "$dir" | sha256sum | cut -c1-12; }
db() { echo "ferric_${1}_$(tag)"; }
databases=(placement nova_api nova_cell0 nova neutron)

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

# keystone_authtoken-style password credentials of a service user, for a section.
credentials() {
  cat <<EOF
auth_type = password
auth_url = $auth_url
username = $1
password = ferric-test-$1
project_name = service
user_domain_name = Default
project_domain_name = Default
region_name = RegionOne
EOF
}

write_configs() {
  local placement_port="$1" compute_port="$2" network_port="$3"
  cat >"$dir/placement.conf" <<EOF
# Written by scripts/openstack.sh.
[DEFAULT]
log_file = $dir/logs/placement-api.log

[placement_database]
connection = mysql+pymysql://$db_user@$db_host/$(db placement)

[api]
auth_strategy = keystone

[keystone_authtoken]
www_authenticate_uri = $auth_url
$(credentials placement)
EOF
  cp "$venv/etc/nova/api-paste.ini" "$dir/api-paste.ini"
  cat >"$dir/nova.conf" <<EOF
# Written by scripts/openstack.sh: Nova with the ironic driver, Ferric as the baremetal service.
[DEFAULT]
log_dir = $dir/logs
state_path = $dir/state
instances_path = $dir/state/instances
transport_url = $transport_url
control_exchange = ferric_nova_$(tag)
compute_driver = ironic.IronicDriver
host = ferric-compute
my_ip = 127.0.0.1
# Not forced: Nova 32's ironic driver cannot build a config drive for a server without
# networks (--nic none): _get_network_metadata subscripts the None that
# get_network_metadata returns for an empty network_info (TypeError, build aborted).
force_config_drive = False
reserved_host_memory_mb = 0
osapi_compute_listen = 127.0.0.1
# Ironic's recommendation: nodes rebalanced and reported quickly.
update_resources_interval = 10
# Nova's own power sync off: a server following a power change made behind Nova's back is
# Ferric's power-update event, nothing else (cargo xtask openstack proves it).
sync_power_state_interval = -1

[wsgi]
api_paste_config = $dir/api-paste.ini

[api]
auth_strategy = keystone

[api_database]
connection = mysql+pymysql://$db_user@$db_host/$(db nova_api)

[database]
connection = mysql+pymysql://$db_user@$db_host/$(db nova)

[keystone_authtoken]
www_authenticate_uri = $auth_url
$(credentials nova)

[service_user]
send_service_user_token = true
$(credentials nova)

[placement]
$(credentials placement)

[neutron]
$(credentials neutron)
valid_interfaces = public

[ironic]
$(credentials nova)
valid_interfaces = public

[glance]
region_name = RegionOne
valid_interfaces = public

[scheduler]
# Every Ferric node is a compute node of host ferric-compute; the host is mapped to cell1 once
# it has its first node, which the scheduler notices within this many seconds.
discover_hosts_in_cells_interval = 2
workers = 1

[conductor]
workers = 1

[oslo_concurrency]
lock_path = $dir/state/locks

[oslo_messaging_notifications]
driver = noop

[oslo_policy]
enforce_scope = true
enforce_new_defaults = true
EOF
  mkdir -p "$dir/neutron"
  cp "$venv/etc/neutron/api-paste.ini" "$dir/neutron/api-paste.ini"
  cat >"$dir/neutron/neutron.conf" <<EOF
# Written by scripts/openstack.sh: only the API, which Nova's server views ask for ports and
# security groups; ML2 without mechanism drivers (no agents, no ports bound).
[DEFAULT]
log_file = $dir/logs/neutron-api.log
api_paste_config = $dir/neutron/api-paste.ini
core_plugin = ml2
service_plugins = router,port_forwarding
auth_strategy = keystone
transport_url = $transport_url
control_exchange = ferric_neutron_$(tag)
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false

[database]
connection = mysql+pymysql://$db_user@$db_host/$(db neutron)

[keystone_authtoken]
www_authenticate_uri = $auth_url
$(credentials neutron)

[nova]
$(credentials nova)

[ml2]
type_drivers = flat
tenant_network_types =
mechanism_drivers =
extension_drivers =

[oslo_concurrency]
lock_path = $dir/state/locks
EOF
  cat >"$dir/neutron-gunicorn/gunicorn.conf.py" <<EOF
wsgi_app = "neutron.wsgi.api:application"
bind = "127.0.0.1:$network_port"
workers = 1
threads = 4
worker_class = "gthread"
timeout = 120
errorlog = "$dir/logs/neutron-gunicorn.log"

# Neutron's port listing reads Port.port_forwardings, a backref SQLAlchemy only creates when
# the mappers are configured: without this, every port query of a fresh worker is a 500
# (AttributeError) until something else configured them.
def post_worker_init(worker):
    from sqlalchemy import orm
    orm.configure_mappers()
EOF
  cat >"$dir/placement-gunicorn/gunicorn.conf.py" <<EOF
wsgi_app = "placement.wsgi:init_application()"
bind = "127.0.0.1:$placement_port"
workers = 1
threads = 4
worker_class = "gthread"
timeout = 120
errorlog = "$dir/logs/placement-gunicorn.log"
EOF
  cat >"$dir/nova-api-gunicorn/gunicorn.conf.py" <<EOF
wsgi_app = "nova.wsgi.osapi_compute:application"
bind = "127.0.0.1:$compute_port"
workers = 1
threads = 4
worker_class = "gthread"
timeout = 120
errorlog = "$dir/logs/nova-api-gunicorn.log"
EOF
}

manage() {
  local tool="$1"
  shift
  "$venv/bin/$tool" "$@" >>"$dir/logs/manage.log" 2>&1 ||
    { tail -n 20 "$dir/logs/manage.log" >&2; die "$tool $* failed (log: $dir/logs/manage.log)"; }
}

# Starts one service in its own session: `spawn NAME WORKDIR COMMAND…`.
spawn() {
  local name="$1" workdir="$2"
  shift 2
  (cd "$workdir" && OS_PLACEMENT_CONFIG_DIR="$dir" OS_NOVA_CONFIG_DIR="$dir" \
    OS_NOVA_CONFIG_FILES="api-paste.ini;nova.conf" OS_NEUTRON_CONFIG_DIR="$dir/neutron" \
    OS_NEUTRON_CONFIG_FILES="neutron.conf" PYTHONWARNINGS=ignore exec setsid "$@" \
    >"$dir/logs/$name.out" 2>&1 </dev/null) &
  echo $! >"$dir/pids/$name"
}

wait_for() {
  local what="$1" check="$2"
  local deadline=$((SECONDS + 180))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if eval "$check" >/dev/null 2>&1; then return 0; fi
    for pidfile in "$dir"/pids/*; do
      kill -0 "$(cat "$pidfile")" 2>/dev/null ||
        { tail -n 30 "$dir/logs/$(basename "$pidfile").out" >&2; stop; die "$(basename "$pidfile") exited while waiting for $what (logs: $dir/logs)"; }
    done
    sleep 0.5
  done
  stop
  die "$what not ready within 180 s (logs: $dir/logs)"
}

start() {
  [ -n "$auth_url" ] || die "start needs --auth-url (Keystone's v3 URL)"
  install_venv
  stop
  rm -rf "$dir"
  mkdir -p "$dir/logs" "$dir/pids" "$dir/state/locks" "$dir/placement-gunicorn" \
    "$dir/nova-api-gunicorn" "$dir/neutron-gunicorn"
  local placement_port compute_port network_port
  placement_port="$(free_port)"
  compute_port="$(free_port)"
  network_port="$(free_port)"
  local placement_url="http://127.0.0.1:$placement_port"
  local compute_url="http://127.0.0.1:$compute_port/v2.1"
  local network_url="http://127.0.0.1:$network_port"
  write_configs "$placement_port" "$compute_port" "$network_port"
  for name in "${databases[@]}"; do
    sql "DROP DATABASE IF EXISTS $(db "$name")" || die "cannot reach the database server at $db_host as $db_user"
    sql "CREATE DATABASE $(db "$name") CHARACTER SET utf8mb4"
  done
  "$venv/bin/python" "$setup_services" --auth-url "$auth_url" --admin-password "$admin_password" \
    --compute-url "$compute_url" --placement-url "$placement_url" --network-url "$network_url" >>"$dir/logs/setup.log" 2>&1 ||
    { tail -n 20 "$dir/logs/setup.log" >&2; die "registering Nova and Placement in Keystone failed"; }
  manage placement-manage --config-file "$dir/placement.conf" db sync
  manage neutron-db-manage --config-file "$dir/neutron/neutron.conf" upgrade head
  local conf=(--config-file "$dir/nova.conf")
  manage nova-manage "${conf[@]}" api_db sync
  manage nova-manage "${conf[@]}" cell_v2 map_cell0 \
    --database_connection "mysql+pymysql://$db_user@$db_host/$(db nova_cell0)"
  manage nova-manage "${conf[@]}" cell_v2 create_cell --name cell1 --verbose
  manage nova-manage "${conf[@]}" db sync

  spawn placement-api "$dir/placement-gunicorn" "$venv/bin/gunicorn"
  # nova-api runs in gunicorn's threads: without eventlet's monkey patching (Nova 2025.1+
  # supports it there), or its first authenticated request hangs until gunicorn's timeout.
  OS_NOVA_DISABLE_EVENTLET_PATCHING=true spawn nova-api "$dir/nova-api-gunicorn" "$venv/bin/gunicorn"
  spawn neutron-api "$dir/neutron-gunicorn" "$venv/bin/gunicorn"
  spawn nova-conductor "$dir" "$venv/bin/nova-conductor" "${conf[@]}"
  spawn nova-scheduler "$dir" "$venv/bin/nova-scheduler" "${conf[@]}"
  spawn nova-compute "$dir" "$venv/bin/nova-compute" "${conf[@]}"
  wait_for "Placement" "curl -sf $placement_url/"
  wait_for "nova-api" "curl -sf http://127.0.0.1:$compute_port/"
  wait_for "neutron-api" "curl -sf $network_url/"

  cat >"$dir/openstack.env" <<EOF
export OS_AUTH_URL=$auth_url
export OS_IDENTITY_API_VERSION=3
export OS_REGION_NAME=RegionOne
export OS_USERNAME=admin
export OS_PASSWORD=$admin_password
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_NAME=admin
export OS_PROJECT_DOMAIN_NAME=Default
export FERRIC_NOVA_URL=$compute_url
export FERRIC_PLACEMENT_URL=$placement_url
export FERRIC_NEUTRON_URL=$network_url
export FERRIC_NOVA_CONF=$dir/nova.conf
EOF
  # The three RPC services report to the database: wait until nova-api lists them up.
  # shellcheck disable=SC1091
  wait_for "nova-conductor, nova-scheduler and nova-compute" \
    "[ \"\$(. '$dir/openstack.env' && '$venv/bin/openstack' compute service list -f value -c State | grep -c '^up$')\" -ge 3 ]"
  cat "$dir/openstack.env"
}

stop() {
  [ -d "$dir/pids" ] || return 0
  local pidfile pid
  for pidfile in "$dir"/pids/*; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    # setsid made each service the leader of its own process group: signal the group.
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pidfile in "$dir"/pids/*; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    for _ in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "$(basename "$pidfile") (pid $pid) ignored SIGTERM for 10 s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

purge() {
  stop
  if [ -x "$venv/bin/python" ]; then
    for name in "${databases[@]}"; do sql "DROP DATABASE IF EXISTS $(db "$name")" || true; done
  fi
  rm -rf "$dir"
}

case "$command" in
  install) install_venv; echo "$venv" ;;
  start) start ;;
  stop) stop ;;
  purge) purge ;;
  *) die "usage: $0 install|start|stop|purge [--dir DIR] [--auth-url URL]" ;;
esac
