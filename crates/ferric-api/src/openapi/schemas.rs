//! The OpenAPI document's schemas (`#/components/schemas`): each resource's from its field
//! table, request and answer bodies written out.

use serde_json::{Map, Value, json};

use crate::v1::body::{BodySpec, FALSE_WORDS, Kind, Null, TRUE_WORDS};
use crate::v1::fields::{Access, FieldSpec, FieldType};
use crate::v1::{
    allocations, chassis, conductors, deploy_templates, inspection_rules, node_fields, port_fields,
    portgroup_fields, runbooks, volumes,
};

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
        FieldType::RuleItems => json!({
            "type": "array",
            "nullable": true,
            "items": {
                "type": "object",
                "properties": {
                    "op": { "type": "string" },
                    "args": {},
                    "loop": {},
                    "multiple": { "type": "string", "enum": ["any", "all", "first", "last"] },
                },
                "required": ["op", "args"],
                "additionalProperties": true,
            },
        }),
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

/// A declared request body (`v1/body.rs`): closed, its required fields listed, each field
/// typed as the parser checks it.
pub(super) fn body_schema(spec: &BodySpec) -> Value {
    let mut properties = Map::new();
    for field in spec.fields {
        let mut schema = match field.kind {
            Kind::Text => json!({ "type": "string" }),
            Kind::Choice(names) | Kind::ChoiceAnyCase(names) => {
                json!({ "type": "string", "enum": names })
            }
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::Flag => {
                let words = [TRUE_WORDS, FALSE_WORDS].concat();
                json!({ "oneOf": [{ "type": "boolean" }, { "type": "string", "enum": words }] })
            }
            Kind::Integer { min } => json!({ "type": "integer", "minimum": min }),
            Kind::TextOrObject => json!({ "oneOf": [{ "type": "string" }, { "type": "object" }] }),
            // `allOf`: siblings of a `$ref` are ignored in OpenAPI 3.0.
            Kind::Steps => json!({ "allOf": [{ "$ref": "#/components/schemas/Steps" }] }),
            Kind::HttpUrl => json!({ "type": "string", "format": "uri", "pattern": "^https?://" }),
        };
        if let Some(max) = field.max_len {
            schema["maxLength"] = json!(max);
        }
        if field.null == Null::Value || (field.null == Null::Absent && !field.required) {
            schema["nullable"] = json!(true);
        }
        if let Some(description) = field.description {
            schema["description"] = json!(description);
        }
        properties.insert(field.name.to_owned(), with_since(schema, field.since));
    }
    let required: Vec<&str> = spec
        .fields
        .iter()
        .filter(|field| field.required)
        .map(|field| field.name)
        .collect();
    object(Value::Object(properties), &required)
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

/// Every schema: the ones written here and the declared bodies' (`bodies`).
pub(super) fn schemas(bodies: &[&BodySpec]) -> Value {
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
        "InspectionData": {
            "type": "object",
            "description": "What the inspection ramdisk found: at least an `inventory` object.",
            "properties": { "inventory": { "type": "object" } },
            "required": ["inventory"],
        },
        "ContinueInspection": {
            "type": "object",
            "description": "`{uuid}` at 1.1; from 1.84 the node and the agent's configuration \
                (with a fresh agent token).",
            "properties": {
                "uuid": { "type": "string", "format": "uuid" },
                "node": { "type": "object" },
                "config": { "type": "object" },
            },
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
        "InspectionRule": resource_schema(inspection_rules::INSPECTION_RULE_FIELDS),
        "InspectionRuleCreate": create_schema(
            inspection_rules::INSPECTION_RULE_FIELDS,
            &["actions"],
        ),
        "InspectionRuleCollection": collection_schema("inspection_rules", "InspectionRule"),
        }),
        json!({
        "Indicators": object(json!({
            "indicators": {
                "type": "array",
                "items": object(json!({
                    "name": { "type": "string" },
                    "component": { "type": "string" },
                    "readonly": { "type": "boolean" },
                    "states": { "type": "array", "items": { "type": "string" } },
                    "links": { "type": "array", "items": { "type": "object" } },
                }), &["name", "component", "readonly", "states", "links"]),
            },
        }), &["indicators"]),
        "ConsoleState": object(json!({
            "console_enabled": { "type": "boolean" },
            "console_info": {
                "type": "object",
                "nullable": true,
                "properties": {
                    "type": { "type": "string", "enum": ["socat"] },
                    "url": { "type": "string" },
                },
            },
        }), &["console_enabled", "console_info"]),
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
    for spec in bodies {
        all.insert(spec.schema.to_owned(), body_schema(spec));
    }
    Value::Object(all)
}
