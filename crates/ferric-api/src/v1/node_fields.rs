//! The node's API fields: the one table of (field → microversion, access), the record → JSON
//! mapping and the checked JSON → record writes used by create and PATCH.

use ferric_db::NodeSortKey;
use ferric_model::Microversion;
use ferric_model::resources::Node;
use ferric_model::state::visible_provision_state;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, MASK, boolean, field, mask_secrets, object, opt_boolean, opt_string, opt_text_value,
    opt_uuid, string, uuid_value,
};
use super::resource::Resource;
use super::{links, opt_timestamp, timestamp};
use crate::ApiError;

/// Every node field, the minor version it appeared in (`reference/ironic.md` §2.4), and who
/// may write it. The only place node fields are version-gated.
pub(crate) const NODE_FIELDS: &[FieldSpec] = &[
    field("uuid", 1, CreateOnly, T::Uuid),
    field("name", 5, Writable, T::OptText),
    field("description", 51, Writable, T::OptText),
    field("driver", 1, Writable, T::Text),
    field("driver_info", 1, Writable, T::Object),
    field("driver_internal_info", 3, ReadOnly, T::Object),
    field("properties", 1, Writable, T::Object),
    field("instance_info", 1, Writable, T::Object),
    field("extra", 1, Writable, T::Object),
    field("instance_uuid", 1, Writable, T::OptUuid),
    field("instance_name", 104, Writable, T::OptText),
    field("chassis_uuid", 1, Writable, T::OptUuid),
    field("parent_node", 83, Writable, T::OptUuid),
    field("allocation_uuid", 52, ReadOnly, T::OptUuid),
    field("provision_state", 1, ReadOnly, T::Text),
    field("target_provision_state", 1, ReadOnly, T::OptText),
    field("provision_updated_at", 1, ReadOnly, T::OptTime),
    field("power_state", 1, ReadOnly, T::OptText),
    field("target_power_state", 1, ReadOnly, T::OptText),
    field("last_error", 1, ReadOnly, T::OptText),
    field("console_enabled", 1, ReadOnly, T::Bool),
    field("fault", 42, ReadOnly, T::OptText),
    field("health", 109, ReadOnly, T::OptText),
    field("maintenance", 1, Writable, T::Bool),
    field("maintenance_reason", 1, ReadOnly, T::OptText),
    field("reservation", 1, ReadOnly, T::OptText),
    field("protected", 48, Writable, T::Bool),
    field("protected_reason", 48, Writable, T::OptText),
    field("retired", 61, Writable, T::Bool),
    field("retired_reason", 61, Writable, T::OptText),
    field("disable_power_off", 95, Writable, T::Bool),
    field("automated_clean", 47, Writable, T::OptBool),
    field("inspection_started_at", 6, ReadOnly, T::OptTime),
    field("inspection_finished_at", 6, ReadOnly, T::OptTime),
    field("clean_step", 7, ReadOnly, T::Object),
    field("deploy_step", 44, ReadOnly, T::Object),
    field("service_step", 87, ReadOnly, T::Object),
    field("raid_config", 12, ReadOnly, T::Object),
    field("target_raid_config", 12, ReadOnly, T::Object),
    field("network_data", 66, Writable, T::Object),
    field("boot_mode", 75, ReadOnly, T::OptText),
    field("secure_boot", 75, ReadOnly, T::OptBool),
    field("bios_interface", 40, Writable, T::OptText),
    field("boot_interface", 31, Writable, T::OptText),
    field("console_interface", 31, Writable, T::OptText),
    field("deploy_interface", 31, Writable, T::OptText),
    field("firmware_interface", 86, Writable, T::OptText),
    field("inspect_interface", 31, Writable, T::OptText),
    field("management_interface", 31, Writable, T::OptText),
    field("network_interface", 20, Writable, T::OptText),
    field("power_interface", 31, Writable, T::OptText),
    field("raid_interface", 31, Writable, T::OptText),
    field("rescue_interface", 38, Writable, T::OptText),
    field("storage_interface", 33, Writable, T::OptText),
    field("vendor_interface", 31, Writable, T::OptText),
    field("resource_class", 21, Writable, T::OptText),
    field("conductor_group", 46, Writable, T::Text),
    field("conductor", 49, ReadOnly, T::OptText),
    field("shard", 82, Writable, T::OptText),
    field("owner", 50, Writable, T::OptText),
    field("lessee", 65, Writable, T::OptText),
    field("traits", 37, ReadOnly, T::StringList),
    field("created_at", 1, ReadOnly, T::Time),
    field("updated_at", 1, ReadOnly, T::OptTime),
    field("links", 1, ReadOnly, T::Links),
    field("ports", 1, ReadOnly, T::Links),
    field("states", 14, ReadOnly, T::Links),
    field("portgroups", 24, ReadOnly, T::Links),
    field("volume", 32, ReadOnly, T::Links),
];

