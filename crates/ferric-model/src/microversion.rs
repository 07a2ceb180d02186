//! API microversions: parsing, comparison, and how states are shown to older clients.
//!
//! Every request to the Bare Metal API carries (or defaults) a microversion `1.N`. Features,
//! verbs and even state names appear at a given version; a client that asks for an older
//! version must keep seeing the API as it was then (`reference/ironic.md` §1.4, §2.2). This
//! module holds the parsing of the two request headers and the rules that depend only on the
//! version; the HTTP layer decides the status codes and response headers.

use std::fmt;

/// An API microversion. The major part is always 1, so only the minor number is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion {
    minor: u16,
}

impl Microversion {
    /// The oldest version the API serves, and the one used when a request names none.
    pub const MIN: Self = Self::new(1);

    /// Version `1.minor`.
    pub const fn new(minor: u16) -> Self {
        Self { minor }
    }

    /// Always 1: the Bare Metal API never had a version 2.
    pub const fn major(self) -> u16 {
        1
    }

    pub const fn minor(self) -> u16 {
        self.minor
    }
}

impl fmt::Display for Microversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major(), self.minor)
    }
}

/// The versions at which the state machine changed (`reference/ironic.md` §1.4), and the
/// newest ones (1.111-1.115). Code that gates behaviour on the requested version names the
/// feature through these constants instead of repeating numbers.
pub mod gate {
    use super::Microversion;

    /// `available` is shown by name; below this it is JSON `null` (the old NOSTATE).
    pub const AVAILABLE_STATE: Microversion = Microversion::new(2);
    /// The `manageable` state and the `manage` / `provide` verbs.
    pub const MANAGE_AND_PROVIDE: Microversion = Microversion::new(4);
    /// `inspecting` / `inspect failed` and the `inspect` verb.
    pub const INSPECT: Microversion = Microversion::new(6);
    /// New nodes start in `enroll` instead of `available`.
    pub const ENROLL_INITIAL_STATE: Microversion = Microversion::new(11);
    /// The `abort` verb (first from `clean wait`).
    pub const ABORT: Microversion = Microversion::new(13);
    /// Manual cleaning: the `clean` verb.
    pub const MANUAL_CLEAN: Microversion = Microversion::new(15);
    /// The `adopt` verb.
    pub const ADOPT: Microversion = Microversion::new(17);
    /// The rescue states and the `rescue` / `unrescue` verbs.
    pub const RESCUE: Microversion = Microversion::new(38);
    /// `inspect wait` is shown by name; older clients see `inspecting`.
    pub const INSPECT_WAIT_STATE: Microversion = Microversion::new(39);
    /// `abort` from `inspect wait`.
    pub const ABORT_INSPECT_WAIT: Microversion = Microversion::new(41);
    /// `deploy` and `undeploy` as aliases of `active` and `deleted`.
    pub const DEPLOY_UNDEPLOY_ALIASES: Microversion = Microversion::new(73);
    /// The `unhold` verb for `clean hold` / `deploy hold`.
    pub const UNHOLD: Microversion = Microversion::new(85);
    /// Servicing: the `service` verb and the service states.
    pub const SERVICE: Microversion = Microversion::new(87);
    /// `abort` from `wait call-back`.
    pub const ABORT_WAIT_CALL_BACK: Microversion = Microversion::new(110);
    /// Port `available_for_dynamic_portgroup` and portgroup `dynamic_portgroup`.
    pub const DYNAMIC_PORTGROUP: Microversion = Microversion::new(111);
    /// Runbook `traits` (and `/v1/runbooks/{runbook}/traits`), `description`, any logical
    /// name; a node runs a runbook when it has one of its traits.
    pub const RUNBOOK_TRAITS: Microversion = Microversion::new(112);
    /// Node history `project` (detail).
    pub const NODE_HISTORY_PROJECT: Microversion = Microversion::new(113);
    /// Firmware component `vendor`, `model`, `serial_number`.
    pub const FIRMWARE_IDENTITY: Microversion = Microversion::new(114);
    /// Node history `state`, `target_provision_state`, `duration_seconds` (detail).
    pub const NODE_HISTORY_FIELDS: Microversion = Microversion::new(115);
}

/// The legacy request header every client sends, also echoed in every response.
pub const IRONIC_API_VERSION_HEADER: &str = "X-OpenStack-Ironic-API-Version";
/// The standard OpenStack request header, whose value names the service:
/// `OpenStack-API-Version: baremetal 1.N`.
pub const OPENSTACK_API_VERSION_HEADER: &str = "OpenStack-API-Version";
/// The service type this API answers to in [`OPENSTACK_API_VERSION_HEADER`].
pub const SERVICE_TYPE: &str = "baremetal";

/// A version as a client asked for it, before it is checked against what the server supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestedVersion {
    /// `latest`: whatever the server's maximum is.
    Latest,
    /// `major.minor` as written. Kept wide so an absurd request is reported as out of range
    /// (what the client needs to hear) rather than as unparsable.
    Exact { major: u64, minor: u64 },
}

