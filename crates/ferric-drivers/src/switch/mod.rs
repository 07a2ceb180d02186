//! `ironic-networking`: the network interface that drives the site's switches itself, named
//! after Ironic's standalone networking interface (Ironic 35), whose job it does without
//! Neutron, and whose fields it reads: a port's `local_link_connection` (`switch_id` or
//! `switch_info`, and `port_id`) names the switch port, `extra.switchport` (`mode` `access`,
//! `native_vlan`, `lag_name`) the port's own tenant VLAN and bond, and the other networks'
//! VLANs are the site's (`switch.rs`'s file, Ironic's `[ironic_networking] <type>_network`).
//!
//! Theory of operation. At each hook (`network.rs`), the interface works out the *targets*:
//! every switch interface the node's ports are cabled to (a bond's members that name a
//! `lag_name` share one: the LAG is configured, not its members), and the VLAN each must be
//! on for the network asked for. A tenant port's VLAN comes from the VIF attached to it (the
//! VIF's id names one of the switch file's `[tenant_networks]`: without Neutron a VIF is just a
//! name, so the name is the network), else from its `extra.switchport.native_vlan`; a port with
//! neither rests on the idle network. Targets are grouped by switch, and per switch, holding
//! its lock (`ssh.rs`): one batch of commands in the device's dialect (`dialect.rs`), then one
//! read-back of every interface of the batch, compared with what was set. Only then is the
//! result recorded, in the node's `driver_internal_info.switch_ports` (switch, interface,
//! network, VLAN): that record is what "where Ferric left the port" means for the next hook,
//! which leaves a port alone if it is already where it should be, and for the drift check
//! ([`NetworkInterface::check_ports`]), which reads every recorded port back.
//!
//! Failure says what happened: the error names the switch, its address, each interface, the
//! network and VLAN, the commands sent and the switch's answer, the switches already done
//! (recorded, so the node's record is true), and what the failed switch's ports were read back
//! as, or that their state is unknown because the switch did not answer (recorded as
//! `unknown`, which the drift check skips and the next hook overwrites).

pub mod dialect;
pub mod settings;
pub mod ssh;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{JsonObject, Node, Port, TENANT_VIF_KEY};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use settings::NetworkSettings;
pub use ssh::SwitchHub;

use crate::interfaces::Validate;
use crate::network::{Network, NetworkInterface, PortDrift};
use crate::{Component, DriverError};
use settings::SwitchSettings;

/// Where the node's record of its switch ports lives in `driver_internal_info`.
pub const RECORD_KEY: &str = "switch_ports";

/// The network a record carries when a change failed and the port could not be read back.
const UNKNOWN: &str = "unknown";

/// The `ironic-networking` network interface of one node.
#[derive(Debug, Clone)]
pub struct IronicNetworking {
    /// The site's switches; `None` when `switch_config_file` is unset.
    pub hub: Option<Arc<SwitchHub>>,
    pub ports: Vec<Port>,
}

/// Where Ferric left one switch interface of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRecord {
    pub switch: String,
    pub interface: String,
    pub network: String,
    pub vlan: Option<u16>,
    /// The node's ports cabled to it.
    pub ports: Vec<String>,
}

/// A switch interface the node's ports are cabled to.
#[derive(Debug, Clone)]
struct Managed {
    switch: String,
    interface: String,
    ports: Vec<String>,
    tenant_vlan: Option<u16>,
}

/// A change to make.
#[derive(Debug, Clone)]
struct Target {
    managed: Managed,
    network: Network,
    vlan: Option<u16>,
    /// The VLAN Ferric last left it on.
    current: Option<u16>,
}

fn key(switch: &str, interface: &str) -> String {
    format!("{switch}|{interface}")
}

fn vlan_text(vlan: Option<u16>) -> String {
    vlan.map_or("no VLAN".to_owned(), |vlan| format!("VLAN {vlan}"))
}

