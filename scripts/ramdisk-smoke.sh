#!/bin/bash
# Smoke check of `ferric ramdisk build`: boots the ramdisk under QEMU (TCG, user-mode
# networking: the guest reaches the host as 10.0.2.2) against a local `ferric server` with one
# fake-hardware node waiting for its agent, and reports when the agent's lookup and heartbeat
# have reached the server. Needs qemu-system-x86 and curl; FERRIC names the ferric binary.
set -euo pipefail
RD=${1:?usage: scripts/ramdisk-smoke.sh DIR-with-ferric-agent.kernel-and-.initramfs}
RD=$(realpath "$RD")
FERRIC=$(command -v "${FERRIC:-ferric}" || realpath "${FERRIC:-ferric}")
W=$(mktemp -d "${TMPDIR:-/tmp}/ferric-ramdisk-smoke.XXXX")
cd $W
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$FERRIC server --api-listen 127.0.0.1:$PORT > server.log 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null; kill $QPID 2>/dev/null || true' EXIT
for i in $(seq 50); do curl -sf http://127.0.0.1:$PORT/ >/dev/null && break; sleep 0.2; done
H='X-OpenStack-Ironic-API-Version: 1.68'
NODE=$(curl -sf -H "$H" -H 'Content-Type: application/json' -d '{"driver":"fake-hardware","driver_info":{"fake_wait":"deploy"}}' http://127.0.0.1:$PORT/v1/nodes | python3 -c 'import json,sys;print(json.load(sys.stdin)["uuid"])')
state() { curl -sf -H "$H" http://127.0.0.1:$PORT/v1/nodes/$NODE | python3 -c 'import json,sys;print(json.load(sys.stdin)["provision_state"])'; }
prov() { curl -sf -X PUT -H "$H" -H 'Content-Type: application/json' -d "{\"target\":\"$1\"}" http://127.0.0.1:$PORT/v1/nodes/$NODE/states/provision; for i in $(seq 100); do [ "$(state)" = "$2" ] && return; sleep 0.2; done; echo "stuck in $(state)"; exit 1; }
prov manage manageable; prov provide available
curl -sf -H "$H" -H 'Content-Type: application/json' -d "{\"node_uuid\":\"$NODE\",\"address\":\"52:54:00:12:34:56\"}" http://127.0.0.1:$PORT/v1/ports >/dev/null
prov active "wait call-back"
echo "node $NODE waits for its agent; booting QEMU"
START=$(date +%s)
qemu-system-x86_64 -accel tcg -m 1024 -nographic -no-reboot \
  -kernel $RD/ferric-agent.kernel -initrd $RD/ferric-agent.initramfs \
  -append "console=ttyS0 quiet ipa-api-url=http://10.0.2.2:$PORT" \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56 \
  </dev/null > console.log 2>&1 &
QPID=$!
URL=""
for i in $(seq 600); do
  URL=$(curl -sf -H "$H" http://127.0.0.1:$PORT/v1/nodes/$NODE | python3 -c 'import json,sys;print(json.load(sys.stdin)["driver_internal_info"].get("agent_url",""))')
  if [ -n "$URL" ]; then echo "after $(( $(date +%s) - START )) s: agent_url=$URL state=$(state)"; break; fi
  sleep 1
done
grep -E "ferric ramdisk|lookup|heartbeat|INFO|WARN|ERROR" console.log | head -30
echo "console and server logs: $W"
[ -n "$URL" ] || { echo "FAILED: no heartbeat reached the server within 600 s"; exit 1; }
