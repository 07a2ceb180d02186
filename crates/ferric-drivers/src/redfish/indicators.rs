//! The Redfish management interface's indicators (API 1.63): the identify LEDs of the
//! ComputerSystem and of the Chassis its `Links.Chassis` names. Each is named by its resource's
//! `UUID` (its `Id` when it has none), as Ironic names them, under the component `system` or
//! `chassis`.
//!
//! A resource shows its LED in `IndicatorLED` (`Lit`, `Off`, `Blinking`, `Unknown`; deprecated
//! in Redfish 2020.3 but what most BMCs still serve) or `LocationIndicatorActive` (a boolean,
//! its replacement: on or off, no blinking). Setting one PATCHes the same property. A resource
//! with neither has no indicator here.

use ferric_model::resources::Node;
use reqwest::Method;
use serde_json::{Value, json};

use super::Redfish;
use super::info::RedfishInfo;
use crate::DriverError;
use crate::interfaces::{Indicator, IndicatorState};

const SYSTEM: &str = "system";
const CHASSIS: &str = "chassis";

/// How a resource shows its LED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Led {
    /// `IndicatorLED`.
    Named(IndicatorState),
    /// `LocationIndicatorActive`.
    Active(bool),
}

fn led_of(resource: &Value) -> Option<Led> {
    if let Some(name) = resource.get("IndicatorLED").and_then(Value::as_str) {
        return Some(Led::Named(match name {
            "Lit" => IndicatorState::On,
            "Off" => IndicatorState::Off,
            "Blinking" => IndicatorState::Blinking,
            _ => IndicatorState::Unknown,
        }));
    }
    resource
        .get("LocationIndicatorActive")
        .and_then(Value::as_bool)
        .map(Led::Active)
}

impl Led {
    fn state(self) -> IndicatorState {
        match self {
            Self::Named(state) => state,
            Self::Active(true) => IndicatorState::On,
            Self::Active(false) => IndicatorState::Off,
        }
    }

    fn states(self) -> Vec<IndicatorState> {
        match self {
            Self::Named(_) => vec![
                IndicatorState::Blinking,
                IndicatorState::Off,
                IndicatorState::On,
            ],
            Self::Active(_) => vec![IndicatorState::Off, IndicatorState::On],
        }
    }

    /// The PATCH body that shows `state`, if this LED can.
    fn patch(self, state: IndicatorState) -> Option<Value> {
        match (self, state) {
            (Self::Named(_), IndicatorState::On) => Some(json!({"IndicatorLED": "Lit"})),
            (Self::Named(_), IndicatorState::Off) => Some(json!({"IndicatorLED": "Off"})),
            (Self::Named(_), IndicatorState::Blinking) => Some(json!({"IndicatorLED": "Blinking"})),
            (Self::Active(_), IndicatorState::On) => Some(json!({"LocationIndicatorActive": true})),
            (Self::Active(_), IndicatorState::Off) => {
                Some(json!({"LocationIndicatorActive": false}))
            }
            _ => None,
        }
    }
}

/// A resource's indicator name: its `UUID`, else its `Id`.
fn name_of(resource: &Value) -> Option<&str> {
    resource
        .get("UUID")
        .and_then(Value::as_str)
        .filter(|uuid| !uuid.is_empty())
        .or_else(|| resource.get("Id").and_then(Value::as_str))
}

/// One resource with an LED: where it lives, its component and name, and the LED.
struct Lit {
    path: String,
    component: &'static str,
    name: String,
    led: Led,
}

impl Redfish {
    /// The system's and its chassis' resources that have an LED.
    async fn lit_resources(&self, info: &RedfishInfo) -> Result<Vec<Lit>, DriverError> {
        let (path, system) = self.system(info).await?;
        let mut found = Vec::new();
        if let (Some(led), Some(name)) = (led_of(&system), name_of(&system)) {
            found.push(Lit {
                path: path.clone(),
                component: SYSTEM,
                name: name.to_owned(),
                led,
            });
        }
        let chassis: Vec<String> = system
            .pointer("/Links/Chassis")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|link| link.get("@odata.id").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        for path in chassis {
            let body = self
                .clients()
                .send(info, Method::GET, &path, None)
                .await?
                .body;
            if let (Some(led), Some(name)) = (led_of(&body), name_of(&body)) {
                found.push(Lit {
                    path,
                    component: CHASSIS,
                    name: name.to_owned(),
                    led,
                });
            }
        }
        Ok(found)
    }

    async fn lit_resource(
        &self,
        node: &Node,
        component: &str,
        name: &str,
    ) -> Result<Lit, DriverError> {
        let info = RedfishInfo::parse(node)?;
        self.lit_resources(&info)
            .await?
            .into_iter()
            .find(|lit| lit.component == component && lit.name == name)
            .ok_or_else(|| {
                DriverError::missing(
                    "indicator",
                    format!(
                        "Unknown indicator {name} for component {component} of node {}",
                        node.uuid
                    ),
                )
            })
    }

    pub(super) async fn indicator_list(&self, node: &Node) -> Result<Vec<Indicator>, DriverError> {
        let info = RedfishInfo::parse(node)?;
        Ok(self
            .lit_resources(&info)
            .await?
            .into_iter()
            .map(|lit| Indicator {
                component: lit.component.to_owned(),
                name: lit.name,
                readonly: false,
                states: lit.led.states(),
            })
            .collect())
    }

    pub(super) async fn indicator_get(
        &self,
        node: &Node,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, DriverError> {
        Ok(self.lit_resource(node, component, name).await?.led.state())
    }

    pub(super) async fn indicator_set(
        &self,
        node: &Node,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), DriverError> {
        let lit = self.lit_resource(node, component, name).await?;
        let body = lit.led.patch(state).ok_or_else(|| {
            DriverError::invalid(
                "state",
                format!("Indicator {name} of component {component} cannot be {state}."),
            )
        })?;
        let info = RedfishInfo::parse(node)?;
        self.clients()
            .send(&info, Method::PATCH, &lit.path, Some(&body))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leds_read_and_write_as_redfish_names_them() {
        let named = led_of(&json!({"IndicatorLED": "Blinking"})).unwrap();
        assert_eq!(named.state(), IndicatorState::Blinking);
        assert_eq!(
            named.patch(IndicatorState::On),
            Some(json!({"IndicatorLED": "Lit"}))
        );
        let active = led_of(&json!({"LocationIndicatorActive": true})).unwrap();
        assert_eq!(active.state(), IndicatorState::On);
        assert_eq!(active.patch(IndicatorState::Blinking), None);
        assert_eq!(
            active.patch(IndicatorState::Off),
            Some(json!({"LocationIndicatorActive": false}))
        );
        assert_eq!(led_of(&json!({"Id": "1"})), None);
        assert_eq!(name_of(&json!({"Id": "1", "UUID": "u-1"})), Some("u-1"));
        assert_eq!(name_of(&json!({"Id": "1"})), Some("1"));
    }
}
