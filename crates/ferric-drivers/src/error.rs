//! What a driver call can fail with, in the words the API and `last_error` show.

use ferric_model::resources::InterfaceKind;

/// A driver failure. The variant decides how it reaches the operator: the first three are the
/// caller's business (HTTP 400 when they happen before a request is accepted), [`Failed`]
/// happens while work runs and ends in a `* failed` state with `last_error`.
///
/// [`Failed`]: DriverError::Failed
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// Ironic's UnsupportedDriverExtension: the node's interface of this kind is a no-op or
    /// lacks the operation.
    #[error("Driver {driver} does not support {kind} (disabled or not implemented).")]
    Unsupported { driver: String, kind: InterfaceKind },
    /// A setting (usually in `driver_info`) has a value the driver cannot use.
    #[error("{0}")]
    InvalidParameter(String),
    /// A setting the driver needs is absent.
    #[error("{0}")]
    MissingParameter(String),
    /// The hardware, BMC or agent did not do what was asked.
    #[error("{0}")]
    Failed(String),
    /// The agent's hardware managers changed since its steps were read (IPA's
    /// `CLEAN_VERSION_MISMATCH`): the conductor reads them again and restarts the flow.
    #[error("{0}")]
    AgentVersionMismatch(String),
}

impl DriverError {
    /// Whether the caller could fix this by changing the request or the node's settings
    /// (HTTP 400), rather than the operation failing on the way.
    pub const fn is_caller_error(&self) -> bool {
        !matches!(self, Self::Failed(_) | Self::AgentVersionMismatch(_))
    }
}
