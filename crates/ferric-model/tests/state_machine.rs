//! Checks the state machine against `reference/ironic.md` §1.1–1.4, with the reference's facts
//! written out here a second time on purpose: the library derives them from one table, the
//! test states them by hand, and the two must agree.

use std::collections::{BTreeSet, HashSet, VecDeque};

use ferric_model::ProvisionState::{self, *};
use ferric_model::machine::{
    Event, FiredBy, TRANSITIONS, Transition, Verb, VerbError, check_verb, next_state,
};
use ferric_model::microversion::Microversion;

fn states(names: &str) -> BTreeSet<ProvisionState> {
    names
        .split(',')
        .map(|name| {
            name.trim()
                .parse()
                .unwrap_or_else(|error| panic!("{error}"))
        })
        .collect()
}

fn row(number: usize) -> Transition {
    TRANSITIONS[number - 1]
}

#[test]
fn the_table_has_93_transitions_over_30_states() {
    assert_eq!(TRANSITIONS.len(), 93);
    assert_eq!(ProvisionState::ALL.len(), 30);
    let used: BTreeSet<_> = TRANSITIONS.iter().flat_map(|t| [t.from, t.to]).collect();
    assert_eq!(used, ProvisionState::ALL.into_iter().collect());
}

#[test]
fn rows_match_the_reference_exactly() {
    let api = FiredBy::Api { since: None };
    let cases = [
        (1, Available, Event::Deploy, Deploying, api),
        (2, Deploying, Event::Fail, DeployFailed, FiredBy::Conductor),
        (
            12,
            WaitCallBack,
            Event::Abort,
            DeployFailed,
            FiredBy::Api {
                since: Some(Microversion::new(110)),
            },
        ),
        (19, Deleting, Event::Clean, Cleaning, FiredBy::Conductor),
        (33, Cleaning, Event::Manage, Manageable, FiredBy::Conductor),
        (
            43,
            InspectWait,
            Event::Abort,
            InspectFailed,
            FiredBy::Api {
                since: Some(Microversion::new(41)),
            },
        ),
        (66, Enroll, Event::Manage, Verifying, api),
        (67, Verifying, Event::Done, Manageable, FiredBy::Conductor),
        (68, Verifying, Event::Fail, Enroll, FiredBy::Conductor),
        (85, ServiceWait, Event::Abort, ServiceFailed, api),
        (86, ServiceHold, Event::Abort, ServiceFailed, api),
        (92, ServiceFailed, Event::Abort, Active, api),
        (93, ServiceWait, Event::Delete, Deleting, api),
    ];
    for (number, from, event, to, fired_by) in cases {
        assert_eq!(
            row(number),
            Transition {
                from,
                event,
                to,
                fired_by
            },
            "row {number}"
        );
    }
}