/// The node's records, by `switch|interface`.
pub fn records(node: &Node) -> BTreeMap<String, PortRecord> {
    node.driver_internal_info
        .get(RECORD_KEY)
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default()
}

fn save_records(node: &mut Node, records: &BTreeMap<String, PortRecord>) {
    match serde_json::to_value(records) {
        Ok(value) if !records.is_empty() => {
            node.driver_internal_info.insert(RECORD_KEY.into(), value);
        }
        _ => {
            node.driver_internal_info.remove(RECORD_KEY);
        }
    }
}

/// A switch interface name is sent to a CLI or a shell: letters, digits and `/ . _ : -` only.
fn check_interface(port: &Port, interface: &str) -> Result<(), DriverError> {
    let safe = !interface.is_empty()
        && interface
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._:-".contains(c));
    if safe {
        Ok(())
    } else {
        Err(DriverError::invalid(
            "local_link_connection.port_id",
            format!(
                "Port {}: the switch interface \"{interface}\" may hold only letters, digits and \
                 / . _ : -",
                port.uuid
            ),
        ))
    }
}

fn text<'a>(object: &'a JsonObject, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

impl IronicNetworking {
    fn hub(&self) -> Result<&Arc<SwitchHub>, DriverError> {
        self.hub.as_ref().ok_or_else(|| {
            DriverError::missing(
                "settings.switch_config_file",
                "The ironic-networking network interface needs the site's switches: set \
                 switch_config_file (docs/networking.md).",
            )
        })
    }

    fn switch(&self, name: &str) -> Result<&SwitchSettings, DriverError> {
        let hub = self.hub()?;
        hub.settings
            .switches
            .iter()
            .find(|switch| switch.name == name)
            .ok_or_else(|| {
                DriverError::failed(
                    Component::Switch,
                    format!("Switch {name} is no longer in switch_config_file."),
                )
            })
    }

    /// The tenant VLAN of `port`: its VIF's network, else its `extra.switchport`.
    fn tenant_vlan(&self, port: &Port) -> Result<Option<u16>, DriverError> {
        let hub = self.hub()?;
        if let Some(vif) = text(&port.internal_info, TENANT_VIF_KEY) {
            return hub
                .settings
                .tenant_networks
                .get(vif)
                .copied()
                .map(Some)
                .ok_or_else(|| {
                    DriverError::invalid(
                        "vif",
                        format!(
                            "The VIF \"{vif}\" attached to port {} names no tenant network; \
                             define it under [tenant_networks] in switch_config_file.",
                            port.uuid
                        ),
                    )
                });
        }
        let Some(switchport) = port.extra.get("switchport").and_then(Value::as_object) else {
            return Ok(None);
        };
        if let Some(mode) = text(switchport, "mode")
            && mode != "access"
        {
            return Err(DriverError::invalid(
                "extra.switchport.mode",
                format!(
                    "Port {}: switchport mode \"{mode}\" is not supported; ironic-networking \
                     sets access ports only.",
                    port.uuid
                ),
            ));
        }
        match switchport.get("native_vlan") {
            None | Some(Value::Null) => Ok(None),
            Some(value) => value
                .as_u64()
                .and_then(|vlan| u16::try_from(vlan).ok())
                .filter(|vlan| (1..=4094).contains(vlan))
                .map(Some)
                .ok_or_else(|| {
                    DriverError::invalid(
                        "extra.switchport.native_vlan",
                        format!(
                            "Port {}: switchport native_vlan {value} is not a VLAN id (1-4094).",
                            port.uuid
                        ),
                    )
                }),
        }
    }

