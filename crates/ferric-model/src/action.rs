//! The typed contract between the API and the conductor: every request the API makes of the
//! conductor that owns a node is one [`Action`], and every answer one [`ActionReply`]. In one
//! process they are passed as values; between processes (PostgreSQL) the action travels as
//! JSON in a `conductor_requests` row and the reply comes back the same way
//! (`ferric-conductor/src/requests/`).
//!
//! The wire format is versioned so that releases N and N+1 can run side by side during a
//! rolling upgrade (docs/operator-guide.md "Rolling upgrades"): a request is the action's JSON
//! object (`{"action": "set_power", "power": "power on", …}`) plus `"handoff_version": V`, the
//! hand-off version its sender spoke. Version 1 (the first release with the hand-off) sent
//! no version field and ignores it — so a version 1 conductor still reads every action it
//! knows from a newer sender. A sender pinned to an older version
//! ([`HandoffVersion::pinned`]) sends only what that version understands, and refuses the
//! rest with a clear error instead of sending it; a receiver refuses an action it does not
//! know (from a newer peer) with an error that says so, never drops it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Verb;
use crate::resources::{InterfaceKind, JsonObject};
use crate::values::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, PowerAction, StepCall,
    VmediaDevice, VmediaSlot,
};

/// The hand-off version this build speaks. Versions, oldest first:
///
/// 1. The first hand-off (Ferric 0.1.0 up to commit 7aea434): the action object alone.
/// 2. Adds `handoff_version` to each request, the `unsupported` reply error, the
///    `pin_handoff_version` setting, and the actions that let an API-only process leave
///    driver interfaces to the conductors: `vendor_methods`, `validate_raid_target`.
/// 3. Serial consoles: `set_console`, `console_info`.
/// 4. Indicators (API 1.63): `indicators`, `get_indicator`, `set_indicator`.
///
/// A new action, or a new field an older receiver would misread, bumps it; the action's
/// [`Action::since`] says which version introduced it.
pub const HANDOFF_VERSION: u32 = 4;

/// The oldest hand-off version this build can still talk to (and be pinned to).
pub const OLDEST_HANDOFF_VERSION: u32 = 1;

/// The field of a request that carries its sender's hand-off version.
pub const VERSION_FIELD: &str = "handoff_version";

/// One request of the API to the conductor that owns a node. Closed: a conductor runs exactly
/// these, and an API process sends nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// `PUT /v1/nodes/{node}/states/provision`.
    Provision {
        verb: Verb,
        #[serde(flatten)]
        args: ProvisionArgs,
    },
    /// `PUT /v1/nodes/{node}/states/power`.
    SetPower {
        power: PowerAction,
        /// How long a soft action may take, in milliseconds.
        timeout_ms: Option<u64>,
    },
    /// `PUT /v1/nodes/{node}/management/boot_device`.
    SetBootDevice {
        device: BootDevice,
        persistent: bool,
    },
    /// `GET /v1/nodes/{node}/management/boot_device`.
    GetBootDevice,
    /// `GET /v1/nodes/{node}/management/boot_device/supported`.
    SupportedBootDevices,
    /// `PUT /v1/nodes/{node}/states/boot_mode`.
    SetBootMode { mode: BootMode },
    /// `PUT /v1/nodes/{node}/states/secure_boot`.
    SetSecureBoot { enabled: bool },
    /// `PUT /v1/nodes/{node}/management/inject_nmi`.
    InjectNmi,
    /// `POST /v1/nodes/{node}/vmedia`.
    VmediaAttach { device: VmediaDevice, url: String },
    /// `DELETE /v1/nodes/{node}/vmedia`.
    VmediaDetach { devices: Vec<VmediaDevice> },
    /// `GET /v1/nodes/{node}/vmedia`.
    VmediaList,
    /// `/v1/nodes/{node}/vendor_passthru/{method}`.
    VendorPassthru {
        method: String,
        http_method: String,
        args: JsonObject,
    },
    /// `GET /v1/nodes/{node}/validate`.
    Validate,
    /// `POST /v1/continue/{node}` and the agent's callbacks that resume a node.
    ContinueNode,
    /// `POST /v1/heartbeat/{node}`.
    Heartbeat(Heartbeat),
    /// `GET /v1/lookup`: the agent's token, minted once.
    AgentLookupToken,
    /// `abort` of a running deployment.
    AbortDeployment,
    /// `POST /v1/continue_inspection`: inspection data for the node.
    ContinueInspection { payload: Value, mint_token: bool },
    /// `GET /v1/nodes/{node}/vendor_passthru/methods` (version 2).
    VendorMethods,
    /// `PUT /v1/nodes/{node}/states/raid`: the raid interface's check of a target
    /// configuration before the API stores it (version 2).
    ValidateRaidTarget { target: JsonObject },
    /// `PUT /v1/nodes/{node}/states/console` (version 3).
    SetConsole { enabled: bool },
    /// `GET /v1/nodes/{node}/states/console`: where the console is relayed (version 3).
    ConsoleInfo,
    /// `GET /v1/nodes/{node}/management/indicators` (version 4).
    Indicators,
    /// `GET /v1/nodes/{node}/management/indicators/{name}@{component}` (version 4).
    GetIndicator { component: String, name: String },
    /// `PUT /v1/nodes/{node}/management/indicators/{name}@{component}` (version 4).
    SetIndicator {
        component: String,
        name: String,
        state: IndicatorState,
    },
}

