//! Power and management requests (`reference/ironic.md` §2.5): power on/off/reboot (a worker,
//! 202), boot device and indicators (done while the API waits), and `validate`.

use std::time::Duration;

use ferric_drivers::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, PowerAction,
};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, InterfaceKind};
use uuid::Uuid;

use crate::task::Task;
use crate::{Conductor, ConductorError};

pub use ferric_model::action::{NodeValidation, ValidationResult};

impl Conductor {
    /// Starts a power action; the node shows `target_power_state` until it is done.
    pub async fn set_power(
        &self,
        node: Uuid,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), ConductorError> {
        let inner = &self.inner;
        let permit = inner.take_worker()?;
        let mut task = Task::acquire(inner, node).await?;
        if let Err(error) = begin_power(&mut task, action).await {
            task.release().await;
            return Err(error);
        }
        let tracker = inner.tracker.clone();
        tracker.spawn(async move {
            let _permit = permit;
            let done = finish_power(&mut task, action, timeout).await;
            if done {
                // Before the result is visible: see power_events.rs.
                let inner = task.inner.clone();
                inner.power_events.announce(&task.node).await;
            }
            // The result and the lease go in one write: a client that sees the new power
            // state can act on the node at once.
            if let Err(error) = task.save_and_release().await {
                tracing::error!(node = %node, error = %error, "could not record the power action's result");
            }
        });
        Ok(())
    }

    /// Sets the boot device through the management interface, under the node's lease.
    pub async fn set_boot_device(
        &self,
        node: Uuid,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), ConductorError> {
        let mut task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            let supported = interfaces.management.supported_boot_devices(&task.node);
            if !supported.contains(&device) {
                let names: Vec<&str> = supported.iter().map(|device| device.as_str()).collect();
                return Err(ConductorError::Invalid(format!(
                    "Invalid boot device {device} specified; the node supports: {}.",
                    names.join(", ")
                )));
            }
            interfaces
                .management
                .set_boot_device(&mut task.node, device, persistent)
                .await?;
            task.save().await
        }
        .await;
        task.release().await;
        result
    }

    /// Sets the firmware boot mode (`PUT …/states/boot_mode`) under the node's lease; the
    /// node's `boot_mode` shows it once the management interface has done it.
    pub async fn set_boot_mode(&self, node: Uuid, mode: BootMode) -> Result<(), ConductorError> {
        let mut task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .management
                .set_boot_mode(&mut task.node, mode)
                .await?;
            task.node.boot_mode = Some(mode.as_str().to_owned());
            task.save().await
        }
        .await;
        task.release().await;
        result
    }

    /// Turns secure boot on or off (`PUT …/states/secure_boot`) under the node's lease.
    pub async fn set_secure_boot(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        let mut task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .management
                .set_secure_boot(&mut task.node, enabled)
                .await?;
            task.node.secure_boot = Some(enabled);
            task.save().await
        }
        .await;
        task.release().await;
        result
    }

    /// Sends a non-maskable interrupt (`PUT …/management/inject_nmi`) under the node's lease.
    pub async fn inject_nmi(&self, node: Uuid) -> Result<(), ConductorError> {
        let task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces.management.inject_nmi(&task.node).await?;
            Ok(())
        }
        .await;
        task.release().await;
        result
    }

    /// The node's indicators (`GET …/management/indicators`, 1.63), read under the node's
    /// lease as Ironic's conductor does, after the management interface's validation.
    pub async fn indicators(&self, node: Uuid) -> Result<Vec<Indicator>, ConductorError> {
        let task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .validate(&task.node, InterfaceKind::Management)
                .await?;
            Ok(interfaces.management.indicators(&task.node).await?)
        }
        .await;
        task.release().await;
        result
    }

    /// The state of one indicator (`GET …/management/indicators/{name}@{component}`).
    pub async fn indicator_state(
        &self,
        node: Uuid,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, ConductorError> {
        let task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .validate(&task.node, InterfaceKind::Management)
                .await?;
            Ok(interfaces
                .management
                .indicator_state(&task.node, component, name)
                .await?)
        }
        .await;
        task.release().await;
        result
    }

    /// Sets one indicator (`PUT …/management/indicators/{name}@{component}`) and saves what
    /// the management interface recorded on the node.
    pub async fn set_indicator_state(
        &self,
        node: Uuid,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), ConductorError> {
        let mut task = Task::acquire(&self.inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces
                .validate(&task.node, InterfaceKind::Management)
                .await?;
            interfaces
                .management
                .set_indicator_state(&mut task.node, component, name, state)
                .await?;
            task.save().await
        }
        .await;
        task.release().await;
        result
    }

    /// The boot device the BMC reports (no lease: a read).
    pub async fn get_boot_device(&self, node: Uuid) -> Result<BootDeviceSetting, ConductorError> {
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        let interfaces = self.inner.drivers.load(&record)?;
        Ok(interfaces.management.get_boot_device(&record).await?)
    }

    pub async fn supported_boot_devices(
        &self,
        node: Uuid,
    ) -> Result<Vec<BootDevice>, ConductorError> {
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        let interfaces = self.inner.drivers.load(&record)?;
        Ok(interfaces.management.supported_boot_devices(&record))
    }

    /// Validates every interface of the node (`GET /v1/nodes/{node}/validate`), seeing the
    /// node as the flows do (`view.rs`): the same record, ports and interfaces.
    pub async fn validate(&self, node: Uuid) -> Result<NodeValidation, ConductorError> {
        let (record, ports) = crate::view::read(&self.inner, node).await?;
        let interfaces = crate::view::interfaces(&self.inner, &record, &ports)?;
        let mut answers = NodeValidation::new();
        for kind in InterfaceKind::ALL {
            let answer = match interfaces.validate(&record, kind).await {
                Ok(()) => ValidationResult {
                    result: true,
                    reason: None,
                },
                Err(error) => ValidationResult {
                    result: false,
                    reason: Some(error.to_string()),
                },
            };
            answers.insert(kind, answer);
        }
        Ok(answers)
    }
}