/// The fields `GET /v1/nodes` shows without `?fields=` or `detail`.
pub(crate) const NODE_DEFAULT_LIST_FIELDS: &[&str] = &[
    "uuid",
    "name",
    "instance_uuid",
    "maintenance",
    "power_state",
    "provision_state",
];

/// Fields that are JSON documents and so cannot be sorted on.
pub(crate) const NODE_JSON_FIELDS: &[&str] = &[
    "properties",
    "driver_info",
    "extra",
    "instance_info",
    "driver_internal_info",
    "clean_step",
    "deploy_step",
    "service_step",
    "raid_config",
    "target_raid_config",
    "traits",
    "network_data",
];

/// Names that would make `/v1/nodes/{name}` ambiguous with a route.
const RESERVED_NAMES: &[&str] = &[
    "detail",
    "validate",
    "states",
    "ports",
    "portgroups",
    "maintenance",
    "management",
    "vendor_passthru",
    "traits",
    "vifs",
    "volume",
    "bios",
    "history",
    "inventory",
    "children",
    "firmware",
    "vmedia",
    "allocation",
];

/// `*_interface` fields: changing them (and `resource_class`) is restricted to some states.
pub(crate) fn is_interface_field(name: &str) -> bool {
    name.ends_with("_interface") || name == "resource_class"
}

/// A field's stored value as JSON, unmasked (what PATCH operates on). `None` for the computed
/// fields (`links`, `reservation`, …) that the view adds.
pub(crate) fn node_field_value(node: &Node, name: &str, version: Microversion) -> Option<Value> {
    let text = |value: &Option<String>| opt_text_value(value.as_deref());
    let obj = |value: &Map<String, Value>| Value::Object(value.clone());
    if let Some(object) = node_object_field(node, name) {
        return Some(obj(object));
    }
    Some(match name {
        "uuid" => json!(node.uuid),
        "name" => text(&node.name),
        "description" => text(&node.description),
        "driver" => json!(node.driver),
        "driver_info" => obj(&node.driver_info),
        "instance_info" => obj(&node.instance_info),
        "instance_uuid" => uuid_value(node.instance_uuid),
        "instance_name" => text(&node.instance_name),
        "chassis_uuid" => uuid_value(node.chassis_uuid),
        "parent_node" => uuid_value(node.parent_node),
        "allocation_uuid" => uuid_value(node.allocation_uuid),
        "provision_state" => opt_text_value(
            visible_provision_state(node.provision_state, version).map(|state| state.as_str()),
        ),
        "target_provision_state" => opt_text_value(
            node.target_provision_state
                .and_then(|state| visible_provision_state(state, version))
                .map(|state| state.as_str()),
        ),
        "provision_updated_at" => opt_timestamp(node.provision_updated_at),
        "power_state" => opt_text_value(node.power_state.map(|state| state.as_str())),
        "target_power_state" => opt_text_value(node.target_power_state.map(|state| state.as_str())),
        "last_error" => text(&node.last_error),
        "console_enabled" => json!(node.console_enabled),
        "fault" => text(&node.fault),
        "health" => text(&node.health),
        "maintenance" => json!(node.maintenance),
        "maintenance_reason" => text(&node.maintenance_reason),
        "protected" => json!(node.protected),
        "protected_reason" => text(&node.protected_reason),
        "retired" => json!(node.retired),
        "retired_reason" => text(&node.retired_reason),
        "disable_power_off" => json!(node.disable_power_off),
        "automated_clean" => json!(node.automated_clean),
        "inspection_started_at" => opt_timestamp(node.inspection_started_at),
        "inspection_finished_at" => opt_timestamp(node.inspection_finished_at),
        "boot_mode" => text(&node.boot_mode),
        "secure_boot" => json!(node.secure_boot),
        "bios_interface" => text(&node.bios_interface),
        "boot_interface" => text(&node.boot_interface),
        "console_interface" => text(&node.console_interface),
        "deploy_interface" => text(&node.deploy_interface),
        "firmware_interface" => text(&node.firmware_interface),
        "inspect_interface" => text(&node.inspect_interface),
        "management_interface" => text(&node.management_interface),
        "network_interface" => text(&node.network_interface),
        "power_interface" => text(&node.power_interface),
        "raid_interface" => text(&node.raid_interface),
        "rescue_interface" => text(&node.rescue_interface),
        "storage_interface" => text(&node.storage_interface),
        "vendor_interface" => text(&node.vendor_interface),
        "resource_class" => text(&node.resource_class),
        "conductor_group" => json!(node.conductor_group),
        "shard" => text(&node.shard),
        "owner" => text(&node.owner),
        "lessee" => text(&node.lessee),
        "traits" => json!(node.traits),
        "created_at" => timestamp(node.created_at),
        "updated_at" => opt_timestamp(node.updated_at),
        _ => return None,
    })
}