impl Action {
    /// `SetPower` with its timeout as a duration.
    pub fn set_power(power: PowerAction, timeout: Option<Duration>) -> Self {
        Self::SetPower {
            power,
            timeout_ms: timeout
                .map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// Its name on the wire (the `action` field).
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Provision { .. } => "provision",
            Self::SetPower { .. } => "set_power",
            Self::SetBootDevice { .. } => "set_boot_device",
            Self::GetBootDevice => "get_boot_device",
            Self::SupportedBootDevices => "supported_boot_devices",
            Self::SetBootMode { .. } => "set_boot_mode",
            Self::SetSecureBoot { .. } => "set_secure_boot",
            Self::InjectNmi => "inject_nmi",
            Self::VmediaAttach { .. } => "vmedia_attach",
            Self::VmediaDetach { .. } => "vmedia_detach",
            Self::VmediaList => "vmedia_list",
            Self::VendorPassthru { .. } => "vendor_passthru",
            Self::Validate => "validate",
            Self::ContinueNode => "continue_node",
            Self::Heartbeat(_) => "heartbeat",
            Self::AgentLookupToken => "agent_lookup_token",
            Self::AbortDeployment => "abort_deployment",
            Self::ContinueInspection { .. } => "continue_inspection",
            Self::VendorMethods => "vendor_methods",
            Self::ValidateRaidTarget { .. } => "validate_raid_target",
            Self::SetConsole { .. } => "set_console",
            Self::ConsoleInfo => "console_info",
            Self::Indicators => "indicators",
            Self::GetIndicator { .. } => "get_indicator",
            Self::SetIndicator { .. } => "set_indicator",
        }
    }

    /// The hand-off version that introduced this action: a sender pinned below it refuses to
    /// send it. Every action so far came with version 1; a new one starts at
    /// [`HANDOFF_VERSION`] (bumped for it).
    pub const fn since(&self) -> u32 {
        match self {
            Self::Provision { .. }
            | Self::SetPower { .. }
            | Self::SetBootDevice { .. }
            | Self::GetBootDevice
            | Self::SupportedBootDevices
            | Self::SetBootMode { .. }
            | Self::SetSecureBoot { .. }
            | Self::InjectNmi
            | Self::VmediaAttach { .. }
            | Self::VmediaDetach { .. }
            | Self::VmediaList
            | Self::VendorPassthru { .. }
            | Self::Validate
            | Self::ContinueNode
            | Self::Heartbeat(_)
            | Self::AgentLookupToken
            | Self::AbortDeployment
            | Self::ContinueInspection { .. } => 1,
            Self::VendorMethods | Self::ValidateRaidTarget { .. } => 2,
            Self::SetConsole { .. } | Self::ConsoleInfo => 3,
            Self::Indicators | Self::GetIndicator { .. } | Self::SetIndicator { .. } => 4,
        }
    }

