//! Redfish virtual media (DMTF VirtualMedia): finding a system's virtual CD, floppy or USB
//! devices — under the ComputerSystem (newer BMCs) and under each Manager that manages it
//! (older ones and sushy-tools; vendors use both) — inserting an image with the `VirtualMedia.InsertMedia`
//! action (or a PATCH of `Image`/`Inserted` on BMCs without the action) and ejecting it; and
//! the `redfish-virtual-media` boot interface, which boots the agent from a per-node ISO
//! (`boot_iso.rs`) inserted as a CD, the boot device then being the CD once.

use async_trait::async_trait;
use ferric_model::resources::{Node, Port};
use reqwest::Method;
use serde_json::{Value, json};

use super::info::RedfishInfo;
use super::{Redfish, system_members};
use crate::DriverError;
use crate::boot_iso;
use crate::interfaces::{BootDevice, BootInterface, Validate};
use crate::settings::BootSettings;
use crate::vmedia::{VmediaDevice, VmediaSlot, check_network};

/// One VirtualMedia resource: its path and body.
type Media = (String, Value);

fn device_of(body: &Value) -> Option<VmediaDevice> {
    let types: Vec<&str> = body
        .get("MediaTypes")
        .and_then(Value::as_array)
        .map(|types| types.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    VmediaDevice::ALL.into_iter().find(|device| {
        device
            .redfish_media_types()
            .iter()
            .any(|name| types.contains(name))
    })
}

fn is_inserted(body: &Value) -> bool {
    body.get("Inserted").and_then(Value::as_bool) == Some(true)
        || body
            .get("Image")
            .and_then(Value::as_str)
            .is_some_and(|image| !image.is_empty())
}

fn action_target<'a>(body: &'a Value, action: &str) -> Option<&'a str> {
    body.get("Actions")
        .and_then(|actions| actions.get(action))
        .and_then(|action| action.get("target"))
        .and_then(Value::as_str)
}

fn odata_id(value: &Value) -> Option<String> {
    value
        .get("@odata.id")
        .and_then(Value::as_str)
        .map(|path| path.trim_end_matches('/').to_owned())
}

impl Redfish {
    /// Every VirtualMedia resource of the node's system: those under the system (where newer
    /// BMCs put them) or, when the system links none, those of each Manager that manages it.
    pub(crate) async fn virtual_media(
        &self,
        info: &RedfishInfo,
    ) -> Result<Vec<Media>, DriverError> {
        let (_, system) = self.system(info).await?;
        let mut collections: Vec<String> = system
            .get("VirtualMedia")
            .and_then(odata_id)
            .into_iter()
            .collect();
        if collections.is_empty() {
            let managers: Vec<String> = system
                .pointer("/Links/ManagedBy")
                .and_then(Value::as_array)
                .map(|managers| managers.iter().filter_map(odata_id).collect())
                .unwrap_or_default();
            for manager in managers {
                let body = self
                    .clients()
                    .send(info, Method::GET, &manager, None)
                    .await?
                    .body;
                collections.extend(body.get("VirtualMedia").and_then(odata_id));
            }
        }
        let mut media = Vec::new();
        for collection in collections {
            let body = self
                .clients()
                .send(info, Method::GET, &collection, None)
                .await?
                .body;
            for member in system_members(&body) {
                let member = member.trim_end_matches('/').to_owned();
                let body = self
                    .clients()
                    .send(info, Method::GET, &member, None)
                    .await?
                    .body;
                media.push((member, body));
            }
        }
        Ok(media)
    }

    /// The first VirtualMedia resource that serves `device`, or what to do about its absence.
    async fn media_for(
        &self,
        info: &RedfishInfo,
        node: &Node,
        device: VmediaDevice,
    ) -> Result<Media, DriverError> {
        let media = self.virtual_media(info).await?;
        media
            .into_iter()
            .find(|(_, body)| device_of(body) == Some(device))
            .ok_or_else(|| {
                DriverError::invalid(
                    "node.boot_interface",
                    format!(
                        "Node {}: its Redfish BMC {} has no virtual {device} (no VirtualMedia \
                     resource with MediaTypes {} under the system or its managers); use a \
                     network boot interface (ipxe) for this node, or enable the BMC's virtual \
                     media (licence, firmware).",
                        node.uuid,
                        info.address,
                        device.redfish_media_types().join(" or ")
                    ),
                )
            })
    }

