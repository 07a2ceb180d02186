//! The `ipmi` hardware type's `driver_info` (`reference/ironic.md` §7), checked without
//! touching the BMC.

use ferric_model::resources::{JsonObject, Node};
use serde_json::Value;

use super::rmcp::CipherSuite;
use crate::DriverError;

pub(crate) const PROPERTIES: &[(&str, &str)] = &[
    (
        "ipmi_address",
        "IP address or hostname of the node's BMC. Required.",
    ),
    (
        "ipmi_port",
        "Remote IPMI RMCP+ port (UDP). Optional; default 623.",
    ),
    (
        "ipmi_username",
        "Username; default is NULL user (anonymous). Optional.",
    ),
    (
        "ipmi_password",
        "Password (at most 20 bytes). Optional; default empty.",
    ),
    (
        "ipmi_priv_level",
        "Privilege level: CALLBACK, USER, OPERATOR or ADMINISTRATOR. Optional; default \
         ADMINISTRATOR.",
    ),
    (
        "ipmi_cipher_suite",
        "RMCP+ cipher suite: 3 (RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128) or 17 \
         (RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128). Optional; by default the BMC is asked \
         which suites it supports (Get Channel Cipher Suites) and 17 is used if listed, else 3.",
    ),
];

/// IPMI privilege levels (IPMI 2.0 §6.8), by their wire value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Privilege {
    Callback = 1,
    User = 2,
    Operator = 3,
    Administrator = 4,
}

/// A node's IPMI settings. `Debug` leaves the password out: these reach logs.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct IpmiInfo {
    pub(crate) address: String,
    pub(crate) port: u16,
    pub(crate) username: String,
    pub(crate) password: Vec<u8>,
    pub(crate) privilege: Privilege,
    /// `None`: the best suite the BMC lists.
    pub(crate) cipher_suite: Option<CipherSuite>,
}

impl std::fmt::Debug for IpmiInfo {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("IpmiInfo")
            .field("address", &self.address)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"******")
            .field("privilege", &self.privilege)
            .field("cipher_suite", &self.cipher_suite)
            .finish()
    }
}

impl IpmiInfo {
    /// `host:port` (IPv6 literals bracketed): the BMC's name in messages and limits.
    pub(crate) fn endpoint(&self) -> String {
        if self.address.contains(':') {
            format!("[{}]:{}", self.address, self.port)
        } else {
            format!("{}:{}", self.address, self.port)
        }
    }

    pub(crate) fn parse(node: &Node) -> Result<Self, DriverError> {
        let info = &node.driver_info;
        let address = text(info, "ipmi_address")?
            .map(|address| address.trim_start_matches('[').trim_end_matches(']'))
            .ok_or_else(|| {
                DriverError::missing(
                    "driver_info.ipmi_address",
                    "The following required driver_info parameter is missing for the ipmi \
                     hardware type: ipmi_address (the BMC's IP address or host name)."
                        .to_owned(),
                )
            })?
            .to_owned();
        let port = match number(info, "ipmi_port")? {
            None => 623,
            Some(port) => u16::try_from(port)
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| {
                    DriverError::invalid(
                        "driver_info.ipmi_port",
                        format!("driver_info ipmi_port {port} is not a UDP port (1-65535)."),
                    )
                })?,
        };
        let password = match info.get("ipmi_password") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(password)) => password.as_bytes().to_vec(),
            Some(_) => {
                return Err(DriverError::invalid(
                    "driver_info.ipmi_password",
                    "driver_info ipmi_password must be a string.".to_owned(),
                ));
            }
        };
        if password.len() > 20 {
            return Err(DriverError::invalid(
                "driver_info.ipmi_password",
                "driver_info ipmi_password is longer than IPMI 2.0's 20 bytes.".to_owned(),
            ));
        }
        let username = text(info, "ipmi_username")?.unwrap_or_default().to_owned();
        if username.len() > 16 {
            return Err(DriverError::invalid(
                "driver_info.ipmi_username",
                "driver_info ipmi_username is longer than IPMI's 16 bytes.".to_owned(),
            ));
        }
        let privilege = match text(info, "ipmi_priv_level")?.map(str::to_ascii_uppercase) {
            None => Privilege::Administrator,
            Some(level) => match level.as_str() {
                "CALLBACK" => Privilege::Callback,
                "USER" => Privilege::User,
                "OPERATOR" => Privilege::Operator,
                "ADMINISTRATOR" => Privilege::Administrator,
                _ => {
                    return Err(DriverError::invalid(
                        "driver_info.ipmi_priv_level",
                        format!(
                            "driver_info ipmi_priv_level {level:?} is not one of CALLBACK, USER, \
                         OPERATOR, ADMINISTRATOR."
                        ),
                    ));
                }
            },
        };
        let cipher_suite = match number(info, "ipmi_cipher_suite")? {
            None => None,
            Some(3) => Some(CipherSuite::Three),
            Some(17) => Some(CipherSuite::Seventeen),
            Some(other) => {
                return Err(DriverError::invalid(
                    "driver_info.ipmi_cipher_suite",
                    format!(
                        "driver_info ipmi_cipher_suite {other} is not supported; use 3 or 17 (the \
                     suites with AES encryption)."
                    ),
                ));
            }
        };
        Ok(Self {
            address,
            port,
            username,
            password,
            privilege,
            cipher_suite,
        })
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

