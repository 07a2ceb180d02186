//! The network boot interfaces — `ipxe`, `pxe`, `http` and `http-ipxe` — all of which boot
//! the agent ramdisk through iPXE; they differ in how the machine's firmware reaches iPXE:
//! - `ipxe`: the NIC runs iPXE already (an iPXE ROM); DHCP hands it `boot.ipxe`.
//! - `pxe`: the firmware's own PXE client; DHCP hands it an iPXE loader over TFTP, chosen by
//!   its architecture (`dhcp.rs`), and that iPXE asks again and gets `boot.ipxe`.
//! - `http`, `http-ipxe`: UEFI HTTP boot; the BMC selects it (boot device `uefihttp`), DHCP
//!   answers the `HTTPClient` vendor class with the loader's HTTP URL on the boot file server
//!   (copied there from Debian's `ipxe` at server start). Ironic's `http` loads GRUB where
//!   Ferric's loads iPXE: the kernel and ramdisk come over HTTP either way.
//!
//! Theory of operation: every machine that DHCP chains into iPXE fetches the generic
//! `boot.ipxe` from Ferric's boot file server. That script chains to `ipxe/<mac>.ipxe`, which
//! exists only while the node is in a ramdisk phase (deploying, cleaning, inspecting,
//! rescuing); without it iPXE exits and the firmware boots the next device — the disk. So a
//! deployed machine never netboots into the ramdisk again, even if its boot order still
//! names the network first. When Ferric feeds a dnsmasq `--dhcp-hostsdir`, the node's MACs
//! are also listed there (tagged `ferric`) only during the ramdisk phase.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ferric_model::resources::{Node, Port};
use serde_json::Value;

use crate::Component;
use crate::DriverError;
use crate::dhcp::{BIOS_LOADER, UEFI_LOADER};
use crate::interfaces::{BootDevice, BootInterface, BootMode, Validate};
use crate::ramdisk_deploy::InstanceRamdisk;
use crate::settings::{BootSettings, boot_file_url};

/// The generic script DHCP hands to iPXE (`--dhcp-boot=tag:ipxe,<http_url>/boot.ipxe`).
pub const BOOT_SCRIPT: &str = "#!ipxe\n\
# Written by Ferric. Machines in a ramdisk phase have a script of their own; with\n\
# discovery on, unknown machines boot the inspection ramdisk (ipxe/discovery.ipxe);\n\
# every other machine leaves iPXE and boots from its next boot device.\n\
chain ipxe/${mac:hexhyp}.ipxe || chain ipxe/discovery.ipxe || goto local\n\
:local\n\
echo No network boot requested for ${mac}; booting from the next device.\n\
exit 0\n";

/// Writes `boot.ipxe` into the boot file server's root (at server start).
/// Also copies the UEFI iPXE loader from `ipxe_dir` (Debian's `ipxe` by default) beside it,
/// for UEFI HTTP boot (`<http_url>/snponly.efi`); without it the `http` interfaces refuse to
/// validate.
pub fn write_boot_script(settings: &BootSettings) -> std::io::Result<()> {
    std::fs::create_dir_all(settings.http_root.join("ipxe"))?;
    std::fs::create_dir_all(settings.http_root.join("images"))?;
    let loader = settings.ipxe_dir.join(UEFI_LOADER);
    if loader.exists() {
        let copy = settings.http_root.join(UEFI_LOADER);
        let temporary = copy.with_extension("tmp");
        std::fs::copy(&loader, &temporary)?;
        std::fs::rename(&temporary, &copy)?;
    } else {
        tracing::warn!(
            loader = %loader.display(),
            "no UEFI iPXE loader (install Debian's ipxe, or set ipxe_dir): UEFI HTTP boot is \
             unavailable"
        );
    }
    write_atomically(&settings.http_root.join("boot.ipxe"), BOOT_SCRIPT)
}

