//! The `redfish-https` boot interface (Ironic's `RedfishHttpsBoot`): the agent boots from the
//! same ISO as with `redfish-virtual-media` — the per-node one Ferric builds (`boot_iso.rs`) or
//! the one the node brings (`given_iso.rs`) — by UEFI HTTP boot instead of a virtual CD. The
//! BMC gets the ISO's URL on the boot file server's HTTPS listener (`BootSettings::https_url`,
//! with the site's own certificate) as `HttpBootUri`, in the same PATCH that sets
//! `BootSourceOverrideTarget` to `UefiHttp`; the URL travels from `prepare_ramdisk` to that
//! PATCH in `driver_internal_info.redfish_uefi_http_url`, as in Ironic. UEFI boot mode only;
//! no virtual media is touched.

use async_trait::async_trait;
use ferric_model::resources::{Node, Port};
use serde_json::Value;

use super::info::RedfishInfo;
use super::{HTTP_BOOT_URL_KEY, Redfish};
use crate::DriverError;
use crate::boot_iso;
use crate::boot_mode::boot_mode;
use crate::interfaces::{BootDevice, BootInterface, BootMode, Validate};
use crate::settings::{BootSettings, DownloadSource};

/// The interface's name, for messages.
const NAME: &str = "redfish-https";

/// The `redfish-https` boot interface of one node.
#[derive(Debug, Clone)]
pub(crate) struct RedfishHttpsBoot {
    redfish: Redfish,
    settings: BootSettings,
    ports: Vec<Port>,
}

fn named(error: DriverError) -> DriverError {
    error.for_boot_interface(NAME)
}

impl RedfishHttpsBoot {
    /// With only the HTTPS listener configured, the ISOs' URLs are built on it directly.
    pub(crate) fn new(redfish: Redfish, mut settings: BootSettings, ports: &[Port]) -> Self {
        if settings.http_url.is_none() {
            settings.http_url.clone_from(&settings.https_url);
        }
        Self {
            redfish,
            settings,
            ports: ports.to_vec(),
        }
    }

    fn https_base(&self) -> Result<&str, DriverError> {
        self.settings.https_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.boot_https_url",
                "UEFI HTTP boot over HTTPS is not configured: set boot_https_listen, \
                 boot_tls_cert and boot_tls_key (and boot_https_url when BMCs reach the boot \
                 file server at another address) in Ferric's settings."
                    .to_owned(),
            )
        })
    }

    /// Whether the BMC fetches from Ferric's boot file server (not a given ISO's origin).
    fn served_here(&self, node: &Node) -> bool {
        let handed_on = crate::given_iso::given(node).is_some_and(|iso| {
            (iso.starts_with("http://") || iso.starts_with("https://"))
                && self.settings.ramdisk_image_download_source == DownloadSource::Http
        });
        !handed_on
    }

    /// `url` on the HTTPS listener when it names a file of the boot file server; an origin's
    /// URL (handed on as given) unchanged.
    fn over_https(&self, url: String) -> Result<String, DriverError> {
        let Some(http) = self.settings.http_url.as_deref() else {
            return Ok(url);
        };
        let prefix = format!("{}/", http.trim_end_matches('/'));
        match url.strip_prefix(&prefix) {
            Some(path) => Ok(format!(
                "{}/{path}",
                self.https_base()?.trim_end_matches('/')
            )),
            None => Ok(url),
        }
    }

    /// Ironic's hardware check (the BMC lists `UefiHttp`), and a `HttpBootUri` to set.
    async fn check_hardware(&self, node: &Node) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (_, system) = self.redfish.system(&info).await?;
        let allowed = system
            .pointer("/Boot/BootSourceOverrideTarget@Redfish.AllowableValues")
            .and_then(Value::as_array);
        if allowed.is_some_and(|allowed| !allowed.iter().any(|value| value == "UefiHttp")) {
            return Err(DriverError::invalid(
                "node.boot_interface",
                format!(
                    "Node {} hardware does not support feature UefiHttp boot, which is required \
                     based upon the requested configuration.",
                    node.uuid
                ),
            ));
        }
        if system.pointer("/Boot/HttpBootUri").is_none() {
            return Err(DriverError::invalid(
                "node.boot_interface",
                format!(
                    "Node {}: its BMC has no HttpBootUri boot property, so it cannot UEFI HTTP \
                     boot the agent's ISO from a URL; use boot_interface redfish-virtual-media \
                     for this node.",
                    node.uuid
                ),
            ));
        }
        Ok(())
    }

    /// Hands the URL to the boot device call that follows.
    fn hand_over(node: &mut Node, url: String) {
        node.driver_internal_info
            .insert(HTTP_BOOT_URL_KEY.to_owned(), Value::String(url));
    }
}

