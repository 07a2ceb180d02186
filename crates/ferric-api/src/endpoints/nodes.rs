//! The node endpoints' declarations: a node, its states and management, and its
//! sub-resources (traits, VIFs, children, history, ports, portgroups, allocation, BIOS,
//! firmware, inventory, volume, vendor passthru). See the parent module for how to add one.

use serde_json::json;

use super::Guard::{List, NodeUpdate, Provision, Rule};
use super::Verb::{Delete, Get, Patch, Post, Put};
use super::{Endpoint, Gate, On, op, since, vendor_calls};
use crate::v1::{
    allocations, children, console, history, node_data, node_management, nodes, portgroups, ports,
    raid, states, traits, vendor, vifs, vmedia, volumes,
};

const NODE: &[&str] = &["node_ident"];

/// Every endpoint under `/v1/nodes`.
pub(super) fn endpoints() -> Vec<Endpoint> {
    let mut endpoints = vec![
        // The node.
        op(Get, "/v1/nodes", "node_list", nodes::node_list)
            .guard(List("node"))
            .summary("List nodes (default fields, or ?fields=)")
            .listing(nodes::NODE_FILTERS, false)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        op(Post, "/v1/nodes", "node_create", nodes::node_create)
            .guard(Rule("baremetal:node:create", On::Nothing))
            .summary("Enroll a node")
            .body("NodeCreate")
            .ok(201, Some("Node"))
            .errors(&[409]),
        op(
            Get,
            "/v1/nodes/detail",
            "node_list_detail",
            nodes::node_list_detail,
        )
        .guard(List("node"))
        .summary("List nodes with every field")
        .listing(nodes::NODE_FILTERS, true)
        .ok(200, Some("NodeCollection"))
        .errors(&[400]),
        op(Get, "/v1/nodes/{node_ident}", "node_get", nodes::node_get)
            .guard(Rule("baremetal:node:get", On::Node))
            .summary("Show a node")
            .refs(NODE)
            .refs(&["fields"])
            .ok(200, Some("Node"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/nodes/{node_ident}",
            "node_update",
            nodes::node_update,
        )
        .guard(NodeUpdate)
        .summary("Update a node (JSON patch)")
        .refs(NODE)
        .param(
            json!({ "name": "reset_interfaces", "in": "query", "required": false,
                "schema": { "type": "boolean" }, "x-ironic-since": "1.45" }),
        )
        .body("JsonPatch")
        .ok(200, Some("Node"))
        .errors(&[409]),
        op(
            Delete,
            "/v1/nodes/{node_ident}",
            "node_delete",
            nodes::node_delete,
        )
        .guard(Rule("baremetal:node:delete", On::Node))
        .summary("Delete a node")
        .refs(NODE)
        .ok(204, None)
        .errors(&[403, 409]),
        // States and management.
        op(
            Get,
            "/v1/nodes/{node_ident}/states",
            "node_states_get",
            states::node_states_get,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("A node's power, provision and RAID states")
        .refs(NODE)
        .ok(200, Some("NodeStates")),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/provision",
            "node_provision_set",
            states::node_provision_set,
        )
        .guard(Provision)
        .summary("Request a provision state change")
        .refs(NODE)
        .body_spec(&states::PROVISION_BODY)
        .ok(202, None)
        .errors(&[409, 503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/power",
            "node_power_set",
            states::node_power_set,
        )
        .guard(Rule("baremetal:node:set_power_state", On::Node))
        .summary("Request a power state change")
        .refs(NODE)
        .body_spec(&states::POWER_BODY)
        .ok(202, None)
        .errors(&[409, 503]),
        op(
            Get,
            "/v1/nodes/{node_ident}/management/boot_device",
            "node_boot_device_get",
            states::node_boot_device_get,
        )
        .guard(Rule("baremetal:node:get_boot_device", On::Node))
        .summary("The node's boot device")
        .refs(NODE)
        .ok(200, Some("BootDevice"))
        .errors(&[400, 409, 503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/management/boot_device",
            "node_boot_device_set",
            states::node_boot_device_set,
        )
        .guard(Rule("baremetal:node:set_boot_device", On::Node))
        .summary("Set the node's boot device")
        .refs(NODE)
        .body_spec(&states::BOOT_DEVICE_BODY)
        .ok(204, None)
        .errors(&[409, 503]),
        op(
            Get,
            "/v1/nodes/{node_ident}/management/boot_device/supported",
            "node_boot_device_supported",
            states::node_boot_device_supported,
        )
        .guard(Rule("baremetal:node:get_boot_device", On::Node))
        .summary("The boot devices the node supports")
        .refs(NODE)
        .ok(200, Some("SupportedBootDevices"))
        .errors(&[400, 409, 503]),
        op(
            Get,
            "/v1/nodes/{node_ident}/validate",
            "node_validate",
            states::node_validate,
        )
        .guard(Rule("baremetal:node:validate", On::Node))
        .summary("Validate the node's interfaces")
        .refs(NODE)
        .ok(200, Some("Validation"))
        .errors(&[409, 503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/maintenance",
            "node_maintenance_set",
            states::node_maintenance_set,
        )
        .guard(Rule("baremetal:node:set_maintenance", On::Node))
        .summary("Put the node in maintenance")
        .refs(NODE)
        .body_spec(&states::MAINTENANCE_BODY)
        .ok(202, None)
        .errors(&[409]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/maintenance",
            "node_maintenance_unset",
            states::node_maintenance_unset,
        )
        .guard(Rule("baremetal:node:set_maintenance", On::Node))
        .summary("Take the node out of maintenance")
        .refs(NODE)
        .ok(202, None)
        .errors(&[409]),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/raid",
            "node_raid_set",
            raid::node_raid_set,
        )
        .guard(Rule("baremetal:node:set_raid_state", On::Node))
        .summary("Set the node's target RAID configuration")
        .since(since::RAID)
        .refused_with(Gate::NotAcceptable)
        .refs(NODE)
        .body("RaidConfig")
        .ok(204, None)
        .errors(&[409]),
        // Traits, VIFs, children, history.
        op(
            Get,
            "/v1/nodes/{node_ident}/traits",
            "trait_list",
            traits::trait_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The node's traits")
        .since(since::TRAITS)
        .refused_with(Gate::NotAcceptable)
        .refs(NODE)
        .ok(200, Some("Traits")),
        op(
            Put,
            "/v1/nodes/{node_ident}/traits",
            "trait_replace_all",
            traits::trait_replace_all,
        )
        .guard(Rule("baremetal:node:traits:set", On::Node))
        .summary("Replace all of the node's traits")
        .since(since::TRAITS)
        .refused_with(Gate::MethodNotAllowed)
        .refs(NODE)
        .body("Traits")
        .ok(204, None)
        .errors(&[409]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/traits",
            "trait_delete_all",
            traits::trait_delete_all,
        )
        .guard(Rule("baremetal:node:traits:set", On::Node))
        .summary("Remove all of the node's traits")
        .since(since::TRAITS)
        .refs(NODE)
        .ok(204, None)
        .errors(&[409]),
        op(
            Put,
            "/v1/nodes/{node_ident}/traits/{trait_name}",
            "trait_add",
            traits::trait_add,
        )
        .guard(Rule("baremetal:node:traits:set", On::Node))
        .summary("Add one trait")
        .since(since::TRAITS)
        .refused_with(Gate::MethodNotAllowed)
        .refs(&["node_ident", "trait_name"])
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/traits/{trait_name}",
            "trait_delete",
            traits::trait_delete,
        )
        .guard(Rule("baremetal:node:traits:set", On::Node))
        .summary("Remove one trait")
        .since(since::TRAITS)
        .refs(&["node_ident", "trait_name"])
        .ok(204, None)
        .errors(&[409]),
        op(
            Get,
            "/v1/nodes/{node_ident}/vifs",
            "vif_list",
            vifs::vif_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The VIFs attached to the node")
        .since(since::VIFS)
        .refs(NODE)
        .ok(200, Some("VifCollection")),
        op(
            Post,
            "/v1/nodes/{node_ident}/vifs",
            "vif_attach",
            vifs::vif_attach,
        )
        .guard(Rule("baremetal:node:vif:attach", On::Node))
        .summary("Attach a VIF")
        .since(since::VIFS)
        .refs(NODE)
        .body("VifAttachRequest")
        .ok(204, None)
        .errors(&[409]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/vifs/{vif_id}",
            "vif_detach",
            vifs::vif_detach,
        )
        .guard(Rule("baremetal:node:vif:detach", On::Node))
        .summary("Detach a VIF")
        .since(since::VIFS)
        .refs(&["node_ident", "vif_id"])
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Get,
            "/v1/nodes/{node_ident}/children",
            "node_children_list",
            children::node_children_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The UUIDs of the node's child nodes")
        .since(since::CHILDREN)
        .refs(NODE)
        .ok(200, Some("NodeChildren"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/history",
            "history_list",
            history::history_list,
        )
        .guard(Rule("baremetal:node:history:get", On::Node))
        .summary("The node's history of events")
        .since(since::HISTORY)
        .refs(NODE)
        .refs(&["detail"])
        .ok(200, Some("NodeHistory"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/history/{event_uuid}",
            "history_get",
            history::history_get,
        )
        .guard(Rule("baremetal:node:history:get", On::Node))
        .summary("One history event")
        .since(since::HISTORY)
        .refs(&["node_ident", "event_uuid"])
        .ok(200, Some("NodeHistoryEvent"))
        .errors(&[400]),
        // Ports, portgroups, allocation.
        op(
            Get,
            "/v1/nodes/{node_ident}/ports",
            "node_port_list",
            ports::node_port_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("List a node's ports")
        .refs(NODE)
        .listing(&[], false)
        .ok(200, Some("PortCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/ports/detail",
            "node_port_list_detail",
            ports::node_port_list_detail,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("List a node's ports with every field")
        .refs(NODE)
        .listing(&[], true)
        .ok(200, Some("PortCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/portgroups",
            "node_portgroup_list",
            portgroups::node_portgroup_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("List a node's portgroups")
        .since(since::PORTGROUP_SUBRESOURCES)
        .refs(NODE)
        .listing(&[], false)
        .ok(200, Some("PortgroupCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/portgroups/detail",
            "node_portgroup_list_detail",
            portgroups::node_portgroup_list_detail,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("List a node's portgroups with every field")
        .since(since::PORTGROUP_SUBRESOURCES)
        .refs(NODE)
        .listing(&[], true)
        .ok(200, Some("PortgroupCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/allocation",
            "node_allocation_get",
            allocations::node_allocation_get,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The node's allocation")
        .since(since::ALLOCATIONS)
        .refs(&["node_ident", "fields"])
        .ok(200, Some("Allocation"))
        .errors(&[400]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/allocation",
            "node_allocation_delete",
            allocations::node_allocation_delete,
        )
        .guard(Rule("baremetal:allocation:delete", On::Node))
        .summary("Delete the node's allocation")
        .since(since::ALLOCATIONS)
        .refs(NODE)
        .ok(204, None)
        .errors(&[409]),
        // Data the conductor and inspection store.
        op(
            Get,
            "/v1/nodes/{node_ident}/bios",
            "bios_list",
            node_data::bios_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The node's BIOS settings")
        .since(since::BIOS)
        .refs(NODE)
        .param(json!({ "name": "detail", "in": "query", "required": false,
                "schema": { "type": "boolean" }, "x-ironic-since": "1.74" }))
        .ok(200, Some("BiosSettings"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/bios/{setting_name}",
            "bios_get",
            node_data::bios_get,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("One BIOS setting")
        .since(since::BIOS)
        .refs(&["node_ident", "setting_name"])
        .ok(200, Some("BiosSettingShow")),
        op(
            Get,
            "/v1/nodes/{node_ident}/firmware",
            "firmware_list",
            node_data::firmware_list,
        )
        .guard(Rule("baremetal:node:get", On::Node))
        .summary("The node's firmware components and their versions")
        .since(since::FIRMWARE)
        .refs(NODE)
        .ok(200, Some("FirmwareComponents")),
        op(
            Get,
            "/v1/nodes/{node_ident}/inventory",
            "inventory_get",
            node_data::inventory_get,
        )
        .guard(Rule("baremetal:node:inventory:get", On::Node))
        .summary("What inspection stored about the node")
        .since(since::INVENTORY)
        .refs(NODE)
        .ok(200, Some("Inventory")),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/boot_mode",
            "node_boot_mode_set",
            node_management::node_boot_mode_set,
        )
        .guard(Rule("baremetal:node:set_boot_mode", On::Node))
        .summary("Set the node's firmware boot mode")
        .since(since::BOOT_MODE)
        .refs(NODE)
        .body_spec(&node_management::BOOT_MODE_BODY)
        .ok(202, None)
        .errors(&[409, 503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/secure_boot",
            "node_secure_boot_set",
            node_management::node_secure_boot_set,
        )
        .guard(Rule("baremetal:node:set_secure_boot", On::Node))
        .summary("Turn the node's UEFI secure boot on or off")
        .since(since::BOOT_MODE)
        .refs(NODE)
        .body_spec(&node_management::SECURE_BOOT_BODY)
        .ok(202, None)
        .errors(&[409, 503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/management/inject_nmi",
            "node_inject_nmi",
            node_management::node_inject_nmi,
        )
        .guard(Rule("baremetal:node:inject_nmi", On::Node))
        .summary("Send the node a non-maskable interrupt")
        .since(since::INJECT_NMI)
        .refs(NODE)
        .body_spec(&node_management::INJECT_NMI_BODY)
        .ok(204, None)
        .errors(&[409, 503]),
        // Indicators (1.63): like Ironic 39, served at every version (no gate).
        op(
            Get,
            "/v1/nodes/{node_ident}/management/indicators",
            "node_indicators",
            node_management::node_indicators,
        )
        .guard(Rule("baremetal:node:get_indicator_state", On::Node))
        .summary("The node's indicators (LEDs) by component")
        .refs(NODE)
        .ok(200, Some("Indicators"))
        .errors(&[400, 409]),
        op(
            Get,
            "/v1/nodes/{node_ident}/management/indicators/{indicator}",
            "node_indicator_get",
            node_management::node_indicator_get,
        )
        .guard(Rule("baremetal:node:get_indicator_state", On::Node))
        .summary("The state of one indicator, named {name}@{component}")
        .refs(&["node_ident", "indicator"])
        .ok(200, Some("IndicatorState"))
        .errors(&[400, 409]),
        op(
            Put,
            "/v1/nodes/{node_ident}/management/indicators/{indicator}",
            "node_indicator_set",
            node_management::node_indicator_set,
        )
        .guard(Rule("baremetal:node:set_indicator_state", On::Node))
        .summary("Set one indicator, named {name}@{component}")
        .refs(&["node_ident", "indicator"])
        .body_spec(&node_management::INDICATOR_BODY)
        .ok(204, None)
        .errors(&[400, 409]),
        // The serial console (issue 24).
        op(
            Get,
            "/v1/nodes/{node_ident}/states/console",
            "node_console_get",
            console::node_console_get,
        )
        .guard(Rule("baremetal:node:get_console", On::Node))
        .summary("Whether the node's serial console is enabled, and where it is relayed")
        .refs(NODE)
        .ok(200, Some("ConsoleState"))
        .errors(&[503]),
        op(
            Put,
            "/v1/nodes/{node_ident}/states/console",
            "node_console_set",
            console::node_console_set,
        )
        .guard(Rule("baremetal:node:set_console_state", On::Node))
        .summary("Enable or disable the node's serial console")
        .refs(NODE)
        .body_spec(&console::CONSOLE_BODY)
        .ok(202, None)
        .errors(&[409, 503]),
        op(
            Get,
            "/v1/nodes/{node_ident}/console/stream",
            "node_console_stream",
            console::node_console_stream,
        )
        .guard(Rule("baremetal:node:console:view", On::Node))
        .summary(
            "The serial console over a WebSocket: the retained output, then live output; \
             frames sent are keystrokes (Ferric's)",
        )
        .refs(NODE)
        .ok(101, None)
        .errors(&[400, 409, 426, 503]),
        op(
            Post,
            "/v1/nodes/{node_ident}/vmedia",
            "node_vmedia_attach",
            vmedia::node_vmedia_attach,
        )
        .guard(Rule("baremetal:node:vmedia:attach", On::Node))
        .summary("Attach an image as the node's virtual CD, floppy or USB disk")
        .since(since::VMEDIA)
        .refs(NODE)
        .body_spec(&vmedia::VMEDIA_ATTACH_BODY)
        .ok(204, None)
        .errors(&[409, 503]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/vmedia",
            "node_vmedia_detach",
            vmedia::node_vmedia_detach,
        )
        .guard(Rule("baremetal:node:vmedia:detach", On::Node))
        .summary("Eject the node's virtual media (?device_types=cdrom,… limits it)")
        .since(since::VMEDIA)
        .refs(NODE)
        .ok(204, None)
        .errors(&[409, 503]),
        op(
            Get,
            "/v1/nodes/{node_ident}/vmedia",
            "node_vmedia_list",
            vmedia::node_vmedia_list,
        )
        .guard(Rule("baremetal:node:vmedia:get", On::Node))
        .summary("The node's virtual media devices as its BMC reports them")
        .since(since::VMEDIA_LIST)
        .refs(NODE)
        .ok(200, Some("VmediaList"))
        .errors(&[409, 503]),
        // Vendor passthru, volume.
        op(
            Get,
            "/v1/nodes/{node_ident}/vendor_passthru/methods",
            "node_vendor_methods",
            vendor::node_vendor_methods,
        )
        .guard(Rule("baremetal:node:vendor_passthru", On::Node))
        .summary("The node's vendor passthru methods")
        .refs(NODE)
        .ok(200, Some("VendorMethods"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/volume",
            "node_volume_get",
            volumes::node_volume_root,
        )
        .guard(Rule("baremetal:volume:get", On::Node))
        .summary("Links to the node's volume connectors and targets")
        .since(since::VOLUME)
        .refs(NODE)
        .ok(200, Some("Volume")),
        op(
            Get,
            "/v1/nodes/{node_ident}/volume/connectors",
            "node_volume_connector_list",
            volumes::node_connector_list,
        )
        .guard(Rule("baremetal:volume:get", On::Node))
        .summary("List the node's volume connectors")
        .since(since::VOLUME)
        .refs(NODE)
        .listing(&[], false)
        .ok(200, Some("VolumeConnectorCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/nodes/{node_ident}/volume/targets",
            "node_volume_target_list",
            volumes::node_target_list,
        )
        .guard(Rule("baremetal:volume:get", On::Node))
        .summary("List the node's volume targets")
        .since(since::VOLUME)
        .refs(NODE)
        .listing(&[], false)
        .ok(200, Some("VolumeTargetCollection"))
        .errors(&[400]),
        op(
            Delete,
            "/v1/nodes/{node_ident}/provision",
            "node_deployment_abort",
            states::node_deployment_abort,
        )
        .guard(Rule("baremetal:node:set_provision_state", On::Node))
        .summary("Abort the running deployment")
        .refs(NODE)
        .ok(202, None)
        .errors(&[403, 409, 503]),
    ];
    endpoints.extend(vendor_calls(
        "/v1/nodes/{node_ident}/vendor_passthru",
        &["node_ident", "method"],
        [
            "node_vendor_call_get",
            "node_vendor_call_post",
            "node_vendor_call_put",
            "node_vendor_call_patch",
            "node_vendor_call_delete",
        ],
        Rule("baremetal:node:vendor_passthru", On::Node),
        vendor::node_vendor_call,
    ));
    endpoints.extend(vendor_calls(
        "/v1/nodes/{node_ident}/vendor_passthru/{vendor_method}",
        &["node_ident", "vendor_method"],
        [
            "node_vendor_call_named_get",
            "node_vendor_call_named_post",
            "node_vendor_call_named_put",
            "node_vendor_call_named_patch",
            "node_vendor_call_named_delete",
        ],
        Rule("baremetal:node:vendor_passthru", On::Node),
        vendor::node_vendor_call_named,
    ));
    endpoints
}
