//! Which interface implementations a site enables (Ironic's `enabled_<kind>_interfaces` and
//! `default_<kind>_interface`): a node may use an implementation only if its hardware type
//! supports it AND the site enabled it, and a node that names none gets the type's first
//! supported one that is enabled (or the site's default for the kind).
//!
//! One departure from Ironic, so that a fresh `ferric server` runs the demo type out of the
//! box while a real machine can never be "deployed" by a fake: the `fake` implementations are
//! always enabled for the `fake-hardware` type (it drives no machine, so they pretend nothing),
//! and for every other type `fake` counts only when the site lists it. The built-in lists
//! ([`InterfaceSettings::default`]) hold every implementation except `fake`, which they enable
//! only for power and management: no BMC type offers those, and they are what
//! `manual-management` is (the operator powers the machine and sets its boot device).

use ferric_model::resources::InterfaceKind;

use crate::DriverError;
use crate::hardware_types::{HARDWARE_TYPES, HardwareType};

/// The hardware type whose `fake` implementations need no enabling.
const FAKE_HARDWARE: &str = "fake-hardware";

/// The implementation no real machine should get unless the site asks for it.
const FAKE: &str = "fake";

/// The site's enabled implementations and defaults, per interface kind (indexed like
/// [`InterfaceKind::ALL`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSettings {
    enabled: [Vec<String>; 13],
    defaults: [Option<String>; 13],
    /// `autodetect_deploy_interfaces`: what the `autodetect` deploy interface picks from.
    autodetect: Vec<String>,
}

impl Default for InterfaceSettings {
    /// Every implementation some hardware type supports, except `fake` (kept for power and
    /// management, see the module comment); no site-wide defaults.
    fn default() -> Self {
        let enabled = InterfaceKind::ALL.map(|kind| {
            known_implementations(kind)
                .into_iter()
                .filter(|name| {
                    *name != FAKE
                        || matches!(kind, InterfaceKind::Power | InterfaceKind::Management)
                })
                .map(str::to_owned)
                .collect()
        });
        Self {
            enabled,
            defaults: Default::default(),
            autodetect: default_autodetect(),
        }
    }
}

fn default_autodetect() -> Vec<String> {
    crate::autodetect::DEFAULT_ORDER.map(str::to_owned).to_vec()
}

/// Every implementation of `kind` any hardware type supports, in first-seen order.
pub fn known_implementations(kind: InterfaceKind) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for hardware_type in HARDWARE_TYPES {
        for name in hardware_type.supported(kind) {
            if !names.contains(name) {
                names.push(name);
            }
        }
    }
    names
}

impl InterfaceSettings {
    /// Every implementation of every kind enabled, `fake` included: what a test of the fake
    /// interfaces on real hardware types asks for.
    pub fn everything() -> Self {
        Self {
            enabled: InterfaceKind::ALL.map(|kind| {
                known_implementations(kind)
                    .into_iter()
                    .map(str::to_owned)
                    .collect()
            }),
            defaults: Default::default(),
            autodetect: default_autodetect(),
        }
    }

    /// The enabled implementations of `kind`.
    pub fn enabled(&self, kind: InterfaceKind) -> &[String] {
        &self.enabled[kind as usize]
    }

    /// The deploy interfaces `autodetect` picks from, in order.
    pub fn autodetect_order(&self) -> &[String] {
        &self.autodetect
    }

    /// The same with `names` as `autodetect_deploy_interfaces`; when `autodetect` is enabled,
    /// each must be an enabled deploy interface (set the enabled list first).
    pub fn with_autodetect<S: AsRef<str>>(mut self, names: &[S]) -> Result<Self, String> {
        if self.is_enabled(InterfaceKind::Deploy, crate::autodetect::AUTODETECT) {
            crate::autodetect::check_order(names, self.enabled(InterfaceKind::Deploy))?;
        }
        self.autodetect = names.iter().map(|name| name.as_ref().to_owned()).collect();
        Ok(self)
    }

    /// The site-wide default of `kind`, if the site set one.
    pub fn default_for(&self, kind: InterfaceKind) -> Option<&str> {
        self.defaults[kind as usize].as_deref()
    }

