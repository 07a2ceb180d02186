//! A conductor's answer as it travels back in a `conductor_requests` row: the value of the
//! [`ActionReply`](ferric_model::action::ActionReply), or the error with what the API needs to
//! answer the same status and words. The format is hand-off version 1's; version 2 added the
//! `unsupported` error kind, sent only to requesters of version 2 or later.

use ferric_drivers::DriverError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::ConductorError;

/// What an older conductor answers a request it cannot parse with (hand-off version 1).
const CANNOT_READ: &str = "cannot read the request";

/// A conductor's answer, as it travels back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(super) enum Reply {
    Done { value: Value },
    Failed { error: WireError },
}

/// [`ConductorError`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum WireError {
    NodeLocked {
        node: Uuid,
        holder: String,
    },
    NoFreeWorker {
        workers: usize,
    },
    Invalid {
        message: String,
    },
    Forbidden {
        message: String,
    },
    Conflict {
        message: String,
    },
    NothingRunning {
        message: String,
    },
    NodeNotFound {
        ident: String,
    },
    DriverCaller {
        message: String,
    },
    DriverFailed {
        message: String,
    },
    Internal {
        message: String,
    },
    ShuttingDown,
    Unavailable {
        message: String,
    },
    /// Hand-off version 2: the request came from a newer process and names an action or a
    /// field this conductor does not know.
    Unsupported {
        message: String,
    },
}

impl WireError {
    /// A request this conductor could not read.
    pub(super) fn unreadable(message: impl std::fmt::Display) -> Self {
        Self::Internal {
            message: format!("{CANNOT_READ}: {message}"),
        }
    }
}

impl From<&ConductorError> for WireError {
    fn from(error: &ConductorError) -> Self {
        match error {
            ConductorError::NodeLocked { node, holder } => Self::NodeLocked {
                node: *node,
                holder: holder.clone(),
            },
            ConductorError::NoFreeWorker { workers } => Self::NoFreeWorker { workers: *workers },
            // The fields stay behind; the other side shows the same words.
            ConductorError::InvalidTransition { .. } => Self::Invalid {
                message: error.to_string(),
            },
            ConductorError::Invalid(message) => Self::Invalid {
                message: message.clone(),
            },
            ConductorError::Forbidden(message) => Self::Forbidden {
                message: message.clone(),
            },
            ConductorError::Conflict(message) => Self::Conflict {
                message: message.clone(),
            },
            ConductorError::NothingRunning(message) => Self::NothingRunning {
                message: message.clone(),
            },
            ConductorError::NodeNotFound(ident) => Self::NodeNotFound {
                ident: ident.clone(),
            },
            ConductorError::Driver(error) if error.is_caller_error() => Self::DriverCaller {
                message: error.to_string(),
            },
            ConductorError::Driver(error) => Self::DriverFailed {
                message: error.to_string(),
            },
            ConductorError::ShuttingDown => Self::ShuttingDown,
            ConductorError::Unavailable(message) => Self::Unavailable {
                message: message.clone(),
            },
            // The details stay in the conductor's log; the API answers a generic 500.
            ConductorError::Storage(_)
            | ConductorError::Remote(_)
            | ConductorError::NameTaken { .. } => Self::Internal {
                message: format!("{error:#}"),
            },
        }
    }
}

impl WireError {
    /// The error as the API process sees it; `conductor` answered it.
    pub(super) fn into_error(self, conductor: &str) -> ConductorError {
        match self {
            Self::NodeLocked { node, holder } => ConductorError::NodeLocked { node, holder },
            Self::NoFreeWorker { workers } => ConductorError::NoFreeWorker { workers },
            Self::Invalid { message } => ConductorError::Invalid(message),
            Self::Forbidden { message } => ConductorError::Forbidden(message),
            Self::Conflict { message } => ConductorError::Conflict(message),
            Self::NothingRunning { message } => ConductorError::NothingRunning(message),
            Self::NodeNotFound { ident } => ConductorError::NodeNotFound(ident),
            Self::DriverCaller { message } => {
                // Only the text crosses the wire; which setting it was about stays behind.
                ConductorError::Driver(DriverError::InvalidParameter {
                    parameter: None,
                    message,
                })
            }
            Self::DriverFailed { message } => ConductorError::Driver(DriverError::Failed {
                component: None,
                message,
            }),
            // An older conductor (hand-off version 1) answers this to an action or field it
            // does not know: a rolling upgrade is under way and this process is not pinned.
            Self::Internal { message } if message.starts_with(CANNOT_READ) => {
                ConductorError::Unavailable(format!(
                    "Conductor {conductor}, which owns the node, could not read the request; it \
                     probably runs an older Ferric release. Nothing was done. Pin this process \
                     to the oldest running release's hand-off version (pin_handoff_version) \
                     until every process is upgraded, or upgrade {conductor}. ({message})"
                ))
            }
            Self::Internal { message } => {
                ConductorError::Remote(format!("conductor {conductor}: {message}"))
            }
            Self::ShuttingDown => ConductorError::ShuttingDown,
            Self::Unavailable { message } => ConductorError::Unavailable(message),
            Self::Unsupported { message } => {
                ConductorError::Unavailable(format!("Conductor {conductor}: {message}"))
            }
        }
    }
}
