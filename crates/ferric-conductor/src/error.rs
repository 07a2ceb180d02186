//! Why the conductor refused or could not do what it was asked; the API maps each variant to
//! Ironic's status code (§2.3).

use ferric_drivers::DriverError;
use ferric_model::ProvisionState;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum ConductorError {
    /// 409: another task holds the node.
    #[error(
        "Node {node} is locked by host {holder}, please retry after the current operation is \
         completed."
    )]
    NodeLocked { node: Uuid, holder: String },
    /// 503: every worker is busy.
    #[error(
        "Requested action cannot be performed due to lack of free conductor workers (all {workers} \
         are busy); retry later."
    )]
    NoFreeWorker { workers: usize },
    /// 400: the node's provision state has no way to do `action` (Ironic's
    /// InvalidStateRequested); a caller can wait for another state and ask again.
    #[error(
        "The requested action \"{action}\" can not be performed on node \"{node}\" while it is \
         in state \"{state}\"."
    )]
    InvalidTransition {
        node: Uuid,
        /// The event or API verb asked for (`deploy`, `abort`, …).
        action: String,
        state: ProvisionState,
    },
    /// 400: the request does not fit the node's state or settings.
    #[error("{0}")]
    Invalid(String),
    /// 403: the node refuses this on principle (protected, non-interruptible step).
    #[error("{0}")]
    Forbidden(String),
    /// 409: the node is in a state where this cannot happen now.
    #[error("{0}")]
    Conflict(String),
    /// 404: there is nothing of the kind to act on (no deployment running to abort).
    #[error("{0}")]
    NothingRunning(String),
    /// 404: no such node.
    #[error("Node {0} could not be found.")]
    NodeNotFound(String),
    /// 400 when the driver says the caller asked for something it cannot do; the driver's
    /// message otherwise.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// 500: the database failed.
    #[error("storage failure")]
    Storage(#[source] ferric_db::Error),
    /// 503: the conductor that owns the node did not answer, or no alive conductor serves it.
    #[error("{0}")]
    Unavailable(String),
    /// 500: another conductor failed internally while running a handed-over request (the
    /// details are in its log and here; the API shows a generic message).
    #[error("{0}")]
    Remote(String),
    /// At start-up: another live conductor holds this conductor name's liveness lock.
    #[error(
        "Conductor {hostname} already registered: another conductor with this name is alive \
         (its lock is held by {holder}). Give every conductor its own conductor_hostname \
         (FERRIC_CONDUCTOR_HOSTNAME), or stop the other one first."
    )]
    NameTaken { hostname: String, holder: String },
    /// 503: the conductor is shutting down and takes no new work.
    #[error("The conductor is shutting down; retry on another conductor or after it restarts.")]
    ShuttingDown,
}

impl From<ferric_db::Error> for ConductorError {
    fn from(error: ferric_db::Error) -> Self {
        match error {
            ferric_db::Error::NotFound {
                kind: ferric_db::Kind::Node,
                ident,
            } => Self::NodeNotFound(ident),
            ferric_db::Error::LeaseHeld { node, holder, .. } => Self::NodeLocked { node, holder },
            // 409: the node went on under another conductor; this one's write was refused.
            error @ ferric_db::Error::LeaseLost { .. } => Self::Conflict(error.to_string()),
            ferric_db::Error::ConductorLocked { hostname, holder } => {
                Self::NameTaken { hostname, holder }
            }
            other => Self::Storage(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_transition_keeps_ironics_words() {
        let error = ConductorError::InvalidTransition {
            node: Uuid::nil(),
            action: "deploy".to_owned(),
            state: ProvisionState::Active,
        };
        assert_eq!(
            error.to_string(),
            "The requested action \"deploy\" can not be performed on node \
             \"00000000-0000-0000-0000-000000000000\" while it is in state \"active\"."
        );
    }
}
