//! The OpenAPI 3.0 document of the Bare Metal API, built from the tables that serve it: each
//! resource's schema comes from its field table (type, microversion, who may write it), its
//! list filters from the handler's filter table, and the operations from [`operations`], one
//! entry per route. `docs/openapi.json` is this document, checked in; a test fails when it is
//! stale and another checks that every documented operation is routed.
//!
//! Theory of operation: Ironic's responses depend on the microversion (newer fields are hidden
//! from older clients), so no response field is `required` but `links` (which `?fields=` keeps too);
//! each field carries `x-ironic-since` (the version it appeared in). Request bodies are closed
//! (`additionalProperties: false`), as the handlers are. Every 4xx/5xx is Ironic's
//! double-encoded error body.

use serde_json::{Map, Value, json};

use crate::v1::fields::{Access, FieldSpec, FieldType};
use crate::v1::{
    allocations, chassis, conductors, deploy_templates, node_fields, nodes, port_fields,
    portgroup_fields, runbooks,
};
use crate::v1::{portgroups, ports, volumes};
use crate::version::{MAX_VERSION, MIN_VERSION};

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for operation in operations() {
        let entry = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[operation.method] = operation.to_json();
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Ferric Bare Metal API",
            "version": MAX_VERSION.to_string(),
            "description": format!(
                "The OpenStack Ironic-compatible Bare Metal API v1 served by Ferric. Requests \
                 choose a microversion with the `X-OpenStack-Ironic-API-Version` header \
                 (`{MIN_VERSION}` when absent, up to `{MAX_VERSION}`, or `latest`); fields, \
                 filters and endpoints newer than it are hidden (`x-ironic-since` names the \
                 version each appeared in). Generated from the code by `cargo xtask docs`."
            ),
        },
        "servers": [{ "url": "http://127.0.0.1:6385" }],
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "parameters": parameters(),
            "responses": error_responses(),
        },
    })
}

// ---- schemas -----------------------------------------------------------------------------

fn field_type_schema(ty: FieldType) -> Value {
    match ty {
        FieldType::Uuid => json!({ "type": "string", "format": "uuid" }),
        FieldType::OptUuid => json!({ "type": "string", "format": "uuid", "nullable": true }),
        FieldType::Text => json!({ "type": "string" }),
        FieldType::OptText => json!({ "type": "string", "nullable": true }),
        FieldType::Bool => json!({ "type": "boolean" }),
        FieldType::OptBool => json!({ "type": "boolean", "nullable": true }),
        FieldType::Int => json!({ "type": "integer" }),
        FieldType::Object => json!({ "type": "object", "additionalProperties": true }),
        FieldType::StringList => json!({ "type": "array", "items": { "type": "string" } }),
        FieldType::Time => json!({ "type": "string", "format": "date-time" }),
        FieldType::OptTime => json!({ "type": "string", "format": "date-time", "nullable": true }),
        FieldType::Links => json!({ "$ref": "#/components/schemas/Links" }),
        FieldType::DeploySteps => steps_schema("priority", true),
        FieldType::RunbookSteps => steps_schema("order", false),
    }
}

/// A step list of a deploy template (`priority`) or runbook (`order`).
fn steps_schema(number: &str, args_required: bool) -> Value {
    let mut required = vec!["interface", "step", number];
    if args_required {
        required.push("args");
    }
    json!({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "properties": {
                "interface": {
                    "type": "string",
                    "enum": ferric_model::resources::STEP_INTERFACES,
                },
                "step": { "type": "string", "minLength": 1 },
                "args": { "type": "object", "additionalProperties": true },
                number: { "type": "integer", "minimum": 0 },
            },
            "required": required,
            "additionalProperties": false,
        },
    })
}

fn with_since(mut schema: Value, since: u16) -> Value {
    if since > 1 {
        schema["x-ironic-since"] = json!(format!("1.{since}"));
    }
    schema
}

/// A resource as responses show it: every field, none required but `links`. Even the
/// identity (`uuid`, a conductor's `hostname`) may be missing: `?fields=` shows only the
/// fields named plus `links`, as Ironic's `sanitize_dict` does.
fn resource_schema(table: &[FieldSpec]) -> Value {
    let mut properties = Map::new();
    for spec in table {
        let mut schema = with_since(field_type_schema(spec.ty), spec.since);
        if spec.access == Access::ReadOnly && !matches!(spec.ty, FieldType::Links) {
            schema["readOnly"] = json!(true);
        }
        properties.insert(spec.name.to_owned(), schema);
    }
    with_required(
        json!({ "type": "object", "properties": properties }),
        &["links"],
    )
}

/// Adds `required` unless it is empty (OpenAPI 3.0 refuses an empty list).
fn with_required(mut schema: Value, required: &[&str]) -> Value {
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

/// A create body: the fields callers may set, closed, `required` present.
fn create_schema(table: &[FieldSpec], required: &[&str]) -> Value {
    let mut properties = Map::new();
    for spec in table
        .iter()
        .filter(|spec| matches!(spec.access, Access::Writable | Access::CreateOnly))
    {
        let mut schema = field_type_schema(spec.ty);
        if required.contains(&spec.name) && spec.ty == FieldType::Text {
            schema["minLength"] = json!(1);
        }
        properties.insert(spec.name.to_owned(), with_since(schema, spec.since));
    }
    with_required(
        json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        }),
        required,
    )
}

/// `{"<key>": [<item>…], "next": "<url>"}`.
fn collection_schema(key: &str, item: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            key: { "type": "array", "items": { "$ref": format!("#/components/schemas/{item}") } },
            "next": { "type": "string", "description": "The next page, present when this one is full." },
        },
        "required": [key],
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    with_required(
        json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        }),
        required,
    )
}

