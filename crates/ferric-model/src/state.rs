//! The provision states of a node, with their wire names (`reference/ironic.md` §1.1).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::microversion::{Microversion, gate};

/// A node's provision state. The string form is the one the Bare Metal API shows
/// (`"wait call-back"`, `"inspect failed"`, …) and the one stored in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum ProvisionState {
    Enroll,
    Verifying,
    Manageable,
    Available,
    Inspecting,
    InspectWait,
    InspectFailed,
    Deploying,
    WaitCallBack,
    DeployHold,
    DeployFailed,
    Active,
    Deleting,
    Cleaning,
    CleanWait,
    CleanHold,
    CleanFailed,
    Error,
    Adopting,
    AdoptFailed,
    Rescuing,
    RescueWait,
    RescueFailed,
    Rescue,
    Unrescuing,
    UnrescueFailed,
    Servicing,
    ServiceWait,
    ServiceHold,
    ServiceFailed,
}

impl ProvisionState {
    /// Every state, in the order of the reference table.
    pub const ALL: [ProvisionState; 30] = [
        Self::Enroll,
        Self::Verifying,
        Self::Manageable,
        Self::Available,
        Self::Inspecting,
        Self::InspectWait,
        Self::InspectFailed,
        Self::Deploying,
        Self::WaitCallBack,
        Self::DeployHold,
        Self::DeployFailed,
        Self::Active,
        Self::Deleting,
        Self::Cleaning,
        Self::CleanWait,
        Self::CleanHold,
        Self::CleanFailed,
        Self::Error,
        Self::Adopting,
        Self::AdoptFailed,
        Self::Rescuing,
        Self::RescueWait,
        Self::RescueFailed,
        Self::Rescue,
        Self::Unrescuing,
        Self::UnrescueFailed,
        Self::Servicing,
        Self::ServiceWait,
        Self::ServiceHold,
        Self::ServiceFailed,
    ];

    /// The wire name, as the API shows it and the database stores it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Enroll => "enroll",
            Self::Verifying => "verifying",
            Self::Manageable => "manageable",
            Self::Available => "available",
            Self::Inspecting => "inspecting",
            Self::InspectWait => "inspect wait",
            Self::InspectFailed => "inspect failed",
            Self::Deploying => "deploying",
            Self::WaitCallBack => "wait call-back",
            Self::DeployHold => "deploy hold",
            Self::DeployFailed => "deploy failed",
            Self::Active => "active",
            Self::Deleting => "deleting",
            Self::Cleaning => "cleaning",
            Self::CleanWait => "clean wait",
            Self::CleanHold => "clean hold",
            Self::CleanFailed => "clean failed",
            Self::Error => "error",
            Self::Adopting => "adopting",
            Self::AdoptFailed => "adopt failed",
            Self::Rescuing => "rescuing",
            Self::RescueWait => "rescue wait",
            Self::RescueFailed => "rescue failed",
            Self::Rescue => "rescue",
            Self::Unrescuing => "unrescuing",
            Self::UnrescueFailed => "unrescue failed",
            Self::Servicing => "servicing",
            Self::ServiceWait => "service wait",
            Self::ServiceHold => "service hold",
            Self::ServiceFailed => "service failed",
        }
    }
}

impl fmt::Display for ProvisionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ProvisionState> for &'static str {
    fn from(state: ProvisionState) -> Self {
        state.as_str()
    }
}

/// A string that names no provision state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a provision state")]
pub struct UnknownProvisionState(pub String);

impl FromStr for ProvisionState {
    type Err = UnknownProvisionState;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == name)
            .ok_or_else(|| UnknownProvisionState(name.to_owned()))
    }
}

impl TryFrom<String> for ProvisionState {
    type Error = UnknownProvisionState;

    fn try_from(name: String) -> Result<Self, UnknownProvisionState> {
        name.parse()
    }
}

/// What kind of resting or moving place a state is (`reference/ironic.md` §1.1 "kind").
///
/// The reference's kind column calls the three holds "T (no timeout)", but Ironic's
/// UNSTABLE_STATES group leaves them out: nothing moves a held node on except an operator. So
/// they get a kind of their own, and the four kinds partition the states exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateKind {
    /// A resting state the FSM marks stable; `target_provision_state` is cleared on entry.
    Stable,
    /// Work in progress, driven by the conductor or by a call-back it waits for.
    Transient,
    /// Paused by a `hold` step until an operator sends `unhold` (or `abort`); no deadline.
    Hold,
    /// A resting state after something went wrong; the operator must act.
    Failure,
}

