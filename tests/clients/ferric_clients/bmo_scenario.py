"""The requests Metal3's baremetal-operator (BMO) sends to Ironic over a host's life, replayed
as BMO sends them: the same methods, paths, query strings and JSON bodies, at the microversion
BMO chooses, with the JSON-patch documents BMO's NodeUpdater builds from the node it has just
read.

Followed: github.com/metal3-io/baremetal-operator at commit
02aa5059e3482f9dc3b5115c3a45cec4b000ae16 (2026-08-20, "Merge pull request #3544"), through
gophercloud v2.13.0 (BMO's go.mod). Each step names the line of BMO that sends the request
(`pkg/provisioner/ironic/<file>:<line>`, `pkg/hardwareutils/bmc/<file>` for the
`driver_info` shapes) — read it there to see why BMO sends what it sends.

What differs from a real Metal3 deployment, and why:
- There is no BMC here, so the hosts registered with BMO's `ipmi`, `redfish` and
  `redfish-virtualmedia` BMC types (with exactly BMO's driver, interfaces and `driver_info`)
  are taken only as far as a node that was never managed goes (find, enroll, ports, configure,
  delete). The host that lives a whole life is registered with `fake-hardware` and BMO's
  bodies otherwise; where BMO would name a BMC's interface (out-of-band inspection `redfish`,
  RAID `redfish`), it names the `fake` one. Each such substitution says so in its step.
- BMO reads the node before nearly every action (ironic.go:162, once per reconcile); those
  reads are steps only where BMO decides on what it reads. The patches are computed here,
  as BMO's `getUpdateOperation` (clients/updateopts.go:103) computes them, from the node read
  just before, so a server that keeps a field differently gets a different patch: the golden
  comparison shows it.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from .steps import Expect, Run

BMO_COMMIT = "02aa5059e3482f9dc3b5115c3a45cec4b000ae16"

# clients/features.go:69 ChooseMicroversion: 1.110 when the server has 1.110 or later
# (HasDeploymentAbort); the first request (GetSupportedMicroversions) is sent at the
# baseline 1.89 (clients/client.go:114).
VERSION = "1.110"
BASELINE = "1.89"

NAMESPACE = "metal3"
HOST = "host-0"
NODE = f"{NAMESPACE}~{HOST}"  # ironic.go:1837 ironicNodeName: namespace + "~" + name
BOOT_MAC = "52:54:00:b3:00:01"
# The BareMetalHost's metadata.uid: BMO's instance_uuid (ironic.go:704).
HOST_UID = "7a1f4c2e-3b5d-4e6f-8a9b-0c1d2e3f4a5b"

# The images BMO points at. Ironic checks each URL (a HEAD request) before it uses it, so a
# small file server on 127.0.0.1 serves them (the files are placeholders: nothing boots).
IMAGE_FILES = {
    "ubuntu-24.04.qcow2": b"QFI\xfb placeholder disk image",
    "live.iso": b"placeholder live ISO",
    "ironic-python-agent.kernel": b"placeholder kernel",
    "ironic-python-agent.initramfs": b"placeholder initramfs",
    "ironic-python-agent.iso": b"placeholder agent ISO",
    "bios.bin": b"placeholder firmware",
}
IMAGE_SHA256 = hashlib.sha256(IMAGE_FILES["ubuntu-24.04.qcow2"]).hexdigest()
IMAGE_MD5 = hashlib.md5(IMAGE_FILES["ubuntu-24.04.qcow2"]).hexdigest()


class ImageServer:
    """Serves IMAGE_FILES over HTTP on a free loopback port until closed."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="ferric-bmo-images-")
        for name, content in IMAGE_FILES.items():
            (Path(self.directory) / name).write_bytes(content)

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass

        handler = functools.partial(Quiet, directory=self.directory)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> "ImageServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)

