//! In-band inspect interfaces (`reference/ironic.md` §5): both boot the inspection ramdisk
//! through the node's own boot, management and power interfaces and leave the node in
//! `inspect wait`; they differ in where the ramdisk sends its data.
//!
//! - `agent` (§5.2, Ironic's built-in inspection): to Ferric's own
//!   `/v1/continue_inspection`; the conductor processes it.
//! - `inspector` (seed 002): to the inspection service's `/v1/continue`. The conductor starts
//!   an introspection there (`manage_boot=false`: Ferric boots the machine itself), polls
//!   its status while the node waits, and asks it to abort (seed 000).
//!
//! Both power the machine off and remove its network boot when the inspection ends
//! ([`InspectInterface::finish`]) or is aborted.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{Node, PowerState};
use serde_json::Value;

use crate::Component;
use crate::DriverError;
use crate::fast_track::{self, FastTrackSettings};
use crate::interfaces::{
    BootInterface, InspectInterface, Inspection, InspectionStatus, ManagementInterface,
    PowerAction, PowerInterface, Validate,
};
use crate::settings::InspectorSettings;

/// `driver_internal_info` key with the BMC addresses `/v1/continue_inspection` may match.
pub const LOOKUP_BMC_ADDRESSES_KEY: &str = "lookup_bmc_addresses";

/// The node's own interfaces an in-band inspection boots it with.
#[derive(Clone)]
pub struct InspectBoot {
    pub(crate) power: Arc<dyn PowerInterface>,
    pub(crate) management: Arc<dyn ManagementInterface>,
    pub(crate) boot: Arc<dyn BootInterface>,
    pub(crate) fast_track: FastTrackSettings,
}

impl InspectBoot {
    /// Network boot of the ramdisk with `callback_url` on its kernel command line, boot
    /// device PXE, reboot.
    async fn boot(&self, node: &mut Node, callback_url: &str) -> Result<(), DriverError> {
        let params = [format!("ipa-inspection-callback-url={callback_url}")];
        self.boot.prepare_ramdisk_with(node, &params).await?;
        let rebooted = self.reboot_into_ramdisk(node).await;
        self.undo_on_error(node, rebooted).await
    }

    /// Boot device PXE (where the management interface can set it), then a reboot. The agent
    /// the node knew (one kept by fast track) is forgotten: the rebooted ramdisk gets a new
    /// token when it posts its data.
    async fn reboot_into_ramdisk(&self, node: &mut Node) -> Result<(), DriverError> {
        crate::agent_client::forget_agent(node);
        let device = self.boot.network_boot_device();
        match self.management.set_boot_device(node, device, false).await {
            Ok(()) | Err(DriverError::Unsupported { .. }) => {}
            Err(error) => return Err(error),
        }
        self.power
            .set_power(node, PowerAction::Reboot, None)
            .await?;
        node.power_state = Some(PowerState::On);
        Ok(())
    }

    /// After a failure once the network boot was prepared: remove it again, so a failed
    /// inspection leaves no iPXE script or DHCP entry behind.
    async fn undo_on_error(
        &self,
        node: &Node,
        result: Result<(), DriverError>,
    ) -> Result<(), DriverError> {
        if result.is_err()
            && let Err(error) = self.boot.clean_up_ramdisk(node).await
        {
            tracing::warn!(node = %node.uuid, error = %error, "could not remove the network boot after a failed inspection start");
        }
        result
    }

    /// No more network boot of the ramdisk; the machine off (unless `disable_power_off`, or,
    /// when `fast_track_ok` and fast track is on for the node, left on with its agent for the
    /// next phase).
    async fn unboot(&self, node: &mut Node, fast_track_ok: bool) -> Result<(), DriverError> {
        self.boot.clean_up_ramdisk(node).await?;
        if fast_track_ok && fast_track::keeps_agent(node, &self.fast_track) {
            tracing::info!(node = %node.uuid, "fast track: the machine stays on with its agent after inspection");
            return Ok(());
        }
        if !node.disable_power_off {
            self.power.set_power(node, PowerAction::Off, None).await?;
            node.power_state = Some(PowerState::Off);
        }
        Ok(())
    }
}

/// The `agent` inspect interface.
pub struct AgentInspect {
    pub(crate) machine: InspectBoot,
    /// Ferric's API URL as the ramdisk reaches it.
    pub(crate) api_url: Option<String>,
}

impl std::fmt::Debug for AgentInspect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentInspect").finish_non_exhaustive()
    }
}

impl AgentInspect {
    fn callback_url(&self) -> Result<String, DriverError> {
        let api_url = self.api_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.api_url",
                "The agent inspect interface needs api_url (the URL the ramdisk reaches \
                 Ferric's API at) in Ferric's settings."
                    .to_owned(),
            )
        })?;
        Ok(format!(
            "{}/v1/continue_inspection",
            api_url.trim_end_matches('/')
        ))
    }
}

#[async_trait]
impl Validate for AgentInspect {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.callback_url()?;
        self.machine.boot.validate(node).await
    }
}

/// The BMC hosts of `driver_info.*_address`, for matching the ramdisk's `bmc_address`.
fn bmc_hosts(node: &Node) -> Vec<Value> {
    node.driver_info
        .iter()
        .filter(|(key, _)| key.ends_with("_address"))
        .filter_map(|(_, value)| value.as_str())
        .filter_map(|value| {
            let rest = value.split_once("://").map_or(value, |(_, rest)| rest);
            let authority = rest.split(['/', '?']).next()?;
            let host = match authority.strip_prefix('[') {
                Some(bracketed) => bracketed.split(']').next()?,
                None => authority
                    .rsplit_once(':')
                    .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
                    .map_or(authority, |(host, _)| host),
            };
            (!host.is_empty()).then(|| Value::from(host))
        })
        .collect()
}

