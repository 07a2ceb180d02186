//! What a driver call can fail with, in the words the API and `last_error` show.

use ferric_model::resources::InterfaceKind;

use crate::step_kind::StepKind;

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
    #[error("{message}")]
    InvalidParameter {
        /// The setting, named where it lives (see [`DriverError::parameter`]).
        parameter: Option<String>,
        /// What the operator reads: what is wrong and what to set instead.
        message: String,
    },
    /// A setting the driver needs is absent.
    #[error("{message}")]
    MissingParameter {
        /// The setting, named where it lives (see [`DriverError::parameter`]).
        parameter: Option<String>,
        /// What the operator reads: what is missing and where to set it.
        message: String,
    },
    /// The hardware, BMC or agent did not do what was asked.
    #[error("{message}")]
    Failed {
        /// Which part failed; `None` when relayed as text from another conductor.
        component: Option<Component>,
        /// What the operator reads (it becomes `last_error`).
        message: String,
    },
    /// The agent's hardware managers changed since its steps were read (IPA's
    /// `CLEAN_VERSION_MISMATCH`): the conductor reads them again and restarts the flow.
    #[error(
        "The agent's hardware managers changed since its {} steps were read (it refused {step} \
         with the versions {versions}): {detail}",
        .kind.as_str()
    )]
    AgentVersionMismatch {
        /// Which list of steps the agent's versions were read for.
        kind: StepKind,
        /// The step the agent refused.
        step: String,
        /// The hardware manager versions Ferric sent, as JSON.
        versions: String,
        /// The agent's own words.
        detail: String,
    },
}

/// The part of the system a [`DriverError::Failed`] happened in, so a caller can count BMC
/// faults apart from agent faults without reading the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Component {
    /// The BMC (Redfish or IPMI), or the fake driver standing in for one.
    Bmc,
    /// The agent ramdisk running on the node.
    Agent,
    /// This conductor: its files, tools, database or settings.
    Conductor,
    /// The separate inspection service (ironic-inspector's API).
    InspectionService,
    /// Glance, or Keystone when Ferric looks Glance up.
    Glance,
    /// A network switch the `ironic-networking` interface drives.
    Switch,
}

impl Component {
    /// A short lowercase name, for metrics labels and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Bmc => "bmc",
            Self::Agent => "agent",
            Self::Conductor => "conductor",
            Self::InspectionService => "inspection_service",
            Self::Glance => "glance",
            Self::Switch => "switch",
        }
    }
}

impl DriverError {
    /// This error with the boot interface `interface` named first, so a refusal says which
    /// interface is unhappy.
    #[must_use]
    pub fn for_boot_interface(self, interface: &str) -> Self {
        let name = |message: String| format!("Boot interface {interface}: {message}");
        match self {
            Self::InvalidParameter { parameter, message } => Self::InvalidParameter {
                parameter,
                message: name(message),
            },
            Self::MissingParameter { parameter, message } => Self::MissingParameter {
                parameter,
                message: name(message),
            },
            Self::Failed { component, message } => Self::Failed {
                component,
                message: name(message),
            },
            other @ (Self::Unsupported { .. } | Self::AgentVersionMismatch { .. }) => other,
        }
    }

    /// A [`DriverError::Failed`] in `component`, shown as `message`.
    pub fn failed(component: Component, message: impl Into<String>) -> Self {
        Self::Failed {
            component: Some(component),
            message: message.into(),
        }
    }

    /// The part that failed, for a [`DriverError::Failed`] raised in this process.
    pub const fn component(&self) -> Option<Component> {
        match self {
            Self::Failed { component, .. } => *component,
            _ => None,
        }
    }

    /// A [`DriverError::InvalidParameter`] for `parameter`, shown as `message`.
    pub fn invalid(parameter: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidParameter {
            parameter: Some(parameter.into()),
            message: message.into(),
        }
    }

    /// A [`DriverError::MissingParameter`] for `parameter`, shown as `message`.
    pub fn missing(parameter: impl Into<String>, message: impl Into<String>) -> Self {
        Self::MissingParameter {
            parameter: Some(parameter.into()),
            message: message.into(),
        }
    }

    /// The setting a parameter error is about, named where it lives: `driver_info.<key>`,
    /// `instance_info.<key>`, `properties.<key>`, `settings.<key>` (Ferric's own settings),
    /// `argument.<name>` (a step's or method's argument) or `node.<field>`. `None` for other
    /// errors, and for a parameter error relayed as text from another conductor.
    pub fn parameter(&self) -> Option<&str> {
        match self {
            Self::InvalidParameter { parameter, .. } | Self::MissingParameter { parameter, .. } => {
                parameter.as_deref()
            }
            Self::Unsupported { .. } | Self::Failed { .. } | Self::AgentVersionMismatch { .. } => {
                None
            }
        }
    }

    /// Whether the caller could fix this by changing the request or the node's settings
    /// (HTTP 400), rather than the operation failing on the way.
    pub const fn is_caller_error(&self) -> bool {
        !matches!(
            self,
            Self::Failed { .. } | Self::AgentVersionMismatch { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_errors_show_their_message_and_name_their_parameter() {
        let error = DriverError::missing("settings.api_url", "Set api_url in Ferric's settings.");
        assert_eq!(error.to_string(), "Set api_url in Ferric's settings.");
        assert_eq!(error.parameter(), Some("settings.api_url"));
        assert!(error.is_caller_error());

        let error =
            DriverError::invalid("driver_info.ipmi_port", "driver_info ipmi_port 0 is bad.");
        assert_eq!(error.to_string(), "driver_info ipmi_port 0 is bad.");
        assert_eq!(error.parameter(), Some("driver_info.ipmi_port"));

        let error = DriverError::failed(Component::Bmc, "The BMC said no.");
        assert_eq!(error.to_string(), "The BMC said no.");
        assert_eq!(error.component(), Some(Component::Bmc));
        assert_eq!(error.parameter(), None);
        assert!(!error.is_caller_error());
    }

    #[test]
    fn a_version_mismatch_renders_the_agents_words() {
        let error = DriverError::AgentVersionMismatch {
            kind: StepKind::Clean,
            step: "erase_devices".to_owned(),
            versions: r#"{"generic":"1.1"}"#.to_owned(),
            detail: "boom".to_owned(),
        };
        assert_eq!(
            error.to_string(),
            r#"The agent's hardware managers changed since its clean steps were read (it refused erase_devices with the versions {"generic":"1.1"}): boom"#
        );
        assert!(!error.is_caller_error());
    }
}
