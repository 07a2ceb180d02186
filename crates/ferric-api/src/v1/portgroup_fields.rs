//! The portgroup's API fields (`reference/ironic.md` §2.6): the field table with each field's
//! microversion, the record → JSON mapping and checked writes.

use ferric_db::PortgroupSortKey;
use ferric_model::Microversion;
use ferric_model::resources::Portgroup;
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, field, object, opt_string, opt_text_value, opt_uuid,
};
use super::port_fields::normalize_mac;
use super::resource::Resource;
use super::{links, opt_timestamp, parse_bool_param, timestamp};
use crate::ApiError;

/// Portgroups appeared in 1.23: that is the floor of every field.
const SINCE: u16 = 23;

/// Every portgroup field, the minor version it appeared in, and who may write it.
pub(crate) const PORTGROUP_FIELDS: &[FieldSpec] = &[
    field("uuid", SINCE, CreateOnly, T::Uuid),
    field("name", SINCE, Writable, T::OptText),
    field("address", SINCE, Writable, T::OptText),
    field("node_uuid", SINCE, Writable, T::Uuid),
    field("extra", SINCE, Writable, T::Object),
    field("internal_info", SINCE, ReadOnly, T::Object),
    field("standalone_ports_supported", SINCE, Writable, T::Bool),
    field("mode", 26, Writable, T::OptText),
    field("properties", 26, Writable, T::Object),
    field("physical_network", 102, Writable, T::OptText),
    field("category", 103, Writable, T::OptText),
    field("dynamic_portgroup", 111, ReadOnly, T::Bool),
    field("created_at", SINCE, ReadOnly, T::Time),
    field("updated_at", SINCE, ReadOnly, T::OptTime),
    field("links", SINCE, ReadOnly, T::Links),
    field("ports", SINCE, ReadOnly, T::Links),
];

/// Ironic's `[DEFAULT]default_portgroup_mode`: the bond mode of a portgroup created without one.
pub(crate) const DEFAULT_PORTGROUP_MODE: &str = "active-backup";

impl Resource for Portgroup {
    type SortKey = PortgroupSortKey;
    const NAME: &'static str = "portgroup";
    const COLLECTION: &'static str = "portgroups";
    const FIELDS: &'static [FieldSpec] = PORTGROUP_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &["uuid", "address", "name"];
    const UNSORTABLE: &'static [&'static str] = &["extra", "internal_info", "properties"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        let text = |value: &Option<String>| opt_text_value(value.as_deref());
        match name {
            "uuid" => json!(self.uuid),
            "name" => text(&self.name),
            "address" => text(&self.address),
            "node_uuid" => json!(self.node_uuid),
            "extra" => Value::Object(self.extra.clone()),
            "internal_info" => Value::Object(self.internal_info.clone()),
            "standalone_ports_supported" => json!(self.standalone_ports_supported),
            "mode" => text(&self.mode),
            "properties" => Value::Object(self.properties.clone()),
            "physical_network" => text(&self.physical_network),
            "category" => text(&self.category),
            "dynamic_portgroup" => json!(self.dynamic_portgroup),
            "created_at" => timestamp(self.created_at),
            "updated_at" => opt_timestamp(self.updated_at),
            "links" => links(base, &format!("portgroups/{}", self.uuid)),
            "ports" => links(base, &format!("portgroups/{}/ports", self.uuid)),
            _ => Value::Null,
        }
    }

    fn field_value(&self, name: &str, version: Microversion) -> Value {
        self.field_json(name, version, "")
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => {
                self.uuid = opt_uuid(name, value)?
                    .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
            }
            "name" => self.name = opt_string(name, value, 255)?,
            // Optional for a portgroup, unlike a port.
            "address" => {
                self.address = match value {
                    Value::Null => None,
                    Value::String(text) => Some(normalize_mac(&text)?),
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "Expected valid MAC address for address: {other}"
                        )));
                    }
                };
            }
            "node_uuid" => {
                self.node_uuid = opt_uuid(name, value)?.ok_or_else(|| {
                    ApiError::bad_request(
                        "node_uuid is required: every portgroup belongs to a node.",
                    )
                })?;
            }
            "extra" => self.extra = object(name, value)?,
            "properties" => self.properties = object(name, value)?,
            "standalone_ports_supported" => {
                // Ironic takes a boolean or a boolean-like string; removing it restores the
                // default (true).
                self.standalone_ports_supported = match value {
                    Value::Null => true,
                    Value::Bool(flag) => flag,
                    Value::String(text) => parse_bool_param(name, &text)?,
                    other => {
                        return Err(ApiError::bad_request(format!(
                            "Invalid value for {name}: expected true or false, got {other}."
                        )));
                    }
                };
            }
            "mode" => self.mode = opt_string(name, value, 255)?,
            "physical_network" => self.physical_network = opt_string(name, value, 64)?,
            "category" => self.category = opt_string(name, value, 80)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set by the API."
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_in_the_table_has_a_value() {
        let portgroup = Portgroup::new(Uuid::new_v4(), Uuid::new_v4());
        for spec in PORTGROUP_FIELDS {
            let value = portgroup.field_json(spec.name, Microversion::new(111), "http://h");
            let optional = matches!(spec.ty, T::OptText | T::OptUuid | T::OptBool | T::OptTime);
            assert!(optional || !value.is_null(), "{} has no value", spec.name);
        }
        assert_eq!(
            portgroup.field_json("standalone_ports_supported", Microversion::new(111), ""),
            true
        );
    }

    #[test]
    fn writes_check_their_values() {
        let mut portgroup = Portgroup::new(Uuid::new_v4(), Uuid::new_v4());
        portgroup
            .set_field("address", json!("52-54-00-AA-BB-CC"))
            .unwrap();
        assert_eq!(portgroup.address.as_deref(), Some("52:54:00:aa:bb:cc"));
        assert!(portgroup.set_field("address", json!("nope")).is_err());
        portgroup
            .set_field("standalone_ports_supported", json!("false"))
            .unwrap();
        assert!(!portgroup.standalone_ports_supported);
        assert!(portgroup.set_field("internal_info", json!({})).is_err());
        assert!(
            portgroup
                .set_field("physical_network", json!("x".repeat(65)))
                .is_err()
        );
    }
}
