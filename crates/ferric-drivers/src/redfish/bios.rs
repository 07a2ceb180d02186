//! The `redfish` BIOS interface: the ComputerSystem's `Bios` resource, its attribute registry
//! and its pending settings.
//!
//! Settings are read from `Bios.Attributes`, described by the registry the resource names
//! (`AttributeRegistry`, found under `/redfish/v1/Registries`; BMCs without one give values
//! only). A change is checked against those names and the registry first, then PATCHed to the
//! settings object (`@Redfish.Settings.SettingsObject`, usually `Bios/Settings`), which the
//! BMC applies at the next boot: so the machine is rebooted through the node's power interface
//! (and powered off again if it was off), and the BIOS read again to verify every value took.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{JsonObject, Node};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::Redfish;
use super::info::RedfishInfo;
use crate::Component;
use crate::DriverError;
use crate::interfaces::{
    BiosChange, BiosInterface, BiosValue, PowerInterface, Validate, check_bios_changes,
};

/// The `redfish` BIOS interface, composed with the node's power interface for the reboots
/// pending settings need.
#[derive(Clone)]
pub(crate) struct RedfishBios {
    pub(crate) redfish: Redfish,
    pub(crate) power: Arc<dyn PowerInterface>,
}

/// What the BIOS resource says, read once.
struct BiosResource {
    path: String,
    body: Value,
}

impl BiosResource {
    fn attributes(&self) -> Map<String, Value> {
        self.body
            .get("Attributes")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    fn settings_path(&self) -> String {
        self.body
            .pointer("/@Redfish.Settings/SettingsObject/@odata.id")
            .and_then(Value::as_str)
            .map_or_else(|| format!("{}/Settings", self.path), str::to_owned)
    }

    fn reset_target(&self) -> String {
        self.body
            .pointer("/Actions/#Bios.ResetBios/target")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("{}/Actions/Bios.ResetBios", self.path),
                str::to_owned,
            )
    }
}

/// A BIOS value as the API shows it: text, whatever its JSON type.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// One registry entry in the API's terms (`/v1/nodes/{node}/bios` at 1.74).
fn registry_fields(entry: &Value) -> JsonObject {
    let mut fields = JsonObject::new();
    let mut copy = |from: &str, to: &str| {
        if let Some(value) = entry.get(from).filter(|value| !value.is_null()) {
            fields.insert(to.to_owned(), value.clone());
        }
    };
    copy("Type", "attribute_type");
    copy("ReadOnly", "read_only");
    copy("ResetRequired", "reset_required");
    copy("LowerBound", "lower_bound");
    copy("UpperBound", "upper_bound");
    copy("MinLength", "min_length");
    copy("MaxLength", "max_length");
    copy("IsSystemUniqueProperty", "unique");
    if let Some(values) = entry.get("AllowableValues").and_then(Value::as_array) {
        let names: Vec<Value> = values
            .iter()
            .filter_map(|value| value.get("ValueName").or(Some(value)))
            .filter(|value| value.is_string())
            .cloned()
            .collect();
        fields.insert("allowable_values".to_owned(), Value::Array(names));
    }
    fields
}

/// The value to PATCH for `change`: typed as the BIOS reports the setting.
fn typed_value(change: &BiosChange, current: Option<&Value>, registry: &JsonObject) -> Value {
    let kind = registry.get("attribute_type").and_then(Value::as_str);
    match (current, kind) {
        (Some(Value::Number(_)), _) | (_, Some("Integer")) => change
            .value
            .parse::<i64>()
            .map_or_else(|_| json!(change.value), |number| json!(number)),
        (Some(Value::Bool(_)), _) | (_, Some("Boolean")) => match change.value.as_str() {
            "true" | "True" => json!(true),
            "false" | "False" => json!(false),
            other => json!(other),
        },
        _ => json!(change.value),
    }
}

