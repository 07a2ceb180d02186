//! The `agent` rescue interface (`reference/ironic.md` §3: `rescue wait` calls
//! `rescue.finalize_rescue`): the machine boots the agent ramdisk from the network; when its
//! agent heartbeats, the conductor hands it the rescue password — the SHA-256 crypt Ferric
//! stored as `instance_info.hashed_rescue_password`, with `hashed: true`, as Ironic sends it —
//! and the agent makes it the rescue user's and stops serving. The network boot is removed
//! then, so a reboot of the rescued machine brings back its own disk. `unrescue` powers it off
//! and boots the instance from disk again.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{JsonObject, Node, PowerState};
use serde_json::Value;

use crate::Component;
use crate::DriverError;
use crate::agent_client::{AgentClient, CommandStatus, Reply, forget_agent};
use crate::interfaces::{
    BootDevice, BootInterface, ManagementInterface, Outcome, PowerAction, PowerInterface,
    RescueInterface, Validate,
};

/// The `agent` rescue interface of one node, composed with its power, management and boot
/// interfaces.
pub struct AgentRescue {
    pub(crate) power: Arc<dyn PowerInterface>,
    pub(crate) management: Arc<dyn ManagementInterface>,
    pub(crate) boot: Arc<dyn BootInterface>,
    pub(crate) agent: AgentClient,
}

impl std::fmt::Debug for AgentRescue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRescue").finish_non_exhaustive()
    }
}

fn text<'a>(object: &'a JsonObject, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

impl AgentRescue {
    async fn power(&self, node: &mut Node, action: PowerAction) -> Result<(), DriverError> {
        self.power.set_power(node, action, None).await?;
        node.power_state = Some(action.resulting_state());
        Ok(())
    }
}

#[async_trait]
impl Validate for AgentRescue {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.boot.validate(node).await
    }
}

#[async_trait]
impl RescueInterface for AgentRescue {
    async fn rescue(&self, node: &mut Node) -> Result<Outcome, DriverError> {
        if text(&node.instance_info, "hashed_rescue_password").is_none() {
            return Err(DriverError::missing(
                "argument.rescue_password",
                format!(
                    "Node {} has no rescue password; ask for the rescue with rescue_password.",
                    node.uuid
                ),
            ));
        }
        forget_agent(node);
        self.boot.prepare_ramdisk(node).await?;
        let device = self.boot.network_boot_device();
        self.management.set_boot_device(node, device, false).await?;
        let action = match self.power.get_power_state(node).await? {
            PowerState::On => PowerAction::Reboot,
            _ => PowerAction::On,
        };
        self.power(node, action).await?;
        Ok(Outcome::Wait)
    }

    async fn finish_rescue(&self, node: &mut Node) -> Result<(), DriverError> {
        let url = text(&node.driver_internal_info, "agent_url").map(str::to_owned);
        let token = text(&node.driver_internal_info, "agent_secret_token").map(str::to_owned);
        let (Some(url), Some(token)) = (url, token) else {
            return Err(DriverError::failed(
                Component::Agent,
                format!(
                    "Node {}'s rescue agent has not called back (no agent URL or token).",
                    node.uuid
                ),
            ));
        };
        let hashed = text(&node.instance_info, "hashed_rescue_password")
            .ok_or_else(|| {
                DriverError::failed(
                    Component::Conductor,
                    format!(
                        "Node {} lost its rescue password before the agent could set it.",
                        node.uuid
                    ),
                )
            })?
            .to_owned();
        let mut params = JsonObject::new();
        params.insert("rescue_password".into(), hashed.into());
        params.insert("hashed".into(), true.into());
        let reply = self
            .agent
            .for_node(node)?
            .execute(&url, &token, "rescue.finalize_rescue", params, true)
            .await?;
        match reply {
            Reply::Result(result) if result.status == CommandStatus::Succeeded => {}
            Reply::Result(result) => {
                return Err(DriverError::failed(
                    Component::Agent,
                    format!(
                        "The agent at {url} could not set the rescue password \
                     (rescue.finalize_rescue): {}",
                        result
                            .error
                            .unwrap_or_else(|| "it gave no reason".to_owned())
                    ),
                ));
            }
            Reply::Busy => {
                return Err(DriverError::failed(
                    Component::Agent,
                    format!("The agent at {url} was busy and did not take the rescue password."),
                ));
            }
        }
        // The agent no longer serves: forget it and the password (as Ironic's clean-up), and
        // boot the disk at the next reboot.
        forget_agent(node);
        node.instance_info.remove("rescue_password");
        node.instance_info.remove("hashed_rescue_password");
        self.boot.clean_up_ramdisk(node).await
    }

    async fn unrescue(&self, node: &mut Node) -> Result<(), DriverError> {
        self.power(node, PowerAction::Off).await?;
        self.boot.clean_up_ramdisk(node).await?;
        self.management
            .set_boot_device(node, BootDevice::Disk, true)
            .await?;
        forget_agent(node);
        self.power(node, PowerAction::On).await
    }

    async fn clean_up(&self, node: &mut Node) -> Result<(), DriverError> {
        forget_agent(node);
        self.boot.clean_up_ramdisk(node).await?;
        self.power(node, PowerAction::Off).await
    }
}
