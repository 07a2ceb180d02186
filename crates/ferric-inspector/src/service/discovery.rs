//! Discovery: Ironic inspector's `enroll` node-not-found hook (`processing.node_not_found_hook
//! = enroll`). With `inspector_discovery` on, data from a machine that no running
//! introspection matches enrolls a new node instead of being refused:
//!
//! - the data is checked first (ramdisk error, at least one NIC): bad data enrolls nothing;
//! - a machine already known — a port with one of its MACs, or a node with its BMC address —
//!   is refused as without discovery (404, `continue refused`): it is enrolled, just not
//!   under introspection, and the callback is unauthenticated;
//! - the node is created in `enroll` with the configured hardware type (`fake-hardware` by
//!   default, as the hook's `enroll_node_driver`), the interfaces that type defaults to, and
//!   `driver_info.ipmi_address` set to the BMC address the ramdisk reported (IPv4 first, as
//!   the hook does; none if it reported none);
//! - every NIC gets a port (`pxe_enabled` for the one it booted from, or all when it did not
//!   say);
//! - an introspection record is written in `processing`, without `manage_boot` (the service
//!   did not boot the machine), and the data gets `auto_discovered: true`, which rules can
//!   test (`data://auto_discovered`);
//!
//! then the data is processed as for any introspection: properties, rules, inventory.
//!
//! Like the rest of the service, the node is written through the store, with the same driver
//! defaults the Bare Metal API applies on `POST /v1/nodes` (`Drivers::apply_defaults`).
//!
//! Unknown machines reach the ramdisk through the PXE filter's wildcard and the iPXE discovery
//! script (`ferric_drivers::ipxe::write_discovery_script`), which `ferric server` writes only when
//! the filter runs.

use ferric_db::{NodeFilter, Page, PortFilter};
use ferric_drivers::{DriverError, Drivers};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, Port};
use serde_json::Value;
use uuid::Uuid;

use super::{Service, ServiceError, node_bmc_addresses};
use crate::node_cache::{Introspection, IntrospectionState};
use crate::process::{AddPorts, ProcessingConfig, payload_bmc_addresses, payload_macs, process};

/// The hardware type of discovered nodes unless `inspector_discovery_driver` says otherwise.
pub const DEFAULT_DRIVER: &str = "fake-hardware";

/// The `driver_info` key the BMC address goes to, as the enroll hook writes it.
pub const BMC_ADDRESS_KEY: &str = "ipmi_address";

/// The BMC address to enroll with: the ramdisk's IPv4 one, else its IPv6 one.
fn reported_bmc_address(payload: &Value) -> Option<String> {
    let usable = payload_bmc_addresses(payload);
    ["bmc_address", "bmc_v6address"]
        .iter()
        .filter_map(|key| {
            payload
                .pointer(&format!("/inventory/{key}"))
                .and_then(Value::as_str)
        })
        .find(|address| usable.contains(*address))
        .map(str::to_owned)
}

/// Whether discovery can enroll nodes of hardware type `driver` (it must be enabled); the
/// server checks this at start rather than at the first unknown machine.
pub fn check_driver(drivers: &Drivers, driver: &str) -> Result<(), DriverError> {
    let mut probe = Node::new(Uuid::nil(), driver, ProvisionState::Enroll);
    drivers.apply_defaults(&mut probe)
}

fn refused(why: String) -> ServiceError {
    tracing::warn!("continue refused: {why}");
    ServiceError::NotFound(format!("Could not find a node for attributes: {why}"))
}

/// Enrolls the machine that sent `payload` as a new node (see the module's description) and
/// returns it, with its introspection in `processing`; marks `payload` as discovered.
pub(crate) async fn enroll(service: &Service, payload: &mut Value) -> Result<Uuid, ServiceError> {
    let store = service.store();
    let config = service.config();
    let mut node = Node::new(
        Uuid::new_v4(),
        config.discovery_driver.clone(),
        ProvisionState::Enroll,
    );
    // Processing on a blank node checks the data and lists the NICs before anything is
    // written; every NIC gets a port.
    let every_nic = ProcessingConfig {
        add_ports: AddPorts::All,
        ..config.processing.clone()
    };
    let checked = process(&node, &[], payload, &every_nic)
        .map_err(|error| ServiceError::BadRequest(error.to_string()))?;

    let macs = payload_macs(payload);
    for mac in &macs {
        let filter = PortFilter {
            address: Some(mac.clone()),
            ..PortFilter::default()
        };
        if let Some(port) = store.port_list(&filter, &Page::all()).await?.first() {
            return Err(refused(format!(
                "MAC {mac} belongs to node {}, which is not under introspection; not enrolling \
                 it again",
                port.node_uuid
            )));
        }
    }
    let bmc_addresses = payload_bmc_addresses(payload);
    if !bmc_addresses.is_empty() {
        let nodes = store
            .node_list(&NodeFilter::default(), &Page::all())
            .await?;
        if let Some(known) = nodes
            .iter()
            .find(|known| !node_bmc_addresses(known).is_disjoint(&bmc_addresses))
        {
            return Err(refused(format!(
                "node {} already has BMC address {:?}, and is not under introspection; not \
                 enrolling it again",
                known.uuid, bmc_addresses
            )));
        }
    }

    match reported_bmc_address(payload) {
        Some(address) => {
            node.driver_info
                .insert(BMC_ADDRESS_KEY.to_owned(), Value::String(address));
        }
        None => tracing::warn!(
            node = %node.uuid,
            "the discovered machine reported no BMC address; its node has none"
        ),
    }
    service
        .drivers()
        .apply_defaults(&mut node)
        .map_err(|error| {
            tracing::error!(error = %error, driver = %node.driver, "discovery cannot enroll nodes");
            ServiceError::Internal(format!(
                "Discovery cannot enroll the machine: {error} (check inspector_discovery_driver)"
            ))
        })?;
    let node = store.node_create(&node).await?;
    tracing::info!(node = %node.uuid, driver = %node.driver, macs = ?macs, bmc = ?bmc_addresses, "discovered machine enrolled");
    for (mac, pxe_enabled) in &checked.new_ports {
        let mut port = Port::new(Uuid::new_v4(), node.uuid, mac.clone());
        port.pxe_enabled = *pxe_enabled;
        if let Err(error) = store.port_create(&port).await {
            tracing::warn!(node = %node.uuid, mac = %mac, error = %error, "discovery could not create a port");
        }
    }
    let introspection = Introspection::new(
        node.uuid,
        IntrospectionState::Processing,
        false,
        macs,
        bmc_addresses,
    );
    store
        .introspection_upsert(&introspection.to_record())
        .await?;
    if let Some(object) = payload.as_object_mut() {
        object.insert("auto_discovered".to_owned(), Value::Bool(true));
    }
    Ok(node.uuid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipv4_bmc_address_wins() {
        let both = serde_json::json!({"inventory": {
            "bmc_address": "10.0.0.9", "bmc_v6address": "fd00::9"}});
        assert_eq!(reported_bmc_address(&both).as_deref(), Some("10.0.0.9"));
        let v6 = serde_json::json!({"inventory": {
            "bmc_address": "0.0.0.0", "bmc_v6address": "fd00::9"}});
        assert_eq!(reported_bmc_address(&v6).as_deref(), Some("fd00::9"));
        let none = serde_json::json!({"inventory": {"bmc_address": null}});
        assert_eq!(reported_bmc_address(&none), None);
    }
}
