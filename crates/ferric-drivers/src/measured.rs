//! Power and management interfaces with their BMC calls timed and counted
//! (`ferric_bmc_request_duration_seconds`, `ferric_bmc_request_errors_total`).
//!
//! [`Drivers`](crate::Drivers) wraps every node's BMC-backed interfaces (`fake`, `redfish`,
//! `ipmitool`) in [`Measured`] when it builds them, so the conductor's power actions, the
//! power sync's reads and the deploy interface's boot-device changes are all measured in one
//! place, the same way for every driver, without the protocol clients knowing about metrics.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferric_metrics::Metrics;
use ferric_model::resources::{Node, PowerState};

use crate::DriverError;
use crate::interfaces::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, ManagementInterface,
    PowerAction, PowerInterface, Validate,
};
use crate::vmedia::{VmediaDevice, VmediaSlot};

/// `inner`, with each BMC call recorded under `driver` (the interface's name).
pub(crate) struct Measured<T> {
    pub(crate) inner: T,
    pub(crate) driver: &'static str,
    pub(crate) metrics: Metrics,
}

impl<T> Measured<T> {
    fn record<R>(
        &self,
        operation: &'static str,
        started: Instant,
        result: &Result<R, DriverError>,
    ) {
        let took: Duration = started.elapsed();
        self.metrics
            .bmc_request(self.driver, operation, took, result.is_ok());
    }
}

#[async_trait]
impl<T: Validate> Validate for Measured<T> {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        // Validation reads driver_info; it does not talk to the BMC.
        self.inner.validate(node).await
    }
}

#[async_trait]
impl<T: PowerInterface> PowerInterface for Measured<T> {
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        let started = Instant::now();
        let result = self.inner.get_power_state(node).await;
        self.record("get_power_state", started, &result);
        result
    }

    async fn set_power(
        &self,
        node: &Node,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.set_power(node, action, timeout).await;
        self.record("set_power", started, &result);
        result
    }

    fn supported_power_actions(&self) -> &'static [PowerAction] {
        self.inner.supported_power_actions()
    }

    fn echoes_recorded_state(&self) -> bool {
        self.inner.echoes_recorded_state()
    }

    fn bmc_address(&self, node: &Node) -> Option<String> {
        self.inner.bmc_address(node)
    }
}

#[async_trait]
impl<T: ManagementInterface> ManagementInterface for Measured<T> {
    fn supported_boot_devices(&self, node: &Node) -> Vec<BootDevice> {
        self.inner.supported_boot_devices(node)
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let started = Instant::now();
        let result = self.inner.get_boot_device(node).await;
        self.record("get_boot_device", started, &result);
        result
    }

    async fn set_boot_device(
        &self,
        node: &mut Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.set_boot_device(node, device, persistent).await;
        self.record("set_boot_device", started, &result);
        result
    }

    async fn check_boot(&self, node: &Node, device: BootDevice) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.check_boot(node, device).await;
        // Only a BMC's answer is a BMC request; a refusal of the node's settings is not.
        if !matches!(result, Err(DriverError::InvalidParameter { .. })) {
            self.record("check_boot", started, &result);
        }
        result
    }

    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        let started = Instant::now();
        let result = self.inner.get_boot_mode(node).await;
        // A driver without boot modes answers without asking its BMC: not a BMC error.
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("get_boot_mode", started, &result);
        }
        result
    }

    async fn set_boot_mode(&self, node: &mut Node, mode: BootMode) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.set_boot_mode(node, mode).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("set_boot_mode", started, &result);
        }
        result
    }

    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.inject_nmi(node).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("inject_nmi", started, &result);
        }
        result
    }

    async fn set_secure_boot(&self, node: &mut Node, enabled: bool) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.set_secure_boot(node, enabled).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("set_secure_boot", started, &result);
        }
        result
    }

    async fn indicators(&self, node: &Node) -> Result<Vec<Indicator>, DriverError> {
        let started = Instant::now();
        let result = self.inner.indicators(node).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("indicators", started, &result);
        }
        result
    }

    async fn indicator_state(
        &self,
        node: &Node,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, DriverError> {
        let started = Instant::now();
        let result = self.inner.indicator_state(node, component, name).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("indicator_state", started, &result);
        }
        result
    }

    async fn set_indicator_state(
        &self,
        node: &mut Node,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self
            .inner
            .set_indicator_state(node, component, name, state)
            .await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("set_indicator_state", started, &result);
        }
        result
    }

    async fn virtual_media(&self, node: &Node) -> Result<Vec<VmediaSlot>, DriverError> {
        let started = Instant::now();
        let result = self.inner.virtual_media(node).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("virtual_media", started, &result);
        }
        result
    }

    async fn attach_virtual_media(
        &self,
        node: &Node,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.attach_virtual_media(node, device, url).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("attach_virtual_media", started, &result);
        }
        result
    }

    async fn detach_virtual_media(
        &self,
        node: &Node,
        devices: &[VmediaDevice],
    ) -> Result<(), DriverError> {
        let started = Instant::now();
        let result = self.inner.detach_virtual_media(node, devices).await;
        if !matches!(result, Err(DriverError::Unsupported { .. })) {
            self.record("detach_virtual_media", started, &result);
        }
        result
    }
}
