//! The `ramdisk` and `custom-agent` deploy interfaces (Ironic's `RamdiskDeploy` and
//! `CustomAgentDeploy`), both built around [`DirectDeploy`]:
//!
//! - `ramdisk`: the instance lives in memory and no disk is written. Its one deploy step,
//!   `deploy.deploy` (priority 100), makes the boot interface boot the instance —
//!   `instance_info.boot_iso`, or `instance_info.kernel` and `ramdisk` (with
//!   `ramdisk_kernel_arguments`) — at every power-on, sets that boot device persistently and
//!   powers the machine on: the node is `active` at once. Metal3 deploys its live ISOs this
//!   way. Only boot interfaces that can boot an instance from memory qualify (Ironic's
//!   `ramdisk_boot` capability): the iPXE family and `redfish-virtual-media` (ISO only). A
//!   config drive is ignored, as Ironic ignores it without `ramdisk_boot_configdrive`.
//! - `custom-agent`: `direct` without its `deploy.write_image` step. The agent is booted and
//!   the operator's own deploy steps (run by the agent, requested with the deploy) do the
//!   work; `image_source` is optional.
//!
//! Cleaning and servicing are `direct`'s for both (through the agent), as in Ironic.

use async_trait::async_trait;
use ferric_model::resources::{Node, PowerState};
use serde_json::Value;

use crate::DriverError;
use crate::direct::DirectDeploy;
use crate::interfaces::{
    DeployInterface, Outcome, PowerAction, StepCall, StepDef, StepKind, Validate,
};

/// What a `ramdisk` instance boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceRamdisk {
    /// `instance_info.boot_iso`.
    Iso(String),
    /// `instance_info.kernel` and `ramdisk`, with `ramdisk_kernel_arguments`.
    Kernel {
        kernel: String,
        ramdisk: String,
        arguments: String,
    },
}

fn info_str<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.instance_info
        .get(key)
        .and_then(Value::as_str)
        .filter(|value| !value.is_empty())
}

/// What `node`'s instance boots, from its `instance_info`; refused when it names neither an
/// ISO nor a kernel and a ramdisk.
pub fn instance_ramdisk(node: &Node) -> Result<InstanceRamdisk, DriverError> {
    if let Some(iso) = info_str(node, "boot_iso") {
        return Ok(InstanceRamdisk::Iso(iso.to_owned()));
    }
    match (info_str(node, "kernel"), info_str(node, "ramdisk")) {
        (Some(kernel), Some(ramdisk)) => {
            let arguments = info_str(node, "ramdisk_kernel_arguments").unwrap_or_default();
            crate::kernel_params::check("instance_info.ramdisk_kernel_arguments", arguments)?;
            Ok(InstanceRamdisk::Kernel {
                kernel: kernel.to_owned(),
                ramdisk: ramdisk.to_owned(),
                arguments: arguments.to_owned(),
            })
        }
        _ => Err(DriverError::missing(
            "instance_info.boot_iso",
            format!(
                "Node {}: the ramdisk deploy interface boots instance_info.boot_iso, or \
             instance_info.kernel and instance_info.ramdisk; set boot_iso (an ISO's URL) or \
             both kernel and ramdisk.",
                node.uuid
            ),
        )),
    }
}

/// Powers `node` off unless it says not to (`disable_power_off`).
async fn power_off(direct: &DirectDeploy, node: &mut Node) -> Result<(), DriverError> {
    if node.disable_power_off {
        return Ok(());
    }
    direct.power.set_power(node, PowerAction::Off, None).await?;
    node.power_state = Some(PowerState::Off);
    Ok(())
}

/// The `ramdisk` deploy interface of one node.
#[derive(Debug)]
pub struct RamdiskDeploy {
    pub(crate) direct: DirectDeploy,
}