fn schemas() -> Value {
    // In parts: one `json!` of everything would pass the macro recursion limit.
    let parts = [
        json!({
        "Error": {
            "type": "object",
            "description": "Ironic's error body: `error_message` is itself JSON text, \
                {\"faultcode\": \"Client\"|\"Server\", \"faultstring\": \"…\", \"debuginfo\": null}.",
            "properties": { "error_message": { "type": "string" } },
            "required": ["error_message"],
        },
        "Links": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "href": { "type": "string" },
                    "rel": { "type": "string" },
                    "type": { "type": "string" },
                },
                "required": ["href", "rel"],
            },
        },
        "Version": {
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "links": { "$ref": "#/components/schemas/Links" },
                "status": { "type": "string" },
                "min_version": { "type": "string" },
                "version": { "type": "string" },
            },
            "required": ["id", "links", "status", "min_version", "version"],
        },
        "Root": {
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "description": { "type": "string" },
                "default_version": { "$ref": "#/components/schemas/Version" },
                "versions": { "type": "array", "items": { "$ref": "#/components/schemas/Version" } },
            },
            "required": ["name", "description", "default_version", "versions"],
        },
        "V1": {
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "links": { "$ref": "#/components/schemas/Links" },
                "version": { "$ref": "#/components/schemas/Version" },
            },
            "required": ["id", "links"],
            "additionalProperties": true,
        },
        }),
        json!({
        "Node": resource_schema(node_fields::NODE_FIELDS),
        "NodeCreate": create_schema(node_fields::NODE_FIELDS, &["driver"]),
        "NodeCollection": collection_schema("nodes", "Node"),
        "Port": resource_schema(port_fields::PORT_FIELDS),
        "PortCreate": create_schema(port_fields::PORT_FIELDS, &["address", "node_uuid"]),
        "PortCollection": collection_schema("ports", "Port"),
        "Portgroup": resource_schema(portgroup_fields::PORTGROUP_FIELDS),
        "PortgroupCreate": create_schema(portgroup_fields::PORTGROUP_FIELDS, &["node_uuid"]),
        "PortgroupCollection": collection_schema("portgroups", "Portgroup"),
        "Chassis": resource_schema(chassis::CHASSIS_FIELDS),
        "ChassisCreate": create_schema(chassis::CHASSIS_FIELDS, &[]),
        "ChassisCollection": collection_schema("chassis", "Chassis"),
        "Conductor": resource_schema(conductors::CONDUCTOR_FIELDS),
        "ConductorCollection": collection_schema("conductors", "Conductor"),
        "NodeHistoryEvent": {
            "type": "object",
            "properties": {
                "uuid": { "type": "string", "format": "uuid" },
                "created_at": { "type": "string", "format": "date-time" },
                "severity": { "type": "string" },
                "event": { "type": "string" },
                "event_type": { "type": "string" },
                "conductor": { "type": "string", "nullable": true },
                "user": { "type": "string", "nullable": true },
                "links": { "$ref": "#/components/schemas/Links" },
            },
            "required": ["uuid", "created_at", "severity", "event"],
        },
        "NodeHistory": collection_schema("history", "NodeHistoryEvent"),
        }),
        json!({
        "JsonPatch": {
            "type": "array",
            "description": "RFC 6902, restricted to add, replace and remove on writable fields.",
            "items": {
                "type": "object",
                "properties": {
                    "op": { "type": "string", "enum": ["add", "replace", "remove"] },
                    "path": { "type": "string", "pattern": "^/" },
                    "value": {},
                },
                "required": ["op", "path"],
            },
        },
        "Driver": {
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "hosts": { "type": "array", "items": { "type": "string" } },
                "type": { "type": "string", "x-ironic-since": "1.30" },
                "links": { "$ref": "#/components/schemas/Links" },
                "properties": { "$ref": "#/components/schemas/Links" },
            },
            "required": ["name", "hosts"],
            "additionalProperties": true,
        },
        "DriverCollection": {
            "type": "object",
            "properties": {
                "drivers": { "type": "array", "items": { "$ref": "#/components/schemas/Driver" } },
            },
            "required": ["drivers"],
        },
        "DriverProperties": {
            "type": "object",
            "additionalProperties": { "type": "string" },
        },
        }),
        json!({
        "NodeStates": {
            "type": "object",
            "properties": {
                "console_enabled": { "type": "boolean" },
                "last_error": { "type": "string", "nullable": true },
                "power_state": { "type": "string", "nullable": true },
                "provision_state": { "type": "string", "nullable": true },
                "provision_updated_at": { "type": "string", "format": "date-time", "nullable": true },
                "target_power_state": { "type": "string", "nullable": true },
                "target_provision_state": { "type": "string", "nullable": true },
                "raid_config": { "type": "object", "x-ironic-since": "1.12" },
                "target_raid_config": { "type": "object", "x-ironic-since": "1.12" },
                "boot_mode": { "type": "string", "nullable": true, "x-ironic-since": "1.75" },
                "secure_boot": { "type": "boolean", "nullable": true, "x-ironic-since": "1.75" },
            },
            "required": ["console_enabled", "power_state", "provision_state"],
        },
        "ProvisionRequest": object(json!({
            "target": {
                "type": "string",
                "enum": ferric_model::machine::Verb::ALL.map(|verb| verb.as_str()),
            },
            "configdrive": { "nullable": true, "oneOf": [{ "type": "string" }, { "type": "object" }] },
            "clean_steps": { "$ref": "#/components/schemas/Steps" },
            "deploy_steps": { "$ref": "#/components/schemas/Steps" },
            "service_steps": { "$ref": "#/components/schemas/Steps" },
            "disable_ramdisk": { "type": "boolean" },
            "rescue_password": { "type": "string" },
            "runbook": {
                "type": "string",
                "description": "A runbook's name or UUID, instead of clean_steps/service_steps.",
                "x-ironic-since": "1.92",
            },
        }), &["target"]),
        "BiosSetting": {
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "value": { "type": "string", "nullable": true },
                "links": { "$ref": "#/components/schemas/Links" },
                "created_at": { "type": "string", "format": "date-time" },
                "updated_at": { "type": "string", "format": "date-time", "nullable": true },
            },
            "required": ["name", "value"],
            "additionalProperties": true,
        },
        "BiosSettings": {
            "type": "object",
            "properties": {
                "bios": { "type": "array", "items": { "$ref": "#/components/schemas/BiosSetting" } },
            },
            "required": ["bios"],
        },
        "BiosSettingShow": {
            "type": "object",
            "description": "{\"<setting name>\": BiosSetting}",
            "additionalProperties": { "$ref": "#/components/schemas/BiosSetting" },
        },
        "FirmwareComponents": {
            "type": "object",
            "properties": {
                "firmware": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "component": { "type": "string" },
                            "initial_version": { "type": "string" },
                            "current_version": { "type": "string" },
                            "last_version_flashed": { "type": "string", "nullable": true },
                            "created_at": { "type": "string", "format": "date-time" },
                            "updated_at": { "type": "string", "format": "date-time", "nullable": true },
                        },
                        "required": ["component", "initial_version", "current_version"],
                    },
                },
            },
            "required": ["firmware"],
        },
        "Inventory": {
            "type": "object",
            "properties": {
                "inventory": { "type": "object" },
                "plugin_data": { "type": "object" },
            },
            "required": ["inventory", "plugin_data"],
        },
        "Shards": {
            "type": "object",
            "properties": {
                "shards": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": { "type": "string", "description": "The shard; \"None\" counts the nodes in no shard." },
                            "count": { "type": "integer", "minimum": 1 },
                        },
                        "required": ["name", "count"],
                    },
                },
            },
            "required": ["shards"],
        },
        "Events": {
            "type": "object",
            "properties": {
                "events": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "event": { "type": "string", "enum": ["network.bind_port", "network.unbind_port", "network.delete_port"] },
                            "port_id": { "type": "string", "format": "uuid" },
                            "mac_address": { "type": "string", "pattern": "^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$" },
                            "status": { "type": "string" },
                            "device_id": { "type": "string", "format": "uuid", "nullable": true },
                            "binding:host_id": { "type": "string", "format": "uuid", "nullable": true },
                            "binding:vnic_type": { "type": "string", "nullable": true },
                        },
                        "required": ["event", "port_id", "mac_address", "status"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["events"],
            "additionalProperties": false,
        },
        "Lookup": {
            "type": "object",
            "properties": {
                "node": { "type": "object" },
                "config": { "type": "object" },
            },
            "required": ["node", "config"],
        },
        "HeartbeatRequest": {
            "type": "object",
            "properties": {
                "callback_url": { "type": "string" },
                "agent_token": { "type": "string", "x-ironic-since": "1.62" },
                "agent_version": { "type": "string", "x-ironic-since": "1.36" },
                "agent_verify_ca": { "type": "string", "x-ironic-since": "1.68" },
                "agent_status": { "type": "string", "x-ironic-since": "1.72" },
                "agent_status_message": { "type": "string", "x-ironic-since": "1.72" },
            },
            "required": ["callback_url"],
        },
        "Steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "interface": { "type": "string" },
                    "step": { "type": "string", "minLength": 1 },
                    "args": { "type": "object" },
                    "priority": { "type": "integer", "minimum": 0 },
                    "order": {},
                    "execute_on_child_nodes": { "type": "boolean" },
                    "limit_child_node_execution": { "type": "array", "items": { "type": "string" } },
                },
                "required": ["interface", "step"],
                "additionalProperties": false,
            },
        },
        "PowerRequest": object(json!({
            "target": {
                "type": "string",
                "enum": ["power on", "power off", "rebooting", "soft power off", "soft rebooting"],
            },
            "timeout": { "type": "integer", "minimum": 1, "x-ironic-since": "1.27" },
        }), &["target"]),
        }),
        json!({
        "BootDevice": {
            "type": "object",
            "properties": {
                "boot_device": { "type": "string", "nullable": true },
                "persistent": { "type": "boolean", "nullable": true },
            },
            "required": ["boot_device", "persistent"],
        },
        "BootDeviceRequest": object(json!({
            "boot_device": {
                "type": "string",
                "enum": ["pxe", "disk", "cdrom", "bios", "safe", "wanboot", "iscsiboot", "floppy", "uefihttp"],
            },
            "persistent": { "type": "boolean" },
        }), &["boot_device"]),
        "SupportedBootDevices": {
            "type": "object",
            "properties": {
                "supported_boot_devices": { "type": "array", "items": { "type": "string" } },
            },
            "required": ["supported_boot_devices"],
        },
        "Validation": {
            "type": "object",
            "description": "Per interface: {\"result\": bool, \"reason\": text when false}.",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "result": { "type": "boolean", "nullable": true },
                    "reason": { "type": "string", "nullable": true },
                },
            },
        },
        "MaintenanceRequest": object(json!({
            "reason": { "type": "string", "nullable": true },
        }), &[]),
        "RaidConfig": {
            "type": "object",
            "description": "A target RAID configuration: `{\"logical_disks\": [{\"size_gb\": \"MAX\", \
                \"raid_level\": \"1\", \"is_root_volume\": true, \"controller\": \"software\"}]}`, \
                or `{}` to clear it.",
            "properties": {
                "logical_disks": {
                    "type": "array",
                    "items": { "type": "object", "additionalProperties": true },
                },
            },
        },
        "NodeChildren": {
            "type": "object",
            "properties": {
                "children": { "type": "array", "items": { "type": "string", "format": "uuid" } },
                "links": {
                    "type": "object",
                    "properties": { "href": { "type": "string" }, "rel": { "type": "string" } },
                },
            },
            "required": ["children", "links"],
        },
        "Traits": {
            "type": "object",
            "properties": {
                "traits": { "type": "array", "items": { "type": "string" }, "maxItems": 50 },
            },
            "required": ["traits"],
            "additionalProperties": false,
        },
        "Vif": {
            "type": "object",
            "properties": { "id": { "type": "string" } },
            "required": ["id"],
        },
        "VifCollection": {
            "type": "object",
            "properties": {
                "vifs": { "type": "array", "items": { "$ref": "#/components/schemas/Vif" } },
            },
            "required": ["vifs"],
        },
        "VifAttachRequest": object(json!({
            "id": { "type": "string", "minLength": 1 },
            "port_uuid": { "type": "string", "format": "uuid", "x-ironic-since": "1.67" },
            "portgroup_uuid": { "type": "string", "format": "uuid", "x-ironic-since": "1.67" },
        }), &["id"]),
        "Health": { "type": "object", "additionalProperties": true },
        "Allocation": resource_schema(allocations::ALLOCATION_FIELDS),
        "AllocationCreate": {
            "allOf": [create_schema(allocations::ALLOCATION_FIELDS, &[])],
            "description": "`resource_class` is required unless `node` (1.58) names a deployed node to backfill.",
        },
        "AllocationCollection": collection_schema("allocations", "Allocation"),
        "DeployTemplate": resource_schema(deploy_templates::DEPLOY_TEMPLATE_FIELDS),
        "DeployTemplateCreate": create_schema(
            deploy_templates::DEPLOY_TEMPLATE_FIELDS,
            &["name", "steps"],
        ),
        "DeployTemplateCollection": collection_schema("deploy_templates", "DeployTemplate"),
        "Runbook": resource_schema(runbooks::RUNBOOK_FIELDS),
        "RunbookCreate": create_schema(runbooks::RUNBOOK_FIELDS, &["name", "steps"]),
        "RunbookCollection": collection_schema("runbooks", "Runbook"),
        }),
        json!({
        "BootModeRequest": object(json!({
            "target": { "type": "string", "enum": ["bios", "uefi"] },
        }), &["target"]),
        "SecureBootRequest": object(json!({
            "target": { "type": "boolean" },
        }), &["target"]),
        "InjectNmiRequest": object(json!({}), &[]),
        "VmediaAttachRequest": object(json!({
            "device_type": { "type": "string", "enum": ["cdrom", "floppy", "disk"] },
            "image_url": { "type": "string", "format": "uri" },
            "image_download_source": { "type": "string", "enum": ["http"] },
        }), &["device_type", "image_url"]),
        "VmediaList": {
            "type": "object",
            "properties": {
                "vmedia": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "device_type": { "type": "string" },
                            "image_url": { "type": "string", "nullable": true },
                            "inserted": { "type": "boolean" },
                            "location": { "type": "string" },
                        },
                    },
                },
            },
        },
        "VendorMethods": {
            "type": "object",
            "description": "Each vendor method by name.",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "async": { "type": "boolean" },
                    "attach": { "type": "boolean" },
                    "description": { "type": "string" },
                    "http_methods": { "type": "array", "items": { "type": "string" } },
                    "require_exclusive_lock": { "type": "boolean", "description": "Node methods only." },
                },
                "required": ["async", "attach", "description", "http_methods"],
            },
        },
        "VendorArguments": {
            "type": "object",
            "description": "The method's arguments; an empty body is {}.",
        },
        "VendorReturn": {
            "description": "What a synchronous method returned (any JSON value).",
        },
        "Volume": {
            "type": "object",
            "properties": {
                "links": { "$ref": "#/components/schemas/Links" },
                "connectors": { "$ref": "#/components/schemas/Links" },
                "targets": { "$ref": "#/components/schemas/Links" },
            },
            "required": ["links", "connectors", "targets"],
        },
        "VolumeConnector": resource_schema(volumes::CONNECTOR_FIELDS),
        "VolumeConnectorCreate": create_schema(volumes::CONNECTOR_FIELDS, volumes::CONNECTOR_REQUIRED),
        "VolumeConnectorCollection": collection_schema("connectors", "VolumeConnector"),
        "VolumeTarget": resource_schema(volumes::TARGET_FIELDS),
        "VolumeTargetCreate": create_schema(volumes::TARGET_FIELDS, volumes::TARGET_REQUIRED),
        "VolumeTargetCollection": collection_schema("targets", "VolumeTarget"),
        }),
    ];
    let mut all = Map::new();
    for part in parts {
        if let Value::Object(part) = part {
            all.extend(part);
        }
    }
    Value::Object(all)
}

