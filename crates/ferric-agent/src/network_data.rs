//! Static addresses from the node's `network_data` (OpenStack's `network_data.json`:
//! `links`, `networks`, `services`), for sites where no DHCP server answers the machine: a
//! virtual-media boot puts the file into the ramdisk at `/etc/ferric/network_data.json`
//! (`ferric-drivers` `boot_iso.rs`) and the agent configures it with `ip` before it looks
//! Ferric up. Each network of type `ipv4`/`ipv6` gets its address on the NIC its link names by
//! MAC (a `vlan` link: a VLAN interface on its parent), its routes, and the link's MTU; `dns`
//! services (and networks' `dns_nameservers`) go into `/etc/resolv.conf`. NICs the file
//! configures are left out of DHCP by the ramdisk's `/init`; networks of the `*_dhcp` types
//! are left to DHCP. Applying twice is harmless (existing addresses and routes are kept).

use std::net::IpAddr;
use std::path::Path;

use serde_json::{Map, Value};

/// Where the ramdisk carries the file.
pub const NETWORK_DATA_PATH: &str = "/etc/ferric/network_data.json";

/// What applying the file does: `ip` commands in order, and the resolver configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub commands: Vec<Vec<String>>,
    /// Nameservers for `/etc/resolv.conf` (empty: leave it alone).
    pub nameservers: Vec<String>,
    /// The interfaces that got a static address.
    pub interfaces: Vec<String>,
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| (*part).to_owned()).collect()
}

fn text<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

fn items<'a>(object: &'a Map<String, Value>, key: &str) -> Vec<&'a Map<String, Value>> {
    object
        .get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// A netmask (`255.255.255.0`, `ffff:ffff::`) or a prefix length (`24`) as a prefix length.
fn prefix_len(netmask: &str) -> Option<u32> {
    if let Ok(bits) = netmask.parse::<u32>() {
        return (bits <= 128).then_some(bits);
    }
    let bits = match netmask.parse::<IpAddr>().ok()? {
        IpAddr::V4(mask) => u128::from(u32::from(mask)) << 96,
        IpAddr::V6(mask) => u128::from(mask),
    };
    let ones = bits.leading_ones();
    // A mask is ones then zeros.
    (bits.checked_shl(ones).unwrap_or(0) == 0).then_some(ones)
}