/// Every row of §1.2 as `from | event | to | api-or-internal`, in order.
const REFERENCE_ROWS: &str = "
available|deploy|deploying|api
deploying|fail|deploy failed|internal
deploy failed|rebuild|deploying|api
deploy failed|deploy|deploying|api
deploying|wait|wait call-back|internal
deploying|hold|deploy hold|internal
wait call-back|hold|deploy hold|internal
wait call-back|resume|deploying|internal
wait call-back|fail|deploy failed|internal
deploy hold|unhold|wait call-back|api
deploy hold|abort|deploy failed|api
wait call-back|abort|deploy failed|api
deploying|done|active|internal
active|rebuild|deploying|api
active|delete|deleting|api
wait call-back|delete|deleting|api
deploy failed|delete|deleting|api
deleting|fail|error|internal
deleting|clean|cleaning|internal
cleaning|done|available|internal
cleaning|fail|clean failed|internal
clean wait|fail|clean failed|internal
clean wait|abort|clean failed|api
cleaning|wait|clean wait|internal
cleaning|hold|clean hold|internal
clean wait|hold|clean hold|internal
clean wait|resume|cleaning|internal
clean hold|abort|clean failed|api
clean hold|unhold|clean wait|api
clean failed|manage|manageable|api
manageable|provide|cleaning|api
manageable|clean|cleaning|api
cleaning|manage|manageable|internal
available|manage|manageable|api
error|rebuild|deploying|api
error|delete|deleting|api
manageable|inspect|inspecting|api
inspecting|done|manageable|internal
inspecting|fail|inspect failed|internal
inspecting|wait|inspect wait|internal
inspect wait|done|manageable|internal
inspect wait|fail|inspect failed|internal
inspect wait|abort|inspect failed|api
inspect wait|resume|inspecting|internal
inspect failed|manage|manageable|api
inspect failed|inspect|inspecting|api
active|rescue|rescuing|api
rescuing|done|rescue|internal
rescuing|wait|rescue wait|internal
rescue wait|resume|rescuing|internal
rescue|rescue|rescuing|api
rescue|delete|deleting|api
rescue wait|fail|rescue failed|internal
rescuing|fail|rescue failed|internal
rescue wait|abort|rescue failed|api
rescue failed|rescue|rescuing|api
rescue failed|unrescue|unrescuing|api
rescue failed|delete|deleting|api
rescue wait|delete|deleting|api
rescue|unrescue|unrescuing|api
unrescuing|done|active|internal
unrescuing|fail|unrescue failed|internal
unrescue failed|rescue|rescuing|api
unrescue failed|unrescue|unrescuing|api
unrescue failed|delete|deleting|api
enroll|manage|verifying|api
verifying|done|manageable|internal
verifying|fail|enroll|internal
manageable|adopt|adopting|api
adopting|done|active|internal
adopting|fail|adopt failed|internal
adopt failed|adopt|adopting|api
adopt failed|manage|manageable|api
servicing|done|active|internal
active|service|servicing|api
servicing|fail|service failed|internal
servicing|wait|service wait|internal
servicing|hold|service hold|internal
service wait|hold|service hold|internal
service hold|service|servicing|api
service hold|unhold|service wait|api
service wait|resume|servicing|internal
service wait|fail|service failed|internal
service hold|fail|service failed|internal
service wait|abort|service failed|api
service hold|abort|service failed|api
service failed|service|servicing|api
service failed|rescue|rescuing|api
service failed|wait|service wait|internal
service failed|hold|service hold|internal
service failed|delete|deleting|api
service failed|abort|active|api
service wait|delete|deleting|api
";

#[test]
fn every_reference_row_is_in_the_table_in_order() {
    let reference: Vec<_> = REFERENCE_ROWS.trim().lines().collect();
    assert_eq!(reference.len(), TRANSITIONS.len());
    for (index, (line, transition)) in reference.iter().zip(&TRANSITIONS).enumerate() {
        let fired_by = if transition.fired_by.is_api() {
            "api"
        } else {
            "internal"
        };
        let ours = format!(
            "{}|{}|{}|{fired_by}",
            transition.from, transition.event, transition.to
        );
        assert_eq!(&ours, line, "row {}", index + 1);
    }
}

#[test]
fn no_state_has_two_edges_for_the_same_event() {
    let mut seen = HashSet::new();
    for t in &TRANSITIONS {
        assert!(
            seen.insert((t.from, t.event)),
            "{} -{}-> is ambiguous",
            t.from,
            t.event
        );
    }
}

#[test]
fn every_state_is_reachable_from_enroll() {
    let mut reached = BTreeSet::from([Enroll]);
    let mut queue = VecDeque::from([Enroll]);
    while let Some(state) = queue.pop_front() {
        for event in Event::ALL {
            if let Some(next) = next_state(state, event)
                && reached.insert(next)
            {
                queue.push_back(next);
            }
        }
    }
    let unreachable: Vec<_> = ProvisionState::ALL
        .into_iter()
        .filter(|state| !reached.contains(state))
        .collect();
    assert!(
        unreachable.is_empty(),
        "unreachable from enroll: {unreachable:?}"
    );
}

#[test]
fn edges_that_must_not_exist_do_not() {
    for state in [
        Deploying, Cleaning, Inspecting, Verifying, Adopting, Rescuing, Unrescuing, Servicing,
        Deleting,
    ] {
        assert_eq!(next_state(state, Event::Abort), None, "abort from {state}");
    }
    assert_eq!(next_state(Available, Event::Inspect), None);
    assert_eq!(next_state(Available, Event::Clean), None);
    for state in [DeployHold, CleanHold] {
        assert_eq!(next_state(state, Event::Fail), None, "fail from {state}");
        assert_eq!(
            next_state(state, Event::Resume),
            None,
            "resume from {state}"
        );
    }
    let leave_clean_failed: Vec<_> = TRANSITIONS
        .iter()
        .filter(|t| t.from == CleanFailed)
        .map(|t| t.event)
        .collect();
    assert_eq!(leave_clean_failed, [Event::Manage]);
    assert_eq!(next_state(DeployFailed, Event::Abort), None);
    let leave_error: BTreeSet<_> = TRANSITIONS
        .iter()
        .filter(|t| t.from == Error)
        .map(|t| t.event)
        .collect();
    assert_eq!(leave_error, BTreeSet::from([Event::Rebuild, Event::Delete]));
}

