//! Undeploy (`deleted` from `active`, `deploy failed` and others): the deploy interface tears
//! the instance down, the node forgets it — its `instance_info`, its VIF attachments and its
//! allocation (Ironic removes both), its agent, its console — and automated cleaning follows
//! (`clean.rs`). Nova relies on the VIFs going here: it skips its own detach for a node it
//! finds `active` when the server is deleted, leaving the tear-down to Ironic.

use ferric_db::{Page, PortFilter, PortgroupFilter, Store};
use ferric_drivers::StepKind;
use ferric_model::Event;
use ferric_model::resources::clear_vif;
use uuid::Uuid;

use crate::ConductorError;
use crate::steps::clear_plan;
use crate::task::{Cause, Task};

/// The start of undeploy: a protected node keeps its instance (Ironic's NodeProtected, 403).
pub(super) async fn start(task: &mut Task) -> Result<(), ConductorError> {
    if task.node.protected {
        return Err(ConductorError::Forbidden(format!(
            "Node {} is protected and cannot be undeployed, rebuilt or deleted; unset protected \
             first.",
            task.uuid()
        )));
    }
    super::check(task, &task.interfaces()?, Event::Delete).await?;
    clear_plan(&mut task.node, StepKind::Deploy);
    task.node.last_error = None;
    Ok(())
}

/// `deleting`: remove the instance (and its allocation), then automated cleaning.
pub(super) async fn drive(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        interfaces.deploy.tear_down(&mut task.node).await?;
        crate::networking::tear_down(&interfaces, &mut task.node).await?;
        remove_vifs(&task.inner.store, task.uuid())
            .await
            .map_err(|error| ConductorError::Invalid(format!("cannot detach its VIFs: {error}")))?;
        Ok::<_, ConductorError>(())
    }
    .await;
    match result {
        Ok(()) => {
            task.node.instance_info.clear();
            task.node.instance_uuid = None;
            task.node.instance_name = None;
            // Ironic destroys the node's allocation at tear-down, so the node can be
            // allocated again once cleaned.
            if let Some(allocation) = task.node.allocation_uuid.take() {
                match task.inner.store.allocation_delete(allocation).await {
                    Ok(()) | Err(ferric_db::Error::NotFound { .. }) => {}
                    Err(error) => {
                        tracing::warn!(node = %task.uuid(), %allocation, %error, "could not delete the torn-down node's allocation");
                    }
                }
            }
            // The deploy interface records the power it changed: the agent's and the ramdisk
            // interfaces power off (unless `disable_power_off`), the fake one, as Ironic's,
            // leaves the machine as it was.
            super::forget_agent(task);
            crate::console::end_with_instance(task).await;
            task.fire(Event::Clean, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!("Failed to tear down node {}: {error}", task.uuid()))
                .await
        }
    }
}

/// Detaches every VIF of `node` (Ironic's `remove_vifs_from_node` at tear-down).
async fn remove_vifs(store: &Store, node: Uuid) -> Result<(), ferric_db::Error> {
    let ports = PortFilter {
        node_uuid: Some(node),
        ..PortFilter::default()
    };
    for port in store.port_list(&ports, &Page::all()).await? {
        let mut updated = port.clone();
        if clear_vif(&mut updated.internal_info, &mut updated.extra) {
            store.port_update(&updated, port.version).await?;
        }
    }
    let groups = PortgroupFilter {
        node_uuid: Some(node),
        ..PortgroupFilter::default()
    };
    for group in store.portgroup_list(&groups, &Page::all()).await? {
        let mut updated = group.clone();
        if clear_vif(&mut updated.internal_info, &mut updated.extra) {
            store.portgroup_update(&updated, group.version).await?;
        }
    }
    Ok(())
}