# What BMO reads of a node (the fields of gophercloud's nodes.Node it uses).
NODE_FIELDS = (
    "uuid",
    "name",
    "driver",
    "driver_info",
    "provision_state",
    "target_provision_state",
    "power_state",
    "target_power_state",
    "maintenance",
    "maintenance_reason",
    "fault",
    "last_error",
    "instance_uuid",
    "instance_info",
    "properties",
    "automated_clean",
    "disable_power_off",
    "network_data",
    "raid_config",
    "target_raid_config",
    "bios_interface",
    "boot_interface",
    "deploy_interface",
    "firmware_interface",
    "inspect_interface",
    "management_interface",
    "power_interface",
    "raid_interface",
    "vendor_interface",
)
PORT_FIELDS = ["node_uuid", "uuid", "address"]  # ironic.go:181


def node_view(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    return {key: node.get(key) for key in NODE_FIELDS}


def ports_view(answer: Any) -> Any:
    if not isinstance(answer, dict):
        return answer
    return {"ports": [{k: p.get(k) for k in PORT_FIELDS} for p in answer.get("ports", [])]}


def validate_view(answer: Any) -> Any:
    """Which interfaces validate (ironic.go:132 reads `result` and `reason` of each)."""
    if not isinstance(answer, dict):
        return answer
    return {kind: (value or {}).get("result") for kind, value in sorted(answer.items())}


def update_op(current: dict, name: str, desired: Any, path: str) -> dict | None:
    """clients/updateopts.go:103 getUpdateOperation: `add` (which also replaces) when the
    desired value is set and differs, `remove` when it is unset and the field is there."""
    present = name in current
    if desired is not None:
        if present and current[name] == desired:
            return None
        return {"op": "add", "path": path, "value": desired}
    if present:
        return {"op": "remove", "path": path}
    return None


class Updater:
    """clients/updateopts.go:143 NodeUpdater, over the node read just before."""

    def __init__(self, node: dict):
        self.node = node
        self.ops: list[dict] = []

    def _add(self, op):
        if op:
            self.ops.append(op)
        return self

    def top(self, name: str, desired: Any):  # updateopts.go:176 SetTopLevelOpt
        return self._add(update_op({name: self.node.get(name)}, name, desired, f"/{name}"))

    def section(self, section: str, settings: dict):  # updateopts.go:184-197
        current = self.node.get(section) or {}
        for name, desired in settings.items():
            self._add(update_op(current, name, desired, f"/{section}/{name}"))
        return self


def run(r: Run) -> None:
    with ImageServer() as images:
        replay(r, images.url)


def replay(r: Run, images: str) -> None:
    image_url = f"{images}/ubuntu-24.04.qcow2"
    live_iso_url = f"{images}/live.iso"
    deploy_kernel = f"{images}/ironic-python-agent.kernel"
    deploy_ramdisk = f"{images}/ironic-python-agent.initramfs"
    deploy_iso = f"{images}/ironic-python-agent.iso"
    uuids: dict[str, str] = {}
    r.normalizer.name(HOST_UID, "host.uid")

    def remember(key: str, placeholder: str):
        def register(value):
            if isinstance(value, dict) and value.get("uuid"):
                uuids[key] = value["uuid"]
                r.normalizer.name(value["uuid"], placeholder)

        return register

    def read(key: str) -> dict:
        """BMO's read of the node (ironic.go:162), not a step: the patch shows what it saw."""
        return r.node_fields(uuids.get(key, key)) or {}

    def step(name, title, method, path, expect, body=None, node=None, **kwargs):
        return r.http(
            f"bmo/{name}", title, method, path, expect, body=body, version=VERSION,
            node=node, **kwargs
        )

    def patch(name, title, key, updater: Updater, expect=None, **kwargs):
        """ironic.go:494 tryUpdateNode: no request at all when nothing changed."""
        if not updater.ops:
            return None
        return step(
            name, title, "PATCH", f"/v1/nodes/{uuids[key]}", expect or Expect(),
            body=updater.ops, node=uuids[key], project=node_view, **kwargs
        )

    def provision(name, title, key, body, wanted, expect=None):
        """ironic.go:527 ChangeProvisionState (202), then BMO polls until Ironic is done."""
        return step(
            name, title, "PUT", f"/v1/nodes/{uuids[key]}/states/provision",
            expect or Expect(status=202, state=wanted), body=body, node=uuids[key],
            wait_for=wanted,
        )

    # --- discovery ----------------------------------------------------------------------
    # clients/features.go:28 GetSupportedMicroversions: the versioned endpoint, at 1.89.
    r.http(
        "bmo/version-discovery",
        "read the API's microversion range (BMO needs 1.89, uses 1.110 when there)",
        "GET", "/v1/", Expect(status=200), version=BASELINE,
        project=lambda v: {"version": {k: (v.get("version") or {}).get(k)
                                       for k in ("id", "min_version", "status")}}
        if isinstance(v, dict) else v,
    )

    # --- registration, per BMC type (register.go Register) -------------------------------
    bmc_types = [
        # pkg/hardwareutils/bmc/ipmi.go: ipmi://192.0.2.10:623 → driver ipmi, boot ipxe,
        # raid no-raid, driver_info ipmi_* with the port and privilege level as strings.
        (
            "ipmi",
            {
                "driver": "ipmi",
                "boot_interface": "ipxe",
                "raid_interface": "no-raid",
                "driver_info": {
                    "ipmi_port": "623",
                    "ipmi_username": "admin",
                    "ipmi_password": "password",
                    "ipmi_address": "192.0.2.10",
                    "ipmi_priv_level": "ADMINISTRATOR",
                },
            },
            {"deploy_kernel": deploy_kernel, "deploy_ramdisk": deploy_ramdisk},
        ),
        # pkg/hardwareutils/bmc/redfish.go: redfish://192.0.2.11/redfish/v1/Systems/1 →
        # driver redfish, boot ipxe, firmware redfish, raid redfish, redfish_address https://.
        (
            "redfish",
            {
                "driver": "redfish",
                "boot_interface": "ipxe",
                "firmware_interface": "redfish",
                "raid_interface": "redfish",
                "driver_info": {
                    "redfish_username": "admin",
                    "redfish_password": "password",
                    "redfish_address": "https://192.0.2.11",
                    "redfish_system_id": "/redfish/v1/Systems/1",
                },
            },
            {"deploy_kernel": deploy_kernel, "deploy_ramdisk": deploy_ramdisk},
        ),
        # pkg/hardwareutils/bmc/redfish_virtualmedia.go: redfish-virtualmedia+http://… with
        # disableCertificateVerification → boot redfish-virtual-media, redfish_verify_ca
        # false; it takes an ISO deploy image (SupportsISOPreprovisioningImage).
        (
            "redfish-virtualmedia",
            {
                "driver": "redfish",
                "boot_interface": "redfish-virtual-media",
                "firmware_interface": "redfish",
                "raid_interface": "redfish",
                "driver_info": {
                    "redfish_username": "admin",
                    "redfish_password": "password",
                    "redfish_address": "http://192.0.2.12:8000",
                    "redfish_system_id": "/redfish/v1/Systems/abc",
                    "redfish_verify_ca": False,
                },
            },
            {"deploy_iso": deploy_iso},
        ),
    ]
    for index, (bmc, fields, deploy_image) in enumerate(bmc_types, start=1):
        name = f"{NAMESPACE}~{bmc}-host"
        mac = f"52:54:00:b3:01:0{index}"
        key = f"reg-{bmc}"
        # ironic.go:219 findExistingHost: by name ("namespace~name"), then the bare name.
        step(f"register-{bmc}-find-by-name", f"look for the {bmc} host by name", "GET",
             f"/v1/nodes/{name}", Expect(ok=False, status=404))
        step(f"register-{bmc}-find-by-bare-name", "…and by the host's bare name", "GET",
             f"/v1/nodes/{bmc}-host", Expect(ok=False, status=404))
        # ironic.go:194 getPorts(address=MAC): is the boot MAC someone else's?
        step(f"register-{bmc}-find-by-mac", "look for a port with the boot MAC", "GET",
             f"/v1/ports?address={mac}&fields=node_uuid,uuid,address",
             Expect(status=200, fields={"ports": []}), project=ports_view)
        # register.go:301 enrollNode (body: register.go:282-298 nodes.CreateOpts); the
        # deploy interface is unset for a disk image (ironic.go:842), the inspect interface
        # `agent` (register.go:270 inspectInterfaceForMode, not fast inspection).
        body = {
            **fields,
            "name": name,
            "inspect_interface": "agent",
            "disable_power_off": False,
            "properties": {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"},
        }
        # register.go:301 nodes.Create with that body.
        step(f"register-{bmc}-create", f"enroll the {bmc} host with BMO's interfaces", "POST",
             "/v1/nodes", Expect(status=201, fields={
                 "name": name, "driver": fields["driver"], "provision_state": "enroll",
                 "boot_interface": fields["boot_interface"],
                 "raid_interface": fields["raid_interface"], "inspect_interface": "agent",
             }), body=body, register=remember(key, f"{bmc}.uuid"), project=node_view)
        if key not in uuids:
            continue
        # register.go:340 createPortsForNode: the node's ports, then (createNodePort,
        # ironic.go:275) the MAC's, then ironic.go:288 ports.Create with pxe_enabled.
        step(f"register-{bmc}-ports-of-node", "list the new node's ports", "GET",
             f"/v1/ports?node_uuid={uuids[key]}&fields=node_uuid,uuid,address",
             Expect(status=200, fields={"ports": []}), project=ports_view)
        step(f"register-{bmc}-port-by-mac", "check nobody has the MAC", "GET",
             f"/v1/ports?address={mac}&fields=node_uuid,uuid,address",
             Expect(status=200, fields={"ports": []}), project=ports_view)
        # ironic.go:288 ports.Create (createNodePort).
        step(f"register-{bmc}-port-create", "create the boot port", "POST", "/v1/ports",
             Expect(status=201, fields={"address": mac, "pxe_enabled": True}),
             body={"node_uuid": uuids[key], "address": mac, "pxe_enabled": True},
             register=remember(f"{key}-port", f"{bmc}.port.uuid"),
             project=lambda p: {k: p.get(k) for k in ("address", "node_uuid", "pxe_enabled")})
        # ironic.go:307 configureNode: the deploy image into driver_info (ironic.go:311,
        # setDeployImage: kernel+ramdisk, or an ISO for virtual media), automated_clean
        # (ironic.go:313), capabilities (ironic.go:323).
        node = read(key)
        update = (
            Updater(node)
            .section("driver_info", {"deploy_kernel": None, "deploy_ramdisk": None,
                                     "deploy_iso": None, "kernel_append_params": None,
                                     **deploy_image})
            .top("automated_clean", True)
            .section("properties", {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"})
        )
        patch(f"register-{bmc}-configure", "set the deploy image and automated cleaning", key,
              update, Expect(status=200, fields={"automated_clean": True}))
        # ironic.go:1582 realDelete: a node still in enroll is deleted at once.
        step(f"register-{bmc}-delete", f"delete the {bmc} host", "DELETE",
             f"/v1/nodes/{uuids[key]}", Expect(status=204))

    # --- the host that lives a whole life (fake-hardware) --------------------------------
    key = "host"
    # ironic.go:219 findExistingHost: nodes.Get by "namespace~name", then by the bare name.
    step("find-by-name", "look for the host by name", "GET", f"/v1/nodes/{NODE}",
         Expect(ok=False, status=404))
    step("find-by-bare-name", "…and by its bare name", "GET", f"/v1/nodes/{HOST}",
         Expect(ok=False, status=404))
    # ironic.go:236 findExistingHost → ironic.go:194 getPorts(address=MAC, fields=).
    step("find-by-mac", "look for a port with the boot MAC", "GET",
         f"/v1/ports?address={BOOT_MAC}&fields=node_uuid,uuid,address",
         Expect(status=200, fields={"ports": []}), project=ports_view)
    # register.go:301, with fake-hardware instead of a BMC's driver (no BMC here) and BMO's
    # boot interface for ipmi and redfish hosts, ipxe (the live ISO needs it: Ironic's ramdisk
    # deploy refuses a boot interface without the ramdisk_boot capability, like fake's).
    step("create", "enroll the host (fake-hardware, boot ipxe, inspect agent)", "POST",
         "/v1/nodes",
         Expect(status=201, fields={"name": NODE, "provision_state": "enroll",
                                    "boot_interface": "ipxe", "inspect_interface": "agent"}),
         body={"driver": "fake-hardware", "name": NODE, "driver_info": {},
               "boot_interface": "ipxe",
               "inspect_interface": "agent", "disable_power_off": False,
               "properties": {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}},
         register=remember(key, "node.uuid"), project=node_view)
    host = uuids[key]
    # ironic.go:245: the node is found by name from now on (findExistingHost).
    step("get-by-name", "read the host by its `~` name", "GET", f"/v1/nodes/{NODE}",
         Expect(status=200, fields={"name": NODE, "uuid": "{node.uuid}"}), project=node_view)
    step("ports-of-node", "list the host's ports", "GET",
         f"/v1/ports?node_uuid={host}&fields=node_uuid,uuid,address",
         Expect(status=200, fields={"ports": []}), project=ports_view)
    step("port-create", "create the boot port (ironic.go:288)", "POST", "/v1/ports",
         Expect(status=201, fields={"address": BOOT_MAC, "pxe_enabled": True}),
         body={"node_uuid": host, "address": BOOT_MAC, "pxe_enabled": True},
         register=remember("port", "port.uuid"),
         project=lambda p: {k: p.get(k) for k in ("address", "node_uuid", "pxe_enabled")})
    step("port-by-mac", "find the port by MAC (fields=)", "GET",
         f"/v1/ports?address={BOOT_MAC}&fields=node_uuid,uuid,address",
         Expect(status=200, fields={"ports": [{"node_uuid": "{node.uuid}",
                                               "uuid": "{port.uuid}",
                                               "address": BOOT_MAC}]}),
         project=ports_view)
    # register.go:202: preprovisioning network_data (no image builder), then register.go:240
    # manage.
    patch("network-data", "set the preprovisioning network_data", key,
          Updater(read(key)).top("network_data", {
              "links": [{"id": "eth0", "type": "phy", "ethernet_mac_address": BOOT_MAC}],
              "networks": [{"id": "provisioning", "link": "eth0", "type": "ipv4_dhcp",
                            "network_id": "provisioning"}],
              "services": [],
          }), Expect(status=200))
    provision("manage", "manage the host (register.go:240)", key, {"target": "manage"},
              {"provision_state": "manageable"})
    patch("configure", "deploy image, automated cleaning, capabilities (ironic.go:307)", key,
          Updater(read(key))
          .section("driver_info", {"deploy_kernel": deploy_kernel,
                                   "deploy_ramdisk": deploy_ramdisk, "deploy_iso": None,
                                   "kernel_append_params": None})
          .top("automated_clean", True)
          .section("properties", {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}),
          Expect(status=200, fields={"automated_clean": True}))

    # --- inspection (inspecthardware.go) ------------------------------------------------
    # inspecthardware.go:37-48: capabilities and the inspect interface, then :65 inspect.
    # BMO's in-band inspection (inspect interface `agent`) and its abort (inspecthardware.go:23)
    # are not replayed: Ironic's fake boot interface cannot start in-band inspection
    # ("does not support validate_inspection"), and there is no ramdisk here. With fast
    # inspection BMO names the BMC's out-of-band inspect interface (`redfish`); here the
    # fake one.
    patch("inspect-interface", "out-of-band inspection (`fake` for BMO's `redfish`)", key,
          Updater(read(key)).top("inspect_interface", "fake"),
          Expect(status=200, fields={"inspect_interface": "fake"}))
    provision("inspect", "inspect (inspecthardware.go:65)", key, {"target": "inspect"},
              {"provision_state": "manageable"})
    # inspecthardware.go:139 GetInventory.
    # The fake inspect interface stores no inventory: both answer 404.
    step("inventory", "read the inspection inventory", "GET", f"/v1/nodes/{host}/inventory",
         Expect(ok=False, status=404))

    # --- firmware settings, components, RAID (ironic.go Prepare) -------------------------
    # ironic.go:736 (with schema) and :738; ironic.go:779 firmware components.
    step("bios-settings-detail", "read BIOS settings with their schema", "GET",
         f"/v1/nodes/{host}/bios?detail=True", Expect(status=200))
    step("bios-settings", "read BIOS settings", "GET", f"/v1/nodes/{host}/bios",
         Expect(status=200))
    step("firmware-components", "read firmware components", "GET",
         f"/v1/nodes/{host}/firmware", Expect(status=200))
    # raid.go:50: the RAID interface BMO wants (the BMC's, `redfish`; here `fake`), then
    # raid.go:57 SetRAIDConfig: one RAID-1 root volume of all the space (gophercloud sends
    # size_gb "MAX" for an unset size).
    # (fake-hardware's RAID interface is `fake` already: no PATCH.)
    patch("raid-interface", "the RAID interface (`fake` for BMO's `redfish`)", key,
          Updater(read(key)).top("raid_interface", "fake"), Expect(status=200))
    step("raid-target", "set the target RAID configuration (raid.go:57)", "PUT",
         f"/v1/nodes/{host}/states/raid", Expect(status=204),
         body={"logical_disks": [{"size_gb": "MAX", "raid_level": "1",
                                  "is_root_volume": True, "controller": "RAID.Integrated.1-1",
                                  "physical_disks": ["Disk.Bay.0", "Disk.Bay.1"]}]})
    # ironic.go:1045 startManualCleaning with ironic.go:964 buildManualCleaningSteps: BIOS
    # apply_configuration (ironic.go:977), firmware update (:992). BMO puts the RAID steps
    # (raid.go:262 delete_configuration, :277 create_configuration) first; Ironic's fake RAID
    # interface has no such clean steps, so they are left out here.
    provision("manual-clean", "BIOS settings and firmware in one manual cleaning", key,
              {"target": "clean", "clean_steps": [
                  {"interface": "bios", "step": "apply_configuration",
                   "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"},
                                         {"name": "NumCores", "value": 8}]}},
                  {"interface": "firmware", "step": "update",
                   "args": {"settings": [{"component": "bios",
                                          "url": f"{images}/bios.bin"}]}},
              ]}, {"provision_state": "manageable"})
    # ironic.go:1063 Prepare's getNode (ironic.go:162): is cleaning over (manageable)?
    step("after-manual-clean", "read the node after manual cleaning", "GET",
         f"/v1/nodes/{host}", Expect(status=200, fields={"provision_state": "manageable"}),
         node=host, project=node_view)
    # ironic.go:1263 Provision from manageable: provide (automated cleaning, fake).
    provision("provide", "provide (automated cleaning)", key, {"target": "provide"},
              {"provision_state": "available"})

    # --- provisioning a disk image (ironic.go:698 getInstanceUpdateOpts) -----------------
    def instance_update(node: dict) -> Updater:
        return (
            Updater(node)
            .top("instance_uuid", HOST_UID)  # ironic.go:704
            .section("instance_info", {  # ironic.go:706
                "capabilities": {},
                "root_device": {"name": "s== /dev/vda"},
            })
        )

    # ironic.go:596 setDirectDeployUpdateOptsForNode with an sha256 checksum
    # (image_os_hash_*; image_checksum removed), disk format qcow2.
    update = instance_update(read(key)).section("instance_info", {
        "boot_iso": None, "image_source": image_url, "image_disk_format": "qcow2",
        "image_pull_secret": None, "image_checksum": None, "image_os_hash_algo": "sha256",
        "image_os_hash_value": IMAGE_SHA256,
    }).section("driver_info", {"force_persistent_boot_device": "Default"})
    patch("deploy-instance-info", "image, checksum, root device hint (ironic.go:494)", key,
          update, Expect(status=200, fields={"instance_uuid": "{host.uid}"}))
    # ironic.go:132 validateNode.
    step("deploy-validate", "validate before deploying", "GET", f"/v1/nodes/{host}/validate",
         Expect(status=200), project=validate_view)
    # ironic.go:1292 with ironic.go:1133 getConfigDrive: a JSON config drive.
    provision("deploy", "deploy with a JSON config drive (ironic.go:1292)", key, {
        "target": "active",
        "configdrive": {
            "meta_data": {"uuid": HOST_UID, "metal3-namespace": NAMESPACE,
                          "metal3-name": HOST, "local-hostname": HOST,
                          "local_hostname": HOST, "name": HOST},
            "network_data": {"links": [], "networks": [], "services": []},
            "user_data": "#cloud-config\nhostname: host-0\n",
        },
    }, {"provision_state": "active"})

    # --- power (ironic.go:1658 changePower) ----------------------------------------------
    # ironic.go:1779 PowerOff, soft by default with BMO's 180 s timeout (ironic.go:36).
    step("power-soft-off", "soft power off", "PUT", f"/v1/nodes/{host}/states/power",
         Expect(status=202, state={"power_state": "power off"}),
         body={"target": "soft power off", "timeout": 180}, node=host,
         wait_for={"power_state": "power off"})
    step("power-on", "power on", "PUT", f"/v1/nodes/{host}/states/power",
         Expect(status=202, state={"power_state": "power on"}), body={"target": "power on"},
         node=host, wait_for={"power_state": "power on"})
    # ironic.go:1828 PowerOff with rebootMode hard on a host with DisablePowerOff: BMO asks
    # for "rebooting" instead of "power off" (ironic.go:1818 "soft rebooting" for soft).
    step("power-reboot", "hard reboot (rebootMode hard)", "PUT",
         f"/v1/nodes/{host}/states/power", Expect(status=202), body={"target": "rebooting"},
         node=host, wait_for={"power_state": "power on"})
    # register.go:156: disable_power_off on a host whose power must stay on; Ironic then
    # refuses to power it off.
    patch("disable-power-off", "disable power off", key,
          Updater(read(key)).top("disable_power_off", True),
          Expect(status=200, fields={"disable_power_off": True}))
    # ironic.go:1826 PowerOff's hard target, which BMO sends when the node it read had
    # DisablePowerOff false; Ironic's 409 makes changePower retry later (ironic.go:1674).
    step("power-off-refused", "power off a host that must stay on", "PUT",
         f"/v1/nodes/{host}/states/power", Expect(ok=False, status=409),
         body={"target": "power off"}, node=host)
    # register.go:156 again, with the host's DisablePowerOff cleared.
    patch("enable-power-off", "allow power off again", key,
          Updater(read(key)).top("disable_power_off", False),
          Expect(status=200, fields={"disable_power_off": False}))

    # --- servicing (servicing.go) --------------------------------------------------------
    provision("service", "servicing: BIOS settings on the active host (servicing.go:55)",
              key, {"target": "service", "service_steps": [
                  {"interface": "bios", "step": "apply_configuration",
                   "args": {"settings": [{"name": "ProcTurboMode", "value": "Enabled"}]}},
              ]}, {"provision_state": "active"})

    # --- deprovisioning (ironic.go:1375) -------------------------------------------------
    provision("deprovision", "deprovision (ironic.go:1473)", key, {"target": "deleted"},
              {"provision_state": "available"})

    # --- live ISO: the ramdisk deploy interface (ironic.go:573) --------------------------
    # A live-ISO host runs from its ISO, there is no disk to clean (and the ramdisk deploy
    # interface cleans through the agent): its cleaning mode is disabled, which BMO applies
    # as automated_clean false (ironic.go:1361 syncAutomatedClean).
    patch("automated-clean-off", "automated cleaning disabled", key,
          Updater(read(key)).top("automated_clean", False),
          Expect(status=200, fields={"automated_clean": False}))
    update = instance_update(read(key)).section("instance_info", {
        "boot_iso": live_iso_url, "image_source": None, "image_os_hash_value": None,
        "image_os_hash_algo": None, "image_checksum": None,
    }).top("deploy_interface", "ramdisk").section(
        "driver_info", {"force_persistent_boot_device": "Default"})
    # ironic.go:573 setLiveIsoUpdateOptsForNode through ironic.go:494 tryUpdateNode.
    patch("live-iso-instance-info", "boot_iso and deploy_interface ramdisk", key, update,
          Expect(status=200, fields={"deploy_interface": "ramdisk"}))
    step("live-iso-validate", "validate the live-ISO host", "GET",
         f"/v1/nodes/{host}/validate", Expect(status=200), project=validate_view)
    # ironic.go:1292: getConfigDrive returns an empty ConfigDrive for a live ISO
    # (ironic.go:1134), which gophercloud sends as `{}`.
    provision("live-iso-deploy", "boot the live ISO", key,
              {"target": "active", "configdrive": {}}, {"provision_state": "active"})
    provision("live-iso-deprovision", "deprovision the live ISO", key, {"target": "deleted"},
              {"provision_state": "available"})

    # --- custom deploy: the custom-agent deploy interface (ironic.go:649) ----------------
    update = instance_update(read(key)).section("instance_info", {
        "boot_iso": None, "image_checksum": None, "image_source": image_url,
        "image_os_hash_algo": "md5", "image_os_hash_value": IMAGE_MD5,
        "image_disk_format": None, "image_pull_secret": None,
    }).top("deploy_interface", "custom-agent")
    patch("custom-deploy-instance-info", "deploy_interface custom-agent", key, update,
          Expect(status=200, fields={"deploy_interface": "custom-agent"}))
    # ironic.go:1292 with ironic.go:1187 getCustomDeploySteps: the host's method as a
    # deploy step at priority 80; the agent that would run it never comes.
    provision("custom-deploy", "deploy with the custom deploy step", key, {
        "target": "active",
        "configdrive": {"meta_data": {"uuid": HOST_UID, "name": HOST}},
        "deploy_steps": [{"interface": "deploy", "step": "install_coreos", "args": {},
                          "priority": 80}],
    }, {"provision_state": "wait call-back"})
    # ironic.go:1309 Provision in wait call-back with forceReboot (or :1544 on delete).
    provision("custom-deploy-abandon", "give up on the waiting deploy", key,
              {"target": "deleted"}, {"provision_state": "available"})
    # ironic.go:635: back to a disk image, the deploy interface is removed (its default).
    patch("deploy-interface-reset", "back to the default deploy interface", key,
          Updater(read(key)).top("deploy_interface", None), Expect(status=200))

    # --- maintenance, capacity, deletion -------------------------------------------------
    step("maintenance-set", "set maintenance (ironic.go:1328)", "PUT",
         f"/v1/nodes/{host}/maintenance", Expect(status=202, state={"maintenance": True}),
         body={"reason": "detached by BMO"}, node=host)
    step("maintenance-unset", "unset maintenance (ironic.go:1330)", "DELETE",
         f"/v1/nodes/{host}/maintenance", Expect(status=202, state={"maintenance": False}),
         node=host)
    # ironic.go:1868 loadBusyHosts (HasCapacity): one `fields` value with commas.
    step("busy-hosts", "list nodes for the provisioning capacity check", "GET",
         "/v1/nodes?fields=uuid,name,provision_state,boot_interface", Expect(status=200),
         project=lambda v: {"nodes": [{k: n.get(k) for k in
                                       ("uuid", "name", "provision_state", "boot_interface")}
                                      for n in (v or {}).get("nodes", [])]})
    # ironic.go:1528 realDelete from available: instance_uuid removed, then :1582 delete.
    patch("delete-instance-uuid", "forget the instance", key,
          Updater(read(key)).top("instance_uuid", None), Expect(status=200))
    step("delete", "delete the host (ironic.go:1582)", "DELETE", f"/v1/nodes/{host}",
         Expect(status=204))
    step("deleted", "the host is gone", "GET", f"/v1/nodes/{NODE}",
         Expect(ok=False, status=404))
