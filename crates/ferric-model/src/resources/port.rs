//! Ports, portgroups and chassis (`reference/ironic.md` §2.6, §2.7).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;

/// Where a port or portgroup keeps the id of the VIF attached to it (`internal_info`).
pub const TENANT_VIF_KEY: &str = "tenant_vif_port_id";

/// The older place of a VIF's id (`extra`), cleared with it as Ironic does.
const LEGACY_VIF_KEY: &str = "vif_port_id";

/// Removes the VIF record from a port's or portgroup's `internal_info` and `extra`; whether
/// there was one.
pub fn clear_vif(internal_info: &mut JsonObject, extra: &mut JsonObject) -> bool {
    let attached = internal_info.remove(TENANT_VIF_KEY).is_some();
    let legacy = extra.remove(LEGACY_VIF_KEY).is_some();
    attached || legacy
}

/// A NIC of a node, known by its MAC address.
///
/// `address` is unique across all ports; the store keeps it in lowercase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub address: String,
    pub node_uuid: Uuid,
    pub portgroup_uuid: Option<Uuid>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub extra: JsonObject,
    pub internal_info: JsonObject,
    pub local_link_connection: JsonObject,
    pub pxe_enabled: bool,
    pub physical_network: Option<String>,
    pub is_smartnic: bool,
    pub vendor: Option<String>,
    pub category: Option<String>,
    pub available_for_dynamic_portgroup: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Port {
    /// A port with the API's defaults (`pxe_enabled` true, everything else empty).
    pub fn new(uuid: Uuid, node_uuid: Uuid, address: impl Into<String>) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            address: address.into(),
            node_uuid,
            portgroup_uuid: None,
            name: None,
            description: None,
            extra: JsonObject::new(),
            internal_info: JsonObject::new(),
            local_link_connection: JsonObject::new(),
            pxe_enabled: true,
            physical_network: None,
            is_smartnic: false,
            vendor: None,
            category: None,
            available_for_dynamic_portgroup: false,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

/// A bond of ports of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Portgroup {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub name: Option<String>,
    /// MAC address, unique and lowercase when set.
    pub address: Option<String>,
    pub node_uuid: Uuid,
    pub extra: JsonObject,
    pub internal_info: JsonObject,
    pub standalone_ports_supported: bool,
    pub mode: Option<String>,
    pub properties: JsonObject,
    pub physical_network: Option<String>,
    pub category: Option<String>,
    pub dynamic_portgroup: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Portgroup {
    /// A portgroup with the API's defaults (`standalone_ports_supported` true).
    pub fn new(uuid: Uuid, node_uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            name: None,
            address: None,
            node_uuid,
            extra: JsonObject::new(),
            internal_info: JsonObject::new(),
            standalone_ports_supported: true,
            mode: None,
            properties: JsonObject::new(),
            physical_network: None,
            category: None,
            dynamic_portgroup: false,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

/// A chassis grouping nodes; rarely used, kept for API compatibility.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chassis {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub description: Option<String>,
    pub extra: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Chassis {
    pub fn new(uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            description: None,
            extra: JsonObject::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}