/// The commands that configure `data` on a machine whose NICs are `nics` (name, MAC).
pub fn plan(data: &Value, nics: &[(String, String)]) -> Result<Plan, String> {
    let data = data
        .as_object()
        .ok_or("network_data is not a JSON object")?;
    let links = items(data, "links");
    let mut plan = Plan::default();
    // The interface name of a link id, creating VLAN interfaces on the way.
    let resolve = |plan: &mut Plan, link_id: &str| -> Result<String, String> {
        let link = links
            .iter()
            .find(|link| text(link, "id") == Some(link_id))
            .ok_or_else(|| {
                format!("network_data names link {link_id:?}, which it does not list")
            })?;
        let by_mac = |mac: &str| {
            nics.iter()
                .find(|(_, address)| address.eq_ignore_ascii_case(mac))
                .map(|(name, _)| name.clone())
                .ok_or_else(|| format!("no NIC has MAC {mac} (link {link_id:?})"))
        };
        let name = match text(link, "type") {
            Some("vlan") => {
                let parent_id = text(link, "vlan_link")
                    .ok_or_else(|| format!("VLAN link {link_id:?} has no vlan_link"))?;
                let parent = links
                    .iter()
                    .find(|candidate| text(candidate, "id") == Some(parent_id))
                    .and_then(|parent| text(parent, "ethernet_mac_address"))
                    .ok_or_else(|| format!("VLAN link {link_id:?}: its parent has no MAC"))?;
                let parent = by_mac(parent)?;
                let vlan = link
                    .get("vlan_id")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("VLAN link {link_id:?} has no vlan_id"))?;
                let name = format!("{parent}.{vlan}");
                plan.commands
                    .push(words(&["ip", "link", "set", &parent, "up"]));
                plan.commands.push(words(&[
                    "ip",
                    "link",
                    "add",
                    "link",
                    &parent,
                    "name",
                    &name,
                    "type",
                    "vlan",
                    "id",
                    &vlan.to_string(),
                ]));
                name
            }
            _ => by_mac(
                text(link, "ethernet_mac_address")
                    .ok_or_else(|| format!("link {link_id:?} has no ethernet_mac_address"))?,
            )?,
        };
        if let Some(mtu) = link.get("mtu").and_then(Value::as_u64) {
            plan.commands.push(words(&[
                "ip",
                "link",
                "set",
                &name,
                "mtu",
                &mtu.to_string(),
            ]));
        }
        plan.commands
            .push(words(&["ip", "link", "set", &name, "up"]));
        Ok(name)
    };
    for network in items(data, "networks") {
        let kind = text(network, "type").unwrap_or("");
        if !matches!(kind, "ipv4" | "ipv6") {
            continue;
        }
        let id = text(network, "id").unwrap_or("?");
        let link = text(network, "link").ok_or_else(|| format!("network {id} has no link"))?;
        let address =
            text(network, "ip_address").ok_or_else(|| format!("network {id} has no ip_address"))?;
        address
            .parse::<IpAddr>()
            .map_err(|_| format!("network {id}: {address:?} is not an IP address"))?;
        let default_prefix = if kind == "ipv4" { "32" } else { "128" };
        let netmask = text(network, "netmask").unwrap_or(default_prefix);
        let prefix = prefix_len(netmask)
            .ok_or_else(|| format!("network {id}: {netmask:?} is not a netmask"))?;
        let interface = resolve(&mut plan, link)?;
        plan.commands.push(words(&[
            "ip",
            "addr",
            "add",
            &format!("{address}/{prefix}"),
            "dev",
            &interface,
        ]));
        for route in items(network, "routes") {
            let (Some(target), Some(gateway)) = (text(route, "network"), text(route, "gateway"))
            else {
                continue;
            };
            let mask = text(route, "netmask").unwrap_or(default_prefix);
            let bits = prefix_len(mask)
                .ok_or_else(|| format!("network {id}: route netmask {mask:?} is not a netmask"))?;
            let destination = if bits == 0 {
                "default".to_owned()
            } else {
                format!("{target}/{bits}")
            };
            plan.commands.push(words(&[
                "ip",
                "route",
                "add",
                &destination,
                "via",
                gateway,
                "dev",
                &interface,
            ]));
        }
        for server in network
            .get("dns_nameservers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !plan.nameservers.iter().any(|known| known == server) {
                plan.nameservers.push(server.to_owned());
            }
        }
        if !plan.interfaces.contains(&interface) {
            plan.interfaces.push(interface);
        }
    }
    for service in items(data, "services") {
        if text(service, "type") == Some("dns")
            && let Some(address) = text(service, "address")
            && !plan.nameservers.iter().any(|known| known == address)
        {
            plan.nameservers.push(address.to_owned());
        }
    }
    Ok(plan)
}

/// The machine's NICs: (name, MAC) from `<sys_root>/class/net`.
pub fn nics(sys_root: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(sys_root.join("class/net")) else {
        return Vec::new();
    };
    let mut nics: Vec<(String, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let mac = std::fs::read_to_string(entry.path().join("address")).ok()?;
            Some((name, mac.trim().to_owned()))
        })
        .filter(|(name, _)| name != "lo")
        .collect();
    nics.sort();
    nics
}

