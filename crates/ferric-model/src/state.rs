//! The provision states of a node, with their wire names (`reference/ironic.md` §1.1).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
