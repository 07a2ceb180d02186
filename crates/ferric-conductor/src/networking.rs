//! Where the flows call the node's network interface (`ferric_drivers::network`): one function
//! per point of Ironic's node life that moves switch ports, so the flows read as a runbook and
//! the table in `network.rs`'s comment has one place here to check against. The hooks record
//! where they left the ports in the node's `driver_internal_info`, which the caller saves with
//! the node; a failed hook is a failed step, its words naming the switch, port and command.

use ferric_drivers::{DriverError, Interfaces, StepKind};
use ferric_model::resources::Node;

/// Before the first step of a cleaning, deployment or servicing (Ironic's `prepare_cleaning`,
/// the deploy interface's `prepare`, `prepare_service`).
pub(crate) async fn enter_steps(
    interfaces: &Interfaces,
    node: &mut Node,
    kind: StepKind,
) -> Result<(), DriverError> {
    let network = &interfaces.network;
    match kind {
        StepKind::Clean => network.add_cleaning_network(node).await,
        StepKind::Deploy => {
            // A rebuild starts from the tenant network.
            network.unconfigure_tenant_networks(node).await?;
            network.add_provisioning_network(node).await
        }
        StepKind::Service => {
            network.unconfigure_tenant_networks(node).await?;
            network.add_servicing_network(node).await
        }
    }
}

/// After the last step (Ironic's `tear_down_cleaning`, `tear_down_service`; for a deployment,
/// its `switch_to_tenant_network` if no earlier step boundary did it).
pub(crate) async fn leave_steps(
    interfaces: &Interfaces,
    node: &mut Node,
    kind: StepKind,
) -> Result<(), DriverError> {
    let network = &interfaces.network;
    match kind {
        StepKind::Clean => network.remove_cleaning_network(node).await,
        StepKind::Deploy => to_tenant(interfaces, node).await,
        StepKind::Service => {
            network.remove_servicing_network(node).await?;
            network.configure_tenant_networks(node).await
        }
    }
}

/// Ironic's deploy step `switch_to_tenant_network` (priority 30: after the agent is torn
/// down, before the instance boots). Ferric's deploy interfaces have no such step, so the
/// step engine calls this before the first deploy step whose priority is below 30 and again
/// at the end; the second call finds every port already moved and touches no switch.
pub(crate) async fn to_tenant(interfaces: &Interfaces, node: &mut Node) -> Result<(), DriverError> {
    interfaces.network.remove_provisioning_network(node).await?;
    interfaces.network.configure_tenant_networks(node).await
}

/// The priority of Ironic's `switch_to_tenant_network` deploy step.
pub(crate) const TENANT_SWITCH_PRIORITY: u32 = 30;

/// After a failed or aborted cleaning, deployment or servicing: the ports leave the network
/// the flow put them on. Returns what failed, for `last_error`.
pub(crate) async fn after_failure(
    interfaces: &Interfaces,
    node: &mut Node,
    kind: StepKind,
) -> Option<String> {
    let network = &interfaces.network;
    let result = match kind {
        StepKind::Clean => network.remove_cleaning_network(node).await,
        StepKind::Deploy => network.remove_provisioning_network(node).await,
        StepKind::Service => network.remove_servicing_network(node).await,
    };
    result
        .err()
        .map(|error| format!("moving the switch ports off the network failed: {error}"))
}

/// Before the inspection boots its ramdisk.
pub(crate) async fn enter_inspection(
    interfaces: &Interfaces,
    node: &mut Node,
) -> Result<(), DriverError> {
    interfaces.network.add_inspection_network(node).await
}

/// After the inspection, done or failed.
pub(crate) async fn leave_inspection(
    interfaces: &Interfaces,
    node: &mut Node,
) -> Result<(), DriverError> {
    interfaces.network.remove_inspection_network(node).await
}

/// Before the rescue ramdisk boots: off the tenant network, onto the rescuing one.
pub(crate) async fn enter_rescue(
    interfaces: &Interfaces,
    node: &mut Node,
) -> Result<(), DriverError> {
    interfaces.network.unconfigure_tenant_networks(node).await?;
    interfaces.network.add_rescuing_network(node).await
}

/// Once the rescue ramdisk is up (Ironic's `_finish_rescue`), at unrescue, and after a failed
/// or aborted rescue: back on the tenant network.
pub(crate) async fn leave_rescue(
    interfaces: &Interfaces,
    node: &mut Node,
) -> Result<(), DriverError> {
    interfaces.network.remove_rescuing_network(node).await?;
    interfaces.network.configure_tenant_networks(node).await
}

/// Undeploy's tear-down: off the tenant network (and the provisioning one, should a failed
/// deployment have left the ports there).
pub(crate) async fn tear_down(interfaces: &Interfaces, node: &mut Node) -> Result<(), DriverError> {
    interfaces.network.unconfigure_tenant_networks(node).await?;
    interfaces.network.remove_provisioning_network(node).await
}