    async fn eject(&self, info: &RedfishInfo, (path, body): &Media) -> Result<(), DriverError> {
        match action_target(body, "#VirtualMedia.EjectMedia") {
            Some(target) => {
                self.clients()
                    .send(info, Method::POST, target, Some(&json!({})))
                    .await?;
            }
            None => {
                self.clients()
                    .send(
                        info,
                        Method::PATCH,
                        path,
                        Some(&json!({"Image": null, "Inserted": false})),
                    )
                    .await?;
            }
        }
        tracing::info!(bmc = %info.address, media = %path, "virtual media ejected");
        Ok(())
    }

    /// Presents `url` as the node's virtual `device`, ejecting what it presented before.
    pub(crate) async fn insert_media(
        &self,
        node: &Node,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let media = self.media_for(&info, node, device).await?;
        if is_inserted(&media.1) {
            self.eject(&info, &media).await?;
        }
        let (path, body) = &media;
        match action_target(body, "#VirtualMedia.InsertMedia") {
            Some(target) => {
                self.clients()
                    .send(
                        &info,
                        Method::POST,
                        target,
                        Some(&json!({"Image": url, "Inserted": true, "WriteProtected": true})),
                    )
                    .await?;
            }
            None => {
                self.clients()
                    .send(
                        &info,
                        Method::PATCH,
                        path,
                        Some(&json!({"Image": url, "Inserted": true})),
                    )
                    .await?;
            }
        }
        tracing::info!(node = %node.uuid, media = %path, image = url, "virtual media inserted");
        Ok(())
    }

    /// Ejects what the node's devices of the given kinds (all kinds when empty) present.
    pub(crate) async fn eject_media(
        &self,
        node: &Node,
        devices: &[VmediaDevice],
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        for media in self.virtual_media(&info).await? {
            let wanted = device_of(&media.1)
                .is_some_and(|device| devices.is_empty() || devices.contains(&device));
            if wanted && is_inserted(&media.1) {
                self.eject(&info, &media).await?;
            }
        }
        Ok(())
    }

    /// The node's virtual media devices.
    pub(crate) async fn media_slots(&self, node: &Node) -> Result<Vec<VmediaSlot>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        Ok(self
            .virtual_media(&info)
            .await?
            .into_iter()
            .filter_map(|(path, body)| {
                Some(VmediaSlot {
                    device_type: device_of(&body)?,
                    image: body
                        .get("Image")
                        .and_then(Value::as_str)
                        .filter(|image| !image.is_empty())
                        .map(str::to_owned),
                    inserted: is_inserted(&body),
                    location: path,
                })
            })
            .collect())
    }
}

/// The `redfish-virtual-media` boot interface of one node.
#[derive(Debug, Clone)]
pub(crate) struct RedfishVirtualMediaBoot {
    pub(crate) redfish: Redfish,
    pub(crate) settings: BootSettings,
    pub(crate) ports: Vec<Port>,
    /// Glance and the image cache: an agent kernel or ramdisk given as a Glance image.
    pub(crate) images: std::sync::Arc<crate::images::ImageSources>,
}

/// `error` with the interface named first, so a refusal says which interface is unhappy.
fn named(error: DriverError) -> DriverError {
    error.for_boot_interface("redfish-virtual-media")
}

