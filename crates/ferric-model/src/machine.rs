//! The provision state machine as data: events, the transition table, API verbs, FSM targets.
//!
//! Theory of operation: [`TRANSITIONS`] is the only place that says which state an event leads
//! to. Everything else is derived from it: [`next_state`] looks rows up, the API verbs find the
//! states they are valid from by filtering it ([`Verb::valid_from`]), and the diagram in
//! `docs/state-machine.md` is rendered from it by a test. The conductor is the only code that
//! fires events on a real node; the API only asks "would this verb be accepted now?"
//! ([`check_verb`]) before handing the request over.
//!
//! The state groups (stable, failure, lookup-allowed, …) are methods on
//! [`ProvisionState`] in `state.rs`; the `target_provision_state` rules
//! are in `machine/target.rs` ([`Transition::target_after`]).

mod target;
mod verb;

use std::fmt;

use ProvisionState::*;

pub use self::target::CleaningKind;
pub use self::verb::{UnknownVerb, Verb, VerbError, check_verb};
use crate::microversion::{Microversion, gate};
use crate::state::ProvisionState;

/// An internal state-machine event. API verbs map onto these (several verbs may share one,
/// e.g. `active` and `deploy`); the conductor fires the rest itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    Deploy,
    Fail,
    Rebuild,
    Wait,
    Hold,
    Resume,
    Unhold,
    Abort,
    Done,
    Delete,
    Clean,
    Manage,
    Provide,
    Inspect,
    Rescue,
    Unrescue,
    Adopt,
    Service,
}

impl Event {
    pub const ALL: [Event; 18] = [
        Self::Deploy,
        Self::Fail,
        Self::Rebuild,
        Self::Wait,
        Self::Hold,
        Self::Resume,
        Self::Unhold,
        Self::Abort,
        Self::Done,
        Self::Delete,
        Self::Clean,
        Self::Manage,
        Self::Provide,
        Self::Inspect,
        Self::Rescue,
        Self::Unrescue,
        Self::Adopt,
        Self::Service,
    ];

    /// The event's name, as used in the diagram, logs and node history.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Deploy => "deploy",
            Self::Fail => "fail",
            Self::Rebuild => "rebuild",
            Self::Wait => "wait",
            Self::Hold => "hold",
            Self::Resume => "resume",
            Self::Unhold => "unhold",
            Self::Abort => "abort",
            Self::Done => "done",
            Self::Delete => "delete",
            Self::Clean => "clean",
            Self::Manage => "manage",
            Self::Provide => "provide",
            Self::Inspect => "inspect",
            Self::Rescue => "rescue",
            Self::Unrescue => "unrescue",
            Self::Adopt => "adopt",
            Self::Service => "service",
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may fire a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FiredBy {
    /// The conductor, as work progresses (a step finished, a call-back arrived, a deadline
    /// passed). No API request can take this edge.
    Conductor,
    /// An API verb that maps to the edge's event. `since` is set when this particular edge was
    /// opened to the API later than the verb itself (`abort` from `inspect wait` and from
    /// `wait call-back`); older clients get 406 there even though the verb exists for them.
    Api { since: Option<Microversion> },
}

impl FiredBy {
    pub const fn is_api(self) -> bool {
        matches!(self, Self::Api { .. })
    }
}

/// One edge of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    pub from: ProvisionState,
    pub event: Event,
    pub to: ProvisionState,
    pub fired_by: FiredBy,
}

const fn api(from: ProvisionState, event: Event, to: ProvisionState) -> Transition {
    Transition {
        from,
        event,
        to,
        fired_by: FiredBy::Api { since: None },
    }
}

const fn api_since(
    from: ProvisionState,
    event: Event,
    to: ProvisionState,
    since: Microversion,
) -> Transition {
    Transition {
        from,
        event,
        to,
        fired_by: FiredBy::Api { since: Some(since) },
    }
}

const fn conductor(from: ProvisionState, event: Event, to: ProvisionState) -> Transition {
    Transition {
        from,
        event,
        to,
        fired_by: FiredBy::Conductor,
    }
}