/// A number given as JSON or as the string the `baremetal` CLI sends.
fn number(info: &JsonObject, key: &str) -> Result<Option<i64>, DriverError> {
    let invalid = |value: &dyn std::fmt::Display| {
        DriverError::invalid(
            format!("driver_info.{key}"),
            format!("driver_info {key} must be a number, not {value}."),
        )
    };
    match info.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number.as_i64().map(Some).ok_or_else(|| invalid(number)),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => text.trim().parse().map(Some).map_err(|_| invalid(text)),
        Some(other) => Err(invalid(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn parse(driver_info: Value) -> Result<IpmiInfo, DriverError> {
        let mut node = Node::new(Uuid::nil(), "ipmi", ProvisionState::Enroll);
        node.driver_info = driver_info.as_object().unwrap().clone();
        IpmiInfo::parse(&node)
    }

    #[test]
    fn defaults_and_strings_from_the_cli() {
        let info = parse(json!({"ipmi_address": "10.0.0.9"})).unwrap();
        assert_eq!(info.port, 623);
        assert_eq!(info.privilege, Privilege::Administrator);
        assert_eq!(info.cipher_suite, None);
        assert_eq!(info.endpoint(), "10.0.0.9:623");

        let info = parse(json!({
            "ipmi_address": "fe80::1", "ipmi_port": "6230", "ipmi_cipher_suite": "3",
            "ipmi_priv_level": "operator", "ipmi_username": "admin", "ipmi_password": "pw"
        }))
        .unwrap();
        assert_eq!(info.endpoint(), "[fe80::1]:6230");
        assert_eq!(info.cipher_suite, Some(CipherSuite::Three));
        assert_eq!(info.privilege, Privilege::Operator);
        assert_eq!(info.password, b"pw");
        let shown = format!("{info:?}");
        assert!(
            shown.contains("admin") && !shown.contains("\"pw\"") && !shown.contains("112, 119"),
            "{shown}"
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        for (driver_info, key) in [
            (json!({}), "ipmi_address"),
            (
                json!({"ipmi_address": "h", "ipmi_port": 70000}),
                "ipmi_port",
            ),
            (
                json!({"ipmi_address": "h", "ipmi_cipher_suite": 1}),
                "ipmi_cipher_suite",
            ),
            (
                json!({"ipmi_address": "h", "ipmi_priv_level": "root"}),
                "ipmi_priv_level",
            ),
            (
                json!({"ipmi_address": "h", "ipmi_password": "x".repeat(21)}),
                "ipmi_password",
            ),
        ] {
            let error = parse(driver_info).unwrap_err();
            assert!(error.to_string().contains(key), "{key}: {error}");
            assert_eq!(
                error.parameter(),
                Some(format!("driver_info.{key}").as_str()),
                "{error:?}"
            );
        }
    }
}