#[async_trait]
impl Validate for RedfishVirtualMediaBoot {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        async {
            let info = RedfishInfo::parse(node)?;
            match crate::given_iso::given(node) {
                // A given ISO carries its own configuration (network data included).
                Some(iso) => crate::given_iso::check(&self.settings, node, iso)?,
                None => {
                    check_network(node)?;
                    // A Glance kernel or ramdisk is checked against Glance (not fetched).
                    self.images
                        .resolve_agent_files(&self.settings, node, false)
                        .await?;
                    boot_iso::check(&self.settings, node, &self.ports, boot_iso::ISO_TOOL)?;
                }
            }
            self.redfish
                .media_for(&info, node, VmediaDevice::Cdrom)
                .await
                .map(drop)
        }
        .await
        .map_err(named)
    }
}

#[async_trait]
impl BootInterface for RedfishVirtualMediaBoot {
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
                check_network(node).map_err(named)?;
                // A Glance kernel or ramdisk: into the cache, the ISO built from its file.
                let resolved = self
                    .images
                    .resolve_agent_files(&self.settings, node, true)
                    .await
                    .map_err(named)?;
                boot_iso::build(
                    &self.settings,
                    &resolved,
                    &self.ports,
                    kernel_params,
                    boot_iso::ISO_TOOL,
                )
                .await?
            }
        };
        self.redfish
            .insert_media(node, VmediaDevice::Cdrom, &url)
            .await
    }

    async fn clean_up_ramdisk(&self, node: &Node) -> Result<(), DriverError> {
        self.images.release(&node.uuid.to_string());
        self.redfish
            .eject_media(node, &[VmediaDevice::Cdrom])
            .await?;
        crate::given_iso::remove(&self.settings, node)?;
        boot_iso::remove(&self.settings, node)
    }

    fn network_boot_device(&self) -> BootDevice {
        BootDevice::Cdrom
    }

    fn boots_instance_ramdisk(&self) -> bool {
        true
    }

    /// The instance's ISO as the virtual CD (a kernel and ramdisk would need an ISO built
    /// around them: not yet).
    async fn prepare_instance_ramdisk(&self, node: &mut Node) -> Result<BootDevice, DriverError> {
        let iso = match crate::ramdisk_deploy::instance_ramdisk(node)? {
            crate::ramdisk_deploy::InstanceRamdisk::Iso(iso) => iso,
            crate::ramdisk_deploy::InstanceRamdisk::Kernel { .. } => {
                return Err(named(DriverError::invalid(
                    "instance_info.boot_iso",
                    format!(
                        "node {} names a kernel and ramdisk for its ramdisk deploy; virtual media \
                     boots an ISO: set instance_info.boot_iso, or use boot_interface ipxe.",
                        node.uuid
                    ),
                )));
            }
        };
        let url = match &self.settings.http_url {
            Some(http_url) => crate::settings::boot_file_url(http_url, &iso)?,
            None => iso,
        };
        self.redfish
            .insert_media(node, VmediaDevice::Cdrom, &url)
            .await?;
        Ok(BootDevice::Cdrom)
    }

    async fn clean_up_instance_ramdisk(&self, node: &Node) -> Result<(), DriverError> {
        self.redfish.eject_media(node, &[VmediaDevice::Cdrom]).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_kinds_come_from_media_types_and_insertion_from_either_field() {
        let cd = json!({"MediaTypes": ["DVD", "CD"], "Inserted": false, "Image": ""});
        assert_eq!(device_of(&cd), Some(VmediaDevice::Cdrom));
        assert!(!is_inserted(&cd));
        let usb = json!({"MediaTypes": ["USBStick"], "Image": "http://x/y.img"});
        assert_eq!(device_of(&usb), Some(VmediaDevice::Disk));
        assert!(is_inserted(&usb));
        assert_eq!(device_of(&json!({"MediaTypes": []})), None);
        let with_actions = json!({"Actions": {"#VirtualMedia.InsertMedia": {"target": "/a/b"}}});
        assert_eq!(
            action_target(&with_actions, "#VirtualMedia.InsertMedia"),
            Some("/a/b")
        );
        assert_eq!(
            action_target(&with_actions, "#VirtualMedia.EjectMedia"),
            None
        );
    }
}
