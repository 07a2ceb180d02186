//! Switch dialects as data and code: for each device type, the commands that put a switch
//! interface on an access VLAN, take it off again and read it back, and the parser of that
//! read-back. The `device_type` names are networking-generic-switch's netmiko names, so a
//! site's NGS switch list translates line for line; the set and remove commands are the ones
//! NGS sends for an access port (its `PLUG_PORT_TO_NETWORK` and `DELETE_PORT`), and the
//! read-backs are each device's own "show this interface's configuration" command (NGS reads
//! nothing back).
//!
//! A batch is what one SSH session sends on its standard input: the dialect wraps the
//! per-interface commands in its configuration mode (`configure terminal` … `end`, Junos'
//! `configure private` … `commit and-quit`) or, on the Linux-based devices (Open vSwitch,
//! SONiC, Cumulus), sends them as shell lines (`set -e` first, so the first failing command
//! stops the batch and the session's exit status says so). Batched read-backs need the answer
//! of each interface told apart: the network operating systems print the interface's name as
//! a section header (`interface Ethernet5`), Open vSwitch answers one JSON table for all the
//! ports asked, SONiC one JSON table of VLAN members, and Cumulus gets an `echo` marker before
//! each interface's JSON.
//!
//! The recorded answers the tests parse (`fixtures/`) are written in the shape each device
//! prints, from the vendors' command references; the Open vSwitch ones were captured from
//! `ovs-vsctl` 3.1 (Debian 12).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A switch's operating system: how Ferric talks to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum DeviceType {
    /// Open vSwitch on a Linux host (`ovs-vsctl`).
    #[serde(rename = "netmiko_ovs_linux")]
    Ovs,
    #[serde(rename = "netmiko_cisco_nxos")]
    CiscoNxos,
    #[serde(rename = "netmiko_cisco_ios")]
    CiscoIos,
    #[serde(rename = "netmiko_arista_eos")]
    AristaEos,
    #[serde(rename = "netmiko_juniper")]
    Junos,
    #[serde(rename = "netmiko_dell_os10")]
    DellOs10,
    #[serde(rename = "netmiko_sonic")]
    Sonic,
    /// Cumulus Linux 5 (NVUE, `nv`).
    #[serde(rename = "netmiko_cumulus_nvue")]
    Cumulus,
}

/// Every device type, for the documentation table and the tests.
pub const DEVICE_TYPES: [DeviceType; 8] = [
    DeviceType::Ovs,
    DeviceType::CiscoNxos,
    DeviceType::CiscoIos,
    DeviceType::AristaEos,
    DeviceType::Junos,
    DeviceType::DellOs10,
    DeviceType::Sonic,
    DeviceType::Cumulus,
];

/// What a device printed that means a command failed, although the session may still exit 0
/// (the network operating systems' CLIs do not stop at an error).
const ERROR_MARKS: &[&str] = &[
    "% Invalid",
    "% Incomplete",
    "% Ambiguous",
    "% Error",
    "error:",
    "syntax error",
    "Error: ",
    "ERROR:",
    "Invalid config",
    "Interface name is invalid",
    "doesn't exist",
];

