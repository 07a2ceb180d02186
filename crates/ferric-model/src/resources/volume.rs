//! Volume connectors and targets (API 1.32): how a node reaches boot-from-volume storage.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;

/// The connector types Ironic's storage interfaces understand.
pub const VOLUME_CONNECTOR_TYPES: &[&str] =
    &["iqn", "ip", "mac", "wwnn", "wwpn", "port", "portgroup"];

/// One way a node connects to storage (an iSCSI initiator IQN, a Fibre Channel WWPN, …).
///
/// `(type, connector_id)` is unique across all connectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeConnector {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub node_uuid: Uuid,
    pub connector_type: String,
    pub connector_id: String,
    pub extra: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl VolumeConnector {
    pub fn new(uuid: Uuid, node_uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            node_uuid,
            connector_type: String::new(),
            connector_id: String::new(),
            extra: JsonObject::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

/// A volume a node boots from or attaches; `boot_index` is unique per node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeTarget {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub node_uuid: Uuid,
    pub volume_type: String,
    pub properties: JsonObject,
    pub boot_index: i64,
    pub volume_id: String,
    pub extra: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl VolumeTarget {
    pub fn new(uuid: Uuid, node_uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            node_uuid,
            volume_type: String::new(),
            properties: JsonObject::new(),
            boot_index: 0,
            volume_id: String::new(),
            extra: JsonObject::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}
