//! Inspection rules (`reference/ironic.md` §5.3, API 1.96): conditions on a node's inspection
//! data and actions on the node when they all hold, run by the conductor after in-band or
//! out-of-band inspection, highest `priority` first.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;

/// The one inspection phase Ironic defines: rules run after the data is processed.
pub const INSPECTION_PHASE_MAIN: &str = "main";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InspectionRule {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    pub description: Option<String>,
    /// 0–9999 for rules made through the API; higher runs first.
    pub priority: i64,
    /// Conditions and actions are not shown by the API (nor logged).
    pub sensitive: bool,
    /// When the rule runs; only [`INSPECTION_PHASE_MAIN`].
    pub phase: String,
    /// `{"op", "args", "loop"?, "multiple"?}` objects; all must hold (none: always).
    pub conditions: Vec<JsonObject>,
    /// `{"op", "args", "loop"?}` objects, run in order; at least one.
    pub actions: Vec<JsonObject>,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl InspectionRule {
    pub fn new(uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            description: None,
            priority: 0,
            sensitive: false,
            phase: INSPECTION_PHASE_MAIN.to_owned(),
            conditions: Vec::new(),
            actions: Vec::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}
