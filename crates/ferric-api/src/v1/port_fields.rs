//! The port's API fields (`reference/ironic.md` §2.6): the field table, the record → JSON
//! mapping and checked writes, MAC address and `local_link_connection` validation.

use ferric_db::PortSortKey;
use ferric_model::Microversion;
use ferric_model::resources::Port;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, boolean, field, object, opt_string, opt_text_value, opt_uuid, uuid_value,
};
use super::resource::Resource;
use super::{links, opt_timestamp, timestamp};
use crate::ApiError;

/// Every port field, the minor version it appeared in, and who may write it.
pub(crate) const PORT_FIELDS: &[FieldSpec] = &[
    field("uuid", 1, CreateOnly, T::Uuid),
    field("address", 1, Writable, T::Text),
    field("node_uuid", 1, Writable, T::Uuid),
    field("extra", 1, Writable, T::Object),
    field("internal_info", 18, ReadOnly, T::Object),
    field("local_link_connection", 19, Writable, T::Object),
    field("pxe_enabled", 19, Writable, T::Bool),
    field("portgroup_uuid", 24, Writable, T::OptUuid),
    field("physical_network", 34, Writable, T::OptText),
    field("is_smartnic", 53, Writable, T::Bool),
    field("name", 88, Writable, T::OptText),
    field("description", 97, Writable, T::OptText),
    field("vendor", 100, Writable, T::OptText),
    field("category", 101, Writable, T::OptText),
    field("available_for_dynamic_portgroup", 111, Writable, T::Bool),
    field("created_at", 1, ReadOnly, T::Time),
    field("updated_at", 1, ReadOnly, T::OptTime),
    field("links", 1, ReadOnly, T::Links),
];

pub(crate) const PORT_DEFAULT_LIST_FIELDS: &[&str] = &["uuid", "address"];

pub(crate) const PORT_JSON_FIELDS: &[&str] = &["extra", "internal_info", "local_link_connection"];

/// A MAC address in canonical form (six hex octets, lowercase, `:`-separated), accepting `:`
/// or `-` separators and any case.
pub(crate) fn normalize_mac(text: &str) -> Result<String, ApiError> {
    let octets: Vec<&str> = text.split([':', '-']).collect();
    let valid = octets.len() == 6
        && octets
            .iter()
            .all(|octet| octet.len() == 2 && octet.chars().all(|c| c.is_ascii_hexdigit()));
    if !valid {
        return Err(ApiError::bad_request(format!(
            "Expected a MAC address but received {text}."
        )));
    }
    Ok(octets.join(":").to_ascii_lowercase())
}

/// The shapes §2.6 allows: empty, `port_id` with `switch_id` or `hostname` (smart NICs), or
/// `network_type: unmanaged` alone; only the known keys.
fn check_local_link_connection(connection: &Map<String, Value>) -> Result<(), ApiError> {
    const KEYS: &[&str] = &[
        "switch_id",
        "port_id",
        "switch_info",
        "hostname",
        "network_type",
        VTEP_KEYS[0],
        VTEP_KEYS[1],
    ];
    if let Some(key) = connection.keys().find(|key| !KEYS.contains(&key.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Invalid local_link_connection key '{key}': use {}.",
            KEYS.join(", ")
        )));
    }
    let has = |key: &str| connection.get(key).is_some_and(|value| !value.is_null());
    if has(VTEP_KEYS[0]) != has(VTEP_KEYS[1]) {
        return Err(ApiError::bad_request(format!(
            "Invalid local_link_connection: give both {} and {}, or neither.",
            VTEP_KEYS[0], VTEP_KEYS[1]
        )));
    }
    let shape_ok = connection.is_empty()
        || (has("port_id") && (has("switch_id") || has("hostname") || has(VTEP_KEYS[0])))
        || (connection.len() == 1 && connection.get("network_type") == Some(&json!("unmanaged")));
    if !shape_ok {
        return Err(ApiError::bad_request(
            "Invalid local_link_connection: give port_id with switch_id (or hostname for a \
             smart NIC), or only {\"network_type\": \"unmanaged\"}.",
        ));
    }
    match connection.get("network_type") {
        None | Some(Value::Null) => Ok(()),
        Some(kind) if kind == "managed" || kind == "unmanaged" => Ok(()),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid local_link_connection network_type {other}: use managed or unmanaged."
        ))),
    }
}

/// The OVN VTEP switch keys Ironic accepts in a `local_link_connection` from 1.90 until 1.105
/// removed them again; outside that range they are refused (406) and not shown.
const VTEP_KEYS: [&str; 2] = ["vtep-logical-switch", "vtep-physical-switch"];
/// `network_type` in a `local_link_connection`.
const NETWORK_TYPE_SINCE: u16 = 64;

fn vtep_allowed(version: Microversion) -> bool {
    (90..105).contains(&version.minor())
}

/// 406 for `local_link_connection` keys the request's version does not know, as Ironic's
/// `_check_allowed_port_fields`: `network_type` before 1.64, the VTEP keys outside 1.90-1.104.
pub(crate) fn check_link_keys_at(
    connection: Option<&Value>,
    version: Microversion,
) -> Result<(), ApiError> {
    let Some(Value::Object(connection)) = connection else {
        return Ok(());
    };
    if connection.contains_key("network_type") && version.minor() < NETWORK_TYPE_SINCE {
        return Err(ApiError::not_acceptable(format!(
            "local_link_connection network_type needs API version 1.{NETWORK_TYPE_SINCE} or \
             newer; this request is at {version}."
        )));
    }
    if VTEP_KEYS.iter().any(|key| connection.contains_key(*key)) && !vtep_allowed(version) {
        return Err(ApiError::not_acceptable(format!(
            "local_link_connection {} and {} are accepted only at API versions 1.90 to 1.104; \
             this request is at {version}.",
            VTEP_KEYS[0], VTEP_KEYS[1]
        )));
    }
    Ok(())
}

