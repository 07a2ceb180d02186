"""The same scenario through openstacksdk's `conn.baremetal` proxy, the library behind Metal3's
and Ansible's OpenStack modules. Each step is one SDK call; its result is recorded as the
resource's dict (or the exception's class, status and message).
"""

from __future__ import annotations

from typing import Any

from .steps import Expect, Run

NODE = "sdk-node"
ABORT_NODE = "sdk-abort"
MAC = "52:54:00:65:43:21"
FAKE_CLEAN_STEPS = [{"interface": "bios", "step": "factory_reset"}]
AGENT_CLEAN_STEPS = [{"interface": "deploy", "step": "erase_devices_metadata"}]


def settled_later(node) -> None:
    """Drops the node a provisioning call returned without waiting: it is a snapshot taken
    mid-transition, different on every run. The step's `after` state is read once settled."""
    return None


def connect(endpoint: str, api_version: str | None = None):
    import openstack.connection  # imported here: only the clients venv has it

    options: dict[str, Any] = {
        "auth_type": "none",
        "baremetal_endpoint_override": endpoint,
    }
    if api_version:
        options["baremetal_api_version"] = api_version
    return openstack.connection.Connection(**options)


def run(r: Run) -> None:
    conn = connect(r.proxy.url)
    bm = conn.baremetal
    timeout = r.wait_timeout

    def remember(placeholder: str):
        def register(value):
            if isinstance(value, dict) and value.get("id"):
                r.normalizer.name(value["id"], placeholder)

        return register

    # --- enrolment and reading -----------------------------------------------------------
    r.sdk(
        "sdk/node-create",
        "create a fake-hardware node with a name",
        f"create_node(driver='fake-hardware', name={NODE!r})",
        lambda: bm.create_node(driver="fake-hardware", name=NODE),
        Expect(fields={"name": NODE, "driver": "fake-hardware", "provision_state": "enroll"}),
        register=remember("node.uuid"),
    )
    r.sdk("sdk/node-list", "list nodes", "list(nodes())", lambda: list(bm.nodes()), Expect())
    r.sdk(
        "sdk/node-list-details",
        "list nodes with every field",
        "list(nodes(details=True))",
        lambda: list(bm.nodes(details=True)),
        Expect(),
    )
    r.sdk(
        "sdk/node-list-fields",
        "list nodes with chosen fields",
        "list(nodes(fields=['uuid', 'name', 'provision_state']))",
        lambda: list(bm.nodes(fields=["uuid", "name", "provision_state"])),
        Expect(),
    )
    _, node = r.sdk(
        "sdk/node-get-by-name",
        "get a node by name",
        f"get_node({NODE!r})",
        lambda: bm.get_node(NODE),
        Expect(fields={"name": NODE}),
    )
    node_id = getattr(node, "id", None) or "uuid-of-sdk-node"
    r.sdk(
        "sdk/node-get-by-uuid",
        "get a node by UUID",
        "get_node('{node.uuid}')",
        lambda: bm.get_node(node_id),
        Expect(fields={"name": NODE}),
    )
    r.sdk(
        "sdk/node-update",
        "replace extra, properties and driver_info (with a password)",
        "update_node(NODE, extra={'rack': 'r1'}, properties={'cpus': 4}, "
        "driver_info={'ipmi_username': 'admin', 'ipmi_password': 's3cret'})",
        lambda: bm.update_node(
            NODE,
            extra={"rack": "r1"},
            properties={"cpus": 4},
            driver_info={"ipmi_username": "admin", "ipmi_password": "s3cret"},
        ),
        Expect(
            fields={
                "extra": {"rack": "r1"},
                "properties": {"cpus": 4},
                "driver_info": {"ipmi_username": "admin", "ipmi_password": "******"},
            }
        ),
    )
    r.sdk(
        "sdk/node-patch-remove",
        "JSON-patch away the extra key and the property",
        "patch_node(NODE, [remove /extra/rack, remove /properties/cpus])",
        lambda: bm.patch_node(
            NODE,
            [{"op": "remove", "path": "/extra/rack"}, {"op": "remove", "path": "/properties/cpus"}],
        ),
        Expect(fields={"extra": {}, "properties": {}}),
    )

    # --- ports ---------------------------------------------------------------------------
    _, port = r.sdk(
        "sdk/port-create",
        "create a port on the node",
        f"create_port(address={MAC!r}, node_uuid='{{node.uuid}}')",
        lambda: bm.create_port(address=MAC, node_uuid=node_id),
        Expect(fields={"address": MAC}),
        register=remember("port.uuid"),
    )
    r.sdk("sdk/port-list", "list ports", "list(ports())", lambda: list(bm.ports()), Expect())
    r.sdk(
        "sdk/port-list-node-details",
        "list the node's ports with every field",
        f"list(ports(node={NODE!r}, details=True))",
        lambda: list(bm.ports(node=NODE, details=True)),
        Expect(),
    )
    r.sdk(
        "sdk/port-create-duplicate-mac",
        "a second port with the same MAC is refused (409)",
        f"create_port(address={MAC!r}, node_uuid='{{node.uuid}}')",
        lambda: bm.create_port(address=MAC, node_uuid=node_id),
        Expect(ok=False, status=409, message=[f"A port with MAC address {MAC} already exists."]),
    )
    r.sdk(
        "sdk/port-delete",
        "delete the port",
        "delete_port('{port.uuid}')",
        lambda: bm.delete_port(getattr(port, "id", None) or "uuid-of-port", ignore_missing=False),
        Expect(),
    )

    # --- drivers -------------------------------------------------------------------------
    r.sdk("sdk/driver-list", "list drivers", "list(drivers())", lambda: list(bm.drivers()),
          Expect())
    r.sdk(
        "sdk/driver-get",
        "get the fake-hardware driver",
        "get_driver('fake-hardware')",
        lambda: bm.get_driver("fake-hardware"),
        Expect(fields={"name": "fake-hardware"}),
    )

    # --- power, boot device, maintenance, validation -------------------------------------
    r.sdk(
        "sdk/node-power-on",
        "power on and wait",
        f"set_node_power_state(NODE, 'power on', wait=True, timeout={timeout:g})",
        lambda: bm.set_node_power_state(NODE, "power on", wait=True, timeout=timeout),
        Expect(state={"power_state": "power on"}),
        node=NODE,
    )
    r.sdk(
        "sdk/node-power-off",
        "power off and wait",
        f"set_node_power_state(NODE, 'power off', wait=True, timeout={timeout:g})",
        lambda: bm.set_node_power_state(NODE, "power off", wait=True, timeout=timeout),
        Expect(state={"power_state": "power off"}),
        node=NODE,
    )
    r.sdk(
        "sdk/node-boot-device-set",
        "set the boot device to pxe, persistently",
        "set_node_boot_device(NODE, 'pxe', persistent=True)",
        lambda: bm.set_node_boot_device(NODE, "pxe", persistent=True),
        Expect(),
    )
    r.sdk(
        "sdk/node-boot-device-get",
        "get the boot device",
        "get_node_boot_device(NODE)",
        lambda: bm.get_node_boot_device(NODE),
        # Ironic's fake management interface always reports pxe, not persistent.
        Expect(fields={"boot_device": "pxe"}),
    )
    r.sdk(
        "sdk/node-boot-device-supported",
        "list the supported boot devices",
        "get_node_supported_boot_devices(NODE)",
        lambda: bm.get_node_supported_boot_devices(NODE),
        Expect(),
    )
    r.sdk(
        "sdk/node-maintenance-set",
        "maintenance on, with a reason",
        "set_node_maintenance(NODE, reason='sdk scenario')",
        lambda: bm.set_node_maintenance(NODE, reason="sdk scenario"),
        Expect(state={"maintenance": True, "maintenance_reason": "sdk scenario"}),
        node=NODE,
    )
    r.sdk(
        "sdk/node-maintenance-unset",
        "maintenance off",
        "unset_node_maintenance(NODE)",
        lambda: bm.unset_node_maintenance(NODE),
        Expect(state={"maintenance": False, "maintenance_reason": None}),
        node=NODE,
    )
    r.sdk(
        "sdk/node-validate",
        "validate every interface (none required)",
        "validate_node(NODE, required=())",
        lambda: bm.validate_node(NODE, required=()),
        Expect(),
    )

    # --- the provisioning lifecycle ------------------------------------------------------
    def verb(name, title, target, state, node=NODE, **kwargs):
        shown = "".join(f", {k}={v!r}" for k, v in kwargs.items())
        r.sdk(
            name,
            title,
            f"set_node_provision_state({'NODE' if node == NODE else 'ABORT_NODE'}, "
            f"{target!r}{shown}, wait=True, timeout={timeout:g})",
            lambda: bm.set_node_provision_state(node, target, wait=True, timeout=timeout,
                                                **kwargs),
            Expect(state=state),
            node=node,
        )

    verb("sdk/node-manage", "enroll -> manageable", "manage", {"provision_state": "manageable"})
    verb("sdk/node-inspect", "inspect (fake) -> manageable", "inspect",
         {"provision_state": "manageable"})
    verb("sdk/node-clean", "manual cleaning with a fake step", "clean",
         {"provision_state": "manageable", "last_error": None}, clean_steps=FAKE_CLEAN_STEPS)
    verb("sdk/node-provide", "manageable -> available", "provide",
         {"provision_state": "available"})
    r.sdk(
        "sdk/node-inspect-illegal",
        "inspect while available is an illegal transition (400)",
        "set_node_provision_state(NODE, 'inspect')",
        lambda: bm.set_node_provision_state(NODE, "inspect"),
        Expect(
            ok=False,
            status=400,
            message=[
                'The requested action "inspect" can not be performed on node '
                '"{node.uuid}" while it is in state "available".'
            ],
            state={"provision_state": "available"},
        ),
        node=NODE,
    )
    verb("sdk/node-deploy", "available -> active", "active", {"provision_state": "active"})
    verb("sdk/node-rescue", "active -> rescue", "rescue", {"provision_state": "rescue"},
         rescue_password="r3scue")
    r.sdk(
        "sdk/node-unrescue",
        "rescue -> active (the SDK cannot wait for unrescue: polled by the runner)",
        "set_node_provision_state(NODE, 'unrescue')",
        lambda: settled_later(bm.set_node_provision_state(NODE, "unrescue")),
        Expect(state={"provision_state": "active"}),
        node=NODE,
        wait_for={"provision_state": "active"},
    )
    verb("sdk/node-undeploy", "active -> available", "deleted", {"provision_state": "available"})

    # --- abort: a node parked in `clean wait` --------------------------------------------
    r.sdk(
        "sdk/abort-node-create",
        "a node with the direct (agent) deploy interface",
        f"create_node(driver='fake-hardware', name={ABORT_NODE!r}, deploy_interface='direct')",
        lambda: bm.create_node(driver="fake-hardware", name=ABORT_NODE, deploy_interface="direct"),
        Expect(fields={"deploy_interface": "direct"}),
        register=remember("abort_node.uuid"),
    )
    verb("sdk/abort-node-manage", "enroll -> manageable", "manage",
         {"provision_state": "manageable"}, node=ABORT_NODE)
    r.sdk(
        "sdk/abort-node-clean",
        "manual cleaning that waits for the agent -> clean wait",
        "set_node_provision_state(ABORT_NODE, 'clean', clean_steps=[deploy.erase_devices_metadata])",
        lambda: settled_later(
            bm.set_node_provision_state(ABORT_NODE, "clean", clean_steps=AGENT_CLEAN_STEPS)
        ),
        Expect(state={"provision_state": "clean wait", "target_provision_state": "manageable"}),
        node=ABORT_NODE,
        wait_for={"provision_state": "clean wait"},
    )
    r.sdk(
        "sdk/abort-node-abort",
        "abort cleaning -> clean failed",
        "set_node_provision_state(ABORT_NODE, 'abort')",
        lambda: settled_later(bm.set_node_provision_state(ABORT_NODE, "abort")),
        Expect(
            state={
                "provision_state": "clean failed",
                "last_error": "By request, the clean operation was aborted",
            }
        ),
        node=ABORT_NODE,
        wait_for={"provision_state": "clean failed"},
    )
    verb("sdk/abort-node-manage-again", "clean failed -> manageable", "manage",
         {"provision_state": "manageable"}, node=ABORT_NODE)

    # --- errors and microversions --------------------------------------------------------
    r.sdk(
        "sdk/node-get-unknown",
        "an unknown node (404)",
        "get_node('no-such-node')",
        lambda: bm.get_node("no-such-node"),
        Expect(ok=False, status=404, message=["Node no-such-node could not be found."]),
    )
    r.sdk(
        "sdk/microversion-too-high",
        "a connection that asks for microversion 1.999 is refused when first used",
        "Connection(baremetal_api_version='1.999').baremetal.get_node(NODE)",
        lambda: connect(r.proxy.url, api_version="1.999").baremetal.get_node(NODE),
        Expect(
            ok=False,
            message=["A default microversion for service baremetal of 1.999 was requested"],
        ),
    )
    r.sdk(
        "sdk/node-delete",
        "delete both nodes",
        "[delete_node(n, ignore_missing=False) for n in (NODE, ABORT_NODE)]",
        lambda: [bm.delete_node(n, ignore_missing=False) for n in (NODE, ABORT_NODE)],
        Expect(),
    )
    r.sdk("sdk/node-list-empty", "no nodes are left", "list(nodes())", lambda: list(bm.nodes()),
          Expect())