/// The node's JSON object fields shown as they are stored (no secrets to mask), by name:
/// what a document writer can serialize in place rather than copy.
pub(crate) fn node_object_field<'a>(node: &'a Node, name: &str) -> Option<&'a Map<String, Value>> {
    Some(match name {
        "driver_internal_info" => &node.driver_internal_info,
        "properties" => &node.properties,
        "extra" => &node.extra,
        "clean_step" => &node.clean_step,
        "deploy_step" => &node.deploy_step,
        "service_step" => &node.service_step,
        "raid_config" => &node.raid_config,
        "target_raid_config" => &node.target_raid_config,
        "network_data" => &node.network_data,
        _ => return None,
    })
}

/// `instance_info` as clients see it, as Ironic shows it: secrets masked, and the config drive
/// (user data, often keys and passwords) and `image_url` (it may carry a temporary URL's
/// signature) hidden whole when set.
pub(crate) fn instance_info_json(instance_info: &Map<String, Value>) -> Value {
    let mut shown = mask_secrets(instance_info);
    if let Value::Object(shown) = &mut shown {
        for hidden in ["configdrive", "image_url"] {
            if let Some(value) = shown.get_mut(hidden)
                && is_set(value)
            {
                *value = Value::String(MASK.to_owned());
            }
        }
    }
    shown
}

/// Python's truthiness of a JSON value, which Ironic's checks use.
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(set) => *set,
        Value::Number(number) => number.as_f64() != Some(0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(fields) => !fields.is_empty(),
    }
}

/// One field of the node as a client at `version` sees it, with secrets masked.
/// `reservation` (the holder of an unexpired lease) needs the store and `conductor` the
/// running conductor: the handler fills them in over the null shown here.
pub(crate) fn node_field_json(node: &Node, name: &str, version: Microversion, base: &str) -> Value {
    match name {
        "driver_info" => mask_secrets(&node.driver_info),
        "instance_info" => instance_info_json(&node.instance_info),
        "reservation" | "conductor" => Value::Null,
        "links" => links(base, &format!("nodes/{}", node.uuid)),
        "ports" | "states" | "portgroups" | "volume" => {
            links(base, &format!("nodes/{}/{name}", node.uuid))
        }
        name => node_field_value(node, name, version).unwrap_or(Value::Null),
    }
}

impl Resource for Node {
    type SortKey = NodeSortKey;
    const NAME: &'static str = "node";
    const COLLECTION: &'static str = "nodes";
    const FIELDS: &'static [FieldSpec] = NODE_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = NODE_DEFAULT_LIST_FIELDS;
    const UNSORTABLE: &'static [&'static str] = NODE_JSON_FIELDS;

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, version: Microversion, base: &str) -> Value {
        node_field_json(self, name, version, base)
    }

    fn field_value(&self, name: &str, version: Microversion) -> Value {
        node_field_value(self, name, version).unwrap_or(Value::Null)
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        node_set_field(self, name, value)
    }
}

/// Checks a node name (§2.4): RFC 3986 unreserved characters, at most 255, not UUID-like and
/// not a word that names a sub-resource.
fn check_name(name: &str) -> Result<(), ApiError> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
    if name.is_empty() || !valid_chars {
        return Err(ApiError::bad_request(format!(
            "Cannot use '{name}' as a node name: use only letters, digits, '-', '.', '_' and '~'."
        )));
    }
    if Uuid::parse_str(name).is_ok() {
        return Err(ApiError::bad_request(format!(
            "Cannot use '{name}' as a node name: it looks like a UUID."
        )));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(ApiError::bad_request(format!(
            "Cannot use '{name}' as a node name: it is a reserved word."
        )));
    }
    Ok(())
}

