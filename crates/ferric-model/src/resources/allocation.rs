//! Allocations (`reference/ironic.md` §2.7, API 1.52): a request for one available node that
//! matches a resource class, traits and optionally a list of candidates. The API matches it at
//! create time; the node it picks carries the allocation's UUID in `allocation_uuid`.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;

/// Where an allocation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllocationState {
    /// Looking for a node.
    Allocating,
    /// A node is reserved for it (`node_uuid`).
    Active,
    /// No node matched; `last_error` says why.
    Error,
}

impl AllocationState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Allocating => "allocating",
            Self::Active => "active",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for AllocationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an allocation state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown allocation state {0:?} (expected allocating, active or error)")]
pub struct UnknownAllocationState(pub String);

impl FromStr for AllocationState {
    type Err = UnknownAllocationState;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "allocating" => Ok(Self::Allocating),
            "active" => Ok(Self::Active),
            "error" => Ok(Self::Error),
            other => Err(UnknownAllocationState(other.to_owned())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub name: Option<String>,
    pub node_uuid: Option<Uuid>,
    pub state: AllocationState,
    pub last_error: Option<String>,
    pub resource_class: Option<String>,
    pub traits: Vec<String>,
    /// Node UUIDs the allocation may pick from; empty means any.
    pub candidate_nodes: Vec<String>,
    pub extra: JsonObject,
    pub owner: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Allocation {
    /// A new allocation, still looking for a node.
    pub fn new(uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            name: None,
            node_uuid: None,
            state: AllocationState::Allocating,
            last_error: None,
            resource_class: None,
            traits: Vec::new(),
            candidate_nodes: Vec::new(),
            extra: JsonObject::new(),
            owner: None,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

/// One BIOS setting of a node, as the BIOS interface read it (`/v1/nodes/{node}/bios`, 1.40).
/// `registry` holds the setting's description from the BMC's attribute registry (1.74:
/// `attribute_type`, `allowable_values`, `lower_bound`, `upper_bound`, `min_length`,
/// `max_length`, `read_only`, `reset_required`, `unique`), as far as the driver knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiosSetting {
    pub name: String,
    pub value: Option<String>,
    pub registry: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// One firmware component of a node (`/v1/nodes/{node}/firmware`, 1.86), as the firmware
/// interface read it: `initial_version` is the version first seen, `current_version` the
/// latest read, `last_version_flashed` what the last `firmware.update` step installed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirmwareComponent {
    pub component: String,
    pub initial_version: String,
    pub current_version: String,
    pub last_version_flashed: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// What inspection learned about a node (`/v1/nodes/{node}/inventory`, 1.81): the hardware
/// inventory the agent reported and the plugin data the inspection hooks kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInventory {
    pub node: Uuid,
    pub inventory: JsonObject,
    pub plugin_data: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_their_wire_names() {
        for state in [
            AllocationState::Allocating,
            AllocationState::Active,
            AllocationState::Error,
        ] {
            assert_eq!(state.as_str().parse::<AllocationState>(), Ok(state));
        }
        assert!("deleting".parse::<AllocationState>().is_err());
    }
}
