"""The `cargo xtask openstack` scenario: Nova deploys onto Ferric's nodes (the target a redfish
node on sushy-emulator, the others fake hardware).

Run by xtask/src/openstack.rs with the OpenStack venv's Python, OS_* naming Keystone's admin
(project `admin`), FERRIC_NOVA_CONF the nova.conf of scripts/openstack.sh and GLANCE_URL
set when a Glance runs, SUSHY_URL and SUSHY_SYSTEM the target node's Redfish BMC. Prints every step and each server state it sees; exits non-zero (with
the reason) at the first thing that is not as Ironic's users expect.
"""

import base64
import gzip
import json
import os
import sqlite3
import sys
import time

import openstack
import requests

RESOURCE_CLASS = "baremetal"
# The tenant network of the first server: a flat provider network on the physical network of
# the target node's one port (Neutron runs its API only; Nova leaves the port unbound for
# Ironic's drivers, and Ferric attaches it to the node's port as a VIF).
PHYSNET = "baremetal"
TARGET_MAC = "52:54:00:0f:e0:01"
PLACEMENT_CLASS = "CUSTOM_BAREMETAL"
# Each wait ends when the state is reached; the bound only turns a hang into a failure.
BOUND = 300

started = time.monotonic()


def say(text):
    print(f"[{time.monotonic() - started:6.1f}s] {text}", flush=True)


def fail(text):
    say("FAILED: " + text)
    sys.exit(1)


def until(what, probe):
    """Calls probe() until it returns something true; returns that."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(1)
    fail(f"{what}: not within {BOUND} s")


# The admin's credentials; the OS_* variables are then removed, so that openstacksdk takes
# the scope asked for below and nothing from the environment.
ADMIN = {
    "auth_url": os.environ["OS_AUTH_URL"],
    "username": os.environ["OS_USERNAME"],
    "password": os.environ["OS_PASSWORD"],
    "user_domain_name": "Default",
}
for name in [name for name in os.environ if name.startswith("OS_")]:
    del os.environ[name]


def connect(system):
    auth = dict(ADMIN)
    if system:
        auth["system_scope"] = "all"
    else:
        auth["project_name"] = "admin"
        auth["project_domain_name"] = "Default"
    return openstack.connect(
        auth=auth, region_name="RegionOne", identity_api_version="3", auth_type="password"
    )


class Servers:
    """Follows servers, printing each (status, task state, power state) it has not seen."""

    def __init__(self, compute):
        self.compute = compute
        self.seen = {}

    def look(self, server_id):
        server = self.compute.find_server(server_id)
        if server is None:
            state = ("DELETED", None, None)
        else:
            state = (server.status, server.task_state, server.power_state)
        if self.seen.get(server_id) != state:
            self.seen[server_id] = state
            name = server.name if server is not None else server_id
            say(f"server {name}: {state[0]} (task {state[1]}, power state {state[2]})")
        return server, state

    def wait(self, server_id, status, power_state=None):
        def reached():
            server, (now, task, power) = self.look(server_id)
            if now == "ERROR" and status != "ERROR":
                fault = getattr(server, "fault", None) or {}
                fail(f"server {server_id} is ERROR: {fault.get('message')}")
            return (
                server
                if now == status and task is None and power_state in (None, power)
                else None
            )

        return until(f"server {server_id} {status}", reached)


def power_off_events():
    """How many power-update:POWER_OFF events Nova's logs show."""
    logs = os.path.join(os.path.dirname(os.environ["FERRIC_NOVA_CONF"]), "logs")
    seen = 0
    for name in os.listdir(logs):
        with open(os.path.join(logs, name), encoding="utf-8", errors="replace") as log:
            seen += log.read().count("Creating event power-update:POWER_OFF")
    return seen


