//! The `redfish` hardware type's `driver_info` (`reference/ironic.md` §7): parsed and checked
//! without touching the BMC, so `validate` and every call see the same rules.

use std::path::PathBuf;

use ferric_model::resources::{JsonObject, Node};
use reqwest::Url;
use serde_json::Value;

use crate::DriverError;

/// The keys this type understands, with what each means (`GET /v1/drivers/redfish/properties`).
pub(crate) const PROPERTIES: &[(&str, &str)] = &[
    (
        "redfish_address",
        "The URL address to the Redfish controller. It must include the authority portion of \
         the URL, and can optionally include the scheme. If the scheme is missing, https is \
         assumed. Required.",
    ),
    (
        "redfish_system_id",
        "The canonical path to the ComputerSystem resource that the driver will interact with. \
         It should include the root service, version and the unique resource path to the \
         ComputerSystem (e.g. /redfish/v1/Systems/1). Required when the BMC has several \
         systems; optional otherwise.",
    ),
    (
        "redfish_username",
        "User account with admin/server-profile access privilege. Optional.",
    ),
    ("redfish_password", "User account password. Optional."),
    (
        "redfish_verify_ca",
        "Either a Boolean value, a path to a CA_BUNDLE file or directory with certificates of \
         trusted CAs. If set to True the driver will verify the host certificates; if False \
         the driver will ignore verifying the SSL certificate. Optional; default True.",
    ),
    (
        "redfish_auth_type",
        "Redfish HTTP client authentication method: \"basic\", \"session\" or \"auto\" \
         (session when the BMC offers it, else basic). Optional; default \"auto\".",
    ),
    (
        "deploy_iso",
        "URL of the deployment ISO to use (boot interface redfish-virtual-media), booted as \
         given instead of one built from deploy_kernel and deploy_ramdisk. Optional.",
    ),
    (
        "rescue_iso",
        "URL of the rescue ISO to use (boot interface redfish-virtual-media), booted as given \
         instead of one built from rescue_kernel and rescue_ramdisk. Optional.",
    ),
];

/// How the BMC's TLS certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum VerifyCa {
    /// Against the system's CA store.
    System,
    /// Not at all.
    No,
    /// Against the CA certificate(s) in this PEM file.
    Bundle(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthType {
    Basic,
    Session,
    Auto,
}

/// A node's Redfish settings. `Debug` leaves the password out: these reach logs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RedfishInfo {
    /// Scheme and authority only, e.g. `https://10.0.0.5:8443`; this names the BMC.
    pub(crate) address: String,
    /// The ComputerSystem's path, when set.
    pub(crate) system_id: Option<String>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) verify_ca: VerifyCa,
    pub(crate) auth_type: AuthType,
}

impl std::fmt::Debug for RedfishInfo {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RedfishInfo")
            .field("address", &self.address)
            .field("system_id", &self.system_id)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "******"))
            .field("verify_ca", &self.verify_ca)
            .field("auth_type", &self.auth_type)
            .finish()
    }
}

fn text<'a>(info: &'a JsonObject, key: &str) -> Result<Option<&'a str>, DriverError> {
    match info.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) if value.trim().is_empty() => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.trim())),
        Some(other) => Err(DriverError::invalid(
            format!("driver_info.{key}"),
            format!("driver_info {key} must be a string, not {other}."),
        )),
    }
}

impl RedfishInfo {
    pub(crate) fn parse(node: &Node) -> Result<Self, DriverError> {
        let info = &node.driver_info;
        let raw_address = text(info, "redfish_address")?.ok_or_else(|| {
            DriverError::missing(
                "driver_info.redfish_address",
                "The following required driver_info parameter is missing for the redfish \
                 hardware type: redfish_address (e.g. https://10.0.0.5)."
                    .to_owned(),
            )
        })?;
        let address = parse_address(raw_address)?;
        let system_id = text(info, "redfish_system_id")?.map(|id| {
            if id.starts_with('/') {
                id.trim_end_matches('/').to_owned()
            } else {
                format!("/redfish/v1/Systems/{id}")
            }
        });
        let verify_ca = match info.get("redfish_verify_ca") {
            None | Some(Value::Null) => VerifyCa::System,
            Some(Value::Bool(true)) => VerifyCa::System,
            Some(Value::Bool(false)) => VerifyCa::No,
            Some(Value::String(value)) => match value.trim().to_ascii_lowercase().as_str() {
                "" | "true" | "yes" | "on" | "1" => VerifyCa::System,
                "false" | "no" | "off" | "0" => VerifyCa::No,
                _ => {
                    let path = PathBuf::from(value.trim());
                    if !path.exists() {
                        return Err(DriverError::invalid(
                            "driver_info.redfish_verify_ca",
                            format!(
                                "driver_info redfish_verify_ca is neither a Boolean nor an existing \
                             file: {value:?}."
                            ),
                        ));
                    }
                    VerifyCa::Bundle(path)
                }
            },
            Some(other) => {
                return Err(DriverError::invalid(
                    "driver_info.redfish_verify_ca",
                    format!(
                        "driver_info redfish_verify_ca must be a Boolean or a path to a CA bundle, \
                     not {other}."
                    ),
                ));
            }
        };
        let auth_type = match text(info, "redfish_auth_type")?.map(str::to_ascii_lowercase) {
            None => AuthType::Auto,
            Some(value) => match value.as_str() {
                "basic" => AuthType::Basic,
                "session" => AuthType::Session,
                "auto" => AuthType::Auto,
                _ => {
                    return Err(DriverError::invalid(
                        "driver_info.redfish_auth_type",
                        format!(
                            "driver_info redfish_auth_type {value:?} is not one of basic, session, \
                         auto."
                        ),
                    ));
                }
            },
        };
        Ok(Self {
            address,
            system_id,
            username: text(info, "redfish_username")?.map(str::to_owned),
            password: match info.get("redfish_password") {
                Some(Value::String(password)) => Some(password.clone()),
                None | Some(Value::Null) => None,
                Some(_) => {
                    return Err(DriverError::invalid(
                        "driver_info.redfish_password",
                        "driver_info redfish_password must be a string.".to_owned(),
                    ));
                }
            },
            verify_ca,
            auth_type,
        })
    }
}