/// One field of the port as JSON (computed fields included), before version hiding.
fn port_field_json(port: &Port, name: &str, base: &str) -> Value {
    let text = |value: &Option<String>| opt_text_value(value.as_deref());
    match name {
        "uuid" => json!(port.uuid),
        "address" => json!(port.address),
        "node_uuid" => json!(port.node_uuid),
        "extra" => Value::Object(port.extra.clone()),
        "internal_info" => Value::Object(port.internal_info.clone()),
        "local_link_connection" => Value::Object(port.local_link_connection.clone()),
        "pxe_enabled" => json!(port.pxe_enabled),
        "portgroup_uuid" => uuid_value(port.portgroup_uuid),
        "physical_network" => text(&port.physical_network),
        "is_smartnic" => json!(port.is_smartnic),
        "name" => text(&port.name),
        "description" => text(&port.description),
        "vendor" => text(&port.vendor),
        "category" => text(&port.category),
        "available_for_dynamic_portgroup" => json!(port.available_for_dynamic_portgroup),
        "created_at" => timestamp(port.created_at),
        "updated_at" => opt_timestamp(port.updated_at),
        "links" => links(base, &format!("ports/{}", port.uuid)),
        _ => Value::Null,
    }
}

/// A field's stored value as JSON (what PATCH operates on below the top level).
fn port_field_value(port: &Port, name: &str) -> Value {
    port_field_json(port, name, "")
}

/// Writes one writable port field from JSON after checking it (`null` resets it).
fn port_set_field(port: &mut Port, name: &str, value: Value) -> Result<(), ApiError> {
    const TEXT_MAX: usize = 255;
    match name {
        "uuid" => {
            port.uuid = opt_uuid(name, value)?
                .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
        }
        "address" => {
            let Value::String(text) = value else {
                return Err(ApiError::bad_request(
                    "address is required: give the port's MAC address as a string.",
                ));
            };
            port.address = normalize_mac(&text)?;
        }
        "node_uuid" => {
            port.node_uuid = opt_uuid(name, value)?.ok_or_else(|| {
                ApiError::bad_request("node_uuid is required: every port belongs to a node.")
            })?;
        }
        "extra" => port.extra = object(name, value)?,
        "local_link_connection" => {
            let connection = object(name, value)?;
            check_local_link_connection(&connection)?;
            port.local_link_connection = connection;
        }
        // Removing it restores the default (PXE enabled).
        "pxe_enabled" => port.pxe_enabled = value.is_null() || boolean(name, value)?,
        "portgroup_uuid" => port.portgroup_uuid = opt_uuid(name, value)?,
        "physical_network" => port.physical_network = opt_string(name, value, 64)?,
        "is_smartnic" => port.is_smartnic = !value.is_null() && boolean(name, value)?,
        "name" => port.name = opt_string(name, value, TEXT_MAX)?,
        "description" => port.description = opt_string(name, value, 4096)?,
        "vendor" => port.vendor = opt_string(name, value, TEXT_MAX)?,
        "category" => port.category = opt_string(name, value, 80)?,
        "available_for_dynamic_portgroup" => {
            port.available_for_dynamic_portgroup = !value.is_null() && boolean(name, value)?;
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "'{other}' cannot be set by the API."
            )));
        }
    }
    Ok(())
}

impl Resource for Port {
    type SortKey = PortSortKey;
    const NAME: &'static str = "port";
    const COLLECTION: &'static str = "ports";
    const FIELDS: &'static [FieldSpec] = PORT_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = PORT_DEFAULT_LIST_FIELDS;
    const UNSORTABLE: &'static [&'static str] = PORT_JSON_FIELDS;

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, version: Microversion, base: &str) -> Value {
        // Outside 1.90-1.104 a VTEP connection is shown empty, as Ironic shows it.
        if name == "local_link_connection"
            && !vtep_allowed(version)
            && VTEP_KEYS
                .iter()
                .any(|key| self.local_link_connection.contains_key(*key))
        {
            return json!({});
        }
        port_field_json(self, name, base)
    }

    fn field_value(&self, name: &str, _version: Microversion) -> Value {
        port_field_value(self, name)
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        port_set_field(self, name, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_validated_and_normalized() {
        assert_eq!(
            normalize_mac("52:54:00:AB:cd:01").unwrap(),
            "52:54:00:ab:cd:01"
        );
        assert_eq!(
            normalize_mac("52-54-00-AB-CD-01").unwrap(),
            "52:54:00:ab:cd:01"
        );
        for bad in ["52:54:00:ab:cd", "52:54:00:ab:cd:0g", "5254.00ab.cd01", ""] {
            assert!(normalize_mac(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn local_link_connection_shapes() {
        let ok = |value: Value| check_local_link_connection(value.as_object().unwrap()).is_ok();
        assert!(ok(json!({})));
        assert!(ok(
            json!({"port_id": "Eth1/1", "switch_id": "0a:1b:2c:3d:4e:5f"})
        ));
        assert!(ok(json!({"port_id": "rep0", "hostname": "dpu-1"})));
        assert!(ok(json!({"network_type": "unmanaged"})));
        assert!(!ok(json!({"port_id": "Eth1/1"})));
        assert!(!ok(
            json!({"port_id": "Eth1/1", "switch_id": "x", "colour": 1})
        ));
        assert!(!ok(json!({"network_type": "other"})));
    }
}