def make_node(baremetal, name, end, bmc=None):
    """A fake-hardware node brought to `end`: enroll, manageable, available or maintenance;
    with `bmc` (a Redfish URL and system ID), a redfish node with fake boot and deploy whose
    power is that BMC's."""
    hardware = {"driver": "fake-hardware"}
    if bmc:
        hardware = {
            "driver": "redfish",
            "boot_interface": "fake",
            "deploy_interface": "fake",
            "driver_info": {"redfish_address": bmc[0], "redfish_system_id": bmc[1]},
        }
    node = baremetal.create_node(
        name=name,
        resource_class=RESOURCE_CLASS,
        properties={"cpus": 1, "memory_mb": 1024, "local_gb": 10, "cpu_arch": "x86_64"},
        **hardware,
    )
    if end != "enroll":
        baremetal.set_node_provision_state(node, "manage", wait=True, timeout=BOUND)
    if end in ("available", "maintenance"):
        baremetal.set_node_provision_state(node, "provide", wait=True, timeout=BOUND)
        # Fake hardware reports no power state until one is set; Nova offers no node whose
        # power state is unknown.
        baremetal.set_node_power_state(node, "power off", wait=True, timeout=BOUND)
    if end == "maintenance":
        baremetal.set_node_maintenance(node, reason="openstack scenario: not to be offered")
    node = baremetal.get_node(node.id)
    say(
        f"node {name} {node.id}: {node.provision_state}, power {node.power_state}, "
        f"maintenance {node.is_maintenance}"
    )
    return node


def check_config_drive(node):
    drive = node.instance_info.get("configdrive")
    if not drive:
        fail(f"node {node.id} has no config drive in instance_info: {sorted(node.instance_info)}")
    if set(drive) == {"*"}:
        # Masked for every caller, as Ironic's `show_instance_secrets` rule ("!") does: read
        # what Nova sent from Ferric's database (xtask names the SQLite file).
        say("config drive: present in instance_info, masked by the API as Ironic masks it")
        database = sqlite3.connect(f"file:{os.environ['FERRIC_DATABASE']}?mode=ro", uri=True)
        row = database.execute("SELECT instance_info FROM nodes WHERE uuid = ?", (node.id,))
        drive = json.loads(row.fetchone()[0])["configdrive"]
        database.close()
    iso = gzip.decompress(base64.b64decode(drive))
    # ISO 9660: the primary volume descriptor at sector 16, its volume label at byte 40.
    label = iso[16 * 2048 + 40 : 16 * 2048 + 72].decode("ascii", "replace").strip()
    if label != "config-2":
        fail(f"the config drive's volume label is {label!r}, not config-2")
    # network_data.json is stored as it is in the image; Nova writes the link of a VIF with the
    # MAC of the Ferric port whose internal_info.tenant_vif_port_id names it.
    if TARGET_MAC.encode() not in iso:
        fail(f"the config drive holds no network data naming the node's port {TARGET_MAC}")
    say(
        f"config drive: an ISO 9660 image of {len(iso)} bytes labelled {label}, "
        f"its network data naming {TARGET_MAC}"
    )