/// Where the discovery script lives under the boot file server's root.
const DISCOVERY_SCRIPT: &str = "ipxe/discovery.ipxe";

/// Writes `ipxe/discovery.ipxe`, which boots the agent ramdisk on a machine Ferric does not
/// know and has it post its inventory to `callback_url` (the inspection service's
/// `/v1/continue`), or removes it (`None`). Only machines DHCP answers reach it: with the
/// inspection PXE filter, unknown ones and those under introspection, never an enrolled
/// machine outside a ramdisk phase (`docs/inspection.md`, discovery).
pub fn write_discovery_script(
    settings: &BootSettings,
    callback_url: Option<&str>,
) -> Result<(), DriverError> {
    let path = settings.http_root.join(DISCOVERY_SCRIPT);
    let Some(callback_url) = callback_url else {
        return match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(DriverError::failed(
                Component::Conductor,
                format!("Could not remove {}: {error}", path.display()),
            )),
            _ => Ok(()),
        };
    };
    let missing = |what: &str| {
        DriverError::missing(
            format!("settings.{what}"),
            format!("Discovery needs network boot: set {what} in Ferric's settings."),
        )
    };
    let http_url = settings
        .http_url
        .as_deref()
        .ok_or_else(|| missing("boot_http_url"))?
        .trim_end_matches('/');
    let api_url = settings
        .api_url
        .as_deref()
        .ok_or_else(|| missing("api_url"))?;
    let params = [
        settings.kernel_append_params.as_str(),
        &format!("ipa-inspection-callback-url={callback_url}"),
    ];
    crate::kernel_params::check("settings.kernel_append_params", params[0])?;
    crate::kernel_params::check("the inspection callback URL", params[1])?;
    let params = params.join(" ");
    let params = params.trim();
    // An unknown machine has no cpu_arch: iPXE's ${buildarch} picks its agent.
    let boot_lines = |kernel: &str, ramdisk: &str| -> Result<String, DriverError> {
        Ok(format!(
            "kernel {} initrd=ramdisk ipa-api-url={api_url} ferric.api_url={api_url} \
             BOOTIF=01-${{mac:hexhyp}} {params} || goto retry\n\
             initrd --name ramdisk {} || goto retry\n\
             boot\n",
            boot_file_url(http_url, kernel)?,
            boot_file_url(http_url, ramdisk)?,
        ))
    };
    let mut branches = String::new();
    let mut arches = String::new();
    for (arch, kernel) in &settings.deploy_kernel_by_arch {
        let Some(ramdisk) = settings.deploy_ramdisk_by_arch.get(arch) else {
            continue;
        };
        let buildarch = crate::boot_arch::ipxe_buildarch(arch);
        branches.push_str(&format!(
            "iseq ${{buildarch}} {buildarch} && goto arch-{arch} ||\n"
        ));
        arches.push_str(&format!(":arch-{arch}\n{}", boot_lines(kernel, ramdisk)?));
    }
    let script = format!(
        "#!ipxe\n# Written by Ferric: discovery, for machines without a node.\n\
         {branches}{}{arches}\
         :retry\n\
         echo Fetching the agent failed; retrying in 5 seconds.\n\
         sleep 5\n\
         chain {http_url}/{DISCOVERY_SCRIPT}\n",
        boot_lines(&settings.deploy_kernel, &settings.deploy_ramdisk)?,
    );
    std::fs::create_dir_all(settings.http_root.join("ipxe"))
        .and_then(|()| write_atomically(&path, &script))
        .map_err(|error| {
            DriverError::failed(
                Component::Conductor,
                format!("Could not write {}: {error}", path.display()),
            )
        })
}

fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents)?;
    std::fs::rename(&temporary, path)
}

/// `52:54:00:ab:cd:ef` → `52-54-00-ab-cd-ef` (iPXE's `${mac:hexhyp}`).
fn hexhyp(mac: &str) -> String {
    mac.to_ascii_lowercase().replace(':', "-")
}