#[async_trait]
impl Validate for RamdiskDeploy {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        if !self.direct.boot.boots_instance_ramdisk() {
            return Err(DriverError::invalid(
                "node.boot_interface",
                format!(
                    "Invalid configuration: node {}'s boot interface {} cannot boot an instance \
                 from memory (Ironic's ramdisk_boot capability), which the ramdisk deploy \
                 interface needs; use boot_interface ipxe or redfish-virtual-media.",
                    node.uuid,
                    node.boot_interface.as_deref().unwrap_or("(default)")
                ),
            ));
        }
        self.direct.boot.validate(node).await?;
        instance_ramdisk(node).map(drop)
    }
}

#[async_trait]
impl DeployInterface for RamdiskDeploy {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        match kind {
            StepKind::Deploy => self
                .direct
                .steps(kind)
                .into_iter()
                .filter(|step| step.step == "deploy")
                .collect(),
            StepKind::Clean | StepKind::Service => self.direct.steps(kind),
        }
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        if (kind, step.step.as_str()) != (StepKind::Deploy, "deploy") {
            return self.direct.execute_step(node, kind, step).await;
        }
        instance_ramdisk(node)?;
        if node.instance_info.contains_key("configdrive") {
            tracing::warn!(
                node = %node.uuid,
                "the ramdisk deploy interface ignores the config drive"
            );
        }
        let direct = &self.direct;
        power_off(direct, node).await?;
        let device = direct.boot.prepare_instance_ramdisk(node).await?;
        direct
            .management
            .set_boot_device(node, device, true)
            .await?;
        let action = match direct.power.get_power_state(node).await? {
            PowerState::On => PowerAction::Reboot,
            _ => PowerAction::On,
        };
        direct.power.set_power(node, action, None).await?;
        node.power_state = Some(PowerState::On);
        tracing::info!(node = %node.uuid, device = ?device, "booting the ramdisk instance");
        Ok(Outcome::Done)
    }

    async fn prepare(&self, node: &mut Node, kind: StepKind) -> Result<Outcome, DriverError> {
        match kind {
            StepKind::Deploy => Ok(Outcome::Done),
            StepKind::Clean | StepKind::Service => self.direct.prepare(node, kind).await,
        }
    }

    async fn finish(&self, node: &mut Node, kind: StepKind) -> Result<(), DriverError> {
        self.direct.finish(node, kind).await
    }

    fn step_needs_agent(&self, step: &StepCall) -> bool {
        step.step != "deploy" && self.direct.step_needs_agent(step)
    }

    fn runs_agent(&self) -> bool {
        self.direct.runs_agent()
    }

    async fn collect_ramdisk_logs(
        &self,
        node: &Node,
        label: Option<&str>,
        failed: bool,
    ) -> Option<std::path::PathBuf> {
        self.direct.collect_ramdisk_logs(node, label, failed).await
    }

    async fn refresh_agent_steps(
        &self,
        node: &mut Node,
        kind: StepKind,
    ) -> Result<(), DriverError> {
        self.direct.refresh_agent_steps(node, kind).await
    }

    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError> {
        power_off(&self.direct, node).await?;
        self.direct.boot.clean_up_instance_ramdisk(node).await
    }

    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError> {
        self.direct.boot.clean_up_instance_ramdisk(node).await?;
        power_off(&self.direct, node).await
    }
}

/// The `custom-agent` deploy interface of one node.
#[derive(Debug)]
pub struct CustomAgentDeploy {
    pub(crate) direct: DirectDeploy,
}

#[async_trait]
impl Validate for CustomAgentDeploy {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.direct.validate(node).await
    }
}