#[async_trait]
impl InspectInterface for AgentInspect {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError> {
        let callback = self.callback_url()?;
        node.driver_internal_info.insert(
            LOOKUP_BMC_ADDRESSES_KEY.to_owned(),
            Value::Array(bmc_hosts(node)),
        );
        self.machine.boot(node, &callback).await?;
        Ok(Inspection::Wait)
    }

    async fn abort(&self, node: &mut Node) -> Result<(), DriverError> {
        node.driver_internal_info.remove(LOOKUP_BMC_ADDRESSES_KEY);
        self.machine.unboot(node, false).await
    }

    async fn finish(&self, node: &mut Node) -> Result<(), DriverError> {
        node.driver_internal_info.remove(LOOKUP_BMC_ADDRESSES_KEY);
        self.machine.unboot(node, true).await
    }

    fn takes_data(&self) -> bool {
        true
    }
}

/// The `inspector` inspect interface: inspection through the inspection service.
pub struct InspectorInspect {
    pub(crate) machine: InspectBoot,
    pub(crate) settings: InspectorSettings,
    pub(crate) http: reqwest::Client,
}

impl std::fmt::Debug for InspectorInspect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InspectorInspect").finish_non_exhaustive()
    }
}

impl InspectorInspect {
    fn service_url(&self) -> Result<&str, DriverError> {
        if !self.settings.enabled {
            return Err(DriverError::failed(
                Component::Conductor,
                "Inspection through the inspection service is disabled: set \
                 inspector_enabled = true (and inspector_service_url) in Ferric's settings, or \
                 use the agent inspect interface."
                    .to_owned(),
            ));
        }
        self.settings
            .service_url
            .as_deref()
            .map(|url| url.trim_end_matches('/'))
            .ok_or_else(|| {
                DriverError::missing(
                    "settings.inspector_service_url",
                    "inspector_enabled is set but inspector_service_url is not: set it to the \
                     inspection service's URL, e.g. http://127.0.0.1:5050."
                        .to_owned(),
                )
            })
    }

    fn callback_url(&self) -> Result<String, DriverError> {
        let base = match &self.settings.callback_url {
            Some(url) => url.trim_end_matches('/'),
            None => self.service_url()?,
        };
        Ok(format!("{base}/v1/continue"))
    }

    /// One request to the service; `Ok((status, body))` for any HTTP answer.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> Result<(reqwest::StatusCode, Value), DriverError> {
        let url = format!("{}{path}", self.service_url()?);
        let response = self
            .http
            .request(method, &url)
            .timeout(self.settings.request_timeout)
            .header("X-OpenStack-Ironic-Inspector-API-Version", "1.18")
            .send()
            .await
            .map_err(|error| {
                DriverError::failed(
                    Component::InspectionService,
                    format!("Could not reach the inspection service at {url}: {error}"),
                )
            })?;
        let status = response.status();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    fn service_error(what: &str, status: reqwest::StatusCode, body: &Value) -> DriverError {
        let message = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        DriverError::failed(
            Component::InspectionService,
            format!(
                "The inspection service refused to {what} (HTTP {}): {message}",
                status.as_u16()
            ),
        )
    }
}

#[async_trait]
impl Validate for InspectorInspect {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        // A disabled service fails the inspection itself (seed 002), not the request.
        self.machine.boot.validate(node).await
    }
}

#[async_trait]
impl InspectInterface for InspectorInspect {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError> {
        let callback = self.callback_url()?;
        // Network boot first: the service allows the MACs in its PXE filter at start.
        self.machine
            .boot
            .prepare_ramdisk_with(node, &[format!("ipa-inspection-callback-url={callback}")])
            .await?;
        let started = async {
            let (status, body) = self
                .call(
                    reqwest::Method::POST,
                    &format!("/v1/introspection/{}?manage_boot=false", node.uuid),
                )
                .await?;
            if !status.is_success() {
                return Err(Self::service_error("start introspection", status, &body));
            }
            self.machine.reboot_into_ramdisk(node).await
        }
        .await;
        self.machine.undo_on_error(node, started).await?;
        Ok(Inspection::Wait)
    }

    async fn status(&self, node: &Node) -> Result<InspectionStatus, DriverError> {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/v1/introspection/{}", node.uuid),
            )
            .await?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(InspectionStatus::Failed(
                "The inspection service has no introspection for this node (it was restarted \
                 or the node was never started there); inspect again."
                    .to_owned(),
            ));
        }
        if !status.is_success() {
            return Err(Self::service_error("report status", status, &body));
        }
        let finished = body
            .get("finished")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let error = body.get("error").and_then(Value::as_str);
        Ok(match (finished, error) {
            (false, _) => InspectionStatus::Running,
            (true, Some(error)) => InspectionStatus::Failed(error.to_owned()),
            (true, None) => InspectionStatus::Finished,
        })
    }

    async fn abort(&self, node: &mut Node) -> Result<(), DriverError> {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &format!("/v1/introspection/{}/abort", node.uuid),
            )
            .await?;
        // Already over there (finished, timed out, forgotten): nothing left to stop.
        let over = matches!(
            status,
            reqwest::StatusCode::BAD_REQUEST | reqwest::StatusCode::NOT_FOUND
        );
        if !status.is_success() && !over {
            return Err(Self::service_error("abort introspection", status, &body));
        }
        self.machine.unboot(node, false).await
    }

    async fn finish(&self, node: &mut Node) -> Result<(), DriverError> {
        self.machine.unboot(node, true).await
    }
}
