#!/usr/bin/env bash
# Runs the real OpenStack Ironic, standalone, as a reference server: Ferric's client scenario
# records its goldens against it (cargo xtask clients --against ironic --record), and
# benchmarks compare against it.
#
#   scripts/ironic-standalone.sh install                 # only the venv (idempotent)
#   scripts/ironic-standalone.sh start [--port N] [--dir DIR] [--keep-db] [--profile bmo]
#                                      [--db sqlite|mariadb] [--keystone AUTH_URL]
#   scripts/ironic-standalone.sh status|stop [--dir DIR]
#   scripts/ironic-standalone.sh dburl|dropdb [--dir DIR] [--db sqlite|mariadb]
#
# `start` prints the endpoint (http://127.0.0.1:PORT) on stdout once `GET /v1` answers and
# the conductor has registered fake-hardware, and returns; the server keeps running in the
# background (its own session) until `stop`. Each start begins with an empty database unless
# --keep-db is given. The log is DIR/ironic.log (one line per API request, "GET /v1/nodes -
# 200"), DIR/stdout.log has what it printed before logging was set up.
#
# --profile bmo enables what Metal3's baremetal-operator registers nodes with (the ipmi and
# redfish hardware types, their BIOS/firmware/RAID/inspection interfaces, virtual media boot,
# the ramdisk and custom-agent deploy interfaces): the configuration the BMO replay scenario
# (tests/clients/ferric_clients/bmo_scenario.py) is recorded against. The default profile is
# the one the cli and sdk goldens were recorded against.
#
# --db mariadb keeps Ironic's database on the local MariaDB (root without a password on
# 127.0.0.1:3306, as scripts/install-deps.sh sets it up; IRONIC_DB_HOST overrides) instead
# of DIR/ironic.sqlite: a database of its own per DIR, dropped and created afresh at each start
# unless --keep-db. PyMySQL comes into the venv with `install` (or on first use). `dburl` prints the
# database's URL (SQLAlchemy's form, as in ironic.conf) for `ferric import ironic --from`.
#
# --keystone AUTH_URL puts Ironic behind that Keystone (`auth_strategy = keystone`, tokens
# validated by keystonemiddleware with the `ferric` service user that scripts/keystone.sh
# creates): how `cargo xtask tempest --with-ironic` runs Tempest against it. The server is then
# ready when the API refuses an unauthenticated request (401) and the conductor has logged its
# start.
#
# Defaults: --port 6388, --dir $HOME/.cache/ferric/ironic-standalone, venv
# $HOME/.cache/ferric/ironic-venv (IRONIC_VENV), Python from PYTHON (>= 3.11).
#
# What we found running Ironic 39.0.0 (newest on PyPI; it needs Python >= 3.11) this way:
# - Install: ~50 s into an empty venv; start to a working API: ~4 s.
# - The all-in-one `ironic` command (API + conductor in one process) is the only way with
#   SQLite and rpc_transport=none; Ironic warns about it but it works.
# - The hardware type manual-management accepts no fake boot/deploy interface: with only fake
#   interfaces enabled the conductor refuses to start ("no default value found for boot
#   interface"). So ipxe (boot), direct (deploy) and noop (management) are enabled too; nodes of
#   fake-hardware still default to the fake interfaces, because Ironic picks the first enabled
#   interface in the hardware type's own order, and fake comes first.
# - Enabling ipxe makes the conductor write DIR/httpboot/boot.ipxe at start; without
#   [deploy]http_root pointing somewhere writable it dies with "No such file or directory:
#   '/httpboot/boot.ipxe'".
# - When the conductor fails to start, the process does NOT exit: its supervisor (cotyledon)
#   re-forks the worker forever ("Forking too fast, sleeping") and the API never listens. So we
#   watch the log for "exited with status" and give up early instead of waiting for a timeout.
# - SIGTERM is honoured but takes a few seconds (graceful worker shutdown); the worker is a
#   child process, so we signal the whole process group and SIGKILL it after 30 s.
# - The direct (agent) deploy interface needs the API's own URL ([service_catalog]
#   endpoint_override), or cleaning/deploying fails with "Couldn't get the URL of the Ironic
#   API service". We set it: nodes with deploy_interface=direct then wait in `clean wait` /
#   `wait call-back` for an agent that never comes, which is how the scenario gets a node into
#   a state that `abort` applies to.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$root/tests/clients/ironic-requirements.txt"
venv="${IRONIC_VENV:-${HOME}/.cache/ferric/ironic-venv}"
python="${PYTHON:-python3}"
port=6388
dir="${HOME}/.cache/ferric/ironic-standalone"
keep_db=""
profile=""
db="sqlite"
keystone=""
db_host="${IRONIC_DB_HOST:-127.0.0.1:3306}"
pymysql_version="1.2.4"