/// Why a version header was refused. Every variant becomes HTTP 406; the `Display` text is the
/// message Ironic clients expect (`reference/ironic.md` §2.2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionHeaderError {
    /// Not `1.N`, `latest`, or (for the standard header) `baremetal <version>`.
    #[error("Invalid value for {IRONIC_API_VERSION_HEADER} header")]
    Malformed { value: String },
    /// A major version other than 1.
    #[error(
        "Mutually exclusive versions requested. Version {major}.{minor} requested but not \
         supported by this service. The supported version range is: [{min}, {max}].",
        min = Microversion::MIN
    )]
    UnsupportedMajor {
        major: u64,
        minor: u64,
        max: Microversion,
    },
    /// Major 1, but the minor number is below 1 or above the server's maximum.
    #[error(
        "Version 1.{minor} was requested but the minor version is not supported by this \
         service. The supported version range is: [{min}, {max}].",
        min = Microversion::MIN
    )]
    MinorOutOfRange { minor: u64, max: Microversion },
}

impl RequestedVersion {
    /// Parses a version as it appears in `X-OpenStack-Ironic-API-Version`: `1.N` or `latest`
    /// (any case), surrounding whitespace ignored.
    pub fn parse(value: &str) -> Result<Self, VersionHeaderError> {
        let malformed = || VersionHeaderError::Malformed {
            value: value.to_owned(),
        };
        let trimmed = value.trim();
        if trimmed.eq_ignore_ascii_case("latest") {
            return Ok(Self::Latest);
        }
        let (major, minor) = trimmed.split_once('.').ok_or_else(malformed)?;
        let major = parse_decimal(major).ok_or_else(malformed)?;
        let minor = parse_decimal(minor).ok_or_else(malformed)?;
        Ok(Self::Exact { major, minor })
    }

    /// Parses the value of `OpenStack-API-Version`, a comma-separated list of
    /// `<service type> <version>` entries. Returns `None` when no entry is for `baremetal`, so
    /// the caller falls back to the legacy header; entries for other services are ignored.
    pub fn parse_openstack_api_version(value: &str) -> Result<Option<Self>, VersionHeaderError> {
        for entry in value.split(',') {
            let mut words = entry.split_whitespace();
            let Some(service) = words.next() else {
                continue;
            };
            if !service.eq_ignore_ascii_case(SERVICE_TYPE) {
                continue;
            }
            return match (words.next(), words.next()) {
                (Some(version), None) => Self::parse(version).map(Some),
                _ => Err(VersionHeaderError::Malformed {
                    value: value.to_owned(),
                }),
            };
        }
        Ok(None)
    }

    /// Checks the request against the range `[1.1, max]` this server supports.
    pub fn resolve(self, max: Microversion) -> Result<Microversion, VersionHeaderError> {
        match self {
            Self::Latest => Ok(max),
            Self::Exact { major, minor } if major != 1 => {
                Err(VersionHeaderError::UnsupportedMajor { major, minor, max })
            }
            Self::Exact { minor, .. } => u16::try_from(minor)
                .ok()
                .map(Microversion::new)
                .filter(|version| (Microversion::MIN..=max).contains(version))
                .ok_or(VersionHeaderError::MinorOutOfRange { minor, max }),
        }
    }
}

/// A run of ASCII digits as a number; `None` for anything else. Saturates instead of failing
/// on overflow, because an enormous number is still a well-formed (and unsupported) version.
fn parse_decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