#[test]
fn verbs_are_valid_from_exactly_the_reference_states() {
    let deploy_from = "available, deploy failed";
    let delete_from = "active, wait call-back, deploy failed, error, rescue, rescue wait, \
                       rescue failed, unrescue failed, service wait, service failed";
    let expected = [
        (Verb::Active, deploy_from),
        (Verb::Deploy, deploy_from),
        (Verb::Rebuild, "active, deploy failed, error"),
        (Verb::Deleted, delete_from),
        (Verb::Undeploy, delete_from),
        (
            Verb::Manage,
            "enroll, available, clean failed, inspect failed, adopt failed",
        ),
        (Verb::Provide, "manageable"),
        (Verb::Inspect, "manageable, inspect failed"),
        (
            Verb::Abort,
            "clean wait, clean hold, deploy hold, rescue wait, service wait, service hold, \
             service failed, inspect wait, wait call-back",
        ),
        (Verb::Clean, "manageable"),
        (Verb::Adopt, "manageable, adopt failed"),
        (
            Verb::Rescue,
            "active, rescue, rescue failed, unrescue failed, service failed",
        ),
        (Verb::Unrescue, "rescue, rescue failed, unrescue failed"),
        (Verb::Unhold, "clean hold, deploy hold, service hold"),
        (Verb::Service, "active, service hold, service failed"),
    ];
    assert_eq!(expected.len(), Verb::ALL.len());
    for (verb, valid_from) in expected {
        assert_eq!(
            verb.valid_from().collect::<BTreeSet<_>>(),
            states(valid_from),
            "{verb}"
        );
    }
}

#[test]
fn verbs_have_the_reference_minimum_versions() {
    let expected = [
        (Verb::Active, 1),
        (Verb::Deploy, 73),
        (Verb::Rebuild, 1),
        (Verb::Deleted, 1),
        (Verb::Undeploy, 73),
        (Verb::Manage, 4),
        (Verb::Provide, 4),
        (Verb::Inspect, 6),
        (Verb::Abort, 13),
        (Verb::Clean, 15),
        (Verb::Adopt, 17),
        (Verb::Rescue, 38),
        (Verb::Unrescue, 38),
        (Verb::Unhold, 85),
        (Verb::Service, 87),
    ];
    for (verb, minor) in expected {
        assert_eq!(verb.min_version(), Microversion::new(minor), "{verb}");
    }
    assert_eq!(
        Verb::Abort.min_version_from(CleanWait),
        Some(Microversion::new(13))
    );
    assert_eq!(
        Verb::Abort.min_version_from(InspectWait),
        Some(Microversion::new(41))
    );
    assert_eq!(
        Verb::Abort.min_version_from(WaitCallBack),
        Some(Microversion::new(110))
    );
    assert_eq!(Verb::Abort.min_version_from(Deploying), None);
}

fn too_old(verb: Verb, state: ProvisionState, required: u16, requested: u16) -> VerbError {
    VerbError::VersionTooOld {
        verb,
        state,
        required: Microversion::new(required),
        requested: Microversion::new(requested),
    }
}

#[test]
fn abort_is_gated_per_source_state() {
    let v = Microversion::new;
    assert_eq!(
        check_verb(Verb::Abort, InspectWait, v(40)),
        Err(too_old(Verb::Abort, InspectWait, 41, 40))
    );
    assert_eq!(
        check_verb(Verb::Abort, InspectWait, v(41)),
        Ok(InspectFailed)
    );
    assert_eq!(
        check_verb(Verb::Abort, WaitCallBack, v(109)),
        Err(too_old(Verb::Abort, WaitCallBack, 110, 109))
    );
    assert_eq!(
        check_verb(Verb::Abort, WaitCallBack, v(110)),
        Ok(DeployFailed)
    );
    assert_eq!(check_verb(Verb::Abort, CleanWait, v(13)), Ok(CleanFailed));
    assert_eq!(
        check_verb(Verb::Abort, CleanWait, v(12)),
        Err(too_old(Verb::Abort, CleanWait, 13, 12))
    );
    assert_eq!(check_verb(Verb::Abort, ServiceFailed, v(115)), Ok(Active));
}