impl StateKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stable => "stable",
            Self::Transient => "transient",
            Self::Hold => "hold",
            Self::Failure => "failure",
        }
    }
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state groups of `reference/ironic.md` §1.1. Each is an exhaustive `match` without a
/// wildcard, so a new state cannot be added without deciding every group for it.
impl ProvisionState {
    pub const fn kind(self) -> StateKind {
        match self {
            Self::Enroll
            | Self::Manageable
            | Self::Available
            | Self::Active
            | Self::Error
            | Self::Rescue => StateKind::Stable,
            Self::Verifying
            | Self::Inspecting
            | Self::InspectWait
            | Self::Deploying
            | Self::WaitCallBack
            | Self::Deleting
            | Self::Cleaning
            | Self::CleanWait
            | Self::Adopting
            | Self::Rescuing
            | Self::RescueWait
            | Self::Unrescuing
            | Self::Servicing
            | Self::ServiceWait => StateKind::Transient,
            Self::DeployHold | Self::CleanHold | Self::ServiceHold => StateKind::Hold,
            Self::InspectFailed
            | Self::DeployFailed
            | Self::CleanFailed
            | Self::AdoptFailed
            | Self::RescueFailed
            | Self::UnrescueFailed
            | Self::ServiceFailed => StateKind::Failure,
        }
    }

    /// Ironic's STABLE_STATES.
    pub const fn is_stable(self) -> bool {
        matches!(self.kind(), StateKind::Stable)
    }

    /// Ironic's UNSTABLE_STATES: work is under way (holds excluded, see [`StateKind`]).
    pub const fn is_unstable(self) -> bool {
        matches!(self.kind(), StateKind::Transient)
    }

    /// Ironic's FAILURE_STATES.
    pub const fn is_failure(self) -> bool {
        matches!(self.kind(), StateKind::Failure)
    }

    /// The holds: a node waits here for an operator, with no deadline.
    pub const fn is_hold(self) -> bool {
        matches!(self.kind(), StateKind::Hold)
    }

    /// The states where the conductor waits for the ramdisk (heartbeat, inspection data) or an
    /// asynchronous step. Each has a deadline after which the node fails, so nothing waits
    /// forever on a machine that never calls back.
    pub const fn has_callback_deadline(self) -> bool {
        match self {
            Self::WaitCallBack
            | Self::CleanWait
            | Self::InspectWait
            | Self::RescueWait
            | Self::ServiceWait => true,
            Self::Enroll
            | Self::Verifying
            | Self::Manageable
            | Self::Available
            | Self::Inspecting
            | Self::InspectFailed
            | Self::Deploying
            | Self::DeployHold
            | Self::DeployFailed
            | Self::Active
            | Self::Deleting
            | Self::Cleaning
            | Self::CleanHold
            | Self::CleanFailed
            | Self::Error
            | Self::Adopting
            | Self::AdoptFailed
            | Self::Rescuing
            | Self::RescueFailed
            | Self::Rescue
            | Self::Unrescuing
            | Self::UnrescueFailed
            | Self::Servicing
            | Self::ServiceHold
            | Self::ServiceFailed => false,
        }
    }

    /// Ironic's STUCK_STATES_TREATED_AS_FAIL: states where a conductor works synchronously. A
    /// node found here with no live reservation (its conductor died) fires `fail`, because
    /// nobody will ever finish the work.
    pub const fn is_stuck_treated_as_failure(self) -> bool {
        match self {
            Self::Deploying
            | Self::Cleaning
            | Self::Verifying
            | Self::Inspecting
            | Self::Adopting
            | Self::Rescuing
            | Self::Unrescuing
            | Self::Deleting
            | Self::Servicing => true,
            Self::Enroll
            | Self::Manageable
            | Self::Available
            | Self::InspectWait
            | Self::InspectFailed
            | Self::WaitCallBack
            | Self::DeployHold
            | Self::DeployFailed
            | Self::Active
            | Self::CleanWait
            | Self::CleanHold
            | Self::CleanFailed
            | Self::Error
            | Self::AdoptFailed
            | Self::RescueWait
            | Self::RescueFailed
            | Self::Rescue
            | Self::UnrescueFailed
            | Self::ServiceWait
            | Self::ServiceHold
            | Self::ServiceFailed => false,
        }
    }

    /// Whether `PATCH /v1/nodes/{node}` may change a node in this state although its
    /// `target_provision_state` is set (Ironic's UPDATE_ALLOWED_STATES). Ask only when a
    /// target is set: a node without one (every stable state) can always be updated.
    /// `inspecting` is allowed only for clients older than 1.39, which could not see
    /// `inspect wait` and so could not tell the two apart.
    ///
    /// Ironic's list also holds the `service` verb string, which names no state; it has no
    /// counterpart here.
    pub fn allows_update_during_transition(self, version: Microversion) -> bool {
        match self {
            Self::Inspecting => version < gate::INSPECT_WAIT_STATE,
            Self::DeployFailed
            | Self::InspectFailed
            | Self::InspectWait
            | Self::CleanFailed
            | Self::Error
            | Self::Verifying
            | Self::AdoptFailed
            | Self::RescueFailed
            | Self::UnrescueFailed
            | Self::ServiceHold
            | Self::ServiceFailed => true,
            Self::Enroll
            | Self::Manageable
            | Self::Available
            | Self::Deploying
            | Self::WaitCallBack
            | Self::DeployHold
            | Self::Active
            | Self::Deleting
            | Self::Cleaning
            | Self::CleanWait
            | Self::CleanHold
            | Self::Adopting
            | Self::Rescuing
            | Self::RescueWait
            | Self::Rescue
            | Self::Unrescuing
            | Self::Servicing
            | Self::ServiceWait => false,
        }
    }

