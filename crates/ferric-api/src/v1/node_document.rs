//! A node's detail document written straight into a listing's body: the same bytes as
//! serializing [`super::nodes`]'s `node_json` with every field selected, without building
//! the ~70-entry JSON map first or copying the node's JSON objects into it.
//!
//! Why: on a detail page whose documents the render cache does not hold, building that map
//! (a key string and a value per field, each object field cloned) and then serializing and
//! dropping it cost about as much as reading the row. Fields come out in the order a
//! `serde_json::Map` keeps them (sorted by name), so cached and fresh documents, and the
//! single-node answer, stay byte-for-byte alike.

use std::sync::LazyLock;

use ferric_model::Microversion;
use ferric_model::resources::Node;
use serde::Serialize;
use serde_json::Value;

use super::fields::FieldSpec;
use super::node_fields::{NODE_FIELDS, node_field_json, node_field_value, node_object_field};

/// [`NODE_FIELDS`] sorted by name: the order of a serialized `serde_json::Map`.
static SORTED_FIELDS: LazyLock<Vec<&'static FieldSpec>> = LazyLock::new(|| {
    let mut fields: Vec<&'static FieldSpec> = NODE_FIELDS.iter().collect();
    fields.sort_by_key(|spec| spec.name);
    fields
});

/// Appends the detail document of `node` as a client at `version` sees it: secrets masked,
/// `reservation` and `conductor` as given.
pub(crate) fn write_node_document(
    out: &mut Vec<u8>,
    node: &Node,
    version: Microversion,
    base: &str,
    reservation: Option<&str>,
    conductor: Option<&str>,
) -> Result<(), serde_json::Error> {
    out.push(b'{');
    let mut first = true;
    for spec in SORTED_FIELDS.iter() {
        if version.minor() < spec.since {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        // Field names are plain ASCII identifiers: nothing to escape.
        out.push(b'"');
        out.extend_from_slice(spec.name.as_bytes());
        out.extend_from_slice(b"\":");
        let name = spec.name;
        match name {
            "reservation" => write(out, &reservation)?,
            "conductor" => write(out, &conductor)?,
            "links" => write_links(out, base, node, "")?,
            "ports" | "states" | "portgroups" | "volume" => write_links(out, base, node, name)?,
            "traits" => write(out, &node.traits)?,
            "driver_info" | "instance_info" => {
                write(out, &node_field_json(node, name, version, base))?;
            }
            name => match node_object_field(node, name) {
                Some(object) => write(out, object)?,
                None => write(
                    out,
                    &node_field_value(node, name, version).unwrap_or(Value::Null),
                )?,
            },
        }
    }
    out.push(b'}');
    Ok(())
}

fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), serde_json::Error> {
    serde_json::to_writer(&mut *out, value)
}

/// The `self` and `bookmark` links of the node (`sub` empty) or of one of its
/// sub-resources, as `super::links` shows them.
fn write_links(
    out: &mut Vec<u8>,
    base: &str,
    node: &Node,
    sub: &str,
) -> Result<(), serde_json::Error> {
    let path = if sub.is_empty() {
        format!("nodes/{}", node.uuid)
    } else {
        format!("nodes/{}/{sub}", node.uuid)
    };
    out.extend_from_slice(b"[{\"href\":");
    write(out, &format!("{base}/v1/{path}"))?;
    out.extend_from_slice(b",\"rel\":\"self\"},{\"href\":");
    write(out, &format!("{base}/{path}"))?;
    out.extend_from_slice(b",\"rel\":\"bookmark\"}]");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use chrono::{TimeZone, Utc};
    use ferric_model::ProvisionState;
    use ferric_model::resources::PowerState;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::v1::fields::Selection;
    use crate::v1::resource::record_json;

    /// A node with every kind of field set, secrets and text needing escapes included.
    fn node() -> Node {
        let mut node = Node::new(Uuid::from_u128(7), "fake-hardware", ProvisionState::Active);
        node.id = 3;
        node.version = 9;
        node.name = Some("rack-1.node_\"7\"".to_owned());
        node.description = Some("line\nbreak ✓".to_owned());
        let object = |value: Value| match value {
            Value::Object(object) => object,
            _ => unreachable!(),
        };
        node.driver_info = object(json!({
            "redfish_password": "secret",
            "redfish_address": "http://10.0.0.1",
            "nested": {"ipmi_password": "x", "port": 623},
        }));
        node.instance_info = object(json!({"configdrive": "data", "image_url": "http://i"}));
        node.properties = object(json!({"cpus": 64, "memory_mb": 262_144}));
        node.extra = object(json!({"rack": "r01", "list": [1, "two", null]}));
        node.driver_internal_info = object(json!({"agent_url": "http://a"}));
        node.clean_step = object(json!({"step": "erase_devices", "priority": 10}));
        node.instance_uuid = Some(Uuid::from_u128(8));
        node.power_state = Some(PowerState::On);
        node.target_power_state = None;
        node.maintenance = true;
        node.maintenance_reason = Some("tested".to_owned());
        node.automated_clean = Some(false);
        node.traits = vec!["CUSTOM_A".to_owned(), "CUSTOM_B".to_owned()];
        node.resource_class = Some("baremetal".to_owned());
        node.conductor_group = "group-a".to_owned();
        node.provision_updated_at = Some(Utc.timestamp_opt(1_700_000_000, 123_456_000).unwrap());
        node.created_at = Utc.timestamp_opt(1_600_000_000, 0).unwrap();
        node
    }

    /// The document as the generic path builds it: the record's fields, then the two that
    /// come from outside the row.
    fn generic(node: &Node, minor: u16, base: &str, holder: Option<&str>) -> Vec<u8> {
        let mut shown = record_json(node, Microversion::new(minor), &Selection::All, base);
        let held: HashMap<Uuid, String> = holder
            .map(|holder| (node.uuid, holder.to_owned()))
            .into_iter()
            .collect();
        if let Some(slot) = shown.get_mut("reservation") {
            *slot = held.get(&node.uuid).map_or(Value::Null, |h| json!(h));
        }
        if let Some(slot) = shown.get_mut("conductor") {
            *slot = json!("conductor-1");
        }
        serde_json::to_vec(&shown).unwrap()
    }

    #[test]
    fn the_written_document_is_the_generic_one_byte_for_byte() {
        let node = node();
        for minor in [1, 31, 49, 52, 83, 95, 110] {
            for (base, holder) in [
                ("http://ferric.test", None),
                ("https://h\"ost:6385", Some("conductor-2")),
            ] {
                let mut written = b"[".to_vec();
                write_node_document(
                    &mut written,
                    &node,
                    Microversion::new(minor),
                    base,
                    holder,
                    Some("conductor-1"),
                )
                .unwrap();
                let expected = generic(&node, minor, base, holder);
                assert_eq!(
                    String::from_utf8_lossy(&written[1..]),
                    String::from_utf8_lossy(&expected),
                    "1.{minor} at {base}"
                );
            }
        }
        let shown: Value = serde_json::from_slice(&generic(&node, 110, "http://b", None)).unwrap();
        assert_eq!(shown["driver_info"]["redfish_password"], "******");
        assert_eq!(shown["instance_info"]["configdrive"], "******");
    }
}