    /// The switch interfaces the node's ports are cabled to.
    fn managed(&self) -> Result<Vec<Managed>, DriverError> {
        let hub = self.hub()?;
        let mut managed: BTreeMap<String, Managed> = BTreeMap::new();
        for port in &self.ports {
            let link = &port.local_link_connection;
            if link.is_empty() || text(link, "network_type") == Some("unmanaged") {
                continue;
            }
            let (switch_id, switch_info) = (text(link, "switch_id"), text(link, "switch_info"));
            let switch = hub.settings.find(switch_id, switch_info).ok_or_else(|| {
                DriverError::invalid(
                    "local_link_connection",
                    format!(
                        "Port {}'s local_link_connection names switch {}, which is not in \
                         switch_config_file.",
                        port.uuid,
                        switch_info.or(switch_id).unwrap_or("(none)")
                    ),
                )
            })?;
            let port_id = text(link, "port_id").ok_or_else(|| {
                DriverError::invalid(
                    "local_link_connection.port_id",
                    format!("Port {}'s local_link_connection has no port_id.", port.uuid),
                )
            })?;
            let lag = port
                .extra
                .get("switchport")
                .and_then(Value::as_object)
                .and_then(|switchport| text(switchport, "lag_name"));
            let interface = lag.unwrap_or(port_id);
            check_interface(port, interface)?;
            let tenant_vlan = self.tenant_vlan(port)?;
            let entry = managed
                .entry(key(&switch.name, interface))
                .or_insert_with(|| Managed {
                    switch: switch.name.clone(),
                    interface: interface.to_owned(),
                    ports: Vec::new(),
                    tenant_vlan,
                });
            if entry.tenant_vlan != tenant_vlan {
                return Err(DriverError::invalid(
                    "extra.switchport.lag_name",
                    format!(
                        "The ports of bond {interface} on switch {} ask for different tenant \
                         networks ({} and {}).",
                        switch.name,
                        vlan_text(entry.tenant_vlan),
                        vlan_text(tenant_vlan)
                    ),
                ));
            }
            entry.ports.push(port.uuid.to_string());
        }
        Ok(managed.into_values().collect())
    }