impl DeviceType {
    /// The name in the switch file (`device_type`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ovs => "netmiko_ovs_linux",
            Self::CiscoNxos => "netmiko_cisco_nxos",
            Self::CiscoIos => "netmiko_cisco_ios",
            Self::AristaEos => "netmiko_arista_eos",
            Self::Junos => "netmiko_juniper",
            Self::DellOs10 => "netmiko_dell_os10",
            Self::Sonic => "netmiko_sonic",
            Self::Cumulus => "netmiko_cumulus_nvue",
        }
    }

    /// The commands that make `interface` an access port on `vlan`. `current`: the VLAN Ferric
    /// last left it on (SONiC adds a VLAN member, so the old membership goes first).
    pub fn set_access(self, interface: &str, vlan: u16, current: Option<u16>) -> Vec<String> {
        let port = interface;
        match self {
            Self::Ovs => vec![
                format!("ovs-vsctl set port {port} vlan_mode=access"),
                format!("ovs-vsctl set port {port} tag={vlan}"),
            ],
            Self::CiscoIos | Self::AristaEos => vec![
                format!("interface {port}"),
                format!("switchport access vlan {vlan}"),
            ],
            Self::CiscoNxos | Self::DellOs10 => vec![
                format!("interface {port}"),
                "switchport mode access".to_owned(),
                format!("switchport access vlan {vlan}"),
            ],
            Self::Junos => vec![
                format!("delete interfaces {port} unit 0 family ethernet-switching vlan members"),
                format!(
                    "set interfaces {port} unit 0 family ethernet-switching vlan members {vlan}"
                ),
            ],
            Self::Sonic => {
                let mut commands = Vec::new();
                if let Some(old) = current.filter(|old| *old != vlan) {
                    commands.push(format!("sudo config vlan member del {old} {port}"));
                }
                if current != Some(vlan) {
                    commands.push(format!("sudo config vlan member add -u {vlan} {port}"));
                }
                commands
            }
            Self::Cumulus => vec![
                format!("nv unset interface {port} bridge domain br_default untagged"),
                format!("nv set interface {port} bridge domain br_default access {vlan}"),
            ],
        }
    }

    /// The commands that take `interface` off its access VLAN (`current`, where Ferric left
    /// it), back to the switch's default for the port.
    pub fn clear(self, interface: &str, current: Option<u16>) -> Vec<String> {
        let port = interface;
        match self {
            Self::Ovs => vec![
                format!("ovs-vsctl clear port {port} tag"),
                format!("ovs-vsctl clear port {port} trunks"),
                format!("ovs-vsctl clear port {port} vlan_mode"),
            ],
            Self::CiscoIos | Self::CiscoNxos | Self::AristaEos | Self::DellOs10 => vec![
                format!("interface {port}"),
                "no switchport access vlan".to_owned(),
            ],
            Self::Junos => vec![format!(
                "delete interfaces {port} unit 0 family ethernet-switching vlan members"
            )],
            Self::Sonic => current
                .map(|old| vec![format!("sudo config vlan member del {old} {port}")])
                .unwrap_or_default(),
            Self::Cumulus => vec![
                format!("nv unset interface {port} bridge domain br_default access"),
                format!("nv unset interface {port} bridge domain br_default untagged"),
            ],
        }
    }

    /// The session's input for `commands`: in configuration mode, saved or committed.
    pub fn wrap(self, commands: &[String]) -> String {
        let mut lines: Vec<String> = Vec::new();
        match self {
            Self::Ovs => {
                lines.push("set -e".to_owned());
                lines.extend(commands.iter().cloned());
            }
            Self::Sonic => {
                lines.push("set -e".to_owned());
                lines.extend(commands.iter().cloned());
                lines.push("sudo config save -y".to_owned());
            }
            Self::Cumulus => {
                lines.push("set -e".to_owned());
                lines.extend(commands.iter().cloned());
                lines.push("nv config apply -y".to_owned());
                lines.push("nv config save".to_owned());
            }
            Self::CiscoIos | Self::CiscoNxos | Self::DellOs10 => {
                lines.push("configure terminal".to_owned());
                lines.extend(commands.iter().cloned());
                lines.push("end".to_owned());
                lines.push(if self == Self::DellOs10 {
                    "write memory".to_owned()
                } else {
                    "copy running-config startup-config".to_owned()
                });
            }
            Self::AristaEos => {
                lines.push("configure".to_owned());
                lines.extend(commands.iter().cloned());
                lines.push("end".to_owned());
                lines.push("write memory".to_owned());
            }
            Self::Junos => {
                lines.push("configure private".to_owned());
                lines.extend(commands.iter().cloned());
                lines.push("commit and-quit".to_owned());
            }
        }
        let mut script = lines.join("\n");
        script.push('\n');
        script
    }

    /// The commands that read back the access VLAN of each of `interfaces` in one session.
    pub fn read(self, interfaces: &[&str]) -> Vec<String> {
        match self {
            Self::Ovs => vec![format!(
                "ovs-vsctl --format=json --columns=name,tag list port {}",
                interfaces.join(" ")
            )],
            Self::CiscoIos | Self::CiscoNxos => interfaces
                .iter()
                .map(|port| format!("show running-config interface {port}"))
                .collect(),
            Self::AristaEos => interfaces
                .iter()
                .map(|port| format!("show running-config interfaces {port}"))
                .collect(),
            Self::DellOs10 => interfaces
                .iter()
                .map(|port| format!("show running-configuration interface {port}"))
                .collect(),
            Self::Junos => interfaces
                .iter()
                .map(|port| format!("show configuration interfaces {port} | display set"))
                .collect(),
            Self::Sonic => vec!["sonic-cfggen -d --var-json VLAN_MEMBER".to_owned()],
            Self::Cumulus => interfaces
                .iter()
                .flat_map(|port| {
                    [
                        format!("echo '### {port}'"),
                        format!("nv show interface {port} bridge domain br_default -o json"),
                    ]
                })
                .collect(),
        }
    }

    /// The read-back's input: the read commands, plain (a CLI leaves `show` output alone).
    pub fn wrap_read(self, commands: &[String]) -> String {
        let mut script = commands.join("\n");
        script.push('\n');
        script
    }

    /// The error a device printed in `output`, if any (the line that says so).
    pub fn error_in(self, output: &str) -> Option<String> {
        output
            .lines()
            .find(|line| ERROR_MARKS.iter().any(|mark| line.contains(mark)))
            .map(|line| line.trim().to_owned())
    }

    /// The access VLAN of each of `interfaces` in a read-back's `output` (`None`: on no VLAN,
    /// the port's default). An interface the answer does not mention is an error.
    pub fn parse(
        self,
        interfaces: &[&str],
        output: &str,
    ) -> Result<BTreeMap<String, Option<u16>>, String> {
        let mut seen = match self {
            Self::Ovs => parse_ovs(output)?,
            Self::CiscoIos | Self::CiscoNxos | Self::AristaEos | Self::DellOs10 => {
                parse_sections(interfaces, output)?
            }
            Self::Junos => parse_junos(interfaces, output)?,
            Self::Sonic => parse_sonic(interfaces, output)?,
            Self::Cumulus => parse_cumulus(output)?,
        };
        let mut found = BTreeMap::new();
        for interface in interfaces {
            let vlan = seen.remove(*interface).ok_or_else(|| {
                format!("the switch's answer does not mention interface {interface}")
            })?;
            found.insert((*interface).to_owned(), vlan);
        }
        Ok(found)
    }
}