    /// Whether the action needs only the node's record and the driver catalog — it touches
    /// no hardware and changes nothing — so a process pinned below its version may run it
    /// itself instead of refusing it.
    pub const fn runs_anywhere(&self) -> bool {
        matches!(self, Self::VendorMethods | Self::ValidateRaidTarget { .. })
    }
}

/// The body fields that come with a provision verb, already checked for shape by the API.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProvisionArgs {
    /// `configdrive` for `active`/`rebuild`: a URL, base64 text or (1.56) a JSON object.
    pub configdrive: Option<Value>,
    pub clean_steps: Option<Vec<StepCall>>,
    pub deploy_steps: Option<Vec<StepCall>>,
    pub service_steps: Option<Vec<StepCall>>,
    pub rescue_password: Option<String>,
    pub disable_ramdisk: Option<bool>,
}

/// What a heartbeat carries (`POST /v1/heartbeat/{node}`), checked for shape by the API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub callback_url: String,
    pub agent_token: String,
    pub agent_version: Option<String>,
    pub agent_verify_ca: Option<String>,
    pub agent_status: Option<String>,
    pub agent_status_message: Option<String>,
}

/// What a vendor method answered, as Ironic's conductor returns it: `return` (always null
/// for an asynchronous method), `async` and `attach`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorReply {
    #[serde(rename = "return")]
    pub value: Value,
    #[serde(rename = "async")]
    pub is_async: bool,
    pub attach: bool,
}

/// One interface's answer in `GET /v1/nodes/{node}/validate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationResult {
    pub result: bool,
    /// Why not, when `result` is false.
    pub reason: Option<String>,
}

/// Every interface's answer, by kind.
pub type NodeValidation = BTreeMap<InterfaceKind, ValidationResult>;

/// The conductor's answer to an [`Action`]: which variant depends on the action.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionReply {
    /// The action was accepted (its first transition is durable); nothing to return.
    Done,
    /// `GetBootDevice`.
    BootDevice(BootDeviceSetting),
    /// `SupportedBootDevices`.
    BootDevices(Vec<BootDevice>),
    /// `VmediaList`.
    Vmedia(Vec<VmediaSlot>),
    /// `VendorPassthru`.
    Vendor(VendorReply),
    /// `Validate`.
    Validation(NodeValidation),
    /// `AgentLookupToken` and `ContinueInspection`: a freshly minted token, or none.
    Token(Option<String>),
    /// `VendorMethods`: the listing, as the API shows it.
    Methods(Value),
    /// `ConsoleInfo`: `{"type", "url"}`, or null while the console is off.
    Console(Value),
    /// `Indicators`.
    Indicators(Vec<Indicator>),
    /// `GetIndicator`.
    IndicatorState(IndicatorState),
}