    /// The same with `names` as the enabled implementations of `kind`; an unknown name is
    /// refused with the known ones.
    pub fn with_enabled<S: AsRef<str>>(
        mut self,
        kind: InterfaceKind,
        names: &[S],
    ) -> Result<Self, String> {
        let known = known_implementations(kind);
        let mut enabled = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            if !known.contains(&name) {
                return Err(format!(
                    "enabled_{kind}_interfaces names '{name}', which is not a {kind} interface; \
                     known: {}",
                    known.join(", ")
                ));
            }
            if !enabled.iter().any(|present: &String| present == name) {
                enabled.push(name.to_owned());
            }
        }
        self.enabled[kind as usize] = enabled;
        Ok(self)
    }

    /// The same with `name` as the default of `kind` for nodes that name none; it must be
    /// enabled (set the enabled list first).
    pub fn with_default(mut self, kind: InterfaceKind, name: Option<&str>) -> Result<Self, String> {
        if let Some(name) = name
            && !self.enabled(kind).iter().any(|enabled| enabled == name)
        {
            return Err(format!(
                "default_{kind}_interface is '{name}', which is not in \
                 enabled_{kind}_interfaces ({}); enable it there or choose one of those",
                self.enabled(kind).join(", ")
            ));
        }
        self.defaults[kind as usize] = name.map(str::to_owned);
        Ok(self)
    }

    /// Whether a node of `hardware_type` may use `name` for `kind`: supported by the type and
    /// enabled by the site (`fake` on `fake-hardware` always is).
    pub fn allows(&self, hardware_type: &HardwareType, kind: InterfaceKind, name: &str) -> bool {
        hardware_type.supported(kind).contains(&name)
            && (self.is_enabled(kind, name)
                || (hardware_type.name == FAKE_HARDWARE && name == FAKE))
    }

    fn is_enabled(&self, kind: InterfaceKind, name: &str) -> bool {
        self.enabled(kind).iter().any(|enabled| enabled == name)
    }

    /// The implementations of `kind` a node of `hardware_type` may use, the type's order
    /// (`enabled_<kind>_interfaces` of `GET /v1/drivers/{name}`).
    pub fn enabled_for(
        &self,
        hardware_type: &HardwareType,
        kind: InterfaceKind,
    ) -> Vec<&'static str> {
        hardware_type
            .supported(kind)
            .iter()
            .copied()
            .filter(|name| self.allows(hardware_type, kind, name))
            .collect()
    }

    /// What a node of `hardware_type` that names no `kind` interface gets: the site's default
    /// for the kind if set, else the type's first supported implementation that is enabled.
    pub fn default_interface(
        &self,
        hardware_type: &HardwareType,
        kind: InterfaceKind,
    ) -> Result<&'static str, DriverError> {
        let found = match self.default_for(kind) {
            Some(name) => hardware_type
                .supported(kind)
                .iter()
                .copied()
                .find(|supported| *supported == name),
            None => self.enabled_for(hardware_type, kind).first().copied(),
        };
        found.ok_or_else(|| {
            let hint = match self.default_for(kind) {
                Some(name) => format!(
                    "default_{kind}_interface is '{name}', which this type does not support; \
                     name one of {} in the node's {kind}_interface",
                    self.enabled_for(hardware_type, kind).join(", ")
                ),
                None => format!(
                    "enable one of {} in enabled_{kind}_interfaces",
                    hardware_type.supported(kind).join(", ")
                ),
            };
            DriverError::invalid(
                format!("settings.enabled_{kind}_interfaces"),
                format!(
                    "For hardware type '{}', no default value found for {kind} interface could be \
                 determined. Please ensure the interfaces are enabled ({hint}).",
                    hardware_type.name
                ),
            )
        })
    }

    /// Checks that a node of `hardware_type` may use `name` for `kind`, with Ironic's
    /// messages: an implementation the site did not enable is not found at all
    /// (InterfaceNotFoundInEntrypoint), an enabled one the type lacks is incompatible.
    pub fn check(
        &self,
        hardware_type: &HardwareType,
        kind: InterfaceKind,
        name: &str,
    ) -> Result<(), DriverError> {
        if self.allows(hardware_type, kind, name) {
            return Ok(());
        }
        let exempt = hardware_type.name == FAKE_HARDWARE && name == FAKE;
        if !self.is_enabled(kind, name) && !exempt {
            let valid: Vec<String> = self
                .enabled(kind)
                .iter()
                .map(|name| format!("'{name}'"))
                .collect();
            return Err(DriverError::invalid(
                format!("node.{kind}_interface"),
                format!(
                    "Could not find the following interface in the \
                 'ironic.hardware.interfaces.{kind}' entrypoint: {name}. Valid interfaces are \
                 [{}]. Add it to the enabled_{kind}_interfaces setting to use it.",
                    valid.join(", ")
                ),
            ));
        }
        Err(DriverError::invalid(
            format!("node.{kind}_interface"),
            format!(
                "{kind} interface implementation '{name}' is not supported by hardware type {}. \
             Supported: {}.",
                hardware_type.name,
                self.enabled_for(hardware_type, kind).join(", ")
            ),
        ))
    }

    /// Checks that every enabled hardware type has an implementation of every kind a node
    /// could get by default, so no node creation fails on the site's lists alone.
    pub fn check_types(&self, types: &[&'static HardwareType]) -> Result<(), String> {
        for hardware_type in types {
            for kind in InterfaceKind::ALL {
                if self.enabled_for(hardware_type, kind).is_empty() {
                    return Err(format!(
                        "hardware type {} has no enabled {kind} interface: add one of {} to \
                         enabled_{kind}_interfaces, or remove {} from enabled_hardware_types",
                        hardware_type.name,
                        hardware_type.supported(kind).join(", "),
                        hardware_type.name
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardware_type(name: &str) -> &'static HardwareType {
        HARDWARE_TYPES
            .into_iter()
            .find(|hardware_type| hardware_type.name == name)
            .unwrap()
    }

    #[test]
    fn by_default_no_bmc_type_can_use_a_fake_interface() {
        let settings = InterfaceSettings::default();
        for name in ["redfish", "ipmi"] {
            let bmc = hardware_type(name);
            for kind in InterfaceKind::ALL {
                assert!(!settings.allows(bmc, kind, FAKE), "{name} {kind}");
                assert_ne!(settings.default_interface(bmc, kind).unwrap(), FAKE);
            }
            let error = settings
                .check(bmc, InterfaceKind::Deploy, FAKE)
                .unwrap_err();
            assert_eq!(
                error.to_string(),
                "Could not find the following interface in the \
                 'ironic.hardware.interfaces.deploy' entrypoint: fake. Valid interfaces are \
                 ['direct', 'ramdisk', 'custom-agent', 'autodetect']. Add it to the enabled_deploy_interfaces \
                 setting to use it."
            );
        }
        let fake = hardware_type(FAKE_HARDWARE);
        for kind in InterfaceKind::ALL {
            let default = settings.default_interface(fake, kind).unwrap();
            assert_eq!(default, fake.supported(kind)[0], "{kind}");
        }
        settings
            .check_types(&HARDWARE_TYPES)
            .expect("the defaults serve every type");
    }

    #[test]
    fn enabling_fake_lets_a_bmc_type_use_it() {
        let settings = InterfaceSettings::default()
            .with_enabled(InterfaceKind::Deploy, &["direct", "fake"])
            .unwrap();
        let redfish = hardware_type("redfish");
        settings
            .check(redfish, InterfaceKind::Deploy, FAKE)
            .unwrap();
        // Still not the default: the type's order puts `direct` first.
        assert_eq!(
            settings
                .default_interface(redfish, InterfaceKind::Deploy)
                .unwrap(),
            "direct"
        );
        let settings = settings
            .with_default(InterfaceKind::Deploy, Some(FAKE))
            .unwrap();
        assert_eq!(
            settings
                .default_interface(redfish, InterfaceKind::Deploy)
                .unwrap(),
            FAKE
        );
    }

    #[test]
    fn unknown_names_defaults_off_the_list_and_empty_kinds_are_refused() {
        let error = InterfaceSettings::default()
            .with_enabled(InterfaceKind::Deploy, &["direkt"])
            .unwrap_err();
        assert!(
            error.contains("enabled_deploy_interfaces names 'direkt'"),
            "{error}"
        );
        let error = InterfaceSettings::default()
            .with_default(InterfaceKind::Deploy, Some(FAKE))
            .unwrap_err();
        assert!(
            error.contains("not in enabled_deploy_interfaces"),
            "{error}"
        );
        let settings = InterfaceSettings::default()
            .with_enabled::<&str>(InterfaceKind::Power, &["redfish"])
            .unwrap();
        let error = settings.check_types(&[hardware_type("ipmi")]).unwrap_err();
        assert!(
            error.contains("ipmi has no enabled power interface: add one of ipmitool"),
            "{error}"
        );
        // An enabled implementation the type lacks is incompatible, not unknown.
        let error = settings
            .check(hardware_type("ipmi"), InterfaceKind::Power, "redfish")
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("power interface implementation 'redfish' is not supported by"),
            "{error}"
        );
    }
}