// ---- parameters --------------------------------------------------------------------------

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "required": true,
        "description": description,
        "schema": { "type": "string" },
    })
}

fn parameters() -> Value {
    json!({
        "ApiVersion": {
            "name": "X-OpenStack-Ironic-API-Version",
            "in": "header",
            "required": false,
            "description": "The microversion: `1.N` or `latest`; 1.1 when absent.",
            "schema": { "type": "string", "pattern": "^(1\\.[0-9]+|latest)$" },
        },
        "node_ident": path_param("node_ident", "A node's UUID or name."),
        "port_ident": path_param("port_ident", "A port's UUID or name (1.88)."),
        "portgroup_ident": path_param("portgroup_ident", "A portgroup's UUID or name."),
        "chassis_uuid": path_param("chassis_uuid", "A chassis's UUID."),
        "hostname": path_param("hostname", "A conductor's hostname."),
        "driver_name": path_param("driver_name", "A hardware type's name."),
        "vendor_method": path_param("vendor_method", "A vendor method's name."),
        "method": {
            "name": "method", "in": "query", "required": true,
            "description": "The vendor method's name.",
            "schema": { "type": "string" },
        },
        "trait_name": path_param("trait_name", "A trait: CUSTOM_* or a standard trait."),
        "vif_id": path_param("vif_id", "The VIF's identifier."),
        "event_uuid": path_param("event_uuid", "A history event's UUID."),
        "allocation_ident": path_param("allocation_ident", "An allocation's UUID or name."),
        "template_ident": path_param("template_ident", "A deploy template's UUID or name."),
        "runbook_ident": path_param("runbook_ident", "A runbook's UUID or name."),
        "setting_name": path_param("setting_name", "A BIOS setting's name."),
        "connector_uuid": path_param("connector_uuid", "A volume connector's UUID."),
        "target_uuid": path_param("target_uuid", "A volume target's UUID."),
        "limit": {
            "name": "limit", "in": "query", "required": false,
            "description": "Page size, at most 1000.",
            "schema": { "type": "integer", "minimum": 1 },
        },
        "marker": {
            "name": "marker", "in": "query", "required": false,
            "description": "The UUID of the last item of the previous page.",
            "schema": { "type": "string", "format": "uuid" },
        },
        "sort_key": {
            "name": "sort_key", "in": "query", "required": false,
            "schema": { "type": "string" },
        },
        "sort_dir": {
            "name": "sort_dir", "in": "query", "required": false,
            "schema": { "type": "string", "enum": ["asc", "desc"] },
        },
        "fields": {
            "name": "fields", "in": "query", "required": false,
            "description": "Comma-separated field names (1.8).",
            "schema": { "type": "string" },
            "x-ironic-since": "1.8",
        },
        "detail": {
            "name": "detail", "in": "query", "required": false,
            "description": "Show every field (1.43); not with `fields`.",
            "schema": { "type": "boolean" },
            "x-ironic-since": "1.43",
        },
    })
}