#[async_trait]
impl DeployInterface for CustomAgentDeploy {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        self.direct
            .steps(kind)
            .into_iter()
            .filter(|step| !(kind == StepKind::Deploy && step.step == "write_image"))
            .collect()
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        match (kind, step.step.as_str()) {
            // `direct`'s deploy step insists on an image; here the image is the custom
            // steps' business.
            (StepKind::Deploy, "deploy") => self.direct.boot_agent(node).await,
            _ => self.direct.execute_step(node, kind, step).await,
        }
    }

    async fn prepare(&self, node: &mut Node, kind: StepKind) -> Result<Outcome, DriverError> {
        self.direct.prepare(node, kind).await
    }

    async fn finish(&self, node: &mut Node, kind: StepKind) -> Result<(), DriverError> {
        self.direct.finish(node, kind).await
    }

    fn step_needs_agent(&self, step: &StepCall) -> bool {
        self.direct.step_needs_agent(step)
    }

    fn runs_agent(&self) -> bool {
        self.direct.runs_agent()
    }

    async fn collect_ramdisk_logs(
        &self,
        node: &Node,
        label: Option<&str>,
        failed: bool,
    ) -> Option<std::path::PathBuf> {
        self.direct.collect_ramdisk_logs(node, label, failed).await
    }

    async fn refresh_agent_steps(
        &self,
        node: &mut Node,
        kind: StepKind,
    ) -> Result<(), DriverError> {
        self.direct.refresh_agent_steps(node, kind).await
    }

    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError> {
        self.direct.tear_down(node).await
    }

    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError> {
        self.direct.clean_up(node).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn node(info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Available);
        node.instance_info = info.as_object().cloned().unwrap_or_default();
        node
    }

    #[test]
    fn a_boot_iso_wins_over_a_kernel_and_ramdisk() {
        let both = node(json!({"boot_iso": "http://x/live.iso", "kernel": "k", "ramdisk": "r"}));
        assert_eq!(
            instance_ramdisk(&both).unwrap(),
            InstanceRamdisk::Iso("http://x/live.iso".into())
        );
        let kernel = node(json!({"kernel": "k", "ramdisk": "r",
                                 "ramdisk_kernel_arguments": "console=ttyS0"}));
        assert_eq!(
            instance_ramdisk(&kernel).unwrap(),
            InstanceRamdisk::Kernel {
                kernel: "k".into(),
                ramdisk: "r".into(),
                arguments: "console=ttyS0".into()
            }
        );
    }

    #[test]
    fn ipxe_boots_the_instances_iso_or_kernel_from_the_network_every_time() {
        let settings = crate::settings::BootSettings {
            http_url: Some("http://10.0.0.1:8080".into()),
            ..Default::default()
        };
        let boot = crate::ipxe::IpxeBoot::new(settings, &[]);
        let mac = "52:54:00:00:00:01";
        let iso = boot
            .instance_script(&node(json!({"boot_iso": "http://images/live.iso"})), mac)
            .unwrap();
        assert!(
            iso.contains("sanboot --no-describe http://images/live.iso || goto retry"),
            "{iso}"
        );
        assert!(iso.contains("chain http://10.0.0.1:8080/ipxe/52-54-00-00-00-01.ipxe"));
        let kernel = boot
            .instance_script(
                &node(json!({"kernel": "vmlinuz", "ramdisk": "initrd.img",
                             "ramdisk_kernel_arguments": "console=ttyS0 rd.live"})),
                mac,
            )
            .unwrap();
        assert!(
            kernel.contains(
                "kernel http://10.0.0.1:8080/vmlinuz initrd=ramdisk console=ttyS0 rd.live"
            ) && kernel.contains("initrd --name ramdisk http://10.0.0.1:8080/initrd.img"),
            "{kernel}"
        );
    }

    #[test]
    fn an_instance_needs_an_iso_or_both_kernel_and_ramdisk() {
        for info in [json!({}), json!({"kernel": "k"}), json!({"boot_iso": ""})] {
            let error = instance_ramdisk(&node(info)).unwrap_err();
            assert!(error.to_string().contains("boot_iso"), "{error}");
        }
        // A line break, or iPXE's own command separators on one line (issue 41, item 2).
        for arguments in ["a\nb", "quiet ; chain http://elsewhere/x", "a && shell"] {
            let error = instance_ramdisk(&node(
                json!({"kernel": "k", "ramdisk": "r", "ramdisk_kernel_arguments": arguments}),
            ))
            .unwrap_err();
            assert!(error.to_string().contains("boot script"), "{error}");
        }
    }
}
