"""The `baremetal` CLI scenario: one node's life through every command an operator uses, then
the error cases. Steps run in order and later steps depend on earlier ones (a node that never
reached `manageable` cannot be inspected), so read a failure report from the top.

Two nodes: `clients-node` (fake-hardware with its default, fake interfaces) goes through the
whole lifecycle; `clients-abort` uses the `direct` deploy interface, so cleaning waits in
`clean wait` for an agent that never comes — the one way to park a node in a state that
`abort` applies to. (Ironic 39 drops the reserved `hold`/`wait` steps from manual cleaning
and servicing before running them, and the fake interfaces finish synchronously.)
"""

from __future__ import annotations

from .steps import Expect, Run

NODE = "clients-node"
ABORT_NODE = "clients-abort"
MAC = "52:54:00:12:34:56"
FAKE_CLEAN_STEPS = '[{"interface": "bios", "step": "factory_reset"}]'
AGENT_CLEAN_STEPS = '[{"interface": "deploy", "step": "erase_devices_metadata"}]'


def run(r: Run) -> None:
    wait = ["--wait", str(int(r.wait_timeout))]
    ids: dict[str, str] = {}

    def remember(key: str, placeholder: str):
        def register(output):
            if isinstance(output, dict) and output.get("uuid"):
                ids[key] = output["uuid"]
                r.normalizer.name(output["uuid"], placeholder)

        return register

    def node_uuid(name: str) -> str:
        if name not in ids:  # the create step failed: fall back to what the server has
            node = r.node_fields(name) or {}
            ids[name] = node.get("uuid") or f"uuid-of-{name}"
        return ids[name]

    # --- enrolment and reading -----------------------------------------------------------
    r.cli(
        "cli/node-create",
        "create a fake-hardware node with a name",
        ["node", "create", "--driver", "fake-hardware", "--name", NODE, "-f", "json"],
        Expect(fields={"name": NODE, "driver": "fake-hardware", "provision_state": "enroll"}),
        output="json",
        register=remember(NODE, "node.uuid"),
    )
    r.cli(
        "cli/node-list",
        "list nodes (default table)",
        ["node", "list"],
        Expect(
            columns=[
                "uuid", "name", "instance_uuid", "power_state", "provision_state", "maintenance",
            ]
        ),
        output="table",
    )
    r.cli(
        "cli/node-list-long",
        "list nodes with every field",
        ["node", "list", "--long", "-f", "json"],
        Expect(),
        output="json",
    )
    r.cli(
        "cli/node-list-fields",
        "list nodes with chosen fields",
        ["node", "list", "--fields", "uuid", "name", "provision_state", "-f", "json"],
        Expect(columns=["uuid", "name", "provision_state"]),
        output="json",
    )
    r.cli(
        "cli/node-show-by-name",
        "show a node by name",
        ["node", "show", NODE, "-f", "json"],
        Expect(fields={"name": NODE}),
        output="json",
    )
    r.cli(
        "cli/node-show-by-uuid",
        "show a node by UUID",
        ["node", "show", node_uuid(NODE), "-f", "json"],
        Expect(fields={"name": NODE}),
        output="json",
    )
    r.cli(
        "cli/node-set",
        "set extra, a property and driver_info with a password",
        [
            "node", "set", NODE, "--extra", "rack=r1", "--property", "cpus=4",
            "--driver-info", "ipmi_username=admin", "--driver-info", "ipmi_password=s3cret",
        ],
        Expect(),
    )
    r.cli(
        "cli/node-show-after-set",
        "the password is masked, the rest is stored",
        ["node", "show", NODE, "-f", "json", "-c", "extra", "-c", "properties", "-c", "driver_info"],
        Expect(
            fields={
                "extra": {"rack": "r1"},
                "properties": {"cpus": 4},  # the CLI sends values as JSON where they parse
                "driver_info": {"ipmi_username": "admin", "ipmi_password": "******"},
            }
        ),
        output="json",
    )
    r.cli(
        "cli/node-unset",
        "unset the extra key and the property",
        ["node", "unset", NODE, "--extra", "rack", "--property", "cpus"],
        Expect(),
    )
    r.cli(
        "cli/node-show-after-unset",
        "both are gone",
        ["node", "show", NODE, "-f", "json", "-c", "extra", "-c", "properties"],
        Expect(fields={"extra": {}, "properties": {}}),
        output="json",
    )

    # --- ports ---------------------------------------------------------------------------
    r.cli(
        "cli/port-create",
        "create a port on the node",
        ["port", "create", MAC, "--node", node_uuid(NODE), "-f", "json"],
        Expect(fields={"address": MAC}),
        output="json",
        register=remember("port", "port.uuid"),
    )
    r.cli(
        "cli/port-list",
        "list ports",
        ["port", "list", "-f", "json"],
        Expect(columns=["uuid", "address"]),
        output="json",
    )
    r.cli(
        "cli/port-list-node-long",
        "list the node's ports with every field",
        ["port", "list", "--node", NODE, "--long", "-f", "json"],
        Expect(),
        output="json",
    )
    r.cli(
        "cli/port-create-duplicate-mac",
        "a second port with the same MAC is refused (409; the CLI retries 409s 5 times)",
        ["port", "create", MAC, "--node", node_uuid(NODE)],
        Expect(
            ok=False,
            status=409,
            message=[f"A port with MAC address {MAC} already exists. (HTTP 409)"],
        ),
    )
    r.cli(
        "cli/port-delete",
        "delete the port",
        ["port", "delete", ids.get("port", "uuid-of-port")],
        Expect(),
    )

    # --- drivers -------------------------------------------------------------------------
    r.cli(
        "cli/driver-list",
        "list drivers",
        ["driver", "list", "-f", "json"],
        Expect(columns=["name", "hosts"]),
        output="json",
    )
    r.cli(
        "cli/driver-show",
        "show the fake-hardware driver",
        ["driver", "show", "fake-hardware", "-f", "json"],
        Expect(fields={"name": "fake-hardware"}),
        output="json",
    )

    # --- power, boot device, maintenance, validation -------------------------------------
    r.cli(
        "cli/node-power-on",
        "power on, then wait for power_state",
        ["node", "power", "on", NODE],
        Expect(state={"power_state": "power on"}),
        node=NODE,
        wait_for={"power_state": "power on", "target_power_state": None},
    )
    r.cli(
        "cli/node-power-off",
        "power off, then wait for power_state",
        ["node", "power", "off", NODE],
        Expect(state={"power_state": "power off"}),
        node=NODE,
        wait_for={"power_state": "power off", "target_power_state": None},
    )
    r.cli(
        "cli/node-boot-device-set",
        "set the boot device to pxe, persistently",
        ["node", "boot", "device", "set", NODE, "pxe", "--persistent"],
        Expect(),
    )
    r.cli(
        "cli/node-boot-device-show",
        "show the boot device",
        ["node", "boot", "device", "show", NODE, "-f", "json"],
        # Ironic's fake management interface always reports pxe, not persistent.
        Expect(fields={"boot_device": "pxe"}),
        output="json",
    )
    r.cli(
        "cli/node-boot-device-supported",
        "list the supported boot devices",
        ["node", "boot", "device", "show", "--supported", NODE, "-f", "json"],
        Expect(),
        output="json",
    )
    r.cli(
        "cli/node-maintenance-set",
        "put the node in maintenance with a reason",
        ["node", "maintenance", "set", NODE, "--reason", "client scenario"],
        Expect(state={"maintenance": True, "maintenance_reason": "client scenario"}),
        node=NODE,
    )
    r.cli(
        "cli/node-maintenance-unset",
        "take it out of maintenance",
        ["node", "maintenance", "unset", NODE],
        Expect(state={"maintenance": False, "maintenance_reason": None}),
        node=NODE,
    )
    r.cli(
        "cli/node-validate",
        "validate every interface",
        ["node", "validate", NODE, "-f", "json"],
        Expect(columns=["Interface", "Result", "Reason"]),
        output="json",
    )

    # --- the provisioning lifecycle ------------------------------------------------------
    def verb(name, title, args, state, **extra):
        r.cli(name, title, args, Expect(state=state), node=NODE, **extra)

    verb("cli/node-manage", "enroll -> manageable", ["node", "manage", NODE, *wait],
         {"provision_state": "manageable"})
    verb("cli/node-inspect", "inspect (fake) -> manageable", ["node", "inspect", NODE, *wait],
         {"provision_state": "manageable"})
    r.cli(
        "cli/node-clean-empty-steps",
        "manual cleaning with an empty step list is refused (400)",
        ["node", "clean", NODE, "--clean-steps", "[]"],
        Expect(
            ok=False,
            status=400,
            message=['"clean_steps" is required when setting target provision state to clean'],
            state={"provision_state": "manageable"},
        ),
        node=NODE,
    )
    verb("cli/node-clean", "manual cleaning with a fake step -> manageable",
         ["node", "clean", NODE, "--clean-steps", FAKE_CLEAN_STEPS, *wait],
         {"provision_state": "manageable", "last_error": None})
    verb("cli/node-provide", "manageable -> (cleaning) -> available",
         ["node", "provide", NODE, *wait], {"provision_state": "available"})
    r.cli(
        "cli/node-inspect-illegal",
        "inspect while available is an illegal transition (400)",
        ["node", "inspect", NODE],
        Expect(
            ok=False,
            status=400,
            message=[
                'The requested action "inspect" can not be performed on node '
                '"{node.uuid}" while it is in state "available". (HTTP 400)'
            ],
            state={"provision_state": "available"},
        ),
        node=NODE,
    )
    verb("cli/node-deploy", "available -> active", ["node", "deploy", NODE, *wait],
         {"provision_state": "active"})
    verb("cli/node-rescue", "active -> rescue",
         ["node", "rescue", NODE, "--rescue-password", "r3scue", *wait],
         {"provision_state": "rescue"})
    verb("cli/node-unrescue", "rescue -> active", ["node", "unrescue", NODE, *wait],
         {"provision_state": "active"})
    verb("cli/node-undeploy", "active -> (cleaning) -> available",
         ["node", "undeploy", NODE, *wait], {"provision_state": "available"})

    # --- abort: a node parked in `clean wait` --------------------------------------------
    r.cli(
        "cli/abort-node-create",
        "a node with the direct (agent) deploy interface",
        [
            "node", "create", "--driver", "fake-hardware", "--name", ABORT_NODE,
            "--deploy-interface", "direct", "-f", "json",
        ],
        Expect(fields={"deploy_interface": "direct"}),
        output="json",
        register=remember(ABORT_NODE, "abort_node.uuid"),
    )
    r.cli("cli/abort-node-manage", "enroll -> manageable",
          ["node", "manage", ABORT_NODE, *wait],
          Expect(state={"provision_state": "manageable"}), node=ABORT_NODE)
    r.cli(
        "cli/abort-node-clean",
        "manual cleaning that waits for the agent -> clean wait",
        ["node", "clean", ABORT_NODE, "--clean-steps", AGENT_CLEAN_STEPS],
        Expect(state={"provision_state": "clean wait", "target_provision_state": "manageable"}),
        node=ABORT_NODE,
        wait_for={"provision_state": "clean wait"},
    )
    r.cli(
        "cli/abort-node-abort",
        "abort cleaning -> clean failed",
        ["node", "abort", ABORT_NODE],
        Expect(
            state={
                "provision_state": "clean failed",
                "last_error": "By request, the clean operation was aborted",
            }
        ),
        node=ABORT_NODE,
        wait_for={"provision_state": "clean failed"},
    )
    r.cli("cli/abort-node-manage-again", "clean failed -> manageable",
          ["node", "manage", ABORT_NODE, *wait],
          Expect(state={"provision_state": "manageable"}), node=ABORT_NODE)

    # --- errors and microversions --------------------------------------------------------
    r.cli(
        "cli/node-show-unknown",
        "an unknown node (404)",
        ["node", "show", "no-such-node"],
        Expect(ok=False, status=404, message=["Node no-such-node could not be found. (HTTP 404)"]),
    )
    r.cli(
        "cli/microversion-too-high",
        "a microversion above the server's maximum (406)",
        ["node", "list"],
        Expect(ok=False, status=406, message=["Requested API version 1.999 is not supported"]),
        api_version="1.999",
    )
    r.cli(
        "cli/microversion-latest",
        "`latest` negotiates down to the server's maximum",
        ["node", "show", NODE, "-f", "json", "-c", "name", "-c", "provision_state"],
        Expect(fields={"name": NODE, "provision_state": "available"}),
        output="json",
        api_version="latest",
    )

    # --- clean up ------------------------------------------------------------------------
    r.cli("cli/node-delete", "delete both nodes", ["node", "delete", NODE, ABORT_NODE], Expect())
    r.cli(
        "cli/node-list-empty",
        "no nodes are left",
        ["node", "list", "-f", "json"],
        Expect(),
        output="json",
    )