/// How the firmware reaches iPXE (the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkBoot {
    /// `ipxe`: the NIC boots iPXE itself.
    Ipxe,
    /// `pxe`: the firmware's PXE client, then iPXE over TFTP.
    Pxe,
    /// `http`, `http-ipxe`: UEFI HTTP boot of iPXE.
    Http,
}

impl NetworkBoot {
    /// The implementation for a boot interface name, if it is one of these.
    pub fn from_interface(name: &str) -> Option<Self> {
        match name {
            "ipxe" => Some(Self::Ipxe),
            "pxe" => Some(Self::Pxe),
            "http" | "http-ipxe" => Some(Self::Http),
            _ => None,
        }
    }
}

/// The network boot interface of one node.
#[derive(Debug, Clone)]
pub struct IpxeBoot {
    pub(crate) settings: BootSettings,
    /// The node's MACs that may network-boot (ports with `pxe_enabled`).
    pub(crate) macs: Vec<String>,
    pub(crate) kind: NetworkBoot,
    /// The interface's name as the node names it (for messages).
    pub(crate) name: &'static str,
    /// Whether the node's management interface can select UEFI HTTP boot.
    pub(crate) http_selectable: bool,
    /// Glance and the image cache: an agent kernel or ramdisk given as a Glance image.
    pub(crate) images: std::sync::Arc<crate::images::ImageSources>,
}

impl IpxeBoot {
    /// The `ipxe` interface.
    pub fn new(settings: BootSettings, ports: &[Port]) -> Self {
        let macs = ports
            .iter()
            .filter(|port| port.pxe_enabled)
            .map(|port| port.address.to_ascii_lowercase())
            .collect();
        Self {
            settings,
            macs,
            kind: NetworkBoot::Ipxe,
            name: "ipxe",
            http_selectable: false,
            images: std::sync::Arc::default(),
        }
    }

    /// The same with Glance and the image cache, for agent kernels and ramdisks given as
    /// Glance images.
    #[must_use]
    pub fn with_images(mut self, images: std::sync::Arc<crate::images::ImageSources>) -> Self {
        self.images = images;
        self
    }

    /// The same for the interface `name` (`pxe`, `http`, …), whose BMC can select the boot
    /// devices `selectable`.
    #[must_use]
    pub fn with_interface(mut self, name: &'static str, selectable: &[BootDevice]) -> Self {
        self.kind = NetworkBoot::from_interface(name).unwrap_or(NetworkBoot::Ipxe);
        self.name = name;
        self.http_selectable = selectable.contains(&BootDevice::Uefihttp);
        self
    }

    /// Checks what the firmware needs to reach iPXE this way, in the node's boot mode.
    fn validate_path(&self, node: &Node) -> Result<(), DriverError> {
        let (mode, source) = crate::boot_mode::boot_mode(node)?;
        let name = self.name;
        match self.kind {
            NetworkBoot::Ipxe => Ok(()),
            NetworkBoot::Pxe => {
                let loader = match mode {
                    BootMode::Uefi => UEFI_LOADER,
                    BootMode::Bios => BIOS_LOADER,
                };
                let path = self.settings.ipxe_dir.join(loader);
                if path.exists() {
                    return Ok(());
                }
                Err(DriverError::invalid(
                    "node.boot_interface",
                    format!(
                        "Node {}: boot interface {name} hands {mode} machines {} over TFTP, and it is \
                     missing; install Debian's ipxe package (or set ipxe_dir to a directory \
                     holding iPXE's loaders), or set boot_interface ipxe if the machine's NIC \
                     runs iPXE itself.",
                        node.uuid,
                        path.display()
                    ),
                ))
            }
            NetworkBoot::Http => {
                if mode != BootMode::Uefi {
                    return Err(DriverError::invalid(
                        "capabilities.boot_mode",
                        format!(
                            "Node {}: boot interface {name} is UEFI HTTP boot, but the node boots in \
                         {mode} mode (from {}); set boot_mode:uefi in properties.capabilities, or \
                         use boot_interface pxe or ipxe.",
                            node.uuid,
                            source.field()
                        ),
                    ));
                }
                if !self.http_selectable {
                    return Err(DriverError::invalid(
                        "node.boot_interface",
                        format!(
                            "Node {}: boot interface {name} needs a BMC that can select UEFI HTTP \
                         boot, and its management interface {} cannot; use the redfish driver, or \
                         boot_interface pxe.",
                            node.uuid,
                            node.management_interface.as_deref().unwrap_or("(default)")
                        ),
                    ));
                }
                let loader = self.settings.http_root.join(UEFI_LOADER);
                if loader.exists() {
                    return Ok(());
                }
                Err(DriverError::invalid(
                    "node.boot_interface",
                    format!(
                        "Node {}: boot interface {name} serves {} to UEFI HTTP boot, and it is \
                     missing; install Debian's ipxe package ({}) and restart ferric server, \
                     which copies it there.",
                        node.uuid,
                        loader.display(),
                        self.settings.ipxe_dir.join(UEFI_LOADER).display()
                    ),
                ))
            }
        }
    }

