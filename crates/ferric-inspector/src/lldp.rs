//! LLDP in inspection data (Ironic's `parse-lldp` hook): the raw TLVs a ramdisk reports per
//! NIC (`inventory.interfaces[].lldp`, or the `lldp_raw` collector's plugin data) become
//! `plugin_data.parsed_lldp`: `{interface name: {"switch_chassis_id": …, "switch_port_id": …,
//! "switch_system_name": …, …}}`, with Ironic's names for the basic management TLVs and the
//! common 802.1 / 802.3 ones. A TLV that does not parse is skipped, never an error: LLDP is
//! what a switch says, not what the machine is.
//!
//! [`local_link_connections`] is Ironic's `local-link-connection` hook: per NIC, the port's
//! `local_link_connection` from the same TLVs (`switch_id` from a MAC chassis ID, `port_id`
//! from the port ID, and `switch_info` from the system name, as the widely used
//! `system_name_llc` plug-in adds).

use serde_json::{Map, Value, json};

/// Ironic reads LLDP of at most this many interfaces.
const MAX_INTERFACES: usize = 64;
const OUI_802_1: [u8; 3] = [0x00, 0x80, 0xc2];
const OUI_802_3: [u8; 3] = [0x00, 0x12, 0x0f];

/// `parsed_lldp` for the inventory and the rest of the payload; `None` when no interface
/// reported any LLDP.
pub fn parsed_lldp(
    inventory: &Map<String, Value>,
    plugin_data: &Map<String, Value>,
) -> Option<Value> {
    let mut parsed = Map::new();
    for (name, _, tlvs) in interface_tlvs(inventory, plugin_data) {
        let fields = parse_tlvs(tlvs);
        if !fields.is_empty() {
            parsed.insert(name.to_owned(), Value::Object(fields));
        }
    }
    (!parsed.is_empty()).then_some(Value::Object(parsed))
}

/// The longest information string 802.1AB allows a TLV of `kind` (its length field has nine
/// bits: 511 at most; the basic management TLVs have tighter limits).
fn max_value_len(kind: u64) -> usize {
    match kind {
        1 | 2 => 256,
        4..=6 => 255,
        7 => 4,
        8 => 167,
        _ => 511,
    }
}

/// Whether a reported TLV (`[type, hex]`) is one a switch could have sent: a type and a value
/// of whole octets no longer than the standard allows for that type.
fn is_possible_tlv(tlv: &Value) -> bool {
    match (
        tlv.get(0).and_then(Value::as_u64),
        tlv.get(1).and_then(Value::as_str),
    ) {
        (Some(kind), Some(hex)) => kind <= 127 && hex.len() <= 2 * max_value_len(kind),
        _ => false,
    }
}

/// Removes, before anything is stored or parsed, every reported TLV that no switch could have
/// sent (longer than 802.1AB allows, or malformed): inspection data comes from a ramdisk on the
/// machine, and a 600-octet "system name" would otherwise be kept whole and copied into the
/// port's `local_link_connection` (issue 41, item 7). Returns how many were dropped.
pub fn drop_impossible_tlvs(
    inventory: &mut Map<String, Value>,
    plugin_data: &mut Map<String, Value>,
) -> usize {
    let mut dropped = 0;
    let mut keep_possible = |tlvs: &mut Value| {
        if let Some(tlvs) = tlvs.as_array_mut() {
            let before = tlvs.len();
            tlvs.retain(is_possible_tlv);
            dropped += before - tlvs.len();
        }
    };
    if let Some(interfaces) = inventory
        .get_mut("interfaces")
        .and_then(Value::as_array_mut)
    {
        for interface in interfaces {
            if let Some(tlvs) = interface.get_mut("lldp") {
                keep_possible(tlvs);
            }
        }
    }
    if let Some(raw) = plugin_data
        .get_mut("lldp_raw")
        .and_then(Value::as_object_mut)
    {
        for tlvs in raw.values_mut() {
            keep_possible(tlvs);
        }
    }
    dropped
}

/// Each named interface (at most [`MAX_INTERFACES`]) with its MAC as sent and its TLVs: the
/// `lldp_raw` collector's when it has them, else the inventory's `lldp`.
fn interface_tlvs<'a>(
    inventory: &'a Map<String, Value>,
    plugin_data: &'a Map<String, Value>,
) -> Vec<(&'a str, Option<&'a str>, &'a [Value])> {
    let raw = plugin_data.get("lldp_raw").and_then(Value::as_object);
    let Some(interfaces) = inventory.get("interfaces").and_then(Value::as_array) else {
        return Vec::new();
    };
    interfaces
        .iter()
        .take(MAX_INTERFACES)
        .filter_map(|interface| {
            let name = interface["name"].as_str()?;
            let tlvs = raw
                .and_then(|raw| raw.get(name))
                .filter(|tlvs| !tlvs.is_null())
                .or_else(|| interface.get("lldp"))
                .and_then(Value::as_array);
            Some((
                name,
                interface["mac_address"].as_str(),
                tlvs.map_or(&[][..], Vec::as_slice),
            ))
        })
        .collect()
}