/// `10.0.0.5`, `bmc.example:8443`, `https://bmc/`, `http://[fe80::1]:8000` → scheme and
/// authority; a path, query or anything but http(s) is refused.
fn parse_address(raw: &str) -> Result<String, DriverError> {
    let with_scheme = if raw.contains("://") {
        raw.to_owned()
    } else {
        format!("https://{raw}")
    };
    let invalid = |why: &str| {
        DriverError::invalid(
            "driver_info.redfish_address",
            format!("driver_info redfish_address {raw:?} is not a valid Redfish address: {why}."),
        )
    };
    let url = Url::parse(&with_scheme).map_err(|error| invalid(&error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    let host = url.host_str().ok_or_else(|| invalid("it names no host"))?;
    if !matches!(url.path(), "" | "/") || url.query().is_some() {
        return Err(invalid(
            "give only the scheme, host and port; the driver finds the Redfish paths itself",
        ));
    }
    Ok(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn node(driver_info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Enroll);
        node.driver_info = driver_info.as_object().unwrap().clone();
        node
    }

    #[test]
    fn debug_output_hides_the_password() {
        let info = RedfishInfo::parse(&node(json!({
            "redfish_address": "10.0.0.5",
            "redfish_username": "root",
            "redfish_password": "hunter2-secret",
        })))
        .unwrap();
        let shown = format!("{info:?}");
        assert!(
            shown.contains("root") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn addresses_get_a_scheme_and_lose_the_slash() {
        for (raw, expected) in [
            ("10.0.0.5", "https://10.0.0.5"),
            ("bmc.example:8443", "https://bmc.example:8443"),
            ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
            ("https://[fe80::1]:443", "https://[fe80::1]"),
        ] {
            assert_eq!(parse_address(raw).unwrap(), expected, "{raw}");
        }
        for bad in [
            "ftp://bmc",
            "https://bmc/redfish/v1",
            "http://",
            "https://bmc?x=1",
        ] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_and_refusals_are_clear() {
        let info = RedfishInfo::parse(&node(json!({"redfish_address": "10.1.1.1"}))).unwrap();
        assert_eq!(info.auth_type, AuthType::Auto);
        assert_eq!(info.verify_ca, VerifyCa::System);
        assert_eq!(info.system_id, None);

        let info = RedfishInfo::parse(&node(json!({
            "redfish_address": "10.1.1.1", "redfish_system_id": "1",
            "redfish_verify_ca": "False", "redfish_auth_type": "Session",
            "redfish_username": "admin", "redfish_password": "secret"
        })))
        .unwrap();
        assert_eq!(info.system_id.as_deref(), Some("/redfish/v1/Systems/1"));
        assert_eq!(info.verify_ca, VerifyCa::No);
        assert_eq!(info.auth_type, AuthType::Session);
        assert_eq!(info.password.as_deref(), Some("secret"));

        let missing = RedfishInfo::parse(&node(json!({}))).unwrap_err();
        assert!(missing.to_string().contains("redfish_address"), "{missing}");
        let bad_auth = RedfishInfo::parse(&node(json!({
            "redfish_address": "10.1.1.1", "redfish_auth_type": "kerberos"
        })))
        .unwrap_err();
        assert!(
            bad_auth.to_string().contains("basic, session, auto"),
            "{bad_auth}"
        );
        let bad_ca = RedfishInfo::parse(&node(json!({
            "redfish_address": "10.1.1.1", "redfish_verify_ca": "/nonexistent/ca.pem"
        })))
        .unwrap_err();
        assert!(bad_ca.to_string().contains("existing file"), "{bad_ca}");
    }
}