    fn script_path(&self, mac: &str) -> PathBuf {
        self.settings
            .http_root
            .join("ipxe")
            .join(format!("{}.ipxe", hexhyp(mac)))
    }

    fn host_path(hostsdir: &Path, mac: &str) -> PathBuf {
        hostsdir.join(format!("ferric-{}", hexhyp(mac)))
    }

    fn http_url(&self) -> Result<&str, DriverError> {
        self.settings.http_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.boot_http_url",
                "Network boot is not configured: set boot_http_url (the URL machines reach \
                 Ferric's boot file server at) and api_url in Ferric's settings."
                    .to_owned(),
            )
        })
    }

    fn node_setting<'a>(node: &'a Node, key: &str, default: &'a str) -> &'a str {
        node.driver_info
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
            .unwrap_or(default)
    }

    /// The per-MAC iPXE script that boots the agent ramdisk.
    pub fn ramdisk_script(&self, node: &Node, mac: &str) -> Result<String, DriverError> {
        self.ramdisk_script_with(node, mac, &[])
    }

    /// The script, with `extra` kernel parameters (the inspection callback URL).
    pub fn ramdisk_script_with(
        &self,
        node: &Node,
        mac: &str,
        extra: &[String],
    ) -> Result<String, DriverError> {
        let http_url = self.http_url()?;
        let api_url = self.settings.api_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.api_url",
                "Network boot is not configured: set api_url (the URL agents reach Ferric's \
                 API at) in Ferric's settings."
                    .to_owned(),
            )
        })?;
        let (kernel, ramdisk) = crate::boot_arch::agent_files(&self.settings, node)?;
        let kernel = boot_file_url(http_url, kernel)?;
        let ramdisk = boot_file_url(http_url, ramdisk)?;
        let mut append = format!(
            "initrd=ramdisk ipa-api-url={api_url} ferric.api_url={api_url} \
             ipa-node-uuid={} BOOTIF=01-{}",
            node.uuid,
            hexhyp(mac)
        );
        for (field, extra) in [
            (
                "settings.kernel_append_params",
                self.settings.kernel_append_params.as_str(),
            ),
            (
                "driver_info.kernel_append_params",
                Self::node_setting(node, "kernel_append_params", ""),
            ),
        ]
        .into_iter()
        .chain(
            extra
                .iter()
                .map(|extra| ("kernel parameters", extra.as_str())),
        ) {
            crate::kernel_params::check(field, extra)?;
            if !extra.is_empty() {
                append.push(' ');
                append.push_str(extra);
            }
        }
        Ok(format!(
            "#!ipxe\n# Written by Ferric for node {uuid} (MAC {mac}): boot the agent ramdisk.\n\
             kernel {kernel} {append} || goto retry\n\
             initrd --name ramdisk {ramdisk} || goto retry\n\
             boot\n\
             :retry\n\
             echo Fetching the agent failed; retrying in 5 seconds.\n\
             sleep 5\n\
             chain {http_url}/ipxe/{name}.ipxe\n",
            uuid = node.uuid,
            name = hexhyp(mac),
            http_url = http_url.trim_end_matches('/'),
        ))
    }

    /// The per-MAC iPXE script that boots a `ramdisk` deploy's instance: its kernel and
    /// ramdisk, or its ISO (`sanboot`). It stays while the node is active.
    pub fn instance_script(&self, node: &Node, mac: &str) -> Result<String, DriverError> {
        let http_url = self.http_url()?;
        let boot = match crate::ramdisk_deploy::instance_ramdisk(node)? {
            InstanceRamdisk::Iso(iso) => format!(
                "sanboot --no-describe {} || goto retry\n",
                boot_file_url(http_url, &iso)?
            ),
            InstanceRamdisk::Kernel {
                kernel,
                ramdisk,
                arguments,
            } => {
                crate::kernel_params::check("instance_info.ramdisk_kernel_arguments", &arguments)?;
                format!(
                    "kernel {} initrd=ramdisk {arguments} || goto retry\n\
                 initrd --name ramdisk {} || goto retry\n\
                 boot\n",
                    boot_file_url(http_url, &kernel)?,
                    boot_file_url(http_url, &ramdisk)?
                )
            }
        };
        Ok(format!(
            "#!ipxe\n# Written by Ferric for node {uuid} (MAC {mac}): boot the instance \
             (ramdisk deploy).\n\
             {boot}\
             :retry\n\
             echo Fetching the instance failed; retrying in 5 seconds.\n\
             sleep 5\n\
             chain {http_url}/ipxe/{name}.ipxe\n",
            uuid = node.uuid,
            name = hexhyp(mac),
            http_url = http_url.trim_end_matches('/'),
        ))
    }

    /// Writes one script per MAC (and lists the MACs for DHCP), rendered by `script` (as
    /// `prepare_ramdisk_with` does for the agent).
    fn write_scripts(
        &self,
        script: impl Fn(&str) -> Result<String, DriverError>,
    ) -> Result<(), DriverError> {
        for mac in &self.macs {
            let script = script(mac)?;
            let path = self.script_path(mac);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|error| Self::io_error("create", parent, &error))?;
            }
            write_atomically(&path, &script)
                .map_err(|error| Self::io_error("write", &path, &error))?;
            if let Some(hostsdir) = &self.settings.dhcp_hostsdir {
                let host = Self::host_path(hostsdir, mac);
                write_atomically(&host, &format!("{mac},set:ferric\n"))
                    .map_err(|error| Self::io_error("write", &host, &error))?;
            }
        }
        Ok(())
    }

    fn io_error(what: &str, path: &Path, error: &std::io::Error) -> DriverError {
        DriverError::failed(
            Component::Conductor,
            format!("Could not {what} {}: {error}", path.display()),
        )
    }
}