async fn begin_power(task: &mut Task, action: PowerAction) -> Result<(), ConductorError> {
    let node = task.uuid();
    let state = task.node.provision_state;
    if matches!(state, ProvisionState::Cleaning | ProvisionState::CleanWait) {
        return Err(ConductorError::Invalid(format!(
            "Power action \"{action}\" cannot be performed on node {node} while it is in state \
             \"{state}\"; wait for cleaning to end or abort it."
        )));
    }
    // A node that must stay on (Metal3 sets this for hosts it may only reboot) refuses to be
    // powered off, with Ironic's 409 and words; reboots still work.
    if task.node.disable_power_off && matches!(action, PowerAction::Off | PowerAction::SoftOff) {
        return Err(ConductorError::Conflict(format!(
            "Failed to set node power state to {action}."
        )));
    }
    let interfaces = task.interfaces()?;
    interfaces
        .validate(&task.node, InterfaceKind::Power)
        .await?;
    if !interfaces.power.supported_power_actions().contains(&action) {
        return Err(ConductorError::Invalid(format!(
            "The power interface of node {node} does not support \"{action}\"."
        )));
    }
    task.node.target_power_state = Some(action.resulting_state());
    task.node.last_error = None;
    task.save().await
}

/// Carries the power action out and records its result on the task's node; `true` if done.
async fn finish_power(task: &mut Task, action: PowerAction, timeout: Option<Duration>) -> bool {
    let node = task.uuid();
    let result = async {
        let interfaces = task.interfaces()?;
        interfaces
            .power
            .set_power(&task.node, action, timeout)
            .await?;
        Ok::<_, ConductorError>(())
    }
    .await;
    task.node.target_power_state = None;
    match result {
        Ok(()) => {
            task.node.power_state = Some(action.resulting_state());
            task.history("INFO", "power", format!("Power action \"{action}\" done"))
                .await;
            true
        }
        Err(error) => {
            let message =
                format!("Failed to change power state of node {node} to \"{action}\": {error}");
            task.node.last_error = Some(message.clone());
            task.history("ERROR", "power", message).await;
            false
        }
    }
}