/// UEFI HTTP boot exists only in UEFI mode.
fn check_mode(node: &Node) -> Result<(), DriverError> {
    let (mode, source) = boot_mode(node)?;
    if mode == BootMode::Bios {
        return Err(DriverError::invalid(
            source.parameter(),
            format!(
                "Node {}: UEFI HTTP boot needs boot mode uefi, but {} says bios; set \
                 boot_mode:uefi there, or use boot_interface redfish-virtual-media.",
                node.uuid,
                source.field()
            ),
        ));
    }
    Ok(())
}

#[async_trait]
impl Validate for RedfishHttpsBoot {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        async {
            self.check_hardware(node).await?;
            check_mode(node)?;
            if self.served_here(node) {
                self.https_base()?;
            }
            match crate::given_iso::given(node) {
                // A given ISO carries its own configuration (network data included).
                Some(iso) => crate::given_iso::check(&self.settings, node, iso),
                None => {
                    crate::vmedia::check_network(node)?;
                    boot_iso::check(&self.settings, node, &self.ports, boot_iso::ISO_TOOL)
                }
            }
        }
        .await
        .map_err(named)
    }
}

#[async_trait]
impl BootInterface for RedfishHttpsBoot {
    fn network_boot_device(&self) -> BootDevice {
        BootDevice::Uefihttp
    }

    async fn prepare_ramdisk(&self, node: &mut Node) -> Result<(), DriverError> {
        self.prepare_ramdisk_with(node, &[]).await
    }

    async fn prepare_ramdisk_with(
        &self,
        node: &mut Node,
        kernel_params: &[String],
    ) -> Result<(), DriverError> {
        let url = match crate::given_iso::given(node) {
            Some(iso) => crate::given_iso::publish(&self.settings, node, iso)
                .await
                .map_err(named)?,
            None => {
                crate::vmedia::check_network(node).map_err(named)?;
                boot_iso::build(
                    &self.settings,
                    node,
                    &self.ports,
                    kernel_params,
                    boot_iso::ISO_TOOL,
                )
                .await?
            }
        };
        let url = self.over_https(url).map_err(named)?;
        Self::hand_over(node, url);
        Ok(())
    }

    async fn clean_up_ramdisk(&self, node: &Node) -> Result<(), DriverError> {
        crate::given_iso::remove(&self.settings, node)?;
        boot_iso::remove(&self.settings, node)
    }

    fn boots_instance_ramdisk(&self) -> bool {
        true
    }

    /// The instance's ISO, UEFI HTTP booted at every power-on.
    async fn prepare_instance_ramdisk(&self, node: &mut Node) -> Result<BootDevice, DriverError> {
        let iso = match crate::ramdisk_deploy::instance_ramdisk(node)? {
            crate::ramdisk_deploy::InstanceRamdisk::Iso(iso) => iso,
            crate::ramdisk_deploy::InstanceRamdisk::Kernel { .. } => {
                return Err(named(DriverError::invalid(
                    "instance_info.boot_iso",
                    format!(
                        "node {} names a kernel and ramdisk for its ramdisk deploy; UEFI HTTP \
                         boot loads an ISO: set instance_info.boot_iso, or use boot_interface \
                         ipxe.",
                        node.uuid
                    ),
                )));
            }
        };
        let url = match &self.settings.http_url {
            Some(http_url) => crate::settings::boot_file_url(http_url, &iso)?,
            None => iso,
        };
        let url = self.over_https(url).map_err(named)?;
        Self::hand_over(node, url);
        Ok(BootDevice::Uefihttp)
    }

    /// Nothing to eject: the next boot device change clears `HttpBootUri`.
    async fn clean_up_instance_ramdisk(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[cfg(test)]
#[path = "https_boot_tests.rs"]
mod tests;