def main():
    system = connect(system=True)
    cloud = connect(system=False)
    baremetal, compute, placement = system.baremetal, cloud.compute, cloud.placement
    servers = Servers(compute)

    sushy_url = os.environ["SUSHY_URL"]
    system_path = f"/redfish/v1/Systems/{os.environ['SUSHY_SYSTEM']}"
    say(f"creating nodes in Ferric: nova-0 a redfish node on sushy-emulator {sushy_url}")
    target = make_node(baremetal, "nova-0", "available", bmc=(sushy_url, system_path))
    nic = baremetal.create_port(
        node_uuid=target.id, address=TARGET_MAC, physical_network=PHYSNET, pxe_enabled=True
    )
    say(f"node nova-0: port {nic.id} {nic.address} on physical network {PHYSNET}")
    others = [
        make_node(baremetal, "nova-enroll", "enroll"),
        make_node(baremetal, "nova-manageable", "manageable"),
        make_node(baremetal, "nova-maintenance", "maintenance"),
    ]
    nodes = [target, *others]

    flavor = compute.create_flavor(name="baremetal", ram=1, vcpus=1, disk=0)
    compute.create_flavor_extra_specs(
        flavor,
        {
            f"resources:{PLACEMENT_CLASS}": "1",
            "resources:VCPU": "0",
            "resources:MEMORY_MB": "0",
            "resources:DISK_GB": "0",
        },
    )
    say(f"flavor baremetal: resources:{PLACEMENT_CLASS}=1, VCPU/MEMORY_MB/DISK_GB 0")

    image = cloud.image.create_image(
        name="ferric-test-image",
        data=b"\0" * 1024 * 1024,
        disk_format="raw",
        container_format="bare",
        visibility="public",
        wait=True,
    )
    image = until(
        "the image active",
        lambda: (lambda found: found if found.status == "active" else None)(
            cloud.image.get_image(image.id)
        ),
    )
    say(f"Glance image {image.id}: {image.status}, {image.size} bytes")

    say("waiting for nova-compute to report every node as a hypervisor")
    wanted = {node.id for node in nodes}

    def hypervisors():
        names = {h.name for h in compute.hypervisors()}
        return names if wanted <= names else None

    until("every node a hypervisor", hypervisors)
    say(f"hypervisors: {len(wanted)} Ferric nodes listed")

    def inventories():
        found = {}
        for node in nodes:
            try:
                provider = placement.get_resource_provider(node.id)
            except openstack.exceptions.NotFoundException:
                return None
            inventory = {
                item.resource_class: item
                for item in placement.resource_provider_inventories(provider)
            }
            if PLACEMENT_CLASS not in inventory:
                return None
            found[node.id] = inventory
        return found

    found = until("a Placement inventory per node", inventories)
    for node in nodes:
        inventory = found[node.id]
        if list(inventory) != [PLACEMENT_CLASS]:
            fail(f"node {node.name}'s inventory has {sorted(inventory)}, not one resource class")
        item = inventory[PLACEMENT_CLASS]
        say(f"placement {node.name}: {PLACEMENT_CLASS} total {item.total} reserved {item.reserved}")

    def offered():
        inventory = inventories() or {}
        unavailable = all(
            inventory.get(node.id, {}).get(PLACEMENT_CLASS)
            and inventory[node.id][PLACEMENT_CLASS].reserved
            == inventory[node.id][PLACEMENT_CLASS].total
            for node in others
        )
        target_free = inventory.get(target.id, {}).get(PLACEMENT_CLASS)
        return unavailable and target_free and target_free.reserved == 0

    until("enroll, manageable and maintenance nodes reserved, the available one free", offered)
    say("placement: only the available node is offered")

    network = cloud.network.create_network(
        name="ferric-baremetal",
        provider_network_type="flat",
        provider_physical_network=PHYSNET,
        is_shared=True,
    )
    subnet = cloud.network.create_subnet(
        network_id=network.id, ip_version=4, cidr="10.99.0.0/24", is_dhcp_enabled=False
    )
    say(f"Neutron network {network.name}: flat on {PHYSNET}, subnet {subnet.cidr} (no DHCP)")

    say(
        "openstack server create --flavor baremetal --image ferric-test-image "
        "--network ferric-baremetal --config-drive true"
    )
    server = compute.create_server(
        name="ferric-bm-0",
        flavor_id=flavor.id,
        image_id=image.id,
        networks=[{"uuid": network.id}],
        config_drive=True,
    )
    # Fake hardware's deploy, as Ironic's, leaves the power as it was (off here): Nova shows
    # the server ACTIVE with power state SHUTDOWN until someone powers it on.
    server = servers.wait(server.id, "ACTIVE")
    node = baremetal.get_node(target.id)
    if node.instance_id != server.id:
        fail(f"node {node.name}'s instance_uuid is {node.instance_id}, not the server {server.id}")
    if node.provision_state != "active":
        fail(f"node {node.name} is {node.provision_state}")
    hypervisor = getattr(server, "hypervisor_hostname", None)
    say(
        f"node {node.name}: active, {node.power_state}, instance_uuid = server id; "
        f"hypervisor {hypervisor}"
    )
    vifs = list(baremetal.list_node_vifs(node))
    neutron_ports = [port.id for port in cloud.network.ports(device_id=server.id)]
    if not neutron_ports or vifs != neutron_ports:
        fail(f"node {node.name}'s VIFs are {vifs}, the server's Neutron ports {neutron_ports}")
    say(f"node {node.name}: VIF {vifs[0]} attached (the server's Neutron port)")
    check_config_drive(node)

    say("a second server: no other node may be offered")
    second = compute.create_server(
        name="ferric-bm-none", flavor_id=flavor.id, image_id=image.id, networks="none"
    )
    second = servers.wait(second.id, "ERROR")
    fault = (getattr(second, "fault", None) or {}).get("message", "")
    if "No valid host" not in fault:
        fail(f"the second server failed for another reason: {fault}")
    say(f"second server: ERROR, {fault!r}")
    compute.delete_server(second)
    until("the second server deleted", lambda: servers.look(second.id)[1][0] == "DELETED")
    for other in others:
        if baremetal.get_node(other.id).instance_id:
            fail(f"node {other.name} got an instance")

    def power_is(expected):
        return lambda: baremetal.get_node(target.id).power_state == expected

    say("openstack server reboot --hard")
    compute.reboot_server(server, "HARD")
    servers.wait(server.id, "ACTIVE", power_state=1)
    until("node on after the reboot", power_is("power on"))

    say("openstack server stop")
    compute.stop_server(server)
    servers.wait(server.id, "SHUTOFF", power_state=4)
    until("node off after server stop", power_is("power off"))
    say("node: power off")

    say("openstack server start")
    compute.start_server(server)
    servers.wait(server.id, "ACTIVE", power_state=1)
    until("node on after server start", power_is("power on"))
    say("node: power on")

    say("power off through Ferric's API (baremetal node power off)")
    baremetal.set_node_power_state(target, "power off", wait=True, timeout=BOUND)
    servers.wait(server.id, "SHUTOFF", power_state=4)
    say("Nova follows: SHUTOFF (Ferric's power-update event)")

    say("power on through Ferric's API (baremetal node power on)")
    baremetal.set_node_power_state(target, "power on", wait=True, timeout=BOUND)
    servers.wait(server.id, "ACTIVE", power_state=1)
    say("Nova follows: ACTIVE, running")

    # Behind everyone's back: the BMC itself powers the machine off. Nova's own power sync is
    # off (nova.conf sync_power_state_interval = -1), so only Ferric's power sync, finding the
    # change, and its power-update event can bring Nova to SHUTOFF.
    say("power off at the BMC (sushy-emulator ComputerSystem.Reset ForceOff), behind Ferric")
    events_before = power_off_events()
    reset = requests.post(
        f"{sushy_url}{system_path}/Actions/ComputerSystem.Reset",
        json={"ResetType": "ForceOff"},
        timeout=30,
    )
    if reset.status_code >= 300:
        fail(f"sushy-emulator refused the reset: {reset.status_code} {reset.text}")
    until("Ferric's power sync finds the node off", power_is("power off"))
    say("Ferric's power sync: node power off")
    servers.wait(server.id, "SHUTOFF", power_state=4)
    say("Nova follows: SHUTOFF (Ferric's power-update from its power sync)")
    if power_off_events() <= events_before:
        fail("nova-api logged no new power-update:POWER_OFF event")
    say("nova-api: Creating event power-update:POWER_OFF (the power sync's)")

    say("power on through Ferric's API (baremetal node power on)")
    baremetal.set_node_power_state(target, "power on", wait=True, timeout=BOUND)
    servers.wait(server.id, "ACTIVE", power_state=1)
    say("Nova follows: ACTIVE, running")

    say("openstack server rebuild --image ferric-test-image")
    # At the CLI's default microversion: from 2.93 on Nova 32 asks every driver to re-image
    # a boot volume on rebuild, and its ironic driver refuses that ("Ironic doesn't support
    # rebuilding volume backed instances") even for an image-backed server.
    response = compute.post(
        f"/servers/{server.id}/action",
        json={"rebuild": {"imageRef": image.id}},
        microversion="2.1",
    )
    if response.status_code != 202:
        fail(f"rebuild: {response.status_code} {response.text}")
    until("the rebuild started", lambda: servers.look(server.id)[1][0] != "ACTIVE")
    servers.wait(server.id, "ACTIVE", power_state=1)
    node = baremetal.get_node(target.id)
    if node.instance_id != server.id or node.provision_state != "active":
        fail(f"after the rebuild node {node.name} is {node.provision_state}, {node.instance_id}")
    say(f"node {node.name}: active again, instance_uuid = server id")

    say("openstack server delete")
    compute.delete_server(server)
    until("the server deleted", lambda: servers.look(server.id)[1][0] == "DELETED")

    def cleaned():
        node = baremetal.get_node(target.id)
        return node if node.provision_state == "available" and not node.instance_id else None

    node = until("the node cleaned back to available", cleaned)
    say(f"node {node.name}: {node.provision_state}, instance_uuid {node.instance_id}")
    vifs = list(baremetal.list_node_vifs(node))
    if vifs:
        fail(f"node {node.name} still has VIFs {vifs} after the server was deleted")
    say(f"node {node.name}: no VIF left")
    say("PASSED")


if __name__ == "__main__":
    main()
