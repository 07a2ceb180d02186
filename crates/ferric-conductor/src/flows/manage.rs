//! Taking a node under management: `manage` from `enroll` verifies its power and management
//! credentials (`verifying`, seed 003), `adopt` takes an already deployed machine as `active`
//! (`adopting`). Neither waits for a callback or can be aborted.

use ferric_model::Event;
use ferric_model::ProvisionState;
use ferric_model::resources::InterfaceKind;

use crate::ConductorError;
use crate::task::{Cause, Task};

/// The start of `manage` or `adopt`.
pub(super) fn start(task: &mut Task, event: Event) -> Result<(), ConductorError> {
    // Only verification (from enroll) starts afresh; `manage` out of a failed state keeps the
    // error that put the node there, as Ironic does.
    if event == Event::Adopt || task.node.provision_state == ProvisionState::Enroll {
        task.node.last_error = None;
    }
    Ok(())
}

/// `verifying` or `adopting`.
pub(super) async fn drive(task: &mut Task) -> Result<(), ConductorError> {
    match task.node.provision_state {
        ProvisionState::Adopting => adopt(task).await,
        _ => verify(task).await,
    }
}

/// `verifying` (seed 003): the power and management credentials work and the power state
/// can be read; otherwise back to `enroll` with `last_error`. The state read is recorded, as
/// Ironic does — except from the fake interface, which only echoes what the node has (so a
/// fake-hardware node's `power_state` stays unset, as on Ironic).
async fn verify(task: &mut Task) -> Result<(), ConductorError> {
    let checked = async {
        let interfaces = task.interfaces()?;
        for kind in [InterfaceKind::Power, InterfaceKind::Management] {
            interfaces.validate(&task.node, kind).await?;
        }
        let power = interfaces.power.get_power_state(&task.node).await?;
        Ok::<_, ConductorError>((interfaces, power))
    }
    .await;
    match checked {
        Ok((interfaces, power)) => {
            if !interfaces.power.echoes_recorded_state() {
                task.node.power_state = Some(power);
            }
            crate::hardware_data::refresh_at_manage(task, &interfaces).await;
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!(
                "Failed to verify node {}: {error}. Fix driver_info and run manage again.",
                task.uuid()
            ))
            .await
        }
    }
}

async fn adopt(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        for kind in [InterfaceKind::Power, InterfaceKind::Deploy] {
            interfaces.validate(&task.node, kind).await?;
        }
        Ok::<_, ConductorError>(interfaces.power.get_power_state(&task.node).await?)
    }
    .await;
    match result {
        Ok(power) => {
            task.node.power_state = Some(power);
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!(
                "Failed to adopt node {}: {error}. Fix the node's settings and adopt again.",
                task.uuid()
            ))
            .await
        }
    }
}