fn vlan_number(text: &str) -> Result<u16, String> {
    text.trim()
        .parse::<u16>()
        .ok()
        .filter(|vlan| (1..=4094).contains(vlan))
        .ok_or_else(|| format!("\"{}\" is not a VLAN id", text.trim()))
}

/// `ovs-vsctl --format=json --columns=name,tag list port …`: `{"data": [["p1", 100], ["p2",
/// ["set", []]]], "headings": ["name", "tag"]}`.
fn parse_ovs(output: &str) -> Result<BTreeMap<String, Option<u16>>, String> {
    // One line of JSON; a login shell may have printed something before it.
    let line = output
        .lines()
        .find(|line| line.trim_start().starts_with('{'))
        .unwrap_or(output);
    let table: Value = serde_json::from_str(line.trim())
        .map_err(|error| format!("ovs-vsctl's answer is not JSON: {error}"))?;
    let rows = table
        .get("data")
        .and_then(Value::as_array)
        .ok_or("ovs-vsctl's answer has no \"data\" rows")?;
    let mut found = BTreeMap::new();
    for row in rows {
        let (Some(name), Some(tag)) = (row.get(0).and_then(Value::as_str), row.get(1)) else {
            return Err(format!("ovs-vsctl's row {row} is not [name, tag]"));
        };
        let vlan = match tag {
            Value::Number(number) => Some(vlan_number(&number.to_string())?),
            // An empty set: no tag.
            _ => None,
        };
        found.insert(name.to_owned(), vlan);
    }
    Ok(found)
}