fn error_responses() -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
        })
    };
    json!({
        "BadRequest": error("The request is invalid (Ironic's Invalid* family)."),
        "Unauthorized": error("Credentials are missing or wrong (http_basic)."),
        "Forbidden": error("The node is protected, or the action is not allowed."),
        "NotFound": error("No such resource, or the endpoint is newer than the microversion."),
        "MethodNotAllowed": error("The path does not accept this method."),
        "NotAcceptable": error("The microversion is outside the supported range, or a field, filter or verb is newer than it."),
        "Conflict": error("A duplicate, a locked node, or a state that refuses the change."),
        "PayloadTooLarge": error("The body is larger than the configured limit."),
        "UnsupportedMediaType": error("The body is not JSON."),
        "ServiceUnavailable": error("No conductor can take the work now; retry."),
        "InternalError": error("An unexpected fault; details are in the server log."),
    })
}

// ---- operations --------------------------------------------------------------------------

/// One documented route and method.
pub(crate) struct Operation {
    method: &'static str,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    since: u16,
    params: Vec<Value>,
    body: Option<&'static str>,
    /// The success status and its schema (`None`: no body).
    success: (u16, Option<&'static str>),
    /// Error statuses this operation can answer besides the ones every operation can.
    errors: &'static [u16],
    /// Also answers 202 with no body (asynchronous vendor methods).
    accepted_too: bool,
    /// The body may be left out.
    body_optional: bool,
}

fn op(method: &'static str, path: &'static str, id: &'static str) -> Operation {
    Operation {
        method,
        path,
        id,
        summary: "",
        since: 1,
        params: Vec::new(),
        body: None,
        success: (200, None),
        errors: &[],
        accepted_too: false,
        body_optional: false,
    }
}

impl Operation {
    fn summary(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }

    fn since(mut self, since: u16) -> Self {
        self.since = since;
        self
    }

    fn refs(mut self, names: &[&str]) -> Self {
        self.params.extend(
            names
                .iter()
                .map(|name| json!({ "$ref": format!("#/components/parameters/{name}") })),
        );
        self
    }

    fn param(mut self, param: Value) -> Self {
        self.params.push(param);
        self
    }

    fn body(mut self, schema: &'static str) -> Self {
        self.body = Some(schema);
        self
    }

    fn ok(mut self, status: u16, schema: Option<&'static str>) -> Self {
        self.success = (status, schema);
        self
    }

    fn errors(mut self, errors: &'static [u16]) -> Self {
        self.errors = errors;
        self
    }

    /// A vendor passthru call: an optional body of arguments, 200 with the return value or
    /// 202 for an asynchronous method.
    fn vendor_call(mut self) -> Self {
        if matches!(self.method, "post" | "put" | "patch") {
            self.body = Some("VendorArguments");
            self.body_optional = true;
        }
        self.accepted_too = true;
        self.success = (200, Some("VendorReturn"));
        self.errors = &[400, 409, 503];
        self
    }

    /// A listing: paging parameters, `fields` (not on detail paths), and its filters.
    fn listing(mut self, filters: &[(&str, u16)], detail_path: bool) -> Self {
        self = self.refs(&["limit", "marker", "sort_key", "sort_dir"]);
        if !detail_path {
            self = self.refs(&["fields", "detail"]);
        }
        for (name, since) in filters {
            self.params.push(filter_param(name, *since));
        }
        self
    }

    fn to_json(&self) -> Value {
        let mut parameters = vec![json!({ "$ref": "#/components/parameters/ApiVersion" })];
        parameters.extend(self.params.iter().cloned());
        let (status, schema) = self.success;
        let success = match schema {
            Some(schema) => json!({
                "description": "Success.",
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
            }),
            None => json!({ "description": "Success, no body." }),
        };
        let mut responses = Map::new();
        responses.insert(status.to_string(), success);
        if self.accepted_too {
            responses.insert(
                "202".to_owned(),
                json!({ "description": "Started (an asynchronous method), no body." }),
            );
        }
        let mut errors: Vec<u16> = vec![401, 404, 406, 500];
        if self.body.is_some() {
            errors.extend([400, 413, 415]);
        }
        errors.extend(self.errors.iter().copied());
        errors.sort_unstable();
        errors.dedup();
        for error in errors {
            let name = match error {
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                405 => "MethodNotAllowed",
                406 => "NotAcceptable",
                409 => "Conflict",
                413 => "PayloadTooLarge",
                415 => "UnsupportedMediaType",
                503 => "ServiceUnavailable",
                _ => "InternalError",
            };
            responses.insert(
                error.to_string(),
                json!({ "$ref": format!("#/components/responses/{name}") }),
            );
        }
        let mut operation = json!({
            "operationId": self.id,
            "summary": self.summary,
            "tags": [self.path.trim_start_matches("/v1/").split('/').next().unwrap_or("root")],
            "parameters": parameters,
            "responses": responses,
        });
        if self.since > 1 {
            operation["x-ironic-since"] = json!(format!("1.{}", self.since));
        }
        if let Some(body) = self.body {
            operation["requestBody"] = json!({
                "required": !self.body_optional,
                "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{body}") } } },
            });
        }
        operation
    }
}

/// A list filter, typed by what the handler parses.
fn filter_param(name: &str, since: u16) -> Value {
    let schema = match name {
        "associated" | "maintenance" | "retired" | "sharded" | "include_children" => {
            json!({ "type": "boolean" })
        }
        "instance_uuid" | "chassis_uuid" | "parent_node" | "node_uuid" => {
            json!({ "type": "string", "format": "uuid" })
        }
        "provision_state" => json!({
            "type": "string",
            "enum": ferric_model::ProvisionState::ALL.map(|state| state.as_str()),
        }),
        "fault" => json!({
            "type": "string",
            "enum": ["power failure", "clean failure", "rescue abort failure", "service failure"],
        }),
        "shard" | "conductor_groups" => json!({
            "type": "string",
            "description": "A comma-separated list: records of nodes in any of them.",
        }),
        _ => json!({ "type": "string" }),
    };
    let mut param = json!({ "name": name, "in": "query", "required": false, "schema": schema });
    if since > 1 {
        param["x-ironic-since"] = json!(format!("1.{since}"));
    }
    param
}