/// Every transition of the state machine, in the order of `reference/ironic.md` §1.2 (the
/// comment on each line is the reference's row number). No `(from, event)` pair appears twice,
/// so the machine is deterministic; the tests check that.
///
/// Rows 85 and 86 (`abort` from `service wait` / `service hold`) are API edges, but the
/// conductor answers that verb by firing `fail` and then `abort` from `service failed`, so the
/// node ends in `active` (§1.5). The table records the FSM edge; the conductor owns the dance.
#[rustfmt::skip]
pub const TRANSITIONS: [Transition; 93] = [
    api(Available, Event::Deploy, Deploying),                                   // 1
    conductor(Deploying, Event::Fail, DeployFailed),                            // 2
    api(DeployFailed, Event::Rebuild, Deploying),                               // 3
    api(DeployFailed, Event::Deploy, Deploying),                                // 4
    conductor(Deploying, Event::Wait, WaitCallBack),                            // 5
    conductor(Deploying, Event::Hold, DeployHold),                              // 6
    conductor(WaitCallBack, Event::Hold, DeployHold),                           // 7
    conductor(WaitCallBack, Event::Resume, Deploying),                          // 8
    conductor(WaitCallBack, Event::Fail, DeployFailed),                         // 9
    api(DeployHold, Event::Unhold, WaitCallBack),                               // 10
    api(DeployHold, Event::Abort, DeployFailed),                                // 11
    api_since(WaitCallBack, Event::Abort, DeployFailed, gate::ABORT_WAIT_CALL_BACK), // 12
    conductor(Deploying, Event::Done, Active),                                  // 13
    api(Active, Event::Rebuild, Deploying),                                     // 14
    api(Active, Event::Delete, Deleting),                                       // 15
    api(WaitCallBack, Event::Delete, Deleting),                                 // 16
    api(DeployFailed, Event::Delete, Deleting),                                 // 17
    conductor(Deleting, Event::Fail, Error),                                    // 18
    conductor(Deleting, Event::Clean, Cleaning),                                // 19
    conductor(Cleaning, Event::Done, Available),                                // 20
    conductor(Cleaning, Event::Fail, CleanFailed),                              // 21
    conductor(CleanWait, Event::Fail, CleanFailed),                             // 22
    api(CleanWait, Event::Abort, CleanFailed),                                  // 23
    conductor(Cleaning, Event::Wait, CleanWait),                                // 24
    conductor(Cleaning, Event::Hold, CleanHold),                                // 25
    conductor(CleanWait, Event::Hold, CleanHold),                               // 26
    conductor(CleanWait, Event::Resume, Cleaning),                              // 27
    api(CleanHold, Event::Abort, CleanFailed),                                  // 28
    api(CleanHold, Event::Unhold, CleanWait),                                   // 29
    api(CleanFailed, Event::Manage, Manageable),                                // 30
    api(Manageable, Event::Provide, Cleaning),                                  // 31
    api(Manageable, Event::Clean, Cleaning),                                    // 32
    conductor(Cleaning, Event::Manage, Manageable),                             // 33
    api(Available, Event::Manage, Manageable),                                  // 34
    api(Error, Event::Rebuild, Deploying),                                      // 35
    api(Error, Event::Delete, Deleting),                                        // 36
    api(Manageable, Event::Inspect, Inspecting),                                // 37
    conductor(Inspecting, Event::Done, Manageable),                             // 38
    conductor(Inspecting, Event::Fail, InspectFailed),                          // 39
    conductor(Inspecting, Event::Wait, InspectWait),                            // 40
    conductor(InspectWait, Event::Done, Manageable),                            // 41
    conductor(InspectWait, Event::Fail, InspectFailed),                         // 42
    api_since(InspectWait, Event::Abort, InspectFailed, gate::ABORT_INSPECT_WAIT), // 43
    conductor(InspectWait, Event::Resume, Inspecting),                          // 44
    api(InspectFailed, Event::Manage, Manageable),                              // 45
    api(InspectFailed, Event::Inspect, Inspecting),                             // 46
    api(Active, Event::Rescue, Rescuing),                                       // 47
    conductor(Rescuing, Event::Done, Rescue),                                   // 48
    conductor(Rescuing, Event::Wait, RescueWait),                               // 49
    conductor(RescueWait, Event::Resume, Rescuing),                             // 50
    api(Rescue, Event::Rescue, Rescuing),                                       // 51
    api(Rescue, Event::Delete, Deleting),                                       // 52
    conductor(RescueWait, Event::Fail, RescueFailed),                           // 53
    conductor(Rescuing, Event::Fail, RescueFailed),                             // 54
    api(RescueWait, Event::Abort, RescueFailed),                                // 55
    api(RescueFailed, Event::Rescue, Rescuing),                                 // 56
    api(RescueFailed, Event::Unrescue, Unrescuing),                             // 57
    api(RescueFailed, Event::Delete, Deleting),                                 // 58
    api(RescueWait, Event::Delete, Deleting),                                   // 59
    api(Rescue, Event::Unrescue, Unrescuing),                                   // 60
    conductor(Unrescuing, Event::Done, Active),                                 // 61
    conductor(Unrescuing, Event::Fail, UnrescueFailed),                         // 62
    api(UnrescueFailed, Event::Rescue, Rescuing),                               // 63
    api(UnrescueFailed, Event::Unrescue, Unrescuing),                           // 64
    api(UnrescueFailed, Event::Delete, Deleting),                               // 65
    api(Enroll, Event::Manage, Verifying),                                      // 66
    conductor(Verifying, Event::Done, Manageable),                              // 67
    conductor(Verifying, Event::Fail, Enroll),                                  // 68
    api(Manageable, Event::Adopt, Adopting),                                    // 69
    conductor(Adopting, Event::Done, Active),                                   // 70
    conductor(Adopting, Event::Fail, AdoptFailed),                              // 71
    api(AdoptFailed, Event::Adopt, Adopting),                                   // 72
    api(AdoptFailed, Event::Manage, Manageable),                                // 73
    conductor(Servicing, Event::Done, Active),                                  // 74
    api(Active, Event::Service, Servicing),                                     // 75
    conductor(Servicing, Event::Fail, ServiceFailed),                           // 76
    conductor(Servicing, Event::Wait, ServiceWait),                             // 77
    conductor(Servicing, Event::Hold, ServiceHold),                             // 78
    conductor(ServiceWait, Event::Hold, ServiceHold),                           // 79
    api(ServiceHold, Event::Service, Servicing),                                // 80
    api(ServiceHold, Event::Unhold, ServiceWait),                               // 81
    conductor(ServiceWait, Event::Resume, Servicing),                           // 82
    conductor(ServiceWait, Event::Fail, ServiceFailed),                         // 83
    conductor(ServiceHold, Event::Fail, ServiceFailed),                         // 84
    api(ServiceWait, Event::Abort, ServiceFailed),                              // 85
    api(ServiceHold, Event::Abort, ServiceFailed),                              // 86
    api(ServiceFailed, Event::Service, Servicing),                              // 87
    api(ServiceFailed, Event::Rescue, Rescuing),                                // 88
    conductor(ServiceFailed, Event::Wait, ServiceWait),                         // 89
    conductor(ServiceFailed, Event::Hold, ServiceHold),                         // 90
    api(ServiceFailed, Event::Delete, Deleting),                                // 91
    api(ServiceFailed, Event::Abort, Active),                                   // 92
    api(ServiceWait, Event::Delete, Deleting),                                  // 93
];

