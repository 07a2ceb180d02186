//! Switch drift check: reads back every switch port Ferric manages (each node's
//! `driver_internal_info.switch_ports`, written by the `ironic-networking` interface) and
//! compares it with where Ferric left it. Ironic's standalone networking applies and cleans up
//! but never looks again; a port someone moved by hand (`ovs-vsctl set port … tag=…`, a
//! `switchport access vlan` typed on the wrong port) silently puts a machine on another
//! tenant's network, so Ferric looks.
//!
//! A drift is always reported: a node history entry naming the port, the VLAN found and the
//! VLAN expected, and the `ferric_switch_port_drifts` metric. Then, when the site asks for
//! repair (`switch_drift_repair`), the port is put back (verified like any change) and the
//! history says so; otherwise, or if the repair fails, the node goes into maintenance with
//! `fault: switch port drift` and the drift as its reason. A later check that finds the port
//! back where it belongs (repaired by hand, or by a flow moving it) takes the node out of
//! maintenance again, as the power sync does for `power failure`.
//!
//! Reads happen without the node's lease (a read changes nothing, and an operator's request
//! should not meet a lock for it); only a node with drift is leased, and checked once more
//! under the lease before anything is written, because a flow may have moved its ports in
//! between. A switch that cannot be read is logged and counted in the run's status; it is not
//! drift.

use std::sync::Arc;

use ferric_drivers::PortDrift;
use ferric_drivers::switch::RECORD_KEY;
use ferric_model::resources::Node;

use crate::task::Task;
use crate::{ConductorError, Inner};

/// The node's `fault` while a drift stands.
pub(crate) const DRIFT_FAULT: &str = "switch port drift";

fn eligible(inner: &Inner, node: &Node) -> bool {
    node.driver_internal_info.contains_key(RECORD_KEY) && !inner.is_busy(node.uuid)
}

/// One pass over this conductor's nodes; returns how many it changed.
pub(crate) async fn run_once(inner: &Arc<Inner>) -> Result<usize, ConductorError> {
    if inner.drivers.switches().is_none() {
        return Ok(0);
    }
    let owned = super::power_sync::owned_ids(inner).await?;
    let mut acted = 0;
    let mut unreadable = Vec::new();
    for ids in owned.chunks(500) {
        let nodes = inner.store.node_list_by_id(ids).await?;
        for node in nodes.into_values() {
            if !inner.owns(&node) || !eligible(inner, &node) {
                continue;
            }
            match check_node(inner, &node).await {
                Ok(changed) => acted += usize::from(changed),
                Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => {}
                Err(error) => {
                    tracing::warn!(node = %node.uuid, error = %error, "switch drift check failed");
                    unreadable.push(format!("node {}: {error}", node.uuid));
                }
            }
        }
    }
    if unreadable.is_empty() {
        Ok(acted)
    } else {
        Err(ConductorError::Invalid(format!(
            "Could not check the switch ports of {} node(s): {}",
            unreadable.len(),
            unreadable.join("; ")
        )))
    }
}

/// Checks one node's ports; `true` if the node was changed.
async fn check_node(inner: &Arc<Inner>, seen: &Node) -> Result<bool, ConductorError> {
    let interfaces = inner.drivers.load(seen)?;
    let drifts = interfaces.network.check_ports(seen).await?;
    let in_fault = seen.maintenance && seen.fault.as_deref() == Some(DRIFT_FAULT);
    if drifts.is_empty() && !in_fault {
        return Ok(false);
    }
    let mut task = Task::acquire(inner, seen.uuid).await?;
    let result = settle(inner, &mut task).await;
    task.release().await;
    result
}

/// Under the node's lease: checks again, reports, repairs or faults, and saves.
async fn settle(inner: &Arc<Inner>, task: &mut Task) -> Result<bool, ConductorError> {
    let interfaces = task.interfaces()?;
    let drifts = interfaces.network.check_ports(&task.node).await?;
    let in_fault = task.node.maintenance && task.node.fault.as_deref() == Some(DRIFT_FAULT);
    if drifts.is_empty() {
        if !in_fault {
            return Ok(false);
        }
        task.node.maintenance = false;
        task.node.fault = None;
        task.node.maintenance_reason = None;
        task.history(
            "INFO",
            "maintenance",
            "The switch ports are back where Ferric left them; maintenance cleared.".to_owned(),
        )
        .await;
        task.save().await?;
        return Ok(true);
    }
    let described = describe(&drifts);
    for drift in &drifts {
        inner.drivers.metrics().switch_port_drift(&drift.switch);
        task.history("ERROR", "network", format!("Switch port drift: {drift}."))
            .await;
    }
    let repaired = if inner.config.switch_drift_repair {
        match interfaces.network.repair_ports(&mut task.node).await {
            Ok(()) => {
                for drift in &drifts {
                    inner.drivers.metrics().switch_port_repair(&drift.switch);
                }
                task.history(
                    "INFO",
                    "network",
                    format!("Repaired (switch_drift_repair): {described}."),
                )
                .await;
                Ok(())
            }
            Err(error) => Err(error.to_string()),
        }
    } else {
        Err("switch_drift_repair is off".to_owned())
    };
    match repaired {
        Ok(()) if in_fault => {
            task.node.maintenance = false;
            task.node.fault = None;
            task.node.maintenance_reason = None;
        }
        Ok(()) => {}
        Err(why) => {
            let reason = format!("Switch port drift: {described}. Not repaired: {why}.");
            task.node.maintenance = true;
            task.node.fault = Some(DRIFT_FAULT.to_owned());
            task.node.maintenance_reason = Some(reason.clone());
            task.node.last_error = Some(reason);
        }
    }
    task.save().await?;
    Ok(true)
}

fn describe(drifts: &[PortDrift]) -> String {
    drifts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
