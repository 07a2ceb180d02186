//! The `target` verbs of `PUT /v1/nodes/{node}/states/provision` and the check that a verb is
//! acceptable for a node's state at the client's microversion (`reference/ironic.md` §1.3).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Event, FiredBy, TRANSITIONS, Transition, transition};
use crate::microversion::{Microversion, gate};
use crate::state::ProvisionState;

/// A provision action a client asks for. Its wire name is the `target` field of the request
/// body; several verbs are aliases that fire the same event (`active`/`deploy`,
/// `deleted`/`undeploy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Verb {
    Active,
    Deploy,
    Rebuild,
    Deleted,
    Undeploy,
    Manage,
    Provide,
    Inspect,
    Abort,
    Clean,
    Adopt,
    Rescue,
    Unrescue,
    Unhold,
    Service,
}

impl Verb {
    /// Every verb, in the order of the reference table.
    pub const ALL: [Verb; 15] = [
        Self::Active,
        Self::Deploy,
        Self::Rebuild,
        Self::Deleted,
        Self::Undeploy,
        Self::Manage,
        Self::Provide,
        Self::Inspect,
        Self::Abort,
        Self::Clean,
        Self::Adopt,
        Self::Rescue,
        Self::Unrescue,
        Self::Unhold,
        Self::Service,
    ];

    /// The wire name, as sent in `{"target": …}`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Deploy => "deploy",
            Self::Rebuild => "rebuild",
            Self::Deleted => "deleted",
            Self::Undeploy => "undeploy",
            Self::Manage => "manage",
            Self::Provide => "provide",
            Self::Inspect => "inspect",
            Self::Abort => "abort",
            Self::Clean => "clean",
            Self::Adopt => "adopt",
            Self::Rescue => "rescue",
            Self::Unrescue => "unrescue",
            Self::Unhold => "unhold",
            Self::Service => "service",
        }
    }

    /// The state-machine event the verb fires.
    pub const fn event(self) -> Event {
        match self {
            Self::Active | Self::Deploy => Event::Deploy,
            Self::Rebuild => Event::Rebuild,
            Self::Deleted | Self::Undeploy => Event::Delete,
            Self::Manage => Event::Manage,
            Self::Provide => Event::Provide,
            Self::Inspect => Event::Inspect,
            Self::Abort => Event::Abort,
            Self::Clean => Event::Clean,
            Self::Adopt => Event::Adopt,
            Self::Rescue => Event::Rescue,
            Self::Unrescue => Event::Unrescue,
            Self::Unhold => Event::Unhold,
            Self::Service => Event::Service,
        }
    }

    /// The oldest microversion that knows the verb at all. Some source states need a newer
    /// one; see [`Verb::min_version_from`].
    pub const fn min_version(self) -> Microversion {
        match self {
            Self::Active | Self::Rebuild | Self::Deleted => Microversion::MIN,
            Self::Deploy | Self::Undeploy => gate::DEPLOY_UNDEPLOY_ALIASES,
            Self::Manage | Self::Provide => gate::MANAGE_AND_PROVIDE,
            Self::Inspect => gate::INSPECT,
            Self::Abort => gate::ABORT,
            Self::Clean => gate::MANUAL_CLEAN,
            Self::Adopt => gate::ADOPT,
            Self::Rescue | Self::Unrescue => gate::RESCUE,
            Self::Unhold => gate::UNHOLD,
            Self::Service => gate::SERVICE,
        }
    }

    /// The API edge this verb takes from `state`, if there is one. Conductor-only edges with
    /// the same event (`cleaning -manage-> manageable`) do not count.
    pub fn edge_from(self, state: ProvisionState) -> Option<&'static Transition> {
        transition(state, self.event()).filter(|edge| edge.fired_by.is_api())
    }

    /// The states a node may be in for this verb to be accepted (at a new enough version),
    /// in table order. Derived from the API edges of [`TRANSITIONS`], never listed by hand.
    pub fn valid_from(self) -> impl Iterator<Item = ProvisionState> {
        let event = self.event();
        TRANSITIONS
            .iter()
            .filter(move |edge| edge.event == event && edge.fired_by.is_api())
            .map(|edge| edge.from)
    }

    /// The oldest microversion at which the verb is accepted from `state`: the verb's own
    /// minimum, raised where the edge was opened later. `None` if the verb is never valid there.
    pub fn min_version_from(self, state: ProvisionState) -> Option<Microversion> {
        self.edge_from(state).map(|edge| self.min_version_for(edge))
    }

    fn min_version_for(self, edge: &Transition) -> Microversion {
        match edge.fired_by {
            FiredBy::Api { since: Some(since) } => since.max(self.min_version()),
            FiredBy::Api { since: None } | FiredBy::Conductor => self.min_version(),
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Verb> for &'static str {
    fn from(verb: Verb) -> Self {
        verb.as_str()
    }
}

/// A `target` that names no provision verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "\"{0}\" is not a provision action; use one of: {verbs}",
    verbs = Verb::ALL.map(Verb::as_str).join(", ")
)]
pub struct UnknownVerb(pub String);

impl FromStr for Verb {
    type Err = UnknownVerb;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|verb| verb.as_str() == name)
            .ok_or_else(|| UnknownVerb(name.to_owned()))
    }
}

impl TryFrom<String> for Verb {
    type Error = UnknownVerb;

    fn try_from(name: String) -> Result<Self, UnknownVerb> {
        name.parse()
    }
}