impl RedfishBios {
    async fn bios(&self, info: &RedfishInfo) -> Result<BiosResource, DriverError> {
        let (system_path, system) = self.redfish.system(info).await?;
        let path = system
            .pointer("/Bios/@odata.id")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                DriverError::failed(
                    Component::Bmc,
                    format!(
                        "Redfish BMC {}: system {system_path} has no Bios resource, so its BIOS \
                     settings cannot be read or changed; set the node's bios_interface to \
                     no-bios",
                        info.address
                    ),
                )
            })?
            .trim_end_matches('/')
            .to_owned();
        let body = self
            .redfish
            .clients()
            .send(info, Method::GET, &path, None)
            .await?
            .body;
        Ok(BiosResource { path, body })
    }

    /// The registry entries by attribute name, when the BMC publishes the registry the BIOS
    /// names; empty otherwise (values alone are still useful).
    async fn registry(&self, info: &RedfishInfo, bios: &BiosResource) -> Map<String, Value> {
        let Some(name) = bios.body.get("AttributeRegistry").and_then(Value::as_str) else {
            return Map::new();
        };
        match self.registry_entries(info, name).await {
            Ok(entries) => entries,
            Err(error) => {
                tracing::debug!(bmc = %info.address, registry = name, %error, "BIOS attribute registry unavailable; settings are read without it");
                Map::new()
            }
        }
    }

    async fn registry_entries(
        &self,
        info: &RedfishInfo,
        name: &str,
    ) -> Result<Map<String, Value>, DriverError> {
        let clients = self.redfish.clients();
        let registries = clients
            .send(info, Method::GET, "/redfish/v1/Registries", None)
            .await?
            .body;
        let member = registries
            .get("Members")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|member| member.get("@odata.id").and_then(Value::as_str))
            .find(|path| path.trim_end_matches('/').rsplit('/').next() == Some(name))
            .ok_or_else(|| {
                DriverError::failed(Component::Bmc, format!("no registry {name} is listed"))
            })?
            .to_owned();
        let file = clients.send(info, Method::GET, &member, None).await?.body;
        let location = file
            .get("Location")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|location| location.get("Uri").and_then(Value::as_str))
            .ok_or_else(|| {
                DriverError::failed(Component::Bmc, format!("registry {name} has no Location"))
            })?
            .to_owned();
        let registry = clients.send(info, Method::GET, &location, None).await?.body;
        Ok(registry
            .pointer("/RegistryEntries/Attributes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let name = entry.get("AttributeName")?.as_str()?;
                Some((name.to_owned(), entry.clone()))
            })
            .collect())
    }

    async fn read(
        &self,
        info: &RedfishInfo,
    ) -> Result<(BiosResource, Vec<BiosValue>, Map<String, Value>), DriverError> {
        let bios = self.bios(info).await?;
        let registry = self.registry(info, &bios).await;
        let settings = bios
            .attributes()
            .iter()
            .map(|(name, value)| BiosValue {
                name: name.clone(),
                value: text_of(value),
                registry: registry.get(name).map(registry_fields).unwrap_or_default(),
            })
            .collect();
        Ok((bios, settings, registry))
    }
}

#[async_trait]
impl Validate for RedfishBios {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        RedfishInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl BiosInterface for RedfishBios {
    async fn cache_settings(&self, node: &Node) -> Result<Vec<BiosValue>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        Ok(self.read(&info).await?.1)
    }

    async fn apply_configuration(
        &self,
        node: &mut Node,
        changes: &[BiosChange],
    ) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let (bios, current, _) = self.read(&info).await?;
        check_bios_changes(&current, changes)?;
        let attributes = bios.attributes();
        let patch: Map<String, Value> = changes
            .iter()
            .map(|change| {
                let registry = current
                    .iter()
                    .find(|setting| setting.name == change.name)
                    .map(|setting| setting.registry.clone())
                    .unwrap_or_default();
                let value = typed_value(change, attributes.get(&change.name), &registry);
                (change.name.clone(), value)
            })
            .collect();
        self.redfish
            .clients()
            .send(
                &info,
                Method::PATCH,
                &bios.settings_path(),
                Some(&json!({ "Attributes": patch })),
            )
            .await?;
        super::reboot_keeping_power(self.power.as_ref(), node).await?;
        let (_, applied, _) = self.read(&info).await?;
        let missed: Vec<String> = changes
            .iter()
            .filter_map(|change| {
                let now = applied
                    .iter()
                    .find(|setting| setting.name == change.name)
                    .and_then(|setting| setting.value.clone());
                (now.as_deref() != Some(change.value.as_str())).then(|| {
                    format!(
                        "{} is {} (asked for {})",
                        change.name,
                        now.map_or_else(|| "unset".to_owned(), |value| format!("'{value}'")),
                        change.value
                    )
                })
            })
            .collect();
        if !missed.is_empty() {
            return Err(DriverError::failed(
                Component::Bmc,
                format!(
                    "Redfish BMC {}: after the reboot the BIOS did not apply every setting: {}",
                    info.address,
                    missed.join("; ")
                ),
            ));
        }
        Ok(())
    }

    async fn factory_reset(&self, node: &mut Node) -> Result<(), DriverError> {
        let info = RedfishInfo::parse(node)?;
        let bios = self.bios(&info).await?;
        self.redfish
            .clients()
            .send(&info, Method::POST, &bios.reset_target(), Some(&json!({})))
            .await?;
        super::reboot_keeping_power(self.power.as_ref(), node).await
    }
}