    /// Whether `DELETE /v1/nodes/{node}` may remove a node in this state (Ironic's
    /// DELETE_ALLOWED_STATES). `available` depends on the operator's
    /// `allow_deleting_available_nodes` setting. A node in maintenance may be deleted in any
    /// state; that is the caller's check, as maintenance is not a provision state.
    pub const fn allows_delete(self, allow_deleting_available_nodes: bool) -> bool {
        match self {
            Self::Available => allow_deleting_available_nodes,
            Self::Manageable | Self::Enroll | Self::AdoptFailed => true,
            Self::Verifying
            | Self::Inspecting
            | Self::InspectWait
            | Self::InspectFailed
            | Self::Deploying
            | Self::WaitCallBack
            | Self::DeployHold
            | Self::DeployFailed
            | Self::Active
            | Self::Deleting
            | Self::Cleaning
            | Self::CleanWait
            | Self::CleanHold
            | Self::CleanFailed
            | Self::Error
            | Self::Adopting
            | Self::Rescuing
            | Self::RescueWait
            | Self::RescueFailed
            | Self::Rescue
            | Self::Unrescuing
            | Self::UnrescueFailed
            | Self::Servicing
            | Self::ServiceWait
            | Self::ServiceHold
            | Self::ServiceFailed => false,
        }
    }

    /// Whether an agent may look its node up (`/v1/lookup`) in this state: the states where a
    /// ramdisk is expected to be running (Ironic's LOOKUP_ALLOWED_STATES).
    pub const fn allows_agent_lookup(self) -> bool {
        match self {
            Self::Deploying
            | Self::WaitCallBack
            | Self::Cleaning
            | Self::CleanWait
            | Self::Inspecting
            | Self::InspectWait
            | Self::Rescuing
            | Self::RescueWait
            | Self::ServiceWait => true,
            Self::Enroll
            | Self::Verifying
            | Self::Manageable
            | Self::Available
            | Self::InspectFailed
            | Self::DeployHold
            | Self::DeployFailed
            | Self::Active
            | Self::Deleting
            | Self::CleanHold
            | Self::CleanFailed
            | Self::Error
            | Self::Adopting
            | Self::AdoptFailed
            | Self::RescueFailed
            | Self::Rescue
            | Self::Unrescuing
            | Self::UnrescueFailed
            | Self::Servicing
            | Self::ServiceHold
            | Self::ServiceFailed => false,
        }
    }

    /// Whether an agent may look its node up when fast-track is enabled: the lookup states
    /// plus the resting states where a ramdisk may be kept running between operations
    /// (Ironic's FASTTRACK_LOOKUP_ALLOWED_STATES).
    pub const fn allows_fast_track_lookup(self) -> bool {
        match self {
            Self::Enroll
            | Self::Manageable
            | Self::Available
            | Self::Servicing
            | Self::ServiceHold => true,
            Self::Verifying
            | Self::Inspecting
            | Self::InspectWait
            | Self::InspectFailed
            | Self::Deploying
            | Self::WaitCallBack
            | Self::DeployHold
            | Self::DeployFailed
            | Self::Active
            | Self::Deleting
            | Self::Cleaning
            | Self::CleanWait
            | Self::CleanHold
            | Self::CleanFailed
            | Self::Error
            | Self::Adopting
            | Self::AdoptFailed
            | Self::Rescuing
            | Self::RescueWait
            | Self::RescueFailed
            | Self::Rescue
            | Self::Unrescuing
            | Self::UnrescueFailed
            | Self::ServiceWait
            | Self::ServiceFailed => self.allows_agent_lookup(),
        }
    }
}

/// The `provision_state` a client at `version` is shown, `None` meaning JSON `null`.
/// States that did not exist yet at that version are shown as the one older clients knew.
pub fn visible_provision_state(
    state: ProvisionState,
    version: Microversion,
) -> Option<ProvisionState> {
    match state {
        ProvisionState::Available if version < gate::AVAILABLE_STATE => None,
        ProvisionState::InspectWait if version < gate::INSPECT_WAIT_STATE => {
            Some(ProvisionState::Inspecting)
        }
        other => Some(other),
    }
}

/// The state a node created by a client at `version` starts in. Old clients expect a new node
/// to be schedulable at once; from 1.11 it must first be managed (credentials verified).
pub fn initial_provision_state(version: Microversion) -> ProvisionState {
    if version < gate::ENROLL_INITIAL_STATE {
        ProvisionState::Available
    } else {
        ProvisionState::Enroll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_name() {
        for state in ProvisionState::ALL {
            assert_eq!(state.as_str().parse::<ProvisionState>(), Ok(state));
        }
        assert!("deploy complete".parse::<ProvisionState>().is_err());
    }

    #[test]
    fn serde_uses_wire_names() {
        let json = serde_json::to_string(&ProvisionState::WaitCallBack).unwrap();
        assert_eq!(json, r#""wait call-back""#);
        let back: ProvisionState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ProvisionState::WaitCallBack);
    }
}