/// Writes one writable field from JSON (`null` means "unset" / the default), after checking
/// its type and rules. The caller has already checked access and version.
fn node_set_field(node: &mut Node, name: &str, value: Value) -> Result<(), ApiError> {
    const TEXT_MAX: usize = 255;
    match name {
        "uuid" => {
            node.uuid = opt_uuid(name, value)?
                .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
        }
        "name" => {
            let new = opt_string(name, value, TEXT_MAX)?;
            if let Some(new) = &new {
                check_name(new)?;
            }
            node.name = new;
        }
        "description" => node.description = opt_string(name, value, 4096)?,
        // TODO-correctness: check that the driver is an enabled hardware type with a live
        // conductor (400 otherwise) once conductors register their drivers.
        "driver" => node.driver = string(name, value, TEXT_MAX)?,
        "driver_info" => node.driver_info = object(name, value)?,
        "properties" => node.properties = object(name, value)?,
        "instance_info" => node.instance_info = object(name, value)?,
        "extra" => node.extra = object(name, value)?,
        "network_data" => node.network_data = object(name, value)?,
        "instance_uuid" => node.instance_uuid = opt_uuid(name, value)?,
        "instance_name" => node.instance_name = opt_string(name, value, TEXT_MAX)?,
        "chassis_uuid" => node.chassis_uuid = opt_uuid(name, value)?,
        "parent_node" => node.parent_node = opt_uuid(name, value)?,
        "maintenance" => node.maintenance = boolean(name, null_is_false(value))?,
        "protected" => node.protected = boolean(name, null_is_false(value))?,
        "protected_reason" => node.protected_reason = opt_string(name, value, TEXT_MAX)?,
        "retired" => node.retired = boolean(name, null_is_false(value))?,
        "retired_reason" => node.retired_reason = opt_string(name, value, TEXT_MAX)?,
        "disable_power_off" => node.disable_power_off = boolean(name, null_is_false(value))?,
        "automated_clean" => node.automated_clean = opt_boolean(name, value)?,
        "resource_class" => node.resource_class = opt_string(name, value, 80)?,
        "conductor_group" => {
            let group = opt_string(name, value, TEXT_MAX)?.unwrap_or_default();
            if !group
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            {
                return Err(ApiError::bad_request(format!(
                    "Invalid conductor_group '{group}': use only letters, digits, '-', '.' and '_'."
                )));
            }
            node.conductor_group = group.to_ascii_lowercase();
        }
        "shard" => node.shard = opt_string(name, value, TEXT_MAX)?,
        "owner" => node.owner = opt_string(name, value, TEXT_MAX)?,
        "lessee" => node.lessee = opt_string(name, value, TEXT_MAX)?,
        interface if interface.ends_with("_interface") => {
            let value = opt_string(name, value, TEXT_MAX)?;
            let slot = match interface {
                "bios_interface" => &mut node.bios_interface,
                "boot_interface" => &mut node.boot_interface,
                "console_interface" => &mut node.console_interface,
                "deploy_interface" => &mut node.deploy_interface,
                "firmware_interface" => &mut node.firmware_interface,
                "inspect_interface" => &mut node.inspect_interface,
                "management_interface" => &mut node.management_interface,
                "network_interface" => &mut node.network_interface,
                "power_interface" => &mut node.power_interface,
                "raid_interface" => &mut node.raid_interface,
                "rescue_interface" => &mut node.rescue_interface,
                "storage_interface" => &mut node.storage_interface,
                "vendor_interface" => &mut node.vendor_interface,
                other => return Err(read_only(other)),
            };
            *slot = value;
        }
        other => return Err(read_only(other)),
    }
    Ok(())
}

fn read_only(name: &str) -> ApiError {
    ApiError::bad_request(format!("'{name}' cannot be set by the API."))
}

/// Removing a flag resets it to false.
fn null_is_false(value: Value) -> Value {
    if value.is_null() {
        Value::Bool(false)
    } else {
        value
    }
}

/// Rules across fields, checked after all of a request's changes: a reason only with its flag.
pub(crate) fn check_node_consistency(node: &Node) -> Result<(), ApiError> {
    if node.protected_reason.is_some() && !node.protected {
        return Err(ApiError::bad_request(
            "protected_reason can only be set when protected is true.",
        ));
    }
    if node.retired_reason.is_some() && !node.retired {
        return Err(ApiError::bad_request(
            "retired_reason can only be set when retired is true.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_in_the_table_has_a_value() {
        let node = Node::new(
            Uuid::new_v4(),
            "fake-hardware",
            ferric_model::ProvisionState::Enroll,
        );
        let computed = [
            "reservation",
            "conductor",
            "links",
            "ports",
            "states",
            "portgroups",
            "volume",
        ];
        for spec in NODE_FIELDS {
            assert!(
                computed.contains(&spec.name)
                    || node_field_value(&node, spec.name, Microversion::new(115)).is_some(),
                "{} has no value mapping",
                spec.name
            );
        }
    }

    #[test]
    fn names_follow_the_rules() {
        assert!(check_name("node-1.rack_2~a").is_ok());
        assert!(check_name("has space").is_err());
        assert!(check_name("detail").is_err());
        assert!(check_name(&Uuid::new_v4().to_string()).is_err());
    }
}