/// Why a verb was refused before anything was handed to the conductor.
///
/// `Display` leaves out the node, which this crate does not know; the API builds its response
/// text with [`VerbError::message_for_node`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbError {
    /// The client's microversion is older than the verb, or than this verb from this state.
    /// The API answers 406.
    #[error("{}", version_too_old_message(*verb, *state, *required, *requested))]
    VersionTooOld {
        verb: Verb,
        state: ProvisionState,
        required: Microversion,
        requested: Microversion,
    },
    /// The verb has no API edge from the node's state. The API answers 400
    /// (InvalidStateRequested), or 409 when the node is locked.
    #[error(
        "The requested action \"{verb}\" can not be performed while the node is in state \
         \"{state}\". {}",
        valid_states_hint(*verb)
    )]
    NotAllowedInState { verb: Verb, state: ProvisionState },
}

impl VerbError {
    /// The text for the API's error body. For a refused state it starts with the sentence
    /// Ironic clients know ("The requested action … can not be performed on node … while it is
    /// in state …") and adds which states would have worked.
    pub fn message_for_node(&self, node_ident: &str) -> String {
        match self {
            Self::VersionTooOld { .. } => self.to_string(),
            Self::NotAllowedInState { verb, state } => format!(
                "The requested action \"{verb}\" can not be performed on node \"{node_ident}\" \
                 while it is in state \"{state}\". {}",
                valid_states_hint(*verb)
            ),
        }
    }
}

fn version_too_old_message(
    verb: Verb,
    state: ProvisionState,
    required: Microversion,
    requested: Microversion,
) -> String {
    if required == verb.min_version() {
        format!(
            "The requested action \"{verb}\" needs API version {required} or later; the \
             request used {requested}."
        )
    } else {
        format!(
            "The requested action \"{verb}\" on a node in state \"{state}\" needs API version \
             {required} or later; the request used {requested}."
        )
    }
}

fn valid_states_hint(verb: Verb) -> String {
    let states: Vec<&str> = verb.valid_from().map(ProvisionState::as_str).collect();
    format!("\"{verb}\" is accepted from: {}.", states.join(", "))
}

/// Checks that `verb` may be requested for a node in `state` by a client at `requested`, and
/// returns the state the node would move to.
///
/// The verb's own minimum version is checked first, whatever the state, so a client too old
/// for a verb always hears that rather than a state complaint. This answers for the state
/// machine only; node conditions such as maintenance or `protected` are the caller's checks.
/// For `abort` from `service wait`/`service hold` the returned state is the FSM's
/// `service failed`, although the conductor then moves the node on to `active`.
pub fn check_verb(
    verb: Verb,
    state: ProvisionState,
    requested: Microversion,
) -> Result<ProvisionState, VerbError> {
    let too_old = |required| VerbError::VersionTooOld {
        verb,
        state,
        required,
        requested,
    };
    if requested < verb.min_version() {
        return Err(too_old(verb.min_version()));
    }
    let edge = verb
        .edge_from(state)
        .ok_or(VerbError::NotAllowedInState { verb, state })?;
    let required = verb.min_version_for(edge);
    if requested < required {
        return Err(too_old(required));
    }
    Ok(edge.to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ProvisionState::*;

    #[test]
    fn verbs_round_trip_through_their_names() {
        for verb in Verb::ALL {
            assert_eq!(verb.as_str().parse::<Verb>(), Ok(verb));
            assert_eq!(serde_json::to_string(&verb).unwrap(), format!("\"{verb}\""));
        }
        let error = "fly".parse::<Verb>().unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("\"fly\" is not a provision action; use one of: active, deploy,")
        );
    }

    #[test]
    fn aliases_fire_the_same_event() {
        assert_eq!(Verb::Active.event(), Verb::Deploy.event());
        assert_eq!(Verb::Deleted.event(), Verb::Undeploy.event());
    }

    #[test]
    fn internal_edges_are_not_offered_to_the_api() {
        // cleaning -manage-> manageable exists, but only the conductor fires it.
        assert_eq!(
            check_verb(Verb::Manage, Cleaning, Microversion::new(115)),
            Err(VerbError::NotAllowedInState {
                verb: Verb::Manage,
                state: Cleaning
            })
        );
    }

    #[test]
    fn a_too_old_verb_is_reported_before_the_state() {
        assert_eq!(
            check_verb(Verb::Deploy, Active, Microversion::new(72)),
            Err(VerbError::VersionTooOld {
                verb: Verb::Deploy,
                state: Active,
                required: Microversion::new(73),
                requested: Microversion::new(72),
            })
        );
    }

    #[test]
    fn messages_tell_the_operator_what_would_work() {
        let error = check_verb(Verb::Provide, Active, Microversion::new(50)).unwrap_err();
        assert_eq!(
            error.message_for_node("node-7"),
            "The requested action \"provide\" can not be performed on node \"node-7\" while it \
             is in state \"active\". \"provide\" is accepted from: manageable."
        );
        let error = check_verb(Verb::Abort, InspectWait, Microversion::new(40)).unwrap_err();
        assert_eq!(
            error.message_for_node("node-7"),
            "The requested action \"abort\" on a node in state \"inspect wait\" needs API \
             version 1.41 or later; the request used 1.40."
        );
        let error = check_verb(Verb::Unhold, DeployHold, Microversion::new(84)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "The requested action \"unhold\" needs API version 1.85 or later; the request \
             used 1.84."
        );
    }
}
