//! The boot mode a node boots in, and where that choice came from.
//!
//! Ironic's order (`boot_mode_utils.get_boot_mode`): `boot_mode` in
//! `instance_info.capabilities` (what this deployment asks for), then in
//! `properties.capabilities` (what the operator or inspection recorded), then the node's
//! `boot_mode` field (what the BMC last reported), then the default, UEFI. Every boot Ferric
//! arranges sets it (Redfish `BootSourceOverrideMode`, IPMI's EFI flag), and validate refuses
//! a value that is neither `uefi` nor `bios`, naming the field to fix.
//!
//! [`BootCheck`] is the boot interface as validate sees it: the interface's own checks, then
//! the BMC's word on the boot that interface arranges (a mode or a boot target outside what
//! the BMC lists as allowable), so a node whose BMC cannot boot it this way is refused before
//! anything is powered.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::Node;
use serde_json::Value;

use crate::DriverError;
use crate::interfaces::{BootInterface, BootMode, ManagementInterface, Validate};

/// Ironic's `[deploy]default_boot_mode`.
pub const DEFAULT_BOOT_MODE: BootMode = BootMode::Uefi;

/// Where a node's boot mode was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    InstanceCapabilities,
    PropertiesCapabilities,
    NodeField,
    Default,
}

impl Source {
    /// The field an operator edits to change it.
    pub const fn field(self) -> &'static str {
        match self {
            Self::InstanceCapabilities => "instance_info.capabilities",
            Self::PropertiesCapabilities => "properties.capabilities",
            Self::NodeField => "the node's boot_mode",
            Self::Default => "the default (no boot_mode capability set)",
        }
    }

    /// Where to set the boot mode, as a [`DriverError::parameter`] name.
    pub const fn parameter(self) -> &'static str {
        match self {
            Self::InstanceCapabilities => "instance_info.capabilities",
            Self::PropertiesCapabilities => "properties.capabilities",
            Self::NodeField | Self::Default => "node.boot_mode",
        }
    }
}

/// The value of `key` in a capabilities field: an object (`{"boot_mode": "uefi"}`), its JSON
/// text, or Ironic's `key:value,key:value` string.
pub fn capability(capabilities: &Value, key: &str) -> Option<String> {
    match capabilities {
        Value::Object(map) => map.get(key).map(|value| match value {
            Value::String(text) => text.trim().to_owned(),
            other => other.to_string(),
        }),
        Value::String(text) => {
            if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                return capability(&parsed, key);
            }
            text.split(',').find_map(|pair| {
                let (name, value) = pair.split_once(':')?;
                (name.trim() == key).then(|| value.trim().to_owned())
            })
        }
        _ => None,
    }
}

/// The node's boot mode and its source; a value that is not a boot mode is refused with
/// what to set.
pub fn boot_mode(node: &Node) -> Result<(BootMode, Source), DriverError> {
    let candidates = [
        (
            node.instance_info
                .get("capabilities")
                .and_then(|caps| capability(caps, "boot_mode")),
            Source::InstanceCapabilities,
        ),
        (
            node.properties
                .get("capabilities")
                .and_then(|caps| capability(caps, "boot_mode")),
            Source::PropertiesCapabilities,
        ),
        (node.boot_mode.clone(), Source::NodeField),
    ];
    for (value, source) in candidates {
        let Some(value) = value.filter(|value| !value.is_empty()) else {
            continue;
        };
        return match value.to_ascii_lowercase().parse::<BootMode>() {
            Ok(mode) => Ok((mode, source)),
            Err(()) => Err(DriverError::invalid(
                source.parameter(),
                format!(
                    "Node {}: boot mode '{value}' in {} is not one of uefi, bios; set \
                 boot_mode:uefi or boot_mode:bios there.",
                    node.uuid,
                    source.field()
                ),
            )),
        };
    }
    Ok((DEFAULT_BOOT_MODE, Source::Default))
}

/// A boot interface validated together with the management interface that arranges its boots.
pub(crate) struct BootCheck {
    pub(crate) boot: Arc<dyn BootInterface>,
    pub(crate) management: Arc<dyn ManagementInterface>,
    /// The boot interface's name, for messages.
    pub(crate) name: String,
}

#[async_trait]
impl Validate for BootCheck {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.boot.validate(node).await?;
        self.management
            .check_boot(node, self.boot.network_boot_device())
            .await
            .map_err(|error| match error {
                DriverError::InvalidParameter { parameter, message } => {
                    DriverError::InvalidParameter {
                        parameter,
                        message: format!("Boot interface {}: {message}", self.name),
                    }
                }
                other => other,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn node() -> Node {
        Node::new(Uuid::nil(), "redfish", ProvisionState::Available)
    }

    #[test]
    fn instance_info_then_properties_then_the_node_then_uefi() {
        let mut node = node();
        assert_eq!(boot_mode(&node).unwrap(), (BootMode::Uefi, Source::Default));
        node.boot_mode = Some("bios".into());
        assert_eq!(
            boot_mode(&node).unwrap(),
            (BootMode::Bios, Source::NodeField)
        );
        node.properties.insert(
            "capabilities".into(),
            "secure_boot:false,boot_mode:uefi".into(),
        );
        assert_eq!(
            boot_mode(&node).unwrap(),
            (BootMode::Uefi, Source::PropertiesCapabilities)
        );
        node.instance_info
            .insert("capabilities".into(), json!({"boot_mode": "bios"}));
        assert_eq!(
            boot_mode(&node).unwrap(),
            (BootMode::Bios, Source::InstanceCapabilities)
        );
        // JSON text, as the CLI often stores it.
        node.instance_info
            .insert("capabilities".into(), r#"{"boot_mode": "UEFI"}"#.into());
        assert_eq!(boot_mode(&node).unwrap().0, BootMode::Uefi);
    }

    #[test]
    fn a_bad_value_names_the_node_and_the_field() {
        let mut node = node();
        node.properties
            .insert("capabilities".into(), "boot_mode:legacy".into());
        let error = boot_mode(&node).unwrap_err().to_string();
        assert!(
            error.contains("'legacy' in properties.capabilities"),
            "{error}"
        );
        assert!(error.contains("boot_mode:bios"), "{error}");
        assert!(error.contains(&Uuid::nil().to_string()), "{error}");
    }
}