log() { printf 'ironic-standalone: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command="${1:-}"
[ $# -gt 0 ] && shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --keep-db) keep_db=1; shift ;;
    --profile) profile="$2"; shift 2 ;;
    --db) db="$2"; shift 2 ;;
    --keystone) keystone="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done

install_venv() {
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$python is $("$python" --version 2>&1); Ironic 39 needs Python >= 3.11 (set PYTHON=…)"
  local stamp
  stamp="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" --version 2>&1)"
  if [ -x "$venv/bin/ironic" ] && [ "$(cat "$venv/.ferric-stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  log "installing Ironic into $venv (about a minute)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
  # --no-deps: the file pins the whole closure (a pip freeze), so nothing is resolved.
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$requirements"
  "$venv/bin/pip" check >/dev/null || { "$venv/bin/pip" check >&2; die "pip check failed in $venv"; }
  echo "$stamp" >"$venv/.ferric-stamp"
}

# The MariaDB database of DIR: one per directory, so runs in parallel each have their own.
db_name() {
  echo "ferric_ironic_$(printf '%s' "$dir" | sha256sum | cut -c1-12)"
}

database_url() {
  case "$db" in
    sqlite) echo "sqlite:///$dir/ironic.sqlite" ;;
    mariadb) echo "mysql+pymysql://root@$db_host/$(db_name)?charset=utf8mb4" ;;
    *) die "unknown --db $db (known: sqlite, mariadb)" ;;
  esac
}

# PyMySQL in the venv: Ironic's driver for MariaDB (not in the pinned requirements, which are
# what the client goldens were recorded with). Idempotent.
ensure_pymysql() {
  "$venv/bin/python" -c 'import pymysql' 2>/dev/null ||
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "PyMySQL==$pymysql_version"
}

# Runs one SQL statement on the MariaDB server (with the venv's PyMySQL).
mariadb_sql() {
  ensure_pymysql
  "$venv/bin/python" - "$db_host" "$1" <<'PY'
import sys, pymysql
host, _, port = sys.argv[1].partition(":")
connection = pymysql.connect(host=host, port=int(port or 3306), user="root")
connection.cursor().execute(sys.argv[2])
connection.commit()
PY
}

running_pid() {
  local pid
  pid="$(cat "$dir/ironic.pid" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

enabled_interfaces() {
  case "$profile" in
    "") cat <<EOF
enabled_hardware_types = fake-hardware,manual-management
enabled_bios_interfaces = fake,no-bios
enabled_boot_interfaces = fake,ipxe
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake,direct
enabled_firmware_interfaces = fake,no-firmware
enabled_inspect_interfaces = fake,no-inspect
enabled_management_interfaces = fake,noop
enabled_network_interfaces = noop
enabled_power_interfaces = fake
enabled_raid_interfaces = fake,no-raid
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = fake,noop
enabled_vendor_interfaces = fake,no-vendor
EOF
      ;;
    bmo) cat <<EOF
enabled_hardware_types = fake-hardware,ipmi,redfish
enabled_bios_interfaces = fake,no-bios,redfish
enabled_boot_interfaces = fake,ipxe,redfish-virtual-media
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake,direct,ramdisk,custom-agent
enabled_firmware_interfaces = fake,no-firmware,redfish
enabled_inspect_interfaces = fake,no-inspect,agent,redfish
enabled_management_interfaces = fake,noop,ipmitool,redfish
enabled_network_interfaces = noop
enabled_power_interfaces = fake,ipmitool,redfish
enabled_raid_interfaces = fake,no-raid,agent,redfish
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = fake,noop
enabled_vendor_interfaces = fake,no-vendor
EOF
      ;;
    *) die "unknown profile $profile (known: bmo)" ;;
  esac
}

auth_settings() {
  if [ -z "$keystone" ]; then
    echo "# No Keystone: every request is an admin request."
    echo "auth_strategy = noauth"
  else
    echo "auth_strategy = keystone"
  fi
}

keystone_section() {
  [ -n "$keystone" ] || return 0
  cat <<EOF

[keystone_authtoken]
www_authenticate_uri = $keystone
auth_url = $keystone
auth_type = password
username = ferric
password = ferric-test-ferric
project_name = service
user_domain_name = Default
project_domain_name = Default
EOF
}

