//! The declarations of every endpoint outside `/v1/nodes` but deploy templates and runbooks
//! (`templates.rs`): version discovery, health and metrics, ports, portgroups, chassis,
//! drivers, allocations, shards, events, volume connectors and targets, the ramdisk agent's
//! calls and conductors.
//! See the parent module for how to add one.

use serde_json::json;

use super::Guard::{List, Public, Rule};
use super::Verb::{Delete, Get, Patch, Post};
use super::{Endpoint, Gate, On, op, since, vendor_calls};
use crate::v1::{
    allocations, chassis, conductors, drivers, node_data, nodes, portgroups, ports, raid, ramdisk,
    vendor, volumes,
};

/// Version discovery, health and metrics.
pub(super) fn discovery() -> Vec<Endpoint> {
    vec![
        op(Get, "/", "root_get", crate::root::root_get)
            .guard(Public)
            .summary("Version discovery: the API's versions")
            .ok(200, Some("Root")),
        op(Get, "/v1", "v1_get", crate::root::v1_get)
            .guard(Public)
            .summary("Version discovery: the v1 document and its resources")
            .ok(200, Some("V1")),
        op(Get, "/health", "health_get", crate::health::health_get)
            .guard(Public)
            .summary("Health of the database and the conductor's reconcilers")
            .ok(200, Some("Health"))
            .errors(&[503]),
        op(Get, "/metrics", "metrics_get", crate::metrics::metrics_get)
            .guard(Public)
            .summary("Prometheus metrics (OpenMetrics text); not part of Ironic's API")
            .ok_plain_text()
            .errors(&[503]),
    ]
}