/// The running configuration of interfaces, one section each (IOS, NX-OS, EOS, OS10): an
/// `interface <name>` line, then indented lines until the next unindented one.
fn parse_sections(
    interfaces: &[&str],
    output: &str,
) -> Result<BTreeMap<String, Option<u16>>, String> {
    let mut found = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        let unindented = !line.starts_with(' ') && !line.starts_with('\t');
        if let Some(name) = line.trim_end().strip_prefix("interface ") {
            let name = name.trim();
            current = interfaces
                .iter()
                .find(|wanted| wanted.eq_ignore_ascii_case(name))
                .map(|wanted| (*wanted).to_owned());
            if let Some(interface) = &current {
                found.insert(interface.clone(), None);
            }
            continue;
        }
        if unindented {
            current = None;
            continue;
        }
        if let (Some(interface), Some(vlan)) = (
            &current,
            line.trim().strip_prefix("switchport access vlan "),
        ) {
            found.insert(interface.clone(), Some(vlan_number(vlan)?));
        }
    }
    Ok(found)
}

/// `show configuration interfaces <port> | display set` (Junos): `set interfaces <port> unit 0
/// family ethernet-switching vlan members <vlan>` lines. An interface with no such line is
/// on no VLAN, if the answer shows it at all (Junos prints nothing for an interface with no
/// configuration: such an interface is taken as on no VLAN too).
fn parse_junos(interfaces: &[&str], output: &str) -> Result<BTreeMap<String, Option<u16>>, String> {
    let mut found: BTreeMap<String, Option<u16>> = interfaces
        .iter()
        .map(|interface| ((*interface).to_owned(), None))
        .collect();
    for line in output.lines() {
        let Some(rest) = line.trim().strip_prefix("set interfaces ") else {
            continue;
        };
        let Some((name, tail)) = rest.split_once(' ') else {
            continue;
        };
        if let (Some(slot), Some(vlan)) = (
            found.get_mut(name),
            tail.strip_prefix("unit 0 family ethernet-switching vlan members "),
        ) {
            *slot = Some(vlan_number(vlan)?);
        }
    }
    Ok(found)
}

/// `sonic-cfggen -d --var-json VLAN_MEMBER`: `{"Vlan100|Ethernet0": {"tagging_mode":
/// "untagged"}, …}`; an interface with no untagged membership is on no VLAN.
fn parse_sonic(interfaces: &[&str], output: &str) -> Result<BTreeMap<String, Option<u16>>, String> {
    let table: Value = serde_json::from_str(output.trim())
        .map_err(|error| format!("sonic-cfggen's answer is not JSON: {error}"))?;
    let members = table
        .as_object()
        .ok_or("sonic-cfggen's answer is not a JSON object")?;
    let mut found: BTreeMap<String, Option<u16>> = interfaces
        .iter()
        .map(|interface| ((*interface).to_owned(), None))
        .collect();
    for (key, member) in members {
        let Some((vlan, port)) = key.split_once('|') else {
            continue;
        };
        let untagged = member.get("tagging_mode").and_then(Value::as_str) == Some("untagged");
        if let (Some(slot), true) = (found.get_mut(port), untagged) {
            let vlan = vlan.strip_prefix("Vlan").unwrap_or(vlan);
            *slot = Some(vlan_number(vlan)?);
        }
    }
    Ok(found)
}

/// Cumulus NVUE: `### <port>` marker lines, each followed by `nv show interface <port> bridge
/// domain br_default -o json`'s object, whose `access` is the access VLAN (absent: none).
fn parse_cumulus(output: &str) -> Result<BTreeMap<String, Option<u16>>, String> {
    let mut found = BTreeMap::new();
    let mut sections = output.split("### ").skip(1);
    for section in sections.by_ref() {
        let (name, body) = section.split_once('\n').unwrap_or((section, ""));
        let body: Value = serde_json::from_str(body.trim())
            .map_err(|error| format!("nv's answer for {} is not JSON: {error}", name.trim()))?;
        let vlan = match body.get("access") {
            Some(Value::Number(number)) => Some(vlan_number(&number.to_string())?),
            Some(Value::String(text)) => Some(vlan_number(text)?),
            _ => None,
        };
        found.insert(name.trim().to_owned(), vlan);
    }
    Ok(found)
}

#[cfg(test)]
#[path = "dialect_tests.rs"]
mod tests;