#[test]
fn deploy_and_undeploy_need_1_73_while_their_old_names_do_not() {
    let v = Microversion::new;
    assert_eq!(
        check_verb(Verb::Deploy, Available, v(72)),
        Err(too_old(Verb::Deploy, Available, 73, 72))
    );
    assert_eq!(check_verb(Verb::Deploy, Available, v(73)), Ok(Deploying));
    assert_eq!(check_verb(Verb::Active, Available, v(1)), Ok(Deploying));
    assert_eq!(
        check_verb(Verb::Undeploy, Active, v(72)),
        Err(too_old(Verb::Undeploy, Active, 73, 72))
    );
    assert_eq!(check_verb(Verb::Deleted, Active, v(1)), Ok(Deleting));
}

#[test]
fn a_verb_from_the_wrong_state_is_refused_with_the_state() {
    let error = check_verb(Verb::Inspect, Available, Microversion::new(60)).unwrap_err();
    assert_eq!(
        error,
        VerbError::NotAllowedInState {
            verb: Verb::Inspect,
            state: Available
        }
    );
    assert!(error.message_for_node("rack4-u12").starts_with(
        "The requested action \"inspect\" can not be performed on node \"rack4-u12\" \
                 while it is in state \"available\"."
    ));
    assert!(matches!(
        check_verb(Verb::Abort, Deploying, Microversion::new(115)),
        Err(VerbError::NotAllowedInState { .. })
    ));
}

#[test]
fn state_groups_match_the_reference() {
    let members = |test: fn(ProvisionState) -> bool| -> BTreeSet<_> {
        ProvisionState::ALL
            .into_iter()
            .filter(|&state| test(state))
            .collect()
    };
    assert_eq!(
        members(ProvisionState::is_stable),
        states("enroll, manageable, available, active, error, rescue")
    );
    assert_eq!(
        members(ProvisionState::is_unstable),
        states(
            "deploying, wait call-back, cleaning, clean wait, verifying, deleting, inspecting, \
             inspect wait, adopting, rescuing, rescue wait, unrescuing, servicing, service wait"
        )
    );
    assert_eq!(
        members(ProvisionState::is_failure),
        states(
            "deploy failed, clean failed, inspect failed, rescue failed, unrescue failed, \
             adopt failed, service failed"
        )
    );
    assert_eq!(
        members(ProvisionState::is_hold),
        states("deploy hold, clean hold, service hold")
    );
    assert_eq!(
        members(ProvisionState::is_stuck_treated_as_failure),
        states(
            "deploying, cleaning, verifying, inspecting, adopting, rescuing, unrescuing, deleting, servicing"
        )
    );
    assert_eq!(
        members(ProvisionState::has_callback_deadline),
        states("wait call-back, clean wait, inspect wait, rescue wait, service wait")
    );
    let lookup = "deploying, wait call-back, cleaning, clean wait, inspecting, inspect wait, \
                  rescuing, rescue wait, service wait";
    assert_eq!(members(ProvisionState::allows_agent_lookup), states(lookup));
    assert_eq!(
        members(ProvisionState::allows_fast_track_lookup),
        states(&format!(
            "{lookup}, enroll, manageable, available, servicing, service hold"
        ))
    );
    assert_eq!(
        members(|state| state.allows_delete(false)),
        states("manageable, enroll, adopt failed")
    );
    assert_eq!(
        members(|state| state.allows_delete(true)),
        states("manageable, enroll, adopt failed, available")
    );
    let update = "deploy failed, inspect failed, inspect wait, clean failed, error, verifying, \
                  adopt failed, rescue failed, unrescue failed, service hold, service failed";
    assert_eq!(
        members(|state| state.allows_update_during_transition(Microversion::new(39))),
        states(update)
    );
    assert_eq!(
        members(|state| state.allows_update_during_transition(Microversion::new(38))),
        states(&format!("{update}, inspecting"))
    );
}

#[test]
fn every_stuck_state_has_a_conductor_fail_edge_and_every_deadline_a_way_out() {
    for state in ProvisionState::ALL {
        let fail = TRANSITIONS
            .iter()
            .find(|t| t.from == state && t.event == Event::Fail);
        if state.is_stuck_treated_as_failure() || state.has_callback_deadline() {
            let fail = fail.unwrap_or_else(|| panic!("{state} has no fail edge"));
            assert_eq!(fail.fired_by, FiredBy::Conductor, "{state}");
        }
    }
}

#[test]
fn deploy_and_clean_holds_leave_only_by_operator_action() {
    for state in [DeployHold, CleanHold] {
        assert!(
            TRANSITIONS
                .iter()
                .filter(|t| t.from == state)
                .all(|t| t.fired_by.is_api()),
            "{state}"
        );
    }
}
