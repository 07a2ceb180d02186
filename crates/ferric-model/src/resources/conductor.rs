//! Conductors, the node leases they hold and the node history they write
//! (`reference/ironic.md` §2.7, §6.1, §6.3).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A registered conductor process. `updated_at` is its last heartbeat; whether it still counts
/// as alive (heartbeat newer than the configured timeout) is for the caller to decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conductor {
    pub hostname: String,
    pub conductor_group: String,
    /// Hardware types this conductor can drive.
    pub drivers: Vec<String>,
    pub online: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An exclusive, expiring claim on a node by one holder (a conductor hostname).
///
/// This replaces Ironic's `reservation` column: a holder that dies stops renewing, the lease
/// expires, and another conductor may take it over without anyone clearing it by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLease {
    pub node: Uuid,
    pub holder: String,
    pub acquired_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The fencing token: a number the database gives each grant of a lease, larger than any
    /// it gave before (renewing keeps it). Every write the holder makes for the node names
    /// it, so a holder whose lease was taken over meanwhile writes nothing.
    #[serde(default)]
    pub generation: i64,
}

impl NodeLease {
    /// Whether the lease has lapsed at `now` (a lease expiring exactly now has lapsed).
    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at <= now
    }
}

/// One event in a node's history (`GET /v1/nodes/{node}/history`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeHistoryEntry {
    pub uuid: Uuid,
    pub node: Uuid,
    pub created_at: DateTime<Utc>,
    /// `"INFO"`, `"WARNING"` or `"ERROR"`, as Ironic writes them.
    pub severity: String,
    pub event_type: String,
    pub event: String,
    pub conductor: Option<String>,
    pub user: Option<String>,
}