/// Reads `path` and configures it; `Ok(None)` when there is no such file. Commands that find
/// their work done ("File exists") count as done.
pub fn apply_file(path: &Path, sys_root: &Path) -> Result<Option<Plan>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    let data: Value = serde_json::from_str(&text)
        .map_err(|error| format!("{} is not JSON: {error}", path.display()))?;
    let plan = plan(&data, &nics(sys_root))?;
    for command in &plan.commands {
        let output = std::process::Command::new(&command[0])
            .args(&command[1..])
            .output()
            .map_err(|error| format!("cannot run {}: {error}", command.join(" ")))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() && !stderr.contains("File exists") {
            return Err(format!("{} failed: {}", command.join(" "), stderr.trim()));
        }
    }
    if !plan.nameservers.is_empty() {
        let resolv: String = plan
            .nameservers
            .iter()
            .map(|server| format!("nameserver {server}\n"))
            .collect();
        std::fs::write("/etc/resolv.conf", resolv)
            .map_err(|error| format!("cannot write /etc/resolv.conf: {error}"))?;
    }
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nics() -> Vec<(String, String)> {
        vec![
            ("eth0".to_owned(), "52:54:00:aa:00:01".to_owned()),
            ("eth1".to_owned(), "52:54:00:aa:00:02".to_owned()),
        ]
    }

    #[test]
    fn a_static_ipv4_network_becomes_address_route_and_resolver() {
        let data = json!({
            "links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:AA:00:01",
                "mtu": 1500}],
            "networks": [{"id": "prov", "type": "ipv4", "link": "nic0",
                "ip_address": "10.231.0.50", "netmask": "255.255.255.0",
                "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.231.0.1"},
                           {"network": "192.168.0.0", "netmask": "255.255.0.0",
                            "gateway": "10.231.0.254"}]},
                {"id": "other", "type": "ipv4_dhcp", "link": "nic0"}],
            "services": [{"type": "dns", "address": "10.231.0.1"}],
        });
        let plan = plan(&data, &nics()).unwrap();
        let lines: Vec<String> = plan
            .commands
            .iter()
            .map(|command| command.join(" "))
            .collect();
        assert_eq!(
            lines,
            [
                "ip link set eth0 mtu 1500",
                "ip link set eth0 up",
                "ip addr add 10.231.0.50/24 dev eth0",
                "ip route add default via 10.231.0.1 dev eth0",
                "ip route add 192.168.0.0/16 via 10.231.0.254 dev eth0",
            ]
        );
        assert_eq!(plan.nameservers, ["10.231.0.1"]);
        assert_eq!(plan.interfaces, ["eth0"]);
    }

    #[test]
    fn vlans_ipv6_and_bad_input() {
        let data = json!({
            "links": [{"id": "nic1", "ethernet_mac_address": "52:54:00:aa:00:02"},
                      {"id": "v100", "type": "vlan", "vlan_link": "nic1", "vlan_id": 100}],
            "networks": [{"id": "n6", "type": "ipv6", "link": "v100",
                "ip_address": "fd00::5", "netmask": "ffff:ffff:ffff:ffff::"}],
        });
        let plan = plan(&data, &nics()).unwrap();
        let lines: Vec<String> = plan
            .commands
            .iter()
            .map(|command| command.join(" "))
            .collect();
        assert!(lines.contains(&"ip link add link eth1 name eth1.100 type vlan id 100".to_owned()));
        assert!(lines.contains(&"ip addr add fd00::5/64 dev eth1.100".to_owned()));
        for (bad, expected) in [
            (
                json!({"links": [], "networks": [{"id": "n", "type": "ipv4", "link": "x",
                "ip_address": "10.0.0.1"}]}),
                "does not list",
            ),
            (
                json!({"links": [{"id": "x", "ethernet_mac_address": "52:54:00:ff:ff:ff"}],
                "networks": [{"id": "n", "type": "ipv4", "link": "x", "ip_address": "10.0.0.1"}]}),
                "no NIC has MAC",
            ),
            (
                json!({"links": [{"id": "x", "ethernet_mac_address": "52:54:00:aa:00:01"}],
                "networks": [{"id": "n", "type": "ipv4", "link": "x", "ip_address": "10.0.0.1",
                "netmask": "255.0.255.0"}]}),
                "not a netmask",
            ),
        ] {
            let error = super::plan(&bad, &nics()).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
        assert_eq!(prefix_len("24"), Some(24));
        assert_eq!(prefix_len("0.0.0.0"), Some(0));
    }

    #[test]
    fn no_file_means_nothing_to_do() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            apply_file(&dir.path().join("absent.json"), dir.path()).unwrap(),
            None
        );
    }
}