/// Ironic's `local-link-connection` hook: for each NIC with a MAC that heard LLDP, the
/// `local_link_connection` its port should get — `switch_id` from a chassis ID of the MAC
/// subtype (other subtypes are not switch IDs), `port_id` from the port ID, `switch_info` from
/// the system name. MACs in lower-case colon form; NICs without any of the three are left out.
pub fn local_link_connections(
    inventory: &Map<String, Value>,
    plugin_data: &Map<String, Value>,
) -> Vec<(String, Map<String, Value>)> {
    let mut links = Vec::new();
    for (_, address, tlvs) in interface_tlvs(inventory, plugin_data) {
        let Some(address) = address.and_then(crate::mac::normalize_mac) else {
            continue;
        };
        let fields = parse_tlvs(tlvs);
        let mut link = Map::new();
        let chassis_mac = tlvs.iter().find_map(|tlv| {
            let value = tlv[1].as_str().and_then(unhex)?;
            match (tlv[0].as_u64(), value.split_first()) {
                (Some(1), Some((4, id))) => mac(id),
                _ => None,
            }
        });
        if let Some(switch_id) = chassis_mac {
            link.insert("switch_id".to_owned(), switch_id);
        }
        for (from, to) in [
            ("switch_port_id", "port_id"),
            ("switch_system_name", "switch_info"),
        ] {
            if let Some(value) = fields.get(from).filter(|value| value.as_str() != Some("")) {
                link.insert(to.to_owned(), value.clone());
            }
        }
        if !link.is_empty() {
            links.push((address, link));
        }
    }
    links
}