impl ActionReply {
    /// The reply's `value` on the wire, as hand-off version 1 wrote it.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Done | Self::Token(None) => Value::Null,
            Self::BootDevice(setting) => serde_json::json!({
                "device": setting.device.map(BootDevice::as_str),
                "persistent": setting.persistent,
            }),
            Self::BootDevices(devices) => devices.iter().map(|device| device.as_str()).collect(),
            Self::Vmedia(slots) => slots.iter().map(VmediaSlot::to_json).collect(),
            Self::Vendor(reply) => serde_json::json!({
                "return": reply.value,
                "async": reply.is_async,
                "attach": reply.attach,
            }),
            Self::Validation(answers) => Value::Object(
                answers
                    .iter()
                    .map(|(kind, answer)| {
                        (
                            kind.as_str().to_owned(),
                            serde_json::json!({"result": answer.result, "reason": answer.reason}),
                        )
                    })
                    .collect(),
            ),
            Self::Token(Some(token)) => Value::String(token.clone()),
            Self::Methods(listing) | Self::Console(listing) => listing.clone(),
            Self::Indicators(indicators) => serde_json::to_value(indicators).unwrap_or_default(),
            Self::IndicatorState(state) => Value::String(state.as_str().to_owned()),
        }
    }

    /// Reads the `value` a conductor answered `action` with.
    pub fn from_value(action: &Action, value: Value) -> Result<Self, String> {
        let unreadable = |error: serde_json::Error| format!("{} reply: {error}", action.name());
        Ok(match action {
            Action::GetBootDevice => {
                Self::BootDevice(serde_json::from_value(value).map_err(unreadable)?)
            }
            Action::SupportedBootDevices => {
                Self::BootDevices(serde_json::from_value(value).map_err(unreadable)?)
            }
            Action::VmediaList => Self::Vmedia(serde_json::from_value(value).map_err(unreadable)?),
            Action::VendorPassthru { .. } => {
                Self::Vendor(serde_json::from_value(value).map_err(unreadable)?)
            }
            Action::Validate => {
                let mut answers = NodeValidation::new();
                let object = value
                    .as_object()
                    .ok_or_else(|| format!("validate reply is not an object: {value}"))?;
                for (name, answer) in object {
                    let kind = InterfaceKind::from_name(name)
                        .ok_or_else(|| format!("validate reply names no interface: {name}"))?;
                    answers.insert(
                        kind,
                        serde_json::from_value(answer.clone()).map_err(unreadable)?,
                    );
                }
                Self::Validation(answers)
            }
            Action::AgentLookupToken | Action::ContinueInspection { .. } => {
                Self::Token(value.as_str().map(str::to_owned))
            }
            Action::VendorMethods => Self::Methods(value),
            Action::ConsoleInfo => Self::Console(value),
            Action::Indicators => {
                Self::Indicators(serde_json::from_value(value).map_err(unreadable)?)
            }
            Action::GetIndicator { .. } => {
                Self::IndicatorState(serde_json::from_value(value).map_err(unreadable)?)
            }
            Action::Provision { .. }
            | Action::SetPower { .. }
            | Action::SetBootDevice { .. }
            | Action::SetBootMode { .. }
            | Action::SetSecureBoot { .. }
            | Action::InjectNmi
            | Action::VmediaAttach { .. }
            | Action::VmediaDetach { .. }
            | Action::ContinueNode
            | Action::Heartbeat(_)
            | Action::AbortDeployment
            | Action::ValidateRaidTarget { .. }
            | Action::SetConsole { .. }
            | Action::SetIndicator { .. } => Self::Done,
        })
    }
}

/// How a process speaks the hand-off: the version it sends (its own, or the one it is pinned
/// to during a rolling upgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandoffVersion {
    sends: u32,
}

impl Default for HandoffVersion {
    fn default() -> Self {
        Self {
            sends: HANDOFF_VERSION,
        }
    }
}

/// Why a request could not be sent or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoffError {
    /// The sender is pinned below the version that introduced the action.
    #[error(
        "The {action} request needs hand-off version {since}, but this process is pinned to \
         version {pinned} (pin_handoff_version) while older processes may still run. Finish \
         the rolling upgrade, then remove the pin and restart, and retry."
    )]
    Pinned {
        action: &'static str,
        since: u32,
        pinned: u32,
    },
    /// The request comes from a newer peer and names an action or a field this build does
    /// not know.
    #[error(
        "This conductor speaks hand-off version {ours} and cannot run a request from a newer \
         process (version {theirs}): {detail}. Upgrade this conductor, or pin the newer \
         processes with pin_handoff_version = {ours} until every process runs the new \
         release."
    )]
    Unsupported {
        ours: u32,
        theirs: u32,
        detail: String,
    },
    /// The request is not a hand-off request at all (or a same-version peer sent nonsense).
    #[error("a request from an API process was malformed: {0}")]
    Malformed(String),
}

