//! The switch file (`switch_config_file`): the site's switches, the VLAN of each of Ferric's
//! networks and the tenant networks a VIF may name. One TOML file rather than many flat
//! settings, because a site has a list of switches, each with its own address and
//! credentials (networking-generic-switch keeps them in `[genericswitch:<name>]` sections of
//! its own file for the same reason). `docs/networking.md` shows a whole file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::dialect::DeviceType;
use crate::network::Network;

/// One switch Ferric drives.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSettings {
    /// The name Ferric gives it (in `last_error`, logs and metrics); a port's
    /// `local_link_connection.switch_info` may name it.
    pub name: String,
    /// What a port's `local_link_connection.switch_id` says for it: usually the chassis MAC
    /// address LLDP reports. Compared without regard to case.
    #[serde(default)]
    pub switch_id: Option<String>,
    /// Host name or IP address of its SSH server.
    pub address: String,
    #[serde(default = "default_ssh_port")]
    pub port: u16,
    pub user: String,
    /// Private key to log in with.
    #[serde(default)]
    pub private_key_file: Option<PathBuf>,
    /// A file holding the password to log in with (when there is no key).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Known host keys of the switch; unset: the first key seen is trusted and kept in Ferric's
    /// own known-hosts file under `state_dir`.
    #[serde(default)]
    pub known_hosts_file: Option<PathBuf>,
    pub device_type: DeviceType,
}

fn default_ssh_port() -> u16 {
    22
}

/// The VLAN of each of Ferric's own networks (Ironic's `[ironic_networking]
/// <type>_network`). Only `provisioning` is required; the others default to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkVlans {
    /// Where a port rests when no network is needed (Ironic's idle network); unset: its
    /// access VLAN is removed (the switch's default for the port).
    #[serde(default)]
    pub idle: Option<u16>,
    pub provisioning: u16,
    #[serde(default)]
    pub cleaning: Option<u16>,
    #[serde(default)]
    pub inspection: Option<u16>,
    #[serde(default)]
    pub rescuing: Option<u16>,
    #[serde(default)]
    pub servicing: Option<u16>,
}

/// How the SSH sessions behave.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSettings {
    /// Seconds to wait for a switch to accept the connection.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: u64,
    /// Attempts of a session that could not connect (a refused command is never retried).
    #[serde(default = "default_attempts")]
    pub attempts: u32,
    /// Milliseconds between two attempts (doubled each time).
    #[serde(default = "default_retry_delay")]
    pub retry_delay_ms: u64,
    /// Seconds an idle session stays open for the next batch (OpenSSH's `ControlPersist`).
    #[serde(default = "default_persist")]
    pub persist: u64,
    /// Where the sessions' control sockets, the lock files and the known-hosts file live;
    /// unset: a directory under the system's temporary directory.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
}

fn default_connect_timeout() -> u64 {
    10
}
fn default_attempts() -> u32 {
    3
}
fn default_retry_delay() -> u64 {
    1_000
}
fn default_persist() -> u64 {
    60
}

impl Default for SshSettings {
    fn default() -> Self {
        Self {
            connect_timeout: default_connect_timeout(),
            attempts: default_attempts(),
            retry_delay_ms: default_retry_delay(),
            persist: default_persist(),
            state_dir: None,
        }
    }
}

impl SshSettings {
    pub fn retry_delay(&self) -> Duration {
        Duration::from_millis(self.retry_delay_ms)
    }
}

/// The whole switch file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSettings {
    pub networks: NetworkVlans,
    /// Tenant networks by name: a VIF attached with this name as its id puts the port on
    /// the VLAN.
    #[serde(default)]
    pub tenant_networks: BTreeMap<String, u16>,
    #[serde(default)]
    pub switches: Vec<SwitchSettings>,
    #[serde(default)]
    pub ssh: SshSettings,
}

impl NetworkSettings {
    /// Reads and checks the file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Self::from_toml(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Parses and checks a switch file's text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let settings: Self = toml::from_str(text).map_err(|error| error.to_string())?;
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), String> {
        let vlans = [
            Some(self.networks.provisioning),
            self.networks.idle,
            self.networks.cleaning,
            self.networks.inspection,
            self.networks.rescuing,
            self.networks.servicing,
        ];
        let tenant = self.tenant_networks.values().copied().map(Some);
        for vlan in vlans.into_iter().chain(tenant).flatten() {
            if !(1..=4094).contains(&vlan) {
                return Err(format!("VLAN {vlan} is not between 1 and 4094"));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for switch in &self.switches {
            if !names.insert(switch.name.as_str()) {
                return Err(format!("two switches are named \"{}\"", switch.name));
            }
            if switch.private_key_file.is_none() && switch.password_file.is_none() {
                return Err(format!(
                    "switch \"{}\" has neither private_key_file nor password_file",
                    switch.name
                ));
            }
            let safe = |text: &str| {
                !text.is_empty()
                    && text
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
            };
            if !safe(&switch.name) || !safe(&switch.address) || !safe(&switch.user) {
                return Err(format!(
                    "switch \"{}\": its name, address and user may hold only letters, digits \
                     and - _ . :",
                    switch.name
                ));
            }
        }
        Ok(())
    }

    /// The VLAN of `network`; `None` for the idle network when it has none, and for the tenant
    /// network (each port's own).
    pub fn vlan(&self, network: Network) -> Option<u16> {
        let vlans = &self.networks;
        let or_provisioning = |vlan: Option<u16>| Some(vlan.unwrap_or(vlans.provisioning));
        match network {
            Network::Idle => vlans.idle,
            Network::Provisioning => Some(vlans.provisioning),
            Network::Cleaning => or_provisioning(vlans.cleaning),
            Network::Inspection => or_provisioning(vlans.inspection),
            Network::Rescuing => or_provisioning(vlans.rescuing),
            Network::Servicing => or_provisioning(vlans.servicing),
            Network::Tenant => None,
        }
    }

    /// The switch a port's `local_link_connection` names: by `switch_info` (its name) or
    /// `switch_id`.
    pub fn find(
        &self,
        switch_id: Option<&str>,
        switch_info: Option<&str>,
    ) -> Option<&SwitchSettings> {
        if let Some(name) = switch_info
            && let Some(switch) = self.switches.iter().find(|switch| switch.name == name)
        {
            return Some(switch);
        }
        let id = switch_id?;
        self.switches.iter().find(|switch| {
            switch
                .switch_id
                .as_deref()
                .is_some_and(|known| known.eq_ignore_ascii_case(id))
        })
    }
}