/// The edge `event` takes from `from`, if the machine has one.
pub fn transition(from: ProvisionState, event: Event) -> Option<&'static Transition> {
    TRANSITIONS
        .iter()
        .find(|transition| transition.from == from && transition.event == event)
}

/// The state `event` leads to from `from`, or `None` when the event is not valid there.
pub fn next_state(from: ProvisionState, event: Event) -> Option<ProvisionState> {
    transition(from, event).map(|transition| transition.to)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet};

    use super::*;

    #[test]
    fn the_table_has_no_duplicate_edges() {
        let mut seen = HashSet::new();
        for transition in &TRANSITIONS {
            assert!(
                seen.insert((transition.from, transition.event)),
                "{} -{}-> appears twice",
                transition.from,
                transition.event
            );
        }
    }

    #[test]
    fn every_state_and_event_is_used() {
        let states: BTreeSet<_> = TRANSITIONS
            .iter()
            .flat_map(|transition| [transition.from, transition.to])
            .collect();
        assert_eq!(states.len(), ProvisionState::ALL.len());
        let events: BTreeSet<_> = TRANSITIONS
            .iter()
            .map(|transition| transition.event)
            .collect();
        assert_eq!(events.len(), Event::ALL.len());
    }

    #[test]
    fn next_state_follows_the_table() {
        assert_eq!(next_state(Enroll, Event::Manage), Some(Verifying));
        assert_eq!(next_state(Verifying, Event::Fail), Some(Enroll));
        assert_eq!(next_state(ServiceFailed, Event::Abort), Some(Active));
        assert_eq!(next_state(Deploying, Event::Abort), None);
        assert_eq!(next_state(Available, Event::Inspect), None);
    }

    #[test]
    fn only_the_two_late_abort_edges_carry_their_own_version() {
        let gated: Vec<_> = TRANSITIONS
            .iter()
            .filter_map(|transition| match transition.fired_by {
                FiredBy::Api { since: Some(since) } => Some((transition.from, since)),
                FiredBy::Api { since: None } | FiredBy::Conductor => None,
            })
            .collect();
        assert_eq!(
            gated,
            [
                (WaitCallBack, gate::ABORT_WAIT_CALL_BACK),
                (InspectWait, gate::ABORT_INSPECT_WAIT)
            ]
        );
    }

    #[test]
    fn event_names_are_unique() {
        let names: HashSet<_> = Event::ALL.iter().map(|event| event.as_str()).collect();
        assert_eq!(names.len(), Event::ALL.len());
    }
}