/// The named fields of one interface's TLVs (`[[type, hex], …]`); the first value of a field
/// wins, as in Ironic.
pub fn parse_tlvs(tlvs: &[Value]) -> Map<String, Value> {
    let mut fields = Map::new();
    for tlv in tlvs {
        let (Some(kind), Some(value)) = (tlv[0].as_u64(), tlv[1].as_str().and_then(unhex)) else {
            continue;
        };
        if value.len() > max_value_len(kind) {
            continue;
        }
        parse_tlv(kind, &value, &mut fields);
    }
    fields
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

fn set(fields: &mut Map<String, Value>, name: &str, value: Value) {
    fields.entry(name.to_owned()).or_insert(value);
}

fn append(fields: &mut Map<String, Value>, name: &str, value: Value) {
    if let Value::Array(list) = fields.entry(name.to_owned()).or_insert_with(|| json!([])) {
        list.push(value);
    }
}

fn text(bytes: &[u8]) -> Value {
    Value::String(
        String::from_utf8_lossy(bytes)
            .trim_end_matches('\0')
            .to_owned(),
    )
}

fn mac(bytes: &[u8]) -> Option<Value> {
    (bytes.len() == 6).then(|| {
        Value::String(
            bytes
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
        )
    })
}

/// An IANA address-family-prefixed address (1 = IPv4, 2 = IPv6).
fn network_address(bytes: &[u8]) -> Option<Value> {
    let (family, address) = bytes.split_first()?;
    let address = match (family, address.len()) {
        (1, 4) => std::net::IpAddr::from(<[u8; 4]>::try_from(address).ok()?),
        (2, 16) => std::net::IpAddr::from(<[u8; 16]>::try_from(address).ok()?),
        _ => return None,
    };
    Some(Value::String(address.to_string()))
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

/// System capability bits (bit 0, "other", is not named), as Ironic names them.
const CAPABILITIES: [(u16, &str); 10] = [
    (1 << 1, "Repeater"),
    (1 << 2, "Bridge"),
    (1 << 3, "WLAN"),
    (1 << 4, "Router"),
    (1 << 5, "Telephone"),
    (1 << 6, "DOCSIS cable device"),
    (1 << 7, "Station only"),
    (1 << 8, "C-Vlan"),
    (1 << 9, "S-Vlan"),
    (1 << 10, "TPMR"),
];

fn capabilities(bits: u16) -> Value {
    CAPABILITIES
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| json!(name))
        .collect()
}

fn parse_tlv(kind: u64, value: &[u8], fields: &mut Map<String, Value>) {
    match kind {
        // Chassis ID and Port ID: a subtype, then a MAC, a network address or a name.
        1 | 2 => {
            let Some((subtype, id)) = value.split_first() else {
                return;
            };
            let (mac_subtype, address_subtype, name) = if kind == 1 {
                (4, 5, "switch_chassis_id")
            } else {
                (3, 4, "switch_port_id")
            };
            let parsed = match *subtype {
                subtype if subtype == mac_subtype => mac(id),
                subtype if subtype == address_subtype => network_address(id),
                _ => Some(text(id)),
            };
            if let Some(parsed) = parsed {
                set(fields, name, parsed);
            }
        }
        4 => set(fields, "switch_port_description", text(value)),
        5 => set(fields, "switch_system_name", text(value)),
        6 => set(fields, "switch_system_description", text(value)),
        7 => {
            if let (Some(system), Some(enabled), 4) =
                (u16_at(value, 0), u16_at(value, 2), value.len())
            {
                set(fields, "switch_capabilities_support", capabilities(system));
                set(fields, "switch_capabilities_enabled", capabilities(enabled));
            }
        }
        // Management address: length (subtype + address), subtype, address, …
        8 => {
            let Some(&length) = value.first() else { return };
            let address = value.get(1..1 + usize::from(length));
            let parsed = address.and_then(|address| match address.split_first() {
                Some((6, mac_address)) => mac(mac_address),
                _ => network_address(address),
            });
            if let Some(parsed) = parsed {
                append(fields, "switch_mgmt_addresses", parsed);
            }
        }
        127 => parse_organizational(value, fields),
        _ => {}
    }
}

/// 802.1 (port VLAN, VLAN names) and 802.3 (MTU) organizationally specific TLVs.
fn parse_organizational(value: &[u8], fields: &mut Map<String, Value>) {
    let (Some(oui), Some(&subtype)) = (value.get(..3), value.get(3)) else {
        return;
    };
    let data = &value[4..];
    match (oui, subtype) {
        (oui, 1) if oui == OUI_802_1 => {
            if let Some(vlan) = u16_at(data, 0) {
                set(fields, "switch_port_untagged_vlan_id", json!(vlan));
            }
        }
        (oui, 3) if oui == OUI_802_1 => {
            if let (Some(id), Some(&length)) = (u16_at(data, 0), data.get(2))
                && let Some(name) = data.get(3..3 + usize::from(length))
            {
                append(
                    fields,
                    "switch_port_vlans",
                    json!({"id": id, "name": text(name)}),
                );
            }
        }
        (oui, 4) if oui == OUI_802_3 => {
            if let Some(mtu) = u16_at(data, 0) {
                set(fields, "switch_port_mtu", json!(mtu));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(kind: u64, bytes: &[u8]) -> Value {
        json!([
            kind,
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ])
    }

    #[test]
    fn basic_tlvs_get_ironics_names() {
        let tlvs = [
            tlv(1, &[4, 0x52, 0x54, 0x00, 0xfe, 0x1a, 0x01]),
            tlv(2, b"\x05ferric-tap3"),
            tlv(3, &[0, 120]),
            tlv(4, b"lab port 3"),
            tlv(5, b"ferric-lab"),
            tlv(6, b"Ferric virtual lab bridge"),
            tlv(7, &[0x00, 0x14, 0x00, 0x04]),
            tlv(8, &[5, 1, 10, 231, 0, 1, 2, 0, 0, 0, 0, 0]),
            tlv(127, &[0x00, 0x80, 0xc2, 1, 0x00, 0x64]),
            tlv(
                127,
                &[0x00, 0x80, 0xc2, 3, 0x00, 0x64, 4, b'p', b'r', b'o', b'v'],
            ),
            tlv(127, &[0x00, 0x12, 0x0f, 4, 0x05, 0xdc]),
            tlv(5, b"second name loses"),
            tlv(0, &[]),
        ];
        let fields = parse_tlvs(&tlvs);
        assert_eq!(
            Value::Object(fields),
            json!({
                "switch_chassis_id": "52:54:00:fe:1a:01",
                "switch_port_id": "ferric-tap3",
                "switch_port_description": "lab port 3",
                "switch_system_name": "ferric-lab",
                "switch_system_description": "Ferric virtual lab bridge",
                "switch_capabilities_support": ["Bridge", "Router"],
                "switch_capabilities_enabled": ["Bridge"],
                "switch_mgmt_addresses": ["10.231.0.1"],
                "switch_port_untagged_vlan_id": 100,
                "switch_port_vlans": [{"id": 100, "name": "prov"}],
                "switch_port_mtu": 1500,
            })
        );
    }

    #[test]
    fn tlvs_longer_than_the_standard_allows_are_dropped_before_anything_uses_them() {
        // A 600-octet system name (802.1AB: 255 at most; any TLV: 511 at most).
        let long_name = vec![b'A'; 600];
        let mut inventory = json!({"interfaces": [
            {"name": "eth0", "mac_address": "52:54:00:aa:00:01", "lldp": [
                tlv(2, b"\x05Ethernet1/7"),
                tlv(5, &long_name),
                tlv(127, &vec![0; 512]),
                json!([5, "4c6561662d31"]),
                json!(["x", "00"]),
            ]},
        ]})
        .as_object()
        .expect("object")
        .clone();
        let mut plugin_data = json!({"lldp_raw": {"eth0": [tlv(6, &vec![b'B'; 256])]}})
            .as_object()
            .expect("object")
            .clone();
        // Even unsanitized, parsing skips them: the system name is the later, possible one.
        let links = local_link_connections(&inventory, &Map::new());
        assert_eq!(links[0].1["switch_info"], "Leaf-1");
        assert_eq!(drop_impossible_tlvs(&mut inventory, &mut plugin_data), 4);
        let kept = &inventory["interfaces"][0]["lldp"];
        assert_eq!(kept.as_array().expect("array").len(), 2, "{kept}");
        assert!(!kept.to_string().contains(&"41".repeat(300)));
        assert_eq!(plugin_data["lldp_raw"]["eth0"], json!([]));
    }

    #[test]
    fn local_link_connections_come_from_chassis_port_and_system_name() {
        let inventory = json!({"interfaces": [
            {"name": "eth0", "mac_address": "52:54:00:AA:00:01", "lldp": [
                tlv(1, &[4, 0x52, 0x54, 0x00, 0xfe, 0x1a, 0x01]),
                tlv(2, b"\x05Ethernet1/7"),
                tlv(5, b"leaf-1"),
            ]},
            // A chassis ID that is a name is no switch_id; the port ID alone still counts.
            {"name": "eth1", "mac_address": "52:54:00:aa:00:02", "lldp": [
                tlv(1, b"\x07chassis-name"),
                tlv(2, &[3, 0x52, 0x54, 0x00, 0xfe, 0x1a, 0x09]),
            ]},
            {"name": "eth2", "mac_address": "52:54:00:aa:00:03", "lldp": []},
            {"name": "eth3", "lldp": [tlv(5, b"no mac")]},
        ]});
        let links = local_link_connections(inventory.as_object().expect("object"), &Map::new());
        assert_eq!(
            links,
            vec![
                (
                    "52:54:00:aa:00:01".to_owned(),
                    json!({"switch_id": "52:54:00:fe:1a:01", "port_id": "Ethernet1/7",
                        "switch_info": "leaf-1"})
                    .as_object()
                    .expect("object")
                    .clone()
                ),
                (
                    "52:54:00:aa:00:02".to_owned(),
                    json!({"port_id": "52:54:00:fe:1a:09"})
                        .as_object()
                        .expect("object")
                        .clone()
                ),
            ]
        );
    }

    #[test]
    fn bad_tlvs_are_skipped_and_silent_interfaces_left_out() {
        let fields = parse_tlvs(&[
            json!([1, "zz"]),
            json!([2, "0"]),
            json!("not a pair"),
            json!([7, "0014"]),
            tlv(1, &[4, 1, 2]),
        ]);
        assert!(fields.is_empty(), "{fields:?}");
        let inventory = json!({"interfaces": [
            {"name": "eth0", "lldp": [tlv(5, b"leaf-1")]},
            {"name": "eth1", "lldp": []},
            {"name": "eth2", "lldp": null},
            {"name": "eth3"},
        ]});
        let parsed = parsed_lldp(inventory.as_object().expect("object"), &Map::new());
        assert_eq!(
            parsed,
            Some(json!({"eth0": {"switch_system_name": "leaf-1"}}))
        );
        // The lldp_raw collector's data wins over the inventory's.
        let raw = json!({"lldp_raw": {"eth0": [tlv(5, b"from lldp_raw")]}});
        let parsed = parsed_lldp(
            inventory.as_object().expect("object"),
            raw.as_object().expect("object"),
        );
        assert_eq!(
            parsed,
            Some(json!({"eth0": {"switch_system_name": "from lldp_raw"}}))
        );
        assert_eq!(
            parsed_lldp(
                json!({"interfaces": []}).as_object().expect("object"),
                &Map::new()
            ),
            None
        );
    }
}