#[async_trait]
impl Validate for IpxeBoot {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.http_url()?;
        if self.macs.is_empty() {
            return Err(DriverError::missing(
                "node.ports",
                format!(
                    "Node {} has no port with pxe_enabled, so it cannot boot from the network; \
                 create a port with the MAC of its boot NIC.",
                    node.uuid
                ),
            ));
        }
        // Renders the script, so a bad kernel name or a missing API URL shows up here; a
        // Glance kernel or ramdisk is checked against Glance (not fetched).
        let node = self
            .images
            .resolve_agent_files(&self.settings, node, false)
            .await?;
        self.ramdisk_script(&node, &self.macs[0])?;
        self.validate_path(&node)
    }
}

#[async_trait]
impl BootInterface for IpxeBoot {
    fn network_boot_device(&self) -> BootDevice {
        match self.kind {
            NetworkBoot::Http => BootDevice::Uefihttp,
            NetworkBoot::Ipxe | NetworkBoot::Pxe => BootDevice::Pxe,
        }
    }

    async fn prepare_ramdisk(&self, node: &mut Node) -> Result<(), DriverError> {
        self.prepare_ramdisk_with(node, &[]).await
    }

    async fn prepare_ramdisk_with(
        &self,
        node: &mut Node,
        kernel_params: &[String],
    ) -> Result<(), DriverError> {
        self.validate(node).await?;
        let resolved = self
            .images
            .resolve_agent_files(&self.settings, node, true)
            .await?;
        for mac in &self.macs {
            let script = self.ramdisk_script_with(&resolved, mac, kernel_params)?;
            let path = self.script_path(mac);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|error| Self::io_error("create", parent, &error))?;
            }
            write_atomically(&path, &script)
                .map_err(|error| Self::io_error("write", &path, &error))?;
            if let Some(hostsdir) = &self.settings.dhcp_hostsdir {
                let host = Self::host_path(hostsdir, mac);
                write_atomically(&host, &format!("{mac},set:ferric\n"))
                    .map_err(|error| Self::io_error("write", &host, &error))?;
            }
        }
        tracing::info!(node = %node.uuid, macs = ?self.macs, "network boot of the agent prepared");
        Ok(())
    }

    fn boots_instance_ramdisk(&self) -> bool {
        true
    }

    async fn prepare_instance_ramdisk(&self, node: &mut Node) -> Result<BootDevice, DriverError> {
        self.validate(node).await?;
        self.write_scripts(|mac| self.instance_script(node, mac))?;
        tracing::info!(node = %node.uuid, macs = ?self.macs, "network boot of the instance prepared");
        Ok(self.network_boot_device())
    }

    async fn clean_up_ramdisk(&self, node: &Node) -> Result<(), DriverError> {
        // A Glance kernel's and ramdisk's cache URLs end with the ramdisk's boot.
        self.images.release(&node.uuid.to_string());
        let mut paths: Vec<PathBuf> = self.macs.iter().map(|mac| self.script_path(mac)).collect();
        if let Some(hostsdir) = &self.settings.dhcp_hostsdir {
            paths.extend(self.macs.iter().map(|mac| Self::host_path(hostsdir, mac)));
        }
        for path in paths {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(Self::io_error("remove", &path, &error)),
            }
        }
        tracing::info!(node = %node.uuid, "network boot of the agent removed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    fn boot(root: &Path) -> IpxeBoot {
        let settings = BootSettings {
            http_url: Some("http://10.0.0.1:8080".into()),
            http_root: root.to_owned(),
            api_url: Some("http://10.0.0.1:6385".into()),
            dhcp_hostsdir: Some(root.join("hosts")),
            ..BootSettings::default()
        };
        let node = Uuid::nil();
        let mut quiet = Port::new(Uuid::new_v4(), node, "52:54:00:00:00:02");
        quiet.pxe_enabled = false;
        IpxeBoot::new(
            settings,
            &[Port::new(Uuid::new_v4(), node, "52:54:00:AB:CD:01"), quiet],
        )
    }

    #[test]
    fn the_discovery_script_boots_the_ramdisk_with_the_callback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = boot(dir.path()).settings;
        let callback = "http://10.0.0.1:5050/v1/continue";
        write_discovery_script(&settings, Some(callback)).expect("write");
        let script =
            std::fs::read_to_string(dir.path().join(DISCOVERY_SCRIPT)).expect("script written");
        for expected in [
            "kernel http://10.0.0.1:8080/agent.kernel initrd=ramdisk",
            "ipa-api-url=http://10.0.0.1:6385",
            "BOOTIF=01-${mac:hexhyp}",
            "ipa-inspection-callback-url=http://10.0.0.1:5050/v1/continue",
            "initrd --name ramdisk http://10.0.0.1:8080/agent.ramdisk",
        ] {
            assert!(script.contains(expected), "{expected} missing: {script}");
        }
        assert!(!script.contains("ipa-node-uuid"), "no node yet: {script}");
        assert!(BOOT_SCRIPT.contains("chain ipxe/discovery.ipxe"));
        // Off again: removed (and removing twice is fine).
        write_discovery_script(&settings, None).expect("remove");
        write_discovery_script(&settings, None).expect("remove again");
        assert!(!dir.path().join(DISCOVERY_SCRIPT).exists());
    }

    #[test]
    fn each_architecture_boots_its_own_agent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut boot = boot(dir.path());
        boot.settings.deploy_kernel_by_arch =
            crate::boot_arch::parse_map("k", "aarch64:arm/agent.kernel").expect("map");
        boot.settings.deploy_ramdisk_by_arch =
            crate::boot_arch::parse_map("r", "aarch64:arm/agent.ramdisk").expect("map");
        // A known node: its cpu_arch.
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Deploying);
        node.properties
            .insert("cpu_arch".to_owned(), serde_json::json!("aarch64"));
        let script = boot
            .ramdisk_script(&node, "52:54:00:ab:cd:01")
            .expect("script");
        assert!(
            script.contains("kernel http://10.0.0.1:8080/arm/agent.kernel ")
                && script.contains("initrd --name ramdisk http://10.0.0.1:8080/arm/agent.ramdisk"),
            "{script}"
        );
        // An unknown machine: iPXE's ${buildarch} chooses, the default agent otherwise.
        write_discovery_script(&boot.settings, Some("http://10.0.0.1:5050/v1/continue"))
            .expect("write");
        let script =
            std::fs::read_to_string(dir.path().join(DISCOVERY_SCRIPT)).expect("script written");
        let branch = script
            .find("iseq ${buildarch} arm64 && goto arch-aarch64 ||")
            .expect("an arm64 branch");
        let default = script
            .find("kernel http://10.0.0.1:8080/agent.kernel ")
            .expect("the default agent");
        let arm = script
            .find(":arch-aarch64\nkernel http://10.0.0.1:8080/arm/agent.kernel ")
            .expect("the arm64 agent");
        assert!(branch < default && default < arm, "{script}");
    }

    #[tokio::test]
    async fn a_ramdisk_phase_writes_and_removes_the_scripts_and_hosts() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("hosts")).expect("hosts dir");
        let boot = boot(dir.path());
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Deploying);
        boot.prepare_ramdisk(&mut node).await.expect("prepare");
        let script = std::fs::read_to_string(dir.path().join("ipxe/52-54-00-ab-cd-01.ipxe"))
            .expect("script written");
        assert!(script.contains("kernel http://10.0.0.1:8080/agent.kernel "));
        assert!(script.contains("ipa-api-url=http://10.0.0.1:6385"));
        assert!(script.contains("BOOTIF=01-52-54-00-ab-cd-01"));
        assert!(script.contains("initrd --name ramdisk http://10.0.0.1:8080/agent.ramdisk"));
        assert!(!dir.path().join("ipxe/52-54-00-00-00-02.ipxe").exists());
        let host = std::fs::read_to_string(dir.path().join("hosts/ferric-52-54-00-ab-cd-01"))
            .expect("host written");
        assert_eq!(host, "52:54:00:ab:cd:01,set:ferric\n");

        boot.clean_up_ramdisk(&node).await.expect("clean up");
        assert!(!dir.path().join("ipxe/52-54-00-ab-cd-01.ipxe").exists());
        assert!(!dir.path().join("hosts/ferric-52-54-00-ab-cd-01").exists());
        // Twice is fine.
        boot.clean_up_ramdisk(&node).await.expect("clean up again");
    }

    #[tokio::test]
    async fn unconfigured_or_portless_nodes_do_not_validate() {
        let node = Node::new(Uuid::nil(), "redfish", ProvisionState::Available);
        let unconfigured = IpxeBoot::new(BootSettings::default(), &[]);
        let error = unconfigured.validate(&node).await.unwrap_err();
        assert!(error.to_string().contains("boot_http_url"), "{error}");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut portless = boot(dir.path());
        portless.macs.clear();
        let error = portless.validate(&node).await.unwrap_err();
        assert!(error.to_string().contains("pxe_enabled"), "{error}");
    }

    #[tokio::test]
    async fn http_boot_needs_uefi_a_bmc_that_selects_it_and_the_loader() {
        let dir = tempfile::tempdir().expect("tempdir");
        let redfish = [BootDevice::Pxe, BootDevice::Disk, BootDevice::Uefihttp];
        let http = boot(dir.path()).with_interface("http", &redfish);
        assert_eq!(http.network_boot_device(), BootDevice::Uefihttp);
        assert_eq!(boot(dir.path()).network_boot_device(), BootDevice::Pxe);
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Available);

        let error = http.validate(&node).await.unwrap_err().to_string();
        assert!(
            error.contains("snponly.efi") && error.contains("install Debian's ipxe"),
            "{error}"
        );
        std::fs::write(dir.path().join(UEFI_LOADER), b"loader").expect("loader");
        http.validate(&node)
            .await
            .expect("UEFI by default, loader there");

        node.properties
            .insert("capabilities".into(), "boot_mode:bios".into());
        let error = http.validate(&node).await.unwrap_err().to_string();
        assert!(
            error.contains("boot interface http is UEFI HTTP boot")
                && error.contains("from properties.capabilities")
                && error.contains("set boot_mode:uefi"),
            "{error}"
        );

        node.properties
            .insert("capabilities".into(), "boot_mode:uefi".into());
        let ipmi = boot(dir.path()).with_interface("http-ipxe", &[BootDevice::Pxe]);
        let error = ipmi.validate(&node).await.unwrap_err().to_string();
        assert!(
            error.contains("cannot select UEFI HTTP boot") || error.contains("needs a BMC"),
            "{error}"
        );
        // `ipxe` asks nothing of the firmware; a bad boot mode is refused by every interface.
        node.properties
            .insert("capabilities".into(), "boot_mode:efi".into());
        let error = boot(dir.path()).validate(&node).await.unwrap_err();
        assert!(
            matches!(error, DriverError::InvalidParameter { .. }),
            "{error}"
        );
    }

    /// Found while writing the `pxe_inputs` fuzz target: `driver_info` values went into the per-MAC
    /// script verbatim, so a line break in one added iPXE commands.
    #[test]
    fn driver_info_cannot_add_lines_to_the_script() {
        let dir = tempfile::tempdir().expect("tempdir");
        let boot = boot(dir.path());
        let mac = boot.macs[0].clone();
        for (key, value) in [
            ("deploy_kernel", "http://x/k\nshell"),
            ("deploy_ramdisk", "images/r d"),
            ("kernel_append_params", "a=b\r\nchain http://evil/x"),
            // iPXE runs `;`-separated commands on one line (issue 41, item 2).
            ("kernel_append_params", "quiet ; chain http://elsewhere/x"),
            ("kernel_append_params", "quiet || chain http://elsewhere/x"),
            ("deploy_kernel", "http://x/k${net0/mac}"),
        ] {
            let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Deploying);
            node.driver_info.insert(key.to_owned(), value.into());
            let error = boot.ramdisk_script(&node, &mac).unwrap_err();
            assert!(
                matches!(error, DriverError::InvalidParameter { .. }),
                "{key}: {error}"
            );
        }
        let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Deploying);
        node.driver_info
            .insert("kernel_append_params".to_owned(), "nofb nomodeset".into());
        let script = boot.ramdisk_script(&node, &mac).expect("a script");
        assert_eq!(script.lines().count(), 9, "{script}");
    }
}
