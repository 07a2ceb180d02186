//! The FSM target: the `target_provision_state` a node carries while it sits in a state
//! (`reference/ironic.md` §1.1, "FSM target" column).
//!
//! For most states the target is fixed: `deploying` is on its way to `active`, `inspect wait`
//! to `manageable`, and stable states have none. The cleaning states are the exception: the
//! same `cleaning` ends in `available` after `provide` or a tear-down (automated cleaning) but
//! in `manageable` after the `clean` verb (manual cleaning). Rather than pretend the state
//! alone decides, the target is chosen by the transition that entered the cleaning states and
//! then carried along while the node moves among them ([`Transition::target_after`]).

use super::{Event, Transition};
use crate::state::ProvisionState::{self, *};

/// Why a node is cleaning, which decides where cleaning returns it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CleaningKind {
    /// Started by `provide` or by tearing an instance down; ends in `available`.
    Automated,
    /// Started by the operator's `clean` verb with explicit steps; ends in `manageable`.
    Manual,
}

impl CleaningKind {
    /// Reads the kind back from the target a cleaning node carries: `manageable` means manual
    /// cleaning. Anything else, a missing target included, counts as automated, the kind
    /// every cleaning started by `provide` or a tear-down is.
    pub const fn from_target(target: Option<ProvisionState>) -> Self {
        match target {
            Some(Manageable) => Self::Manual,
            _ => Self::Automated,
        }
    }
}

impl ProvisionState {
    /// The `target_provision_state` a node has while in this state. `cleaning` only matters
    /// for the cleaning states (`cleaning`, `clean wait`, `clean hold`, `clean failed`).
    pub const fn fsm_target(self, cleaning: CleaningKind) -> Option<ProvisionState> {
        match self {
            Enroll | Manageable | Available | Active | Error | Rescue => None,
            Verifying | Inspecting | InspectWait | InspectFailed => Some(Manageable),
            Deploying | WaitCallBack | DeployHold | DeployFailed => Some(Active),
            Deleting => Some(Available),
            Cleaning | CleanWait | CleanHold | CleanFailed => match cleaning {
                CleaningKind::Automated => Some(Available),
                CleaningKind::Manual => Some(Manageable),
            },
            Adopting | AdoptFailed => Some(Active),
            Rescuing | RescueWait | RescueFailed => Some(Rescue),
            Unrescuing | UnrescueFailed => Some(Active),
            Servicing | ServiceWait | ServiceHold | ServiceFailed => Some(Active),
        }
    }

    /// Whether the target in this state depends on the kind of cleaning under way.
    pub fn target_depends_on_cleaning_kind(self) -> bool {
        self.fsm_target(CleaningKind::Automated) != self.fsm_target(CleaningKind::Manual)
    }
}

impl Transition {
    /// The `target_provision_state` a node has after taking this edge, given the one it had
    /// before. The previous target only matters when moving among the cleaning states, which
    /// keep the target they were entered with; entering them, the API `clean` verb starts
    /// manual cleaning and every other edge (`provide`, tear-down) automated cleaning.
    pub fn target_after(&self, current_target: Option<ProvisionState>) -> Option<ProvisionState> {
        let cleaning = if self.from.target_depends_on_cleaning_kind() {
            CleaningKind::from_target(current_target)
        } else if self.event == Event::Clean && self.fired_by.is_api() {
            CleaningKind::Manual
        } else {
            CleaningKind::Automated
        };
        self.to.fsm_target(cleaning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::transition;

    /// Follows `events` from `state`, carrying the target as the conductor would store it.
    fn walk(
        mut state: ProvisionState,
        events: &[Event],
    ) -> (ProvisionState, Option<ProvisionState>) {
        let mut target = None;
        for &event in events {
            let edge = transition(state, event).unwrap();
            target = edge.target_after(target);
            state = edge.to;
        }
        (state, target)
    }

    #[test]
    fn manual_cleaning_returns_to_manageable_all_the_way_through() {
        assert_eq!(
            walk(Manageable, &[Event::Clean]),
            (Cleaning, Some(Manageable))
        );
        assert_eq!(
            walk(
                Manageable,
                &[Event::Clean, Event::Wait, Event::Hold, Event::Unhold]
            ),
            (CleanWait, Some(Manageable))
        );
        assert_eq!(
            walk(Manageable, &[Event::Clean, Event::Wait, Event::Abort]),
            (CleanFailed, Some(Manageable))
        );
        assert_eq!(
            walk(Manageable, &[Event::Clean, Event::Manage]),
            (Manageable, None)
        );
    }

    #[test]
    fn provide_and_tear_down_clean_towards_available() {
        assert_eq!(
            walk(Manageable, &[Event::Provide, Event::Wait, Event::Resume]),
            (Cleaning, Some(Available))
        );
        assert_eq!(walk(Active, &[Event::Delete]), (Deleting, Some(Available)));
        assert_eq!(
            walk(
                Active,
                &[Event::Delete, Event::Clean, Event::Wait, Event::Fail]
            ),
            (CleanFailed, Some(Available))
        );
        assert_eq!(
            walk(Active, &[Event::Delete, Event::Clean, Event::Done]),
            (Available, None)
        );
    }

    #[test]
    fn stable_states_have_no_target_and_only_cleaning_states_depend_on_the_kind() {
        for state in ProvisionState::ALL {
            if state.is_stable() {
                assert_eq!(state.fsm_target(CleaningKind::Automated), None, "{state}");
            } else {
                assert!(
                    state.fsm_target(CleaningKind::Automated).is_some(),
                    "{state}"
                );
            }
        }
        let cleaning_states: Vec<_> = ProvisionState::ALL
            .into_iter()
            .filter(|state| state.target_depends_on_cleaning_kind())
            .collect();
        assert_eq!(
            cleaning_states,
            [Cleaning, CleanWait, CleanHold, CleanFailed]
        );
    }
}