/// The version a request runs at, from the values of its two version headers (`None` when a
/// header is absent). The standard header wins when it has a `baremetal` entry; with neither
/// header the request runs at [`Microversion::MIN`], not at the latest version.
pub fn negotiate(
    openstack_api_version: Option<&str>,
    ironic_api_version: Option<&str>,
    max: Microversion,
) -> Result<Microversion, VersionHeaderError> {
    let from_standard = match openstack_api_version {
        Some(value) => RequestedVersion::parse_openstack_api_version(value)?,
        None => None,
    };
    let requested = match (from_standard, ironic_api_version) {
        (Some(requested), _) => requested,
        (None, Some(value)) => RequestedVersion::parse(value)?,
        (None, None) => return Ok(Microversion::MIN),
    };
    requested.resolve(max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ProvisionState, initial_provision_state, visible_provision_state};

    const MAX: Microversion = Microversion::new(115);

    #[test]
    fn displays_and_orders_by_minor_number() {
        assert_eq!(Microversion::new(110).to_string(), "1.110");
        assert_eq!(Microversion::MIN.to_string(), "1.1");
        assert!(Microversion::new(9) < Microversion::new(10));
        assert!(gate::ABORT_INSPECT_WAIT < gate::ABORT_WAIT_CALL_BACK);
    }

    #[test]
    fn parses_the_legacy_header() {
        assert_eq!(
            RequestedVersion::parse("1.41").unwrap().resolve(MAX),
            Ok(Microversion::new(41))
        );
        assert_eq!(
            RequestedVersion::parse(" 1.05 ").unwrap().resolve(MAX),
            Ok(Microversion::new(5))
        );
        assert_eq!(
            RequestedVersion::parse("LATEST").unwrap().resolve(MAX),
            Ok(MAX)
        );
        for bad in [
            "",
            "1",
            "1.",
            ".5",
            "1.2.3",
            "v1.2",
            "1.x",
            "-1.2",
            "1.+2",
            "latest please",
        ] {
            assert_eq!(
                RequestedVersion::parse(bad),
                Err(VersionHeaderError::Malformed {
                    value: bad.to_owned()
                }),
                "{bad:?} should be malformed"
            );
        }
    }

    #[test]
    fn rejects_versions_outside_the_supported_range() {
        let resolve = |value: &str| RequestedVersion::parse(value).unwrap().resolve(MAX);
        assert_eq!(
            resolve("2.0"),
            Err(VersionHeaderError::UnsupportedMajor {
                major: 2,
                minor: 0,
                max: MAX
            })
        );
        assert_eq!(
            resolve("1.0"),
            Err(VersionHeaderError::MinorOutOfRange { minor: 0, max: MAX })
        );
        assert_eq!(
            resolve("1.116"),
            Err(VersionHeaderError::MinorOutOfRange {
                minor: 116,
                max: MAX
            })
        );
        assert_eq!(
            resolve("1.99999999999999999999999"),
            Err(VersionHeaderError::MinorOutOfRange {
                minor: u64::MAX,
                max: MAX
            })
        );
        assert_eq!(resolve("1.115"), Ok(MAX));
    }

    #[test]
    fn error_messages_match_what_clients_expect() {
        assert_eq!(
            VersionHeaderError::Malformed { value: "x".into() }.to_string(),
            "Invalid value for X-OpenStack-Ironic-API-Version header"
        );
        assert_eq!(
            VersionHeaderError::MinorOutOfRange {
                minor: 200,
                max: MAX
            }
            .to_string(),
            "Version 1.200 was requested but the minor version is not supported by this service. \
             The supported version range is: [1.1, 1.115]."
        );
        assert_eq!(
            VersionHeaderError::UnsupportedMajor {
                major: 2,
                minor: 1,
                max: MAX
            }
            .to_string(),
            "Mutually exclusive versions requested. Version 2.1 requested but not supported by \
             this service. The supported version range is: [1.1, 1.115]."
        );
    }

    #[test]
    fn parses_the_standard_header() {
        let parse = RequestedVersion::parse_openstack_api_version;
        assert_eq!(
            parse("baremetal 1.50"),
            Ok(Some(RequestedVersion::Exact {
                major: 1,
                minor: 50
            }))
        );
        assert_eq!(
            parse("compute 2.1, BareMetal latest"),
            Ok(Some(RequestedVersion::Latest))
        );
        assert_eq!(parse("compute 2.1"), Ok(None));
        assert!(matches!(
            parse("baremetal"),
            Err(VersionHeaderError::Malformed { .. })
        ));
        assert!(matches!(
            parse("baremetal 1.2 1.3"),
            Err(VersionHeaderError::Malformed { .. })
        ));
        assert!(matches!(
            parse("baremetal one"),
            Err(VersionHeaderError::Malformed { .. })
        ));
    }

    #[test]
    fn negotiation_prefers_the_standard_header_and_defaults_to_the_minimum() {
        assert_eq!(negotiate(None, None, MAX), Ok(Microversion::MIN));
        assert_eq!(
            negotiate(None, Some("1.38"), MAX),
            Ok(Microversion::new(38))
        );
        assert_eq!(
            negotiate(Some("baremetal 1.60"), Some("1.38"), MAX),
            Ok(Microversion::new(60))
        );
        assert_eq!(
            negotiate(Some("compute 2.1"), Some("1.38"), MAX),
            Ok(Microversion::new(38))
        );
        assert_eq!(
            negotiate(Some("compute 2.1"), None, MAX),
            Ok(Microversion::MIN)
        );
        assert!(negotiate(Some("baremetal 1.200"), Some("1.38"), MAX).is_err());
    }

    #[test]
    fn older_clients_see_the_states_they_knew() {
        let v = Microversion::new;
        assert_eq!(
            visible_provision_state(ProvisionState::Available, v(1)),
            None
        );
        assert_eq!(
            visible_provision_state(ProvisionState::Available, v(2)),
            Some(ProvisionState::Available)
        );
        assert_eq!(
            visible_provision_state(ProvisionState::InspectWait, v(38)),
            Some(ProvisionState::Inspecting)
        );
        assert_eq!(
            visible_provision_state(ProvisionState::InspectWait, v(39)),
            Some(ProvisionState::InspectWait)
        );
        assert_eq!(
            visible_provision_state(ProvisionState::Active, v(1)),
            Some(ProvisionState::Active)
        );
    }

    #[test]
    fn new_nodes_start_in_enroll_from_1_11() {
        assert_eq!(
            initial_provision_state(Microversion::new(10)),
            ProvisionState::Available
        );
        assert_eq!(
            initial_provision_state(Microversion::new(11)),
            ProvisionState::Enroll
        );
        assert_eq!(
            initial_provision_state(Microversion::new(115)),
            ProvisionState::Enroll
        );
    }
}