/// Every operation Ferric serves, in route order.
pub(crate) fn operations() -> Vec<Operation> {
    const NODE: &[&str] = &["node_ident"];
    vec![
        op("get", "/", "root_get")
            .summary("Version discovery: the API's versions")
            .ok(200, Some("Root")),
        op("get", "/v1", "v1_get")
            .summary("Version discovery: the v1 document and its resources")
            .ok(200, Some("V1")),
        op("get", "/health", "health_get")
            .summary("Health of the database and the conductor's reconcilers")
            .ok(200, Some("Health"))
            .errors(&[503]),
        // Nodes.
        op("get", "/v1/nodes", "node_list")
            .summary("List nodes (default fields, or ?fields=)")
            .listing(nodes::NODE_FILTERS, false)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        op("post", "/v1/nodes", "node_create")
            .summary("Enroll a node")
            .body("NodeCreate")
            .ok(201, Some("Node"))
            .errors(&[409]),
        op("get", "/v1/nodes/detail", "node_list_detail")
            .summary("List nodes with every field")
            .listing(nodes::NODE_FILTERS, true)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}", "node_get")
            .summary("Show a node")
            .refs(NODE)
            .refs(&["fields"])
            .ok(200, Some("Node"))
            .errors(&[400]),
        op("patch", "/v1/nodes/{node_ident}", "node_update")
            .summary("Update a node (JSON patch)")
            .refs(NODE)
            .body("JsonPatch")
            .ok(200, Some("Node"))
            .errors(&[409]),
        op("delete", "/v1/nodes/{node_ident}", "node_delete")
            .summary("Delete a node")
            .refs(NODE)
            .ok(204, None)
            .errors(&[403, 409]),
        // Node states and management.
        op("get", "/v1/nodes/{node_ident}/states", "node_states_get")
            .summary("A node's power, provision and RAID states")
            .refs(NODE)
            .ok(200, Some("NodeStates")),
        op("put", "/v1/nodes/{node_ident}/states/provision", "node_provision_set")
            .summary("Request a provision state change")
            .refs(NODE)
            .body("ProvisionRequest")
            .ok(202, None)
            .errors(&[409, 503]),
        op("put", "/v1/nodes/{node_ident}/states/power", "node_power_set")
            .summary("Request a power state change")
            .refs(NODE)
            .body("PowerRequest")
            .ok(202, None)
            .errors(&[409, 503]),
        op("get", "/v1/nodes/{node_ident}/management/boot_device", "node_boot_device_get")
            .summary("The node's boot device")
            .refs(NODE)
            .ok(200, Some("BootDevice"))
            .errors(&[400, 409, 503]),
        op("put", "/v1/nodes/{node_ident}/management/boot_device", "node_boot_device_set")
            .summary("Set the node's boot device")
            .refs(NODE)
            .body("BootDeviceRequest")
            .ok(204, None)
            .errors(&[409, 503]),
        op(
            "get",
            "/v1/nodes/{node_ident}/management/boot_device/supported",
            "node_boot_device_supported",
        )
        .summary("The boot devices the node supports")
        .refs(NODE)
        .ok(200, Some("SupportedBootDevices"))
        .errors(&[400, 409, 503]),
        op("get", "/v1/nodes/{node_ident}/validate", "node_validate")
            .summary("Validate the node's interfaces")
            .refs(NODE)
            .ok(200, Some("Validation"))
            .errors(&[409, 503]),
        op("put", "/v1/nodes/{node_ident}/maintenance", "node_maintenance_set")
            .summary("Put the node in maintenance")
            .refs(NODE)
            .body("MaintenanceRequest")
            .ok(202, None)
            .errors(&[409]),
        op("delete", "/v1/nodes/{node_ident}/maintenance", "node_maintenance_unset")
            .summary("Take the node out of maintenance")
            .refs(NODE)
            .ok(202, None)
            .errors(&[409]),
        op("put", "/v1/nodes/{node_ident}/states/raid", "node_raid_set")
            .summary("Set the node's target RAID configuration")
            .since(12)
            .refs(NODE)
            .body("RaidConfig")
            .ok(204, None)
            .errors(&[409]),
        // Traits, VIFs, history.
        op("get", "/v1/nodes/{node_ident}/traits", "trait_list")
            .summary("The node's traits")
            .since(37)
            .refs(NODE)
            .ok(200, Some("Traits")),
        op("put", "/v1/nodes/{node_ident}/traits", "trait_replace_all")
            .summary("Replace all of the node's traits")
            .since(37)
            .refs(NODE)
            .body("Traits")
            .ok(204, None)
            .errors(&[409]),
        op("delete", "/v1/nodes/{node_ident}/traits", "trait_delete_all")
            .summary("Remove all of the node's traits")
            .since(37)
            .refs(NODE)
            .ok(204, None)
            .errors(&[409]),
        op("put", "/v1/nodes/{node_ident}/traits/{trait_name}", "trait_add")
            .summary("Add one trait")
            .since(37)
            .refs(&["node_ident", "trait_name"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("delete", "/v1/nodes/{node_ident}/traits/{trait_name}", "trait_delete")
            .summary("Remove one trait")
            .since(37)
            .refs(&["node_ident", "trait_name"])
            .ok(204, None)
            .errors(&[409]),
        op("get", "/v1/nodes/{node_ident}/vifs", "vif_list")
            .summary("The VIFs attached to the node")
            .since(28)
            .refs(NODE)
            .ok(200, Some("VifCollection")),
        op("post", "/v1/nodes/{node_ident}/vifs", "vif_attach")
            .summary("Attach a VIF")
            .since(28)
            .refs(NODE)
            .body("VifAttachRequest")
            .ok(204, None)
            .errors(&[409]),
        op("delete", "/v1/nodes/{node_ident}/vifs/{vif_id}", "vif_detach")
            .summary("Detach a VIF")
            .since(28)
            .refs(&["node_ident", "vif_id"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("get", "/v1/nodes/{node_ident}/children", "node_children_list")
            .summary("The UUIDs of the node's child nodes")
            .since(83)
            .refs(NODE)
            .ok(200, Some("NodeChildren"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/history", "history_list")
            .summary("The node's history of events")
            .since(78)
            .refs(NODE)
            .refs(&["detail"])
            .ok(200, Some("NodeHistory"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/history/{event_uuid}", "history_get")
            .summary("One history event")
            .since(78)
            .refs(&["node_ident", "event_uuid"])
            .ok(200, Some("NodeHistoryEvent"))
            .errors(&[400]),
        // Ports.
        op("get", "/v1/ports", "port_list")
            .summary("List ports")
            .listing(ports::PORT_FILTERS, false)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op("post", "/v1/ports", "port_create")
            .summary("Create a port")
            .body("PortCreate")
            .ok(201, Some("Port"))
            .errors(&[409]),
        op("get", "/v1/ports/detail", "port_list_detail")
            .summary("List ports with every field")
            .listing(ports::PORT_FILTERS, true)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op("get", "/v1/ports/{port_ident}", "port_get")
            .summary("Show a port")
            .refs(&["port_ident", "fields"])
            .ok(200, Some("Port"))
            .errors(&[400]),
        op("patch", "/v1/ports/{port_ident}", "port_update")
            .summary("Update a port (JSON patch)")
            .refs(&["port_ident"])
            .body("JsonPatch")
            .ok(200, Some("Port"))
            .errors(&[409]),
        op("delete", "/v1/ports/{port_ident}", "port_delete")
            .summary("Delete a port")
            .refs(&["port_ident"])
            .ok(204, None)
            .errors(&[409]),
        op("get", "/v1/nodes/{node_ident}/ports", "node_port_list")
            .summary("List a node's ports")
            .refs(NODE)
            .listing(&[], false)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/ports/detail", "node_port_list_detail")
            .summary("List a node's ports with every field")
            .refs(NODE)
            .listing(&[], true)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        // Portgroups.
        op("get", "/v1/portgroups", "portgroup_list")
            .summary("List portgroups")
            .since(23)
            .listing(portgroups::PORTGROUP_FILTERS, false)
            .ok(200, Some("PortgroupCollection"))
            .errors(&[400]),
        op("post", "/v1/portgroups", "portgroup_create")
            .summary("Create a portgroup")
            .since(23)
            .body("PortgroupCreate")
            .ok(201, Some("Portgroup"))
            .errors(&[409]),
        op("get", "/v1/portgroups/detail", "portgroup_list_detail")
            .summary("List portgroups with every field")
            .since(23)
            .listing(portgroups::PORTGROUP_FILTERS, true)
            .ok(200, Some("PortgroupCollection"))
            .errors(&[400]),
        op("get", "/v1/portgroups/{portgroup_ident}", "portgroup_get")
            .summary("Show a portgroup")
            .since(23)
            .refs(&["portgroup_ident", "fields"])
            .ok(200, Some("Portgroup"))
            .errors(&[400]),
        op("patch", "/v1/portgroups/{portgroup_ident}", "portgroup_update")
            .summary("Update a portgroup (JSON patch)")
            .since(23)
            .refs(&["portgroup_ident"])
            .body("JsonPatch")
            .ok(200, Some("Portgroup"))
            .errors(&[409]),
        op("delete", "/v1/portgroups/{portgroup_ident}", "portgroup_delete")
            .summary("Delete a portgroup (it must have no ports)")
            .since(23)
            .refs(&["portgroup_ident"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("get", "/v1/portgroups/{portgroup_ident}/ports", "portgroup_port_list")
            .summary("List a portgroup's ports")
            .since(24)
            .refs(&["portgroup_ident"])
            .listing(&[], false)
            .ok(200, Some("PortCollection"))
            .errors(&[400]),
        op(
            "get",
            "/v1/portgroups/{portgroup_ident}/ports/detail",
            "portgroup_port_list_detail",
        )
        .summary("List a portgroup's ports with every field")
        .since(24)
        .refs(&["portgroup_ident"])
        .listing(&[], true)
        .ok(200, Some("PortCollection"))
        .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/portgroups", "node_portgroup_list")
            .summary("List a node's portgroups")
            .since(24)
            .refs(NODE)
            .listing(&[], false)
            .ok(200, Some("PortgroupCollection"))
            .errors(&[400]),
        op(
            "get",
            "/v1/nodes/{node_ident}/portgroups/detail",
            "node_portgroup_list_detail",
        )
        .summary("List a node's portgroups with every field")
        .since(24)
        .refs(NODE)
        .listing(&[], true)
        .ok(200, Some("PortgroupCollection"))
        .errors(&[400]),
        // Chassis.
        op("get", "/v1/chassis", "chassis_list")
            .summary("List chassis")
            .listing(&[], false)
            .ok(200, Some("ChassisCollection"))
            .errors(&[400]),
        op("post", "/v1/chassis", "chassis_create")
            .summary("Create a chassis")
            .body("ChassisCreate")
            .ok(201, Some("Chassis"))
            .errors(&[409]),
        op("get", "/v1/chassis/detail", "chassis_list_detail")
            .summary("List chassis with every field")
            .listing(&[], true)
            .ok(200, Some("ChassisCollection"))
            .errors(&[400]),
        op("get", "/v1/chassis/{chassis_uuid}", "chassis_get")
            .summary("Show a chassis")
            .refs(&["chassis_uuid", "fields"])
            .ok(200, Some("Chassis"))
            .errors(&[400]),
        op("patch", "/v1/chassis/{chassis_uuid}", "chassis_update")
            .summary("Update a chassis (JSON patch)")
            .refs(&["chassis_uuid"])
            .body("JsonPatch")
            .ok(200, Some("Chassis"))
            .errors(&[409]),
        op("delete", "/v1/chassis/{chassis_uuid}", "chassis_delete")
            .summary("Delete a chassis (it must have no nodes)")
            .refs(&["chassis_uuid"])
            .ok(204, None)
            .errors(&[400]),
        op("get", "/v1/chassis/{chassis_uuid}/nodes", "chassis_node_list")
            .summary("List a chassis's nodes")
            .refs(&["chassis_uuid"])
            .listing(nodes::NODE_FILTERS, false)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        op("get", "/v1/chassis/{chassis_uuid}/nodes/detail", "chassis_node_list_detail")
            .summary("List a chassis's nodes with every field")
            .refs(&["chassis_uuid"])
            .listing(nodes::NODE_FILTERS, true)
            .ok(200, Some("NodeCollection"))
            .errors(&[400]),
        // Drivers and conductors.
        op("get", "/v1/drivers", "driver_list")
            .summary("List the enabled hardware types")
            .param(json!({ "name": "type", "in": "query", "required": false,
                "schema": { "type": "string", "enum": ["classic", "dynamic"] }, "x-ironic-since": "1.30" }))
            .param(json!({ "name": "detail", "in": "query", "required": false,
                "schema": { "type": "boolean" }, "x-ironic-since": "1.30" }))
            .ok(200, Some("DriverCollection"))
            .errors(&[400]),
        op("get", "/v1/drivers/{driver_name}", "driver_get")
            .summary("Show a hardware type")
            .refs(&["driver_name"])
            .ok(200, Some("Driver")),
        op("get", "/v1/drivers/{driver_name}/properties", "driver_properties_get")
            .summary("The driver_info properties a hardware type reads")
            .refs(&["driver_name"])
            .ok(200, Some("DriverProperties")),
        op(
            "get",
            "/v1/drivers/{driver_name}/raid/logical_disk_properties",
            "driver_raid_properties",
        )
        .summary("What each property of a RAID logical disk means")
        .since(12)
        .refs(&["driver_name"])
        .ok(200, Some("DriverProperties")),
        // Allocations.
        op("get", "/v1/allocations", "allocation_list")
            .summary("List allocations")
            .since(52)
            .listing(allocations::ALLOCATION_FILTERS, false)
            .ok(200, Some("AllocationCollection"))
            .errors(&[400]),
        op("post", "/v1/allocations", "allocation_create")
            .summary("Ask for a node: matched at once, answered active or error")
            .since(52)
            .body("AllocationCreate")
            .ok(201, Some("Allocation"))
            .errors(&[409]),
        op("get", "/v1/allocations/{allocation_ident}", "allocation_get")
            .summary("Show an allocation")
            .since(52)
            .refs(&["allocation_ident", "fields"])
            .ok(200, Some("Allocation"))
            .errors(&[400]),
        op("patch", "/v1/allocations/{allocation_ident}", "allocation_update")
            .summary("Rename an allocation or change its extra (1.57)")
            .since(52)
            .refs(&["allocation_ident"])
            .body("JsonPatch")
            .ok(200, Some("Allocation"))
            .errors(&[405, 409]),
        op("delete", "/v1/allocations/{allocation_ident}", "allocation_delete")
            .summary("Delete an allocation, freeing its node")
            .since(52)
            .refs(&["allocation_ident"])
            .ok(204, None)
            .errors(&[409]),
        op("get", "/v1/nodes/{node_ident}/allocation", "node_allocation_get")
            .summary("The node's allocation")
            .since(52)
            .refs(&["node_ident", "fields"])
            .ok(200, Some("Allocation"))
            .errors(&[400]),
        op("delete", "/v1/nodes/{node_ident}/allocation", "node_allocation_delete")
            .summary("Delete the node's allocation")
            .since(52)
            .refs(NODE)
            .ok(204, None)
            .errors(&[409]),
        // Deploy templates and runbooks.
        op("get", "/v1/deploy_templates", "deploy_template_list")
            .summary("List deploy templates")
            .since(55)
            .listing(&[], false)
            .ok(200, Some("DeployTemplateCollection"))
            .errors(&[400]),
        op("post", "/v1/deploy_templates", "deploy_template_create")
            .summary("Create a deploy template")
            .since(55)
            .body("DeployTemplateCreate")
            .ok(201, Some("DeployTemplate"))
            .errors(&[400, 405, 409]),
        op("get", "/v1/deploy_templates/detail", "deploy_template_list_detail")
            .summary("List deploy templates with every field")
            .since(55)
            .listing(&[], true)
            .ok(200, Some("DeployTemplateCollection"))
            .errors(&[400]),
        op("get", "/v1/deploy_templates/{template_ident}", "deploy_template_get")
            .summary("Show a deploy template")
            .since(55)
            .refs(&["template_ident", "fields"])
            .ok(200, Some("DeployTemplate"))
            .errors(&[400]),
        op("patch", "/v1/deploy_templates/{template_ident}", "deploy_template_update")
            .summary("Update a deploy template (JSON patch)")
            .since(55)
            .refs(&["template_ident"])
            .body("JsonPatch")
            .ok(200, Some("DeployTemplate"))
            .errors(&[400, 405, 409]),
        op("delete", "/v1/deploy_templates/{template_ident}", "deploy_template_delete")
            .summary("Delete a deploy template")
            .since(55)
            .refs(&["template_ident"])
            .ok(204, None)
            .errors(&[400, 405]),
        op("get", "/v1/runbooks", "runbook_list")
            .summary("List runbooks")
            .since(92)
            .listing(&[], false)
            .ok(200, Some("RunbookCollection"))
            .errors(&[400]),
        op("post", "/v1/runbooks", "runbook_create")
            .summary("Create a runbook")
            .since(92)
            .body("RunbookCreate")
            .ok(201, Some("Runbook"))
            .errors(&[400, 405, 409]),
        op("get", "/v1/runbooks/detail", "runbook_list_detail")
            .summary("List runbooks with every field")
            .since(92)
            .listing(&[], true)
            .ok(200, Some("RunbookCollection"))
            .errors(&[400]),
        op("get", "/v1/runbooks/{runbook_ident}", "runbook_get")
            .summary("Show a runbook")
            .since(92)
            .refs(&["runbook_ident", "fields"])
            .ok(200, Some("Runbook"))
            .errors(&[400]),
        op("patch", "/v1/runbooks/{runbook_ident}", "runbook_update")
            .summary("Update a runbook (JSON patch)")
            .since(92)
            .refs(&["runbook_ident"])
            .body("JsonPatch")
            .ok(200, Some("Runbook"))
            .errors(&[400, 405, 409]),
        op("delete", "/v1/runbooks/{runbook_ident}", "runbook_delete")
            .summary("Delete a runbook")
            .since(92)
            .refs(&["runbook_ident"])
            .ok(204, None)
            .errors(&[400, 405]),
        op("get", "/v1/runbooks/{runbook_ident}/traits", "runbook_trait_list")
            .summary("The runbook's traits")
            .since(112)
            .refs(&["runbook_ident"])
            .ok(200, Some("Traits"))
            .errors(&[400]),
        op("put", "/v1/runbooks/{runbook_ident}/traits", "runbook_trait_replace_all")
            .summary("Replace all of the runbook's traits")
            .since(112)
            .refs(&["runbook_ident"])
            .body("Traits")
            .ok(204, None)
            .errors(&[400, 409]),
        op("delete", "/v1/runbooks/{runbook_ident}/traits", "runbook_trait_delete_all")
            .summary("Remove all of the runbook's traits")
            .since(112)
            .refs(&["runbook_ident"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("put", "/v1/runbooks/{runbook_ident}/traits/{trait_name}", "runbook_trait_add")
            .summary("Add one trait to the runbook")
            .since(112)
            .refs(&["runbook_ident", "trait_name"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("delete", "/v1/runbooks/{runbook_ident}/traits/{trait_name}", "runbook_trait_delete")
            .summary("Remove one trait from the runbook")
            .since(112)
            .refs(&["runbook_ident", "trait_name"])
            .ok(204, None)
            .errors(&[400, 409]),
        // Node data, shards, events.
        op("get", "/v1/nodes/{node_ident}/bios", "bios_list")
            .summary("The node's BIOS settings")
            .since(40)
            .refs(NODE)
            .param(json!({ "name": "detail", "in": "query", "required": false,
                "schema": { "type": "boolean" }, "x-ironic-since": "1.74" }))
            .ok(200, Some("BiosSettings"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/bios/{setting_name}", "bios_get")
            .summary("One BIOS setting")
            .since(40)
            .refs(&["node_ident", "setting_name"])
            .ok(200, Some("BiosSettingShow")),
        op("get", "/v1/nodes/{node_ident}/firmware", "firmware_list")
            .summary("The node's firmware components and their versions")
            .since(86)
            .refs(NODE)
            .ok(200, Some("FirmwareComponents")),
        op("get", "/v1/nodes/{node_ident}/inventory", "inventory_get")
            .summary("What inspection stored about the node")
            .since(81)
            .refs(NODE)
            .ok(200, Some("Inventory")),
        op("get", "/v1/shards", "shard_list")
            .summary("Shards and how many nodes each has")
            .since(82)
            .ok(200, Some("Shards")),
        op("post", "/v1/events", "event_post")
            .summary("Network events from Neutron (accepted and logged)")
            .since(54)
            .body("Events")
            .ok(204, None),
        // Boot mode, secure boot, NMI.
        op("put", "/v1/nodes/{node_ident}/states/boot_mode", "node_boot_mode_set")
            .summary("Set the node's firmware boot mode")
            .since(76)
            .refs(NODE)
            .body("BootModeRequest")
            .ok(202, None)
            .errors(&[409, 503]),
        op("put", "/v1/nodes/{node_ident}/states/secure_boot", "node_secure_boot_set")
            .summary("Turn the node's UEFI secure boot on or off")
            .since(76)
            .refs(NODE)
            .body("SecureBootRequest")
            .ok(202, None)
            .errors(&[409, 503]),
        op("put", "/v1/nodes/{node_ident}/management/inject_nmi", "node_inject_nmi")
            .summary("Send the node a non-maskable interrupt")
            .since(29)
            .refs(NODE)
            .body("InjectNmiRequest")
            .ok(204, None)
            .errors(&[409, 503]),
        op("post", "/v1/nodes/{node_ident}/vmedia", "node_vmedia_attach")
            .summary("Attach an image as the node's virtual CD, floppy or USB disk")
            .since(89)
            .refs(NODE)
            .body("VmediaAttachRequest")
            .ok(204, None)
            .errors(&[409, 503]),
        op("delete", "/v1/nodes/{node_ident}/vmedia", "node_vmedia_detach")
            .summary("Eject the node's virtual media (?device_types=cdrom,… limits it)")
            .since(89)
            .refs(NODE)
            .ok(204, None)
            .errors(&[409, 503]),
        op("get", "/v1/nodes/{node_ident}/vmedia", "node_vmedia_list")
            .summary("The node's virtual media devices as its BMC reports them")
            .since(93)
            .refs(NODE)
            .ok(200, Some("VmediaList"))
            .errors(&[409, 503]),
        // Vendor passthru.
        op("get", "/v1/nodes/{node_ident}/vendor_passthru/methods", "node_vendor_methods")
            .summary("The node's vendor passthru methods")
            .refs(NODE)
            .ok(200, Some("VendorMethods"))
            .errors(&[400]),
    ]
    .into_iter()
    .chain(vendor_calls(
        "/v1/nodes/{node_ident}/vendor_passthru",
        &["node_ident", "method"],
        [
            "node_vendor_call_get",
            "node_vendor_call_post",
            "node_vendor_call_put",
            "node_vendor_call_patch",
            "node_vendor_call_delete",
        ],
    ))
    .chain(vendor_calls(
        "/v1/nodes/{node_ident}/vendor_passthru/{vendor_method}",
        &["node_ident", "vendor_method"],
        [
            "node_vendor_call_named_get",
            "node_vendor_call_named_post",
            "node_vendor_call_named_put",
            "node_vendor_call_named_patch",
            "node_vendor_call_named_delete",
        ],
    ))
    .chain([op(
        "get",
        "/v1/drivers/{driver_name}/vendor_passthru/methods",
        "driver_vendor_methods",
    )
    .summary("The hardware type's driver-level vendor passthru methods")
    .refs(&["driver_name"])
    .ok(200, Some("VendorMethods"))
    .errors(&[400])])
    .chain(vendor_calls(
        "/v1/drivers/{driver_name}/vendor_passthru",
        &["driver_name", "method"],
        [
            "driver_vendor_call_get",
            "driver_vendor_call_post",
            "driver_vendor_call_put",
            "driver_vendor_call_patch",
            "driver_vendor_call_delete",
        ],
    ))
    .chain(vendor_calls(
        "/v1/drivers/{driver_name}/vendor_passthru/{vendor_method}",
        &["driver_name", "vendor_method"],
        [
            "driver_vendor_call_named_get",
            "driver_vendor_call_named_post",
            "driver_vendor_call_named_put",
            "driver_vendor_call_named_patch",
            "driver_vendor_call_named_delete",
        ],
    ))
    .chain([
        // Volume connectors and targets.
        op("get", "/v1/volume", "volume_get")
            .summary("Links to the volume connectors and targets")
            .since(32)
            .ok(200, Some("Volume")),
        op("get", "/v1/volume/connectors", "volume_connector_list")
            .summary("List volume connectors (default fields, ?fields= or ?detail=)")
            .since(32)
            .listing(volumes::VOLUME_FILTERS, false)
            .ok(200, Some("VolumeConnectorCollection"))
            .errors(&[400]),
        op("post", "/v1/volume/connectors", "volume_connector_create")
            .summary("Create a volume connector")
            .since(32)
            .body("VolumeConnectorCreate")
            .ok(201, Some("VolumeConnector"))
            .errors(&[409]),
        op("get", "/v1/volume/connectors/{connector_uuid}", "volume_connector_get")
            .summary("Show a volume connector")
            .since(32)
            .refs(&["connector_uuid", "fields"])
            .ok(200, Some("VolumeConnector"))
            .errors(&[400]),
        op("patch", "/v1/volume/connectors/{connector_uuid}", "volume_connector_update")
            .summary("Update a volume connector (JSON patch; the node must be powered off)")
            .since(32)
            .refs(&["connector_uuid"])
            .body("JsonPatch")
            .ok(200, Some("VolumeConnector"))
            .errors(&[409]),
        op("delete", "/v1/volume/connectors/{connector_uuid}", "volume_connector_delete")
            .summary("Delete a volume connector (the node must be powered off or deletable)")
            .since(32)
            .refs(&["connector_uuid"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("get", "/v1/volume/targets", "volume_target_list")
            .summary("List volume targets (default fields, ?fields= or ?detail=)")
            .since(32)
            .listing(volumes::VOLUME_FILTERS, false)
            .ok(200, Some("VolumeTargetCollection"))
            .errors(&[400]),
        op("post", "/v1/volume/targets", "volume_target_create")
            .summary("Create a volume target")
            .since(32)
            .body("VolumeTargetCreate")
            .ok(201, Some("VolumeTarget"))
            .errors(&[409]),
        op("get", "/v1/volume/targets/{target_uuid}", "volume_target_get")
            .summary("Show a volume target")
            .since(32)
            .refs(&["target_uuid", "fields"])
            .ok(200, Some("VolumeTarget"))
            .errors(&[400]),
        op("patch", "/v1/volume/targets/{target_uuid}", "volume_target_update")
            .summary("Update a volume target (JSON patch; the node must be powered off)")
            .since(32)
            .refs(&["target_uuid"])
            .body("JsonPatch")
            .ok(200, Some("VolumeTarget"))
            .errors(&[409]),
        op("delete", "/v1/volume/targets/{target_uuid}", "volume_target_delete")
            .summary("Delete a volume target (the node must be powered off or deletable)")
            .since(32)
            .refs(&["target_uuid"])
            .ok(204, None)
            .errors(&[400, 409]),
        op("get", "/v1/nodes/{node_ident}/volume", "node_volume_get")
            .summary("Links to the node's volume connectors and targets")
            .since(32)
            .refs(NODE)
            .ok(200, Some("Volume")),
        op("get", "/v1/nodes/{node_ident}/volume/connectors", "node_volume_connector_list")
            .summary("List the node's volume connectors")
            .since(32)
            .refs(NODE)
            .listing(&[], false)
            .ok(200, Some("VolumeConnectorCollection"))
            .errors(&[400]),
        op("get", "/v1/nodes/{node_ident}/volume/targets", "node_volume_target_list")
            .summary("List the node's volume targets")
            .since(32)
            .refs(NODE)
            .listing(&[], false)
            .ok(200, Some("VolumeTargetCollection"))
            .errors(&[400]),
        // The ramdisk agent's endpoints (public).
        op("get", "/v1/lookup", "lookup")
            .summary("An agent finds its node by MAC addresses or UUID (and gets its token)")
            .since(22)
            .param(json!({ "name": "addresses", "in": "query", "required": false,
                "description": "Comma-separated MAC addresses.", "schema": { "type": "string" } }))
            .param(json!({ "name": "node_uuid", "in": "query", "required": false,
                "schema": { "type": "string", "format": "uuid" } }))
            .ok(200, Some("Lookup"))
            .errors(&[400, 409, 503]),
        op("post", "/v1/heartbeat/{node_ident}", "heartbeat")
            .summary("An agent reports that it is up")
            .since(22)
            .refs(NODE)
            .body("HeartbeatRequest")
            .ok(202, None)
            .errors(&[409, 503]),
        op("get", "/v1/conductors", "conductor_list")
            .summary("List conductors")
            .since(49)
            .refs(&["limit", "marker", "sort_key", "sort_dir", "fields", "detail"])
            .ok(200, Some("ConductorCollection"))
            .errors(&[400]),
        op("get", "/v1/conductors/{hostname}", "conductor_get")
            .summary("Show a conductor")
            .since(49)
            .refs(&["hostname", "fields"])
            .ok(200, Some("Conductor"))
            .errors(&[400]),
    ])
    .collect()
}

/// A vendor passthru call on `path` with each HTTP method a vendor method may take; `ids`
/// in the order GET, POST, PUT, PATCH, DELETE.
fn vendor_calls(path: &'static str, params: &[&str], ids: [&'static str; 5]) -> Vec<Operation> {
    ["get", "post", "put", "patch", "delete"]
        .into_iter()
        .zip(ids)
        .map(|(method, id)| {
            op(method, path, id)
                .summary("Call a vendor passthru method")
                .refs(params)
                .vendor_call()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_id_is_unique_and_every_ref_resolves() {
        let document = document();
        let mut ids: Vec<&str> = operations().iter().map(|op| op.id).collect();
        ids.sort_unstable();
        let count = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), count, "duplicate operationId");

        let text = document.to_string();
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = reference.split('"').next().unwrap();
            let pointer = target.trim_start_matches('#');
            assert!(
                document.pointer(pointer).is_some(),
                "unresolved reference {target}"
            );
        }
    }
}
