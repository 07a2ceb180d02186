//! Virtual media: images a BMC presents to its machine as a CD, a floppy or a USB disk — what
//! `POST/DELETE/GET /v1/nodes/{node}/vmedia` (API 1.89/1.93) attach, and what the
//! `redfish-virtual-media` boot interface boots the agent from. The BMC side is the management
//! interface's ([`crate::interfaces::ManagementInterface::attach_virtual_media`]); this module
//! holds the vocabulary and the check of a node's `network_data`, which a virtual-media boot
//! on a site without DHCP hands to the agent.

use ferric_model::resources::{JsonObject, Node};
use serde_json::Value;

use crate::DriverError;
pub use ferric_model::values::{VmediaDevice, VmediaSlot};

/// `driver_info` key: `true` when no DHCP server answers the node on its provisioning
/// network, so a virtual-media boot must give the agent static addresses (`network_data`).
pub const DHCP_LESS_KEY: &str = "dhcp_less";

/// Whether the node is marked DHCP-less (`driver_info.dhcp_less`: `true` or `"true"`).
pub fn is_dhcp_less(node: &Node) -> bool {
    match node.driver_info.get(DHCP_LESS_KEY) {
        Some(Value::Bool(value)) => *value,
        Some(Value::String(text)) => {
            matches!(
                text.trim().to_ascii_lowercase().as_str(),
                "true" | "yes" | "1"
            )
        }
        _ => false,
    }
}

/// Checks that `network_data` (OpenStack's `network_data.json`: `links`, `networks`,
/// `services`) gives at least one NIC, named by its MAC, a static IPv4 or IPv6 address — what
/// the agent needs to reach Ferric without DHCP. Returns how many static networks it found.
pub fn check_network_data(node: &Node) -> Result<usize, DriverError> {
    let data = &node.network_data;
    let fix = "set the node's network_data (OpenStack network_data.json: a \"links\" entry \
               with the NIC's ethernet_mac_address and a \"networks\" entry of type ipv4 or \
               ipv6 with ip_address, netmask and that link)";
    let refuse = |what: String| {
        DriverError::invalid(
            "node.network_data",
            format!(
                "Node {} cannot boot its agent from virtual media without DHCP: {what}; {fix}.",
                node.uuid
            ),
        )
    };
    if data.is_empty() {
        return Err(refuse("its network_data is empty".to_owned()));
    }
    let links = list(data, "links");
    let networks = list(data, "networks");
    let mut static_networks = 0;
    for network in &networks {
        let kind = network.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(kind, "ipv4" | "ipv6") {
            continue;
        }
        let id = network.get("id").and_then(Value::as_str).unwrap_or("?");
        let address = network.get("ip_address").and_then(Value::as_str);
        let Some(address) = address else {
            return Err(refuse(format!("network {id} has no ip_address")));
        };
        if address.parse::<std::net::IpAddr>().is_err() {
            return Err(refuse(format!(
                "network {id} has ip_address {address:?}, which is not an IP address"
            )));
        }
        let link = network.get("link").and_then(Value::as_str).unwrap_or("");
        let mac = links
            .iter()
            .find(|candidate| candidate.get("id").and_then(Value::as_str) == Some(link))
            .and_then(|found| found.get("ethernet_mac_address"))
            .and_then(Value::as_str);
        if mac.is_none() {
            return Err(refuse(format!(
                "network {id} names link {link:?}, which is not a link with an \
                 ethernet_mac_address"
            )));
        }
        static_networks += 1;
    }
    if static_networks == 0 {
        return Err(refuse(
            "its network_data has no network of type ipv4 or ipv6".to_owned(),
        ));
    }
    Ok(static_networks)
}

/// A DHCP-less node needs usable `network_data`; a node that has some must have it usable
/// (what the ISOs built for virtual media and UEFI HTTP boot carry to the agent).
pub fn check_network(node: &Node) -> Result<(), DriverError> {
    if is_dhcp_less(node) || !node.network_data.is_empty() {
        check_network_data(node)?;
    }
    Ok(())
}

fn list<'a>(data: &'a JsonObject, key: &str) -> Vec<&'a JsonObject> {
    data.get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn node(network_data: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Manageable);
        node.network_data = network_data.as_object().cloned().unwrap_or_default();
        node
    }

    #[test]
    fn network_data_must_give_a_nic_a_static_address() {
        let good = node(json!({
            "links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}],
            "networks": [{"id": "prov", "type": "ipv4", "link": "nic0",
                "ip_address": "10.231.0.50", "netmask": "255.255.255.0"}],
            "services": [{"type": "dns", "address": "10.231.0.1"}],
        }));
        assert_eq!(check_network_data(&good).unwrap(), 1);
        for (bad, expected) in [
            (json!({}), "empty"),
            (
                json!({"links": [], "networks": [{"id": "n", "type": "ipv4_dhcp", "link": "x"}]}),
                "no network of type ipv4",
            ),
            (
                json!({"links": [], "networks": [{"id": "n", "type": "ipv4", "link": "x",
                    "ip_address": "10.0.0.5"}]}),
                "not a link",
            ),
            (
                json!({"links": [{"id": "x", "ethernet_mac_address": "52:54:00:00:00:01"}],
                    "networks": [{"id": "n", "type": "ipv4", "link": "x", "ip_address": "ten"}]}),
                "not an IP address",
            ),
        ] {
            let error = check_network_data(&node(bad)).unwrap_err();
            assert!(error.to_string().contains(expected), "{error}");
            assert!(error.to_string().contains("set the node's network_data"));
        }
    }

    #[test]
    fn dhcp_less_is_a_driver_info_flag() {
        let mut node = node(json!({}));
        assert!(!is_dhcp_less(&node));
        node.driver_info.insert(DHCP_LESS_KEY.into(), json!("True"));
        assert!(is_dhcp_less(&node));
        node.driver_info.insert(DHCP_LESS_KEY.into(), json!(false));
        assert!(!is_dhcp_less(&node));
        assert_eq!("cdrom".parse(), Ok(VmediaDevice::Cdrom));
        assert!("tape".parse::<VmediaDevice>().is_err());
    }
}