impl HandoffVersion {
    /// Pinned to `version` (the oldest release still running); `None` speaks this build's.
    pub fn pinned(version: Option<u32>) -> Result<Self, String> {
        match version {
            None => Ok(Self::default()),
            Some(version) if (OLDEST_HANDOFF_VERSION..=HANDOFF_VERSION).contains(&version) => {
                Ok(Self { sends: version })
            }
            Some(version) => Err(format!(
                "pin_handoff_version = {version} is not a hand-off version this Ferric speaks: \
                 it speaks {OLDEST_HANDOFF_VERSION} to {HANDOFF_VERSION}. Pin to the version of \
                 the oldest release still running (its server logs it at start as \
                 handoff_version), or remove the pin."
            )),
        }
    }

    /// The version this process sends.
    pub const fn sends(self) -> u32 {
        self.sends
    }

    /// Whether this process may send `action`: refused when pinned below its version.
    pub fn check(self, action: &Action) -> Result<(), HandoffError> {
        if action.since() > self.sends {
            return Err(HandoffError::Pinned {
                action: action.name(),
                since: action.since(),
                pinned: self.sends,
            });
        }
        Ok(())
    }

    /// The request body for `action`, as the version this process sends writes it.
    pub fn encode(self, action: &Action) -> Result<String, HandoffError> {
        self.check(action)?;
        let mut value = serde_json::to_value(action)
            .map_err(|error| HandoffError::Malformed(format!("cannot encode it: {error}")))?;
        // Version 1 sent no version; a version 1 receiver ignores it anyway, but what a
        // pinned process sends should be exactly what the old release sent.
        if self.sends > 1
            && let Value::Object(object) = &mut value
        {
            object.insert(VERSION_FIELD.to_owned(), self.sends.into());
        }
        Ok(value.to_string())
    }
}

/// Reads a request body: the sender's hand-off version and the action.
pub fn decode(body: &str) -> Result<(u32, Action), HandoffError> {
    let mut value: Value = serde_json::from_str(body)
        .map_err(|error| HandoffError::Malformed(format!("not JSON: {error}")))?;
    let theirs = match value
        .as_object_mut()
        .and_then(|object| object.remove(VERSION_FIELD))
    {
        None => 1,
        Some(version) => version
            .as_u64()
            .and_then(|version| u32::try_from(version).ok())
            .ok_or_else(|| HandoffError::Malformed(format!("{VERSION_FIELD} is {version}")))?,
    };
    let name = value
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("(none)")
        .to_owned();
    let received = value.clone();
    match serde_json::from_value::<Action>(value) {
        Ok(action) if theirs > HANDOFF_VERSION => {
            // A newer peer may have added a field this build would silently drop.
            let known = serde_json::to_value(&action).unwrap_or_default();
            let unknown: Vec<&String> = received
                .as_object()
                .into_iter()
                .flat_map(|object| object.keys())
                .filter(|key| known.get(key.as_str()).is_none())
                .collect();
            if unknown.is_empty() {
                Ok((theirs, action))
            } else {
                Err(HandoffError::Unsupported {
                    ours: HANDOFF_VERSION,
                    theirs,
                    detail: format!("action \"{name}\" with fields {unknown:?} it does not know"),
                })
            }
        }
        Ok(action) => Ok((theirs, action)),
        Err(error) if theirs > HANDOFF_VERSION => Err(HandoffError::Unsupported {
            ours: HANDOFF_VERSION,
            theirs,
            detail: format!("action \"{name}\": {error}"),
        }),
        Err(error) => Err(HandoffError::Malformed(format!(
            "action \"{name}\": {error}"
        ))),
    }
}

#[cfg(test)]
mod tests;