/// Every endpoint outside `/v1/nodes` but discovery's.
pub(super) fn endpoints() -> Vec<Endpoint> {
    let mut endpoints = vec![
        // Ports.
        op(
            Get,
            "/v1/ports",
            "port_list",
            ports::port_list,
        )
        .guard(List("port"))
            .summary("List ports")
            .listing(ports::PORT_FILTERS, false)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/ports",
            "port_create",
            ports::port_create,
        )
        .guard(Rule("baremetal:port:create", On::BodyNode))
            .summary("Create a port")
            .body("PortCreate")
            .ok(201, Some("Port"))
            .errors(&[409]),
        op(
            Get,
            "/v1/ports/detail",
            "port_list_detail",
            ports::port_list_detail,
        )
        .guard(List("port"))
            .summary("List ports with every field")
            .listing(ports::PORT_FILTERS, true)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/ports/{port_ident}",
            "port_get",
            ports::port_get,
        )
        .guard(Rule("baremetal:port:get", On::Port))
            .summary("Show a port")
            .refs(&["port_ident", "fields"])
            .ok(200, Some("Port"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/ports/{port_ident}",
            "port_update",
            ports::port_update,
        )
        .guard(Rule("baremetal:port:update", On::Port))
            .summary("Update a port (JSON patch)")
            .refs(&["port_ident"])
            .body("JsonPatch")
            .ok(200, Some("Port"))
            .errors(&[409]),
        op(
            Delete,
            "/v1/ports/{port_ident}",
            "port_delete",
            ports::port_delete,
        )
        .guard(Rule("baremetal:port:delete", On::Port))
            .summary("Delete a port")
            .refs(&["port_ident"])
            .ok(204, None)
            .errors(&[409]),
        // Portgroups.
        op(
            Get,
            "/v1/portgroups",
            "portgroup_list",
            portgroups::portgroup_list,
        )
        .guard(List("portgroup"))
            .summary("List portgroups")
            .since(since::PORTGROUPS)
            .listing(portgroups::PORTGROUP_FILTERS, false)
            .ok(200, Some("PortgroupCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/portgroups",
            "portgroup_create",
            portgroups::portgroup_create,
        )
        .guard(Rule("baremetal:portgroup:create", On::BodyNode))
            .summary("Create a portgroup")
            .since(since::PORTGROUPS)
            .body("PortgroupCreate")
            .ok(201, Some("Portgroup"))
            .errors(&[409]),
        op(
            Get,
            "/v1/portgroups/detail",
            "portgroup_list_detail",
            portgroups::portgroup_list_detail,
        )
        .guard(List("portgroup"))
            .summary("List portgroups with every field")
            .since(since::PORTGROUPS)
            .listing(portgroups::PORTGROUP_FILTERS, true)
            .ok(200, Some("PortgroupCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/portgroups/{portgroup_ident}",
            "portgroup_get",
            portgroups::portgroup_get,
        )
        .guard(Rule("baremetal:portgroup:get", On::Portgroup))
            .summary("Show a portgroup")
            .since(since::PORTGROUPS)
            .refs(&["portgroup_ident", "fields"])
            .ok(200, Some("Portgroup"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/portgroups/{portgroup_ident}",
            "portgroup_update",
            portgroups::portgroup_update,
        )
        .guard(Rule("baremetal:portgroup:update", On::Portgroup))
            .summary("Update a portgroup (JSON patch)")
            .since(since::PORTGROUPS)
            .refs(&["portgroup_ident"])
            .body("JsonPatch")
            .ok(200, Some("Portgroup"))
            .errors(&[409]),
        op(
            Delete,
            "/v1/portgroups/{portgroup_ident}",
            "portgroup_delete",
            portgroups::portgroup_delete,
        )
        .guard(Rule("baremetal:portgroup:delete", On::Portgroup))
            .summary("Delete a portgroup (it must have no ports)")
            .since(since::PORTGROUPS)
            .refs(&["portgroup_ident"])
            .ok(204, None)
            .errors(&[400, 409]),
        op(
            Get,
            "/v1/portgroups/{portgroup_ident}/ports",
            "portgroup_port_list",
            ports::portgroup_port_list,
        )
        .guard(Rule("baremetal:portgroup:get", On::Portgroup))
            .summary("List a portgroup's ports")
            .since(since::PORTGROUP_SUBRESOURCES)
            .refs(&["portgroup_ident"])
            .listing(&[], false)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/portgroups/{portgroup_ident}/ports/detail",
            "portgroup_port_list_detail",
            ports::portgroup_port_list_detail,
        )
        .guard(Rule("baremetal:portgroup:get", On::Portgroup))
        .summary("List a portgroup's ports with every field")
        .since(since::PORTGROUP_SUBRESOURCES)
        .refs(&["portgroup_ident"])
        .listing(&[], true)
        .ok(200, Some("PortCollection"))
        .errors(&[400]),
        // Chassis.
        op(
            Get,
            "/v1/chassis",
            "chassis_list",
            chassis::chassis_list,
        )
        .guard(Rule("baremetal:chassis:get", On::Nothing))
            .summary("List chassis")
            .listing(&[], false)
            .ok(200, Some("ChassisCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/chassis",
            "chassis_create",
            chassis::chassis_create,
        )
        .guard(Rule("baremetal:chassis:create", On::Nothing))
            .summary("Create a chassis")
            .body("ChassisCreate")
            .ok(201, Some("Chassis"))
            .errors(&[409]),
        op(
            Get,
            "/v1/chassis/detail",
            "chassis_list_detail",
            chassis::chassis_list_detail,
        )
        .guard(Rule("baremetal:chassis:get", On::Nothing))
            .summary("List chassis with every field")
            .listing(&[], true)
            .ok(200, Some("ChassisCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/chassis/{chassis_uuid}",
            "chassis_get",
            chassis::chassis_get,
        )
        .guard(Rule("baremetal:chassis:get", On::Nothing))
            .summary("Show a chassis")
            .refs(&["chassis_uuid", "fields"])
            .ok(200, Some("Chassis"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/chassis/{chassis_uuid}",
            "chassis_update",
            chassis::chassis_update,
        )
        .guard(Rule("baremetal:chassis:update", On::Nothing))
            .summary("Update a chassis (JSON patch)")
            .refs(&["chassis_uuid"])
            .body("JsonPatch")
            .ok(200, Some("Chassis"))
            .errors(&[409]),
        op(
            Delete,
            "/v1/chassis/{chassis_uuid}",
            "chassis_delete",
            chassis::chassis_delete,
        )
        .guard(Rule("baremetal:chassis:delete", On::Nothing))
            .summary("Delete a chassis (it must have no nodes)")
            .refs(&["chassis_uuid"])
            .ok(204, None)
            .errors(&[400]),
        op(
            Get,
            "/v1/chassis/{chassis_uuid}/nodes",
            "chassis_node_list",
            chassis::chassis_node_list,
        )
        .guard(List("node"))
            .summary("List a chassis's nodes")
            .refs(&["chassis_uuid"])
            .listing(nodes::NODE_FILTERS, false)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/chassis/{chassis_uuid}/nodes/detail",
            "chassis_node_list_detail",
            chassis::chassis_node_list_detail,
        )
        .guard(List("node"))
            .summary("List a chassis's nodes with every field")
            .refs(&["chassis_uuid"])
            .listing(nodes::NODE_FILTERS, true)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        // Drivers.
        op(
            Get,
            "/v1/drivers",
            "driver_list",
            drivers::driver_list,
        )
        .guard(Rule("baremetal:driver:get", On::Nothing))
            .summary("List the enabled hardware types")
            .param(json!({ "name": "type", "in": "query", "required": false,
                "schema": { "type": "string", "enum": ["classic", "dynamic"] }, "x-ironic-since": "1.30" }))
            .param(json!({ "name": "detail", "in": "query", "required": false,
                "schema": { "type": "boolean" }, "x-ironic-since": "1.30" }))
            .ok(200, Some("DriverCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/drivers/{driver_name}",
            "driver_get",
            drivers::driver_get,
        )
        .guard(Rule("baremetal:driver:get", On::Nothing))
            .summary("Show a hardware type")
            .refs(&["driver_name"])
            .ok(200, Some("Driver")),
        op(
            Get,
            "/v1/drivers/{driver_name}/properties",
            "driver_properties_get",
            drivers::driver_properties_get,
        )
        .guard(Rule("baremetal:driver:get", On::Nothing))
            .summary("The driver_info properties a hardware type reads")
            .refs(&["driver_name"])
            .ok(200, Some("DriverProperties")),
        op(
            Get,
            "/v1/drivers/{driver_name}/raid/logical_disk_properties",
            "driver_raid_properties",
            raid::driver_raid_properties,
        )
        .guard(Rule("baremetal:driver:get", On::Nothing))
        .summary("What each property of a RAID logical disk means")
        .since(since::RAID)
        .refused_with(Gate::NotAcceptable)
        .refs(&["driver_name"])
        .ok(200, Some("DriverProperties")),
        // Allocations: below 1.52, GET answers 404 and the other methods 405, as Ironic.
        op(
            Get,
            "/v1/allocations",
            "allocation_list",
            allocations::allocation_list,
        )
        .guard(List("allocation"))
            .summary("List allocations")
            .since(since::ALLOCATIONS)
            .resource_gate("allocations")
            .listing(allocations::ALLOCATION_FILTERS, false)
            .ok(200, Some("AllocationCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/allocations",
            "allocation_create",
            allocations::allocation_create,
        )
        .guard(Rule("baremetal:allocation:create", On::Nothing))
            .summary("Ask for a node: answered allocating, matched in the background")
            .since(since::ALLOCATIONS)
            .resource_gate("allocations")
            .body("AllocationCreate")
            .ok(201, Some("Allocation"))
            .errors(&[409]),
        op(
            Get,
            "/v1/allocations/{allocation_ident}",
            "allocation_get",
            allocations::allocation_get,
        )
        .guard(Rule("baremetal:allocation:get", On::Allocation))
            .summary("Show an allocation")
            .since(since::ALLOCATIONS)
            .resource_gate("allocations")
            .refs(&["allocation_ident", "fields"])
            .ok(200, Some("Allocation"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/allocations/{allocation_ident}",
            "allocation_update",
            allocations::allocation_update,
        )
        .guard(Rule("baremetal:allocation:update", On::Allocation))
            .summary("Rename an allocation or change its extra (1.57)")
            .since(since::ALLOCATIONS)
            .resource_gate("allocations")
            .refs(&["allocation_ident"])
            .body("JsonPatch")
            .ok(200, Some("Allocation"))
            .errors(&[405, 409]),
        op(
            Delete,
            "/v1/allocations/{allocation_ident}",
            "allocation_delete",
            allocations::allocation_delete,
        )
        .guard(Rule("baremetal:allocation:delete", On::Allocation))
            .summary("Delete an allocation, freeing its node")
            .since(since::ALLOCATIONS)
            .resource_gate("allocations")
            .refs(&["allocation_ident"])
            .ok(204, None)
            .errors(&[409]),
        // Shards, events.
        op(
            Get,
            "/v1/shards",
            "shard_list",
            node_data::shard_list,
        )
        .guard(Rule("baremetal:shards:get", On::Nothing))
            .summary("Shards and how many nodes each has")
            .since(since::SHARDS)
            .ok(200, Some("Shards")),
        op(
            Post,
            "/v1/events",
            "event_post",
            node_data::event_post,
        )
        .guard(Rule("baremetal:events:post", On::Nothing))
            .summary("Network events from Neutron (accepted and logged)")
            .since(since::EVENTS)
            .body("Events")
            .ok(204, None),
        // Driver vendor passthru (the calls are added below).
        op(
            Get,
            "/v1/drivers/{driver_name}/vendor_passthru/methods",
            "driver_vendor_methods",
            vendor::driver_vendor_methods,
        )
        .guard(Rule("baremetal:driver:vendor_passthru", On::Nothing))
    .summary("The hardware type's driver-level vendor passthru methods")
    .refs(&["driver_name"])
    .ok(200, Some("VendorMethods"))
    .errors(&[400]),

        // Volume connectors and targets.
        op(
            Get,
            "/v1/volume",
            "volume_get",
            volumes::volume_root,
        )
        .guard(List("volume"))
            .summary("Links to the volume connectors and targets")
            .since(since::VOLUME)
            .ok(200, Some("Volume")),
        op(
            Get,
            "/v1/volume/connectors",
            "volume_connector_list",
            volumes::connector_list,
        )
        .guard(List("volume"))
            .summary("List volume connectors (default fields, ?fields= or ?detail=)")
            .since(since::VOLUME)
            .listing(volumes::VOLUME_FILTERS, false)
            .ok(200, Some("VolumeConnectorCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/volume/connectors",
            "volume_connector_create",
            volumes::connector_create,
        )
        .guard(Rule("baremetal:volume:create", On::BodyNode))
            .summary("Create a volume connector")
            .since(since::VOLUME)
            .body("VolumeConnectorCreate")
            .ok(201, Some("VolumeConnector"))
            .errors(&[409]),
        op(
            Get,
            "/v1/volume/connectors/{connector_uuid}",
            "volume_connector_get",
            volumes::connector_get,
        )
        .guard(Rule("baremetal:volume:get", On::VolumeConnector))
            .summary("Show a volume connector")
            .since(since::VOLUME)
            .refs(&["connector_uuid", "fields"])
            .ok(200, Some("VolumeConnector"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/volume/connectors/{connector_uuid}",
            "volume_connector_update",
            volumes::connector_update,
        )
        .guard(Rule("baremetal:volume:update", On::VolumeConnector))
            .summary("Update a volume connector (JSON patch; the node must be powered off)")
            .since(since::VOLUME)
            .refs(&["connector_uuid"])
            .body("JsonPatch")
            .ok(200, Some("VolumeConnector"))
            .errors(&[409]),
        op(
            Delete,
            "/v1/volume/connectors/{connector_uuid}",
            "volume_connector_delete",
            volumes::connector_delete,
        )
        .guard(Rule("baremetal:volume:delete", On::VolumeConnector))
            .summary("Delete a volume connector (the node must be powered off or deletable)")
            .since(since::VOLUME)
            .refs(&["connector_uuid"])
            .ok(204, None)
            .errors(&[400, 409]),
        op(
            Get,
            "/v1/volume/targets",
            "volume_target_list",
            volumes::target_list,
        )
        .guard(List("volume"))
            .summary("List volume targets (default fields, ?fields= or ?detail=)")
            .since(since::VOLUME)
            .listing(volumes::VOLUME_FILTERS, false)
            .ok(200, Some("VolumeTargetCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/volume/targets",
            "volume_target_create",
            volumes::target_create,
        )
        .guard(Rule("baremetal:volume:create", On::BodyNode))
            .summary("Create a volume target")
            .since(since::VOLUME)
            .body("VolumeTargetCreate")
            .ok(201, Some("VolumeTarget"))
            .errors(&[409]),
        op(
            Get,
            "/v1/volume/targets/{target_uuid}",
            "volume_target_get",
            volumes::target_get,
        )
        .guard(Rule("baremetal:volume:get", On::VolumeTarget))
            .summary("Show a volume target")
            .since(since::VOLUME)
            .refs(&["target_uuid", "fields"])
            .ok(200, Some("VolumeTarget"))
            .errors(&[400]),
        op(
            Patch,
            "/v1/volume/targets/{target_uuid}",
            "volume_target_update",
            volumes::target_update,
        )
        .guard(Rule("baremetal:volume:update", On::VolumeTarget))
            .summary("Update a volume target (JSON patch; the node must be powered off)")
            .since(since::VOLUME)
            .refs(&["target_uuid"])
            .body("JsonPatch")
            .ok(200, Some("VolumeTarget"))
            .errors(&[409]),
        op(
            Delete,
            "/v1/volume/targets/{target_uuid}",
            "volume_target_delete",
            volumes::target_delete,
        )
        .guard(Rule("baremetal:volume:delete", On::VolumeTarget))
            .summary("Delete a volume target (the node must be powered off or deletable)")
            .since(since::VOLUME)
            .refs(&["target_uuid"])
            .ok(204, None)
            .errors(&[400, 409]),
        // The ramdisk agent's endpoints (public).
        op(
            Get,
            "/v1/lookup",
            "lookup",
            ramdisk::lookup,
        )
        .guard(Public)
            .summary("An agent finds its node by MAC addresses or UUID (and gets its token)")
            .since(since::RAMDISK)
            .param(json!({ "name": "addresses", "in": "query", "required": false,
                "description": "Comma-separated MAC addresses.", "schema": { "type": "string" } }))
            .param(json!({ "name": "node_uuid", "in": "query", "required": false,
                "schema": { "type": "string", "format": "uuid" } }))
            .ok(200, Some("Lookup"))
            .errors(&[400, 409, 503]),
        op(
            Post,
            "/v1/heartbeat/{node_ident}",
            "heartbeat",
            ramdisk::heartbeat,
        )
        .guard(Public)
            .summary("An agent reports that it is up")
            .since(since::RAMDISK)
            .refs(&["node_ident"])
            .body_spec(&ramdisk::HEARTBEAT_BODY)
            .ok(202, None)
            .errors(&[409, 503]),
        // Conductors.
        op(
            Get,
            "/v1/conductors",
            "conductor_list",
            conductors::conductor_list,
        )
        .guard(Rule("baremetal:conductor:get", On::Nothing))
            .summary("List conductors")
            .since(since::CONDUCTORS)
            .refs(&["limit", "marker", "sort_key", "sort_dir", "fields", "detail"])
            .ok(200, Some("ConductorCollection"))
            .errors(&[400]),
        op(
            Get,
            "/v1/conductors/{hostname}",
            "conductor_get",
            conductors::conductor_get,
        )
        .guard(Rule("baremetal:conductor:get", On::Nothing))
            .summary("Show a conductor")
            .since(since::CONDUCTORS)
            .refs(&["hostname", "fields"])
            .ok(200, Some("Conductor"))
            .errors(&[400]),

        op(
            Post,
            "/v1/continue_inspection",
            "continue_inspection",
            ramdisk::continue_inspection,
        )
        .guard(Public)
        .summary(
            "The inspection ramdisk's data: {uuid} at 1.1, the node and a fresh agent token \
             from 1.84",
        )
        .param(json!({ "name": "node_uuid", "in": "query", "required": false,
            "description": "The node being inspected (1.84).",
            "schema": { "type": "string", "format": "uuid" } }))
        .body("InspectionData")
        .ok(202, Some("ContinueInspection"))
        .errors(&[409, 503]),
    ];
    endpoints.extend(vendor_calls(
        "/v1/drivers/{driver_name}/vendor_passthru",
        &["driver_name", "method"],
        [
            "driver_vendor_call_get",
            "driver_vendor_call_post",
            "driver_vendor_call_put",
            "driver_vendor_call_patch",
            "driver_vendor_call_delete",
        ],
        Rule("baremetal:driver:vendor_passthru", On::Nothing),
        vendor::driver_vendor_call,
    ));
    endpoints.extend(vendor_calls(
        "/v1/drivers/{driver_name}/vendor_passthru/{vendor_method}",
        &["driver_name", "vendor_method"],
        [
            "driver_vendor_call_named_get",
            "driver_vendor_call_named_post",
            "driver_vendor_call_named_put",
            "driver_vendor_call_named_patch",
            "driver_vendor_call_named_delete",
        ],
        Rule("baremetal:driver:vendor_passthru", On::Nothing),
        vendor::driver_vendor_call_named,
    ));
    endpoints
}
