//! `POST/DELETE/GET /v1/nodes/{node}/vmedia`, conductor side: attach any image as a node's
//! virtual CD, floppy or USB disk, eject it, and list the devices, through the node's
//! management interface (`redfish`: VirtualMedia under the system or its managers). Attaching
//! and ejecting take the node's lease, as a boot-device change does.

use ferric_drivers::vmedia::{VmediaDevice, VmediaSlot};
use uuid::Uuid;

use crate::task::Task;
use crate::{Conductor, ConductorError};

impl Conductor {
    /// Presents the image at `url` as the node's virtual `device`.
    pub async fn vmedia_attach(
        &self,
        node: Uuid,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), ConductorError> {
        let task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .management
                .attach_virtual_media(&task.node, device, url)
                .await?;
            task.history(
                "INFO",
                "vmedia",
                format!("Virtual media {device} attached: {url}"),
            )
            .await;
            Ok(())
        }
        .await;
        task.release().await;
        result
    }

    /// Ejects what the node's devices of the given kinds (every kind when empty) present.
    pub async fn vmedia_detach(
        &self,
        node: Uuid,
        devices: &[VmediaDevice],
    ) -> Result<(), ConductorError> {
        let task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .management
                .detach_virtual_media(&task.node, devices)
                .await?;
            task.history("INFO", "vmedia", "Virtual media detached".to_owned())
                .await;
            Ok(())
        }
        .await;
        task.release().await;
        result
    }

    /// The node's virtual media devices as its BMC reports them (no lease: a read).
    pub async fn vmedia_list(&self, node: Uuid) -> Result<Vec<VmediaSlot>, ConductorError> {
        let (record, ports) = crate::view::read(&self.inner, node).await?;
        let interfaces = crate::view::interfaces(&self.inner, &record, &ports)?;
        Ok(interfaces.management.virtual_media(&record).await?)
    }
}