write_config() {
  cat >"$dir/ironic.conf" <<EOF
# Written by scripts/ironic-standalone.sh: Ironic standalone for Ferric's comparisons.
[DEFAULT]
$(auth_settings)
# API and conductor in one process (the \`ironic\` command), no message bus.
rpc_transport = none
# The conductor's name, shown as a node's "conductor" and a driver's "hosts".
host = ironic-reference
debug = false
log_file = $dir/ironic.log
$(enabled_interfaces)

[api]
host_ip = 127.0.0.1
port = $port

[database]
connection = $(database_url)

[dhcp]
dhcp_provider = none

[deploy]
http_root = $dir/httpboot
http_url = http://127.0.0.1:$port/httpboot-unused

[pxe]
tftp_root = $dir/tftpboot

[service_catalog]
endpoint_override = http://127.0.0.1:$port
$(keystone_section)
EOF
}

start() {
  install_venv
  if pid="$(running_pid)"; then
    die "already running (pid $pid, $dir); stop it first"
  fi
  mkdir -p "$dir/httpboot" "$dir/tftpboot"
  local fresh=""
  case "$db" in
    sqlite)
      [ -n "$keep_db" ] || rm -f "$dir/ironic.sqlite"
      [ -f "$dir/ironic.sqlite" ] || fresh=1
      ;;
    mariadb)
      if [ -z "$keep_db" ]; then
        mariadb_sql "DROP DATABASE IF EXISTS $(db_name)" ||
          die "cannot reach MariaDB at $db_host as root"
        mariadb_sql "CREATE DATABASE $(db_name) CHARACTER SET utf8mb4"
        fresh=1
      fi
      ;;
    *) die "unknown --db $db (known: sqlite, mariadb)" ;;
  esac
  rm -f "$dir/ironic.log" "$dir/stdout.log"
  write_config
  if [ -n "$fresh" ]; then
    "$venv/bin/ironic-dbsync" --config-file "$dir/ironic.conf" create_schema \
      >"$dir/dbsync.log" 2>&1 || { cat "$dir/dbsync.log" >&2; die "ironic-dbsync create_schema failed"; }
  fi
  # Eventlet's deprecation banner and similar noise go to stdout.log, not to our caller.
  PYTHONWARNINGS=ignore setsid "$venv/bin/ironic" --config-file "$dir/ironic.conf" \
    >"$dir/stdout.log" 2>&1 </dev/null &
  echo $! >"$dir/ironic.pid"
  local endpoint="http://127.0.0.1:$port"
  for _ in $(seq 1 240); do
    if ! running_pid >/dev/null; then
      tail -n 20 "$dir/stdout.log" >&2 || true
      die "ironic exited during start-up (log: $dir/ironic.log)"
    fi
    # An error logged while starting fails the start, except the allocations an earlier run
    # left unmatched, which the conductor processes (and fails again) at start with --keep-db.
    if grep -E 'exited with status|ERROR' "$dir/ironic.log" 2>/dev/null |
      grep -qv 'ironic.conductor.allocations'; then
      grep -E 'ERROR' "$dir/ironic.log" | tail -n 5 >&2 || true
      stop
      die "ironic's conductor failed to start (log: $dir/ironic.log)"
    fi
    # Ready = the API answers and the conductor has registered the fake hardware type (behind
    # Keystone: the API asks for a token and the conductor has started).
    if [ -z "$keystone" ]; then
      if curl -sf "$endpoint/v1/drivers" 2>/dev/null | grep -q '"fake-hardware"'; then
        echo "$endpoint"
        return
      fi
    elif [ "$(curl -s -o /dev/null -w '%{http_code}' "$endpoint/v1/drivers" 2>/dev/null)" = 401 ] &&
      grep -q 'Successfully started conductor' "$dir/ironic.log" 2>/dev/null; then
      echo "$endpoint"
      return
    fi
    sleep 0.5
  done
  stop
  die "ironic did not answer on $endpoint within 120 s (log: $dir/ironic.log)"
}

stop() {
  local pid
  pid="$(running_pid)" || { rm -f "$dir/ironic.pid"; return 0; }
  # setsid made the server the leader of its own process group: signal the group, so the
  # forked worker goes too.
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "ironic (pid $pid) ignored SIGTERM for 30 s; killing it"
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$dir/ironic.pid"
}

case "$command" in
  install) install_venv; ensure_pymysql; echo "$venv" ;;
  start) start ;;
  stop) stop ;;
  dburl) database_url ;;
  dropdb) if [ "$db" = mariadb ]; then mariadb_sql "DROP DATABASE IF EXISTS $(db_name)"; fi ;;
  status)
    if pid="$(running_pid)"; then echo "running (pid $pid, $dir)"; else echo "stopped"; exit 3; fi ;;
  *) die "usage: $0 install|start|stop|status|dburl|dropdb [--port N] [--dir DIR] [--keep-db] [--profile bmo] [--db sqlite|mariadb]" ;;
esac