    /// Makes the `targets` true, switch by switch, and records each switch's result.
    async fn apply(&self, node: &mut Node, targets: Vec<Target>) -> Result<(), DriverError> {
        if targets.is_empty() {
            return Ok(());
        }
        let hub = self.hub()?;
        let mut by_switch: BTreeMap<String, Vec<Target>> = BTreeMap::new();
        for target in targets {
            by_switch
                .entry(target.managed.switch.clone())
                .or_default()
                .push(target);
        }
        let mut done: Vec<String> = Vec::new();
        for (name, targets) in by_switch {
            let switch = self.switch(&name)?;
            let result = self.apply_switch(hub, switch, &targets).await;
            let mut recorded = records(node);
            match result {
                Ok(()) => {
                    for target in &targets {
                        recorded.insert(
                            key(&name, &target.managed.interface),
                            PortRecord {
                                switch: name.clone(),
                                interface: target.managed.interface.clone(),
                                network: target.network.as_str().to_owned(),
                                vlan: target.vlan,
                                ports: target.managed.ports.clone(),
                            },
                        );
                        done.push(format!(
                            "{} of switch {name} is on the {} network ({})",
                            target.managed.interface,
                            target.network,
                            vlan_text(target.vlan)
                        ));
                    }
                    save_records(node, &recorded);
                }
                Err((message, seen)) => {
                    for target in &targets {
                        let seen = seen
                            .as_ref()
                            .and_then(|seen| seen.get(&target.managed.interface));
                        recorded.insert(
                            key(&name, &target.managed.interface),
                            PortRecord {
                                switch: name.clone(),
                                interface: target.managed.interface.clone(),
                                network: match seen {
                                    Some(vlan) if *vlan == target.vlan => {
                                        target.network.as_str().to_owned()
                                    }
                                    _ => UNKNOWN.to_owned(),
                                },
                                vlan: seen.copied().flatten(),
                                ports: target.managed.ports.clone(),
                            },
                        );
                    }
                    save_records(node, &recorded);
                    let before = if done.is_empty() {
                        String::new()
                    } else {
                        format!(" Already moved: {}.", done.join("; "))
                    };
                    return Err(DriverError::failed(
                        Component::Switch,
                        format!("{message}{before}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// One switch's batch and read-back. The error: its words, and what was read back (if the
    /// switch answered).
    async fn apply_switch(
        &self,
        hub: &SwitchHub,
        switch: &SwitchSettings,
        targets: &[Target],
    ) -> Result<(), (String, Option<BTreeMap<String, Option<u16>>>)> {
        let dialect = switch.device_type;
        let what = targets
            .iter()
            .map(|target| {
                format!(
                    "port {} to the {} network ({})",
                    target.managed.interface,
                    target.network,
                    vlan_text(target.vlan)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let commands: Vec<String> = targets
            .iter()
            .flat_map(|target| match target.vlan {
                Some(vlan) => dialect.set_access(&target.managed.interface, vlan, target.current),
                None => dialect.clear(&target.managed.interface, target.current),
            })
            .collect();
        let head = format!(
            "Switch {} ({}:{}): moving {what}",
            switch.name, switch.address, switch.port
        );
        let _guard = hub
            .lock(&switch.name)
            .await
            .map_err(|error| (format!("{head} failed: {error}"), None))?;
        let interfaces: Vec<&str> = targets
            .iter()
            .map(|target| target.managed.interface.as_str())
            .collect();
        let sent = if commands.is_empty() {
            Ok(String::new())
        } else {
            hub.run(switch, &dialect.wrap(&commands)).await
        };
        let (refused, unreachable) = match sent {
            Ok(output) => (
                dialect
                    .error_in(&output)
                    .map(|line| format!("it answered \"{line}\"")),
                false,
            ),
            Err(error @ ssh::SshError::Connect(_)) => (Some(error.to_string()), true),
            Err(error) => (Some(error.to_string()), false),
        };
        // A switch that could not be reached is not asked again for the read-back.
        let read = if unreachable {
            Err(String::new())
        } else {
            self.read_back(hub, switch, &interfaces).await
        };
        if let Some(refused) = refused {
            let state = match &read {
                Ok(seen) => format!(
                    " Read back: {}.",
                    seen.iter()
                        .map(|(interface, vlan)| format!("{interface} on {}", vlan_text(*vlan)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Err(_) => format!(
                    " The state of {} is unknown: the switch did not answer.",
                    interfaces.join(", ")
                ),
            };
            return Err((
                format!(
                    "{head} failed: {refused}. Commands: `{}`.{state}",
                    commands.join("; ")
                ),
                read.ok(),
            ));
        }
        let seen = read.map_err(|error| {
            (
                format!("{head}: reading the ports back failed: {error}"),
                None,
            )
        })?;
        let wrong: Vec<String> = targets
            .iter()
            .filter(|target| seen.get(&target.managed.interface) != Some(&target.vlan))
            .map(|target| {
                format!(
                    "{} is on {} after `{}`",
                    target.managed.interface,
                    seen.get(&target.managed.interface)
                        .map_or("an unknown VLAN".to_owned(), |vlan| vlan_text(*vlan)),
                    commands.join("; ")
                )
            })
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err((
                format!(
                    "{head}: the read-back does not match: {}.",
                    wrong.join("; ")
                ),
                Some(seen),
            ))
        }
    }

    /// The access VLAN of each interface, read from the switch.
    async fn read_back(
        &self,
        hub: &SwitchHub,
        switch: &SwitchSettings,
        interfaces: &[&str],
    ) -> Result<BTreeMap<String, Option<u16>>, String> {
        let dialect = switch.device_type;
        let commands = dialect.read(interfaces);
        let output = hub
            .run(switch, &dialect.wrap_read(&commands))
            .await
            .map_err(|error| format!("{error} (`{}`)", commands.join("; ")))?;
        dialect
            .parse(interfaces, &output)
            .map_err(|error| format!("{error} (`{}`)", commands.join("; ")))
    }
}

#[async_trait]
impl Validate for IronicNetworking {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        self.managed().map(|_| ())
    }
}

#[async_trait]
impl NetworkInterface for IronicNetworking {
    async fn add_network(&self, node: &mut Node, network: Network) -> Result<(), DriverError> {
        let hub = self.hub()?;
        let recorded = records(node);
        let mut targets = Vec::new();
        for managed in self.managed()? {
            let (network, vlan) = match network {
                Network::Tenant => match managed.tenant_vlan {
                    Some(vlan) => (Network::Tenant, Some(vlan)),
                    None => (Network::Idle, hub.settings.vlan(Network::Idle)),
                },
                other => (other, hub.settings.vlan(other)),
            };
            let record = recorded.get(&key(&managed.switch, &managed.interface));
            if record
                .is_some_and(|record| record.network == network.as_str() && record.vlan == vlan)
            {
                continue;
            }
            targets.push(Target {
                current: record.and_then(|record| record.vlan),
                managed,
                network,
                vlan,
            });
        }
        self.apply(node, targets).await
    }

    async fn remove_network(&self, node: &mut Node, network: Network) -> Result<(), DriverError> {
        let hub = self.hub()?;
        let recorded = records(node);
        let idle = hub.settings.vlan(Network::Idle);
        let mut targets = Vec::new();
        for managed in self.managed()? {
            let Some(record) = recorded.get(&key(&managed.switch, &managed.interface)) else {
                continue;
            };
            if record.network != network.as_str() {
                continue;
            }
            targets.push(Target {
                current: record.vlan,
                managed,
                network: Network::Idle,
                vlan: idle,
            });
        }
        self.apply(node, targets).await
    }

    async fn check_ports(&self, node: &Node) -> Result<Vec<PortDrift>, DriverError> {
        let hub = self.hub()?;
        let mut by_switch: BTreeMap<String, Vec<PortRecord>> = BTreeMap::new();
        for record in records(node).into_values() {
            if record.network != UNKNOWN {
                by_switch
                    .entry(record.switch.clone())
                    .or_default()
                    .push(record);
            }
        }
        let mut drifts = Vec::new();
        for (name, wanted) in by_switch {
            let switch = self.switch(&name)?;
            let interfaces: Vec<&str> = wanted
                .iter()
                .map(|record| record.interface.as_str())
                .collect();
            let seen = {
                let _guard = hub
                    .lock(&name)
                    .await
                    .map_err(|error| DriverError::failed(Component::Switch, error))?;
                self.read_back(hub, switch, &interfaces).await
            }
            .map_err(|error| {
                DriverError::failed(
                    Component::Switch,
                    format!(
                        "Switch {name} ({}:{}): reading ports {} back failed: {error}",
                        switch.address,
                        switch.port,
                        interfaces.join(", ")
                    ),
                )
            })?;
            for record in wanted {
                let now = seen.get(&record.interface).copied().flatten();
                if now != record.vlan {
                    drifts.push(PortDrift {
                        switch: name.clone(),
                        interface: record.interface,
                        network: record.network,
                        expected: record.vlan,
                        seen: now,
                    });
                }
            }
        }
        Ok(drifts)
    }

    async fn repair_ports(&self, node: &mut Node) -> Result<(), DriverError> {
        let drifts = self.check_ports(node).await?;
        let recorded = records(node);
        let managed = self.managed()?;
        let targets = drifts
            .iter()
            .filter_map(|drift| {
                let record = recorded.get(&key(&drift.switch, &drift.interface))?;
                let managed = managed
                    .iter()
                    .find(|managed| {
                        managed.switch == drift.switch && managed.interface == drift.interface
                    })?
                    .clone();
                Some(Target {
                    managed,
                    network: Network::from_name(&record.network)?,
                    vlan: record.vlan,
                    current: drift.seen,
                })
            })
            .collect();
        self.apply(node, targets).await
    }
}

#[cfg(test)]
mod tests;
