//! The `fake` implementation of every interface, for tests, demos and benchmarks: nothing is
//! touched, every operation succeeds at once, and the node remembers what it was told (power
//! state, boot device, indicator states).
//!
//! Tests and the crash-safety workload steer it through `driver_info` (values may be JSON or
//! the strings the `baremetal` CLI sends):
//! - `fake_delay`: seconds (fractional allowed, at most 60) every operation takes, or an object
//!   of seconds per operation (`{"deploy": 30}`: only the deploy step is slow). The delay is an
//!   await point: a conductor that drops the operation (an accepted abort) stops it there;
//! - `fake_fail`: comma-separated operations that fail with a clear message — `validate`,
//!   `power`, `management`, `deploy`, `clean`, `service`, `inspect`, `rescue`, `unrescue`,
//!   `tear_down`, `bios`, `firmware`, `vendor` (vendor passthru methods);
//! - `fake_wait`: comma-separated operations that do not finish by themselves but leave the
//!   node waiting for a callback — `deploy`, `clean`, `service`, `inspect`, `rescue`,
//!   `firmware` (the `firmware.update` step);
//! - `fake_poll`: comma-separated step kinds (`deploy`, `clean`, `service`) whose fake step
//!   runs asynchronously without waiting for a callback: it answers [`Outcome::Poll`] (every
//!   0.1 s) `fake_polls` times (default 10; at most 6,000), counting in
//!   `driver_internal_info.fake_polled`, then finishes. A polled deploy step also reports
//!   `driver_internal_info.deploy_progress` as the agent's image write does (64 MiB a poll),
//!   so progress displays can be watched without a machine.
//!
//! The fake BIOS and firmware answer as Ironic's do (Metal3 drives them: tests/clients/README.md):
//! the BIOS has no settings until `apply_configuration` gives it some, takes any name, and then
//! lists exactly the settings it was last given (kept in the node's `driver_internal_info`, so
//! they survive restarts); the firmware reports no components and flashes nothing.

use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node, PowerState};
use serde_json::{Value, json};

use crate::Component;
use crate::DriverError;
use crate::interfaces::{
    BiosChange, BiosInterface, BiosValue, BootDevice, BootDeviceSetting, BootInterface, BootMode,
    DeployInterface, FirmwareInterface, FirmwareUpdate, Indicator, IndicatorState,
    InspectInterface, Inspection, ManagementInterface, Outcome, PowerAction, PowerInterface,
    RaidInterface, RescueInterface, StepCall, StepDef, StepKind, Validate, VendorInterface,
    VendorMethod,
};

/// The longest `fake_delay` honoured, so a typo cannot park a worker for hours.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// Where the fake management interface keeps the boot device it was told.
const BOOT_DEVICE_KEY: &str = "fake_boot_device";

/// Where it keeps the indicator states it was told, by `{name}@{component}`.
const INDICATORS_KEY: &str = "fake_indicators";

/// The fake machine's indicators, those of Ironic's fake management interface: the chassis'
/// `led-0`, read-only, and the system's `led`, which can be set. Both show `on` until told
/// otherwise, as Ironic's fake reports every indicator.
fn fake_indicators() -> Vec<Indicator> {
    vec![
        Indicator {
            component: "chassis".to_owned(),
            name: "led-0".to_owned(),
            readonly: true,
            states: vec![IndicatorState::Off, IndicatorState::On],
        },
        Indicator {
            component: "system".to_owned(),
            name: "led".to_owned(),
            readonly: false,
            states: vec![
                IndicatorState::Blinking,
                IndicatorState::Off,
                IndicatorState::On,
            ],
        },
    ]
}

/// The fake indicator `name` of `component`; 400 (Ironic's words) for one it does not have.
fn fake_indicator(component: &str, name: &str) -> Result<Indicator, DriverError> {
    let indicators = fake_indicators();
    if !indicators.iter().any(|known| known.component == component) {
        return Err(DriverError::invalid(
            "component",
            format!("Invalid component {component} specified."),
        ));
    }
    indicators
        .into_iter()
        .find(|known| known.component == component && known.name == name)
        .ok_or_else(|| {
            DriverError::invalid("indicator", format!("Invalid indicator {name} specified."))
        })
}

fn listed(node: &Node, key: &str, operation: &str) -> bool {
    node.driver_info
        .get(key)
        .and_then(Value::as_str)
        .is_some_and(|list| list.split(',').any(|item| item.trim() == operation))
}

/// How long the fake `operation` takes on `node` (`fake_delay`).
fn delay(node: &Node, operation: &str) -> Option<Duration> {
    let seconds = match node.driver_info.get("fake_delay")? {
        Value::Object(per_operation) => seconds(per_operation.get(operation)?)?,
        value => seconds(value)?,
    };
    (seconds.is_finite() && seconds > 0.0).then(|| Duration::from_secs_f64(seconds).min(MAX_DELAY))
}

fn seconds(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Runs the fake `operation`: waits `fake_delay`, then fails if `fake_fail` names it.
async fn operate(node: &Node, operation: &str) -> Result<(), DriverError> {
    if let Some(delay) = delay(node, operation) {
        tokio::time::sleep(delay).await;
    }
    if listed(node, "fake_fail", operation) {
        return Err(DriverError::failed(
            Component::Bmc,
            format!("Fake failure of '{operation}' injected by driver_info fake_fail."),
        ));
    }
    Ok(())
}

/// Fails if `fake_fail` names `operation`, without `fake_delay`: the reads the conductor
/// makes at `manage` do not slow verifying down.
fn injected(node: &Node, operation: &str) -> Result<(), DriverError> {
    if listed(node, "fake_fail", operation) {
        return Err(DriverError::failed(
            Component::Bmc,
            format!("Fake failure of '{operation}' injected by driver_info fake_fail."),
        ));
    }
    Ok(())
}

/// [`operate`], then [`Outcome::Wait`] if `fake_wait` names the operation.
async fn operate_async(node: &Node, operation: &str) -> Result<Outcome, DriverError> {
    operate(node, operation).await?;
    Ok(if listed(node, "fake_wait", operation) {
        Outcome::Wait
    } else {
        Outcome::Done
    })
}

/// Where a polled fake step counts its polls.
const POLLED_KEY: &str = "fake_polled";

/// One look at a fake step that runs asynchronously (`fake_poll`): [`Outcome::Poll`] until
/// it has been looked at `fake_polls` times.
async fn poll(node: &mut Node, operation: &str) -> Result<Outcome, DriverError> {
    operate(node, operation).await?;
    let polls = node
        .driver_info
        .get("fake_polls")
        .and_then(seconds)
        .map_or(10, |polls| polls.clamp(0.0, 6000.0) as u64);
    let polled = node
        .driver_internal_info
        .get(POLLED_KEY)
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if operation == "deploy" {
        // The shape `direct` keeps while the agent writes the image (and leaves at the end).
        node.driver_internal_info.insert(
            "deploy_progress".to_owned(),
            json!({
                "step": "write_image",
                "bytes_written": polled.min(polls) * FAKE_WRITE_PER_POLL,
                "total_bytes": polls * FAKE_WRITE_PER_POLL,
            }),
        );
    }
    if polled >= polls {
        node.driver_internal_info.remove(POLLED_KEY);
        return Ok(Outcome::Done);
    }
    node.driver_internal_info
        .insert(POLLED_KEY.to_owned(), (polled + 1).into());
    Ok(Outcome::Poll(Duration::from_millis(100)))
}

/// The bytes a polled fake deploy step reports written per poll.
const FAKE_WRITE_PER_POLL: u64 = 64 << 20;

/// The fake interface; one value serves every kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fake;

#[async_trait]
impl Validate for Fake {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        if listed(node, "fake_fail", "validate") {
            return Err(DriverError::invalid(
                "driver_info.fake_fail",
                "Fake validation failure injected by driver_info fake_fail.".to_owned(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl PowerInterface for Fake {
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        operate(node, "power").await?;
        Ok(node.power_state.unwrap_or(PowerState::Off))
    }

    fn echoes_recorded_state(&self) -> bool {
        true
    }

    async fn set_power(
        &self,
        node: &Node,
        _action: PowerAction,
        _timeout: Option<Duration>,
    ) -> Result<(), DriverError> {
        operate(node, "power").await
    }

    fn supported_power_actions(&self) -> &'static [PowerAction] {
        &PowerAction::ALL
    }
}

#[async_trait]
impl ManagementInterface for Fake {
    fn supported_boot_devices(&self, _node: &Node) -> Vec<BootDevice> {
        vec![
            BootDevice::Pxe,
            BootDevice::Disk,
            BootDevice::Cdrom,
            BootDevice::Bios,
            BootDevice::Safe,
        ]
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        operate(node, "management").await?;
        let stored = node.driver_internal_info.get(BOOT_DEVICE_KEY);
        Ok(BootDeviceSetting {
            device: stored
                .and_then(|stored| stored.get("boot_device"))
                .and_then(Value::as_str)
                .and_then(|name| name.parse().ok())
                .or(Some(BootDevice::Pxe)),
            persistent: stored
                .and_then(|stored| stored.get("persistent"))
                .and_then(Value::as_bool)
                .or(Some(false)),
        })
    }

    async fn set_boot_device(
        &self,
        node: &mut Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), DriverError> {
        operate(node, "management").await?;
        node.driver_internal_info.insert(
            BOOT_DEVICE_KEY.to_owned(),
            json!({ "boot_device": device.as_str(), "persistent": persistent }),
        );
        Ok(())
    }

    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        operate(node, "management").await?;
        Ok(node.boot_mode.as_deref().and_then(|mode| mode.parse().ok()))
    }

    async fn set_boot_mode(&self, node: &mut Node, mode: BootMode) -> Result<(), DriverError> {
        operate(node, "set_boot_mode").await?;
        node.boot_mode = Some(mode.as_str().to_owned());
        Ok(())
    }

    /// Fake secure boot needs UEFI, as real firmware does.
    async fn set_secure_boot(&self, node: &mut Node, enabled: bool) -> Result<(), DriverError> {
        operate(node, "set_secure_boot").await?;
        if enabled && node.boot_mode.as_deref() == Some(BootMode::Bios.as_str()) {
            return Err(DriverError::invalid(
                "capabilities.boot_mode",
                "Secure boot needs the uefi boot mode; set the boot mode to uefi first.".to_owned(),
            ));
        }
        node.secure_boot = Some(enabled);
        Ok(())
    }

    async fn indicators(&self, node: &Node) -> Result<Vec<Indicator>, DriverError> {
        operate(node, "management").await?;
        Ok(fake_indicators())
    }

    async fn indicator_state(
        &self,
        node: &Node,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, DriverError> {
        operate(node, "management").await?;
        fake_indicator(component, name)?;
        Ok(node
            .driver_internal_info
            .get(INDICATORS_KEY)
            .and_then(|stored| stored.get(format!("{name}@{component}")))
            .and_then(Value::as_str)
            .and_then(|state| state.parse().ok())
            .unwrap_or(IndicatorState::On))
    }

    /// Remembers the state in the node's `driver_internal_info`; a read-only indicator, or a
    /// state it cannot show, is refused.
    async fn set_indicator_state(
        &self,
        node: &mut Node,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), DriverError> {
        operate(node, "management").await?;
        let indicator = fake_indicator(component, name)?;
        if indicator.readonly {
            return Err(DriverError::invalid(
                "indicator",
                format!("Indicator {name} of component {component} is read-only."),
            ));
        }
        if !indicator.states.contains(&state) {
            return Err(DriverError::invalid(
                "state",
                format!("Indicator {name} of component {component} cannot be {state}."),
            ));
        }
        let stored = node
            .driver_internal_info
            .entry(INDICATORS_KEY.to_owned())
            .or_insert_with(|| json!({}));
        if !stored.is_object() {
            *stored = json!({});
        }
        if let Value::Object(states) = stored {
            states.insert(format!("{name}@{component}"), json!(state.as_str()));
        }
        Ok(())
    }

    /// Accepts the interrupt (`fake_fail` may name `inject_nmi`).
    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        operate(node, "inject_nmi").await
    }
}

const NO_ARGS: &[(&str, &str)] = &[];

#[async_trait]
impl DeployInterface for Fake {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        let step = |step, priority| StepDef {
            interface: InterfaceKind::Deploy,
            step,
            priority,
            abortable: true,
            argsinfo: NO_ARGS,
        };
        match kind {
            StepKind::Deploy => vec![step("deploy", 100)],
            StepKind::Clean => vec![step("erase_devices", 10), step("erase_devices_metadata", 0)],
            StepKind::Service => vec![step("service", 0)],
        }
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        _step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        if listed(node, "fake_poll", kind.as_str()) {
            return poll(node, kind.as_str()).await;
        }
        operate_async(node, kind.as_str()).await
    }

    async fn tear_down(&self, node: &mut Node) -> Result<(), DriverError> {
        operate(node, "tear_down").await
    }

    async fn clean_up(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
}

/// The `fake` boot interface: nothing boots from the network; every request succeeds.
#[derive(Debug, Clone, Copy, Default)]
pub struct FakeBoot;

#[async_trait]
impl Validate for FakeBoot {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl BootInterface for FakeBoot {
    async fn prepare_ramdisk(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }

    async fn clean_up_ramdisk(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl InspectInterface for Fake {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError> {
        Ok(match operate_async(node, "inspect").await? {
            Outcome::Done => Inspection::Done,
            Outcome::Wait | Outcome::Poll(_) => Inspection::Wait,
        })
    }

    async fn abort(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl RescueInterface for Fake {
    async fn rescue(&self, node: &mut Node) -> Result<Outcome, DriverError> {
        operate_async(node, "rescue").await
    }

    async fn unrescue(&self, node: &mut Node) -> Result<(), DriverError> {
        operate(node, "unrescue").await
    }

    async fn clean_up(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
}

/// Where the fake BIOS interface keeps the settings it was last told.
const BIOS_KEY: &str = "fake_bios";
/// Set while a fake update waits (`fake_wait` names `firmware`).
const FLASHING_KEY: &str = "fake_firmware_flashing";

/// The fake BIOS, as Ironic's: no settings until `apply_configuration` is given some; then
/// exactly those (a later apply replaces the whole list, as Ironic's fake syncs its table to
/// the list it is given), without registry. `factory_reset` empties it again.
fn fake_bios(node: &Node) -> Vec<BiosValue> {
    let setting = |name: &str, value: &Value| BiosValue {
        name: name.to_owned(),
        value: Some(match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        }),
        registry: JsonObject::new(),
    };
    match node.driver_internal_info.get(BIOS_KEY) {
        Some(Value::Array(stored)) => stored
            .iter()
            .filter_map(|entry| Some(setting(entry.get("name")?.as_str()?, entry.get("value")?)))
            .collect(),
        // Before Ferric's fake followed Ironic's it kept `{name: value}` changes to a fixed
        // BIOS; such a node shows what it was told.
        Some(Value::Object(changed)) => changed
            .iter()
            .map(|(name, value)| setting(name, value))
            .collect(),
        _ => Vec::new(),
    }
}

#[async_trait]
impl RaidInterface for Fake {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        crate::raid::raid_steps(kind)
    }

    fn validate_target(&self, _node: &Node, target: &JsonObject) -> Result<(), DriverError> {
        crate::raid::check_target(target)
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        _kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        operate(node, "raid").await?;
        crate::raid::fake_step(node, step).await
    }
}

#[async_trait]
impl BiosInterface for Fake {
    async fn cache_settings(&self, node: &Node) -> Result<Vec<BiosValue>, DriverError> {
        injected(node, "bios")?;
        Ok(fake_bios(node))
    }

    async fn apply_configuration(
        &self,
        node: &mut Node,
        changes: &[BiosChange],
    ) -> Result<(), DriverError> {
        // Ironic's fake takes any name and value: there is no BIOS to check them against.
        operate(node, "bios").await?;
        let stored: Vec<Value> = changes
            .iter()
            .map(|change| json!({"name": change.name, "value": change.value}))
            .collect();
        node.driver_internal_info
            .insert(BIOS_KEY.to_owned(), Value::Array(stored));
        Ok(())
    }

    async fn factory_reset(&self, node: &mut Node) -> Result<(), DriverError> {
        operate(node, "bios").await?;
        node.driver_internal_info.remove(BIOS_KEY);
        Ok(())
    }
}

#[async_trait]
impl FirmwareInterface for Fake {
    /// As Ironic's fake: there is no firmware to read, so no components are reported.
    async fn cache_components(&self, node: &Node) -> Result<Vec<(String, String)>, DriverError> {
        injected(node, "firmware")?;
        Ok(Vec::new())
    }

    /// As Ironic's fake: nothing is flashed (the updates were checked when the step was
    /// read); `fake_wait` makes the step wait for a callback once.
    async fn update(
        &self,
        node: &mut Node,
        _updates: &[FirmwareUpdate],
    ) -> Result<Outcome, DriverError> {
        operate(node, "firmware").await?;
        if node.driver_internal_info.remove(FLASHING_KEY).is_some() {
            // Called again after the wait.
            return Ok(Outcome::Done);
        }
        if listed(node, "fake_wait", "firmware") {
            node.driver_internal_info
                .insert(FLASHING_KEY.to_owned(), true.into());
            return Ok(Outcome::Wait);
        }
        Ok(Outcome::Done)
    }
}

/// The fake vendor passthru methods: the names, HTTP methods and modes of Ironic's `fake`
/// vendor interface, so clients written against it find the same ones.
const FAKE_VENDOR_METHODS: &[VendorMethod] = &[
    VendorMethod {
        name: "second_method",
        http_methods: &["POST"],
        is_async: true,
        description: "Checks whether 'bar' is \"kazoo\" (asynchronous: the answer is logged).",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "third_method_sync",
        http_methods: &["POST"],
        is_async: false,
        description: "Answers whether 'bar' is \"meow\".",
        attach: false,
        require_exclusive_lock: true,
    },
    VendorMethod {
        name: "fourth_method_shared_lock",
        http_methods: &["POST"],
        is_async: true,
        description: "Checks whether 'bar' is \"woof\" without taking the node's lease \
                      (asynchronous: the answer is logged).",
        attach: false,
        require_exclusive_lock: false,
    },
    VendorMethod {
        name: "log_passthrough",
        http_methods: &["POST"],
        is_async: true,
        description: "Logs the arguments it is given.",
        attach: false,
        require_exclusive_lock: true,
    },
];

/// What each fake method compares `bar` with.
fn fake_vendor_expected(method: &str) -> Option<&'static str> {
    match method {
        "second_method" => Some("kazoo"),
        "third_method_sync" => Some("meow"),
        "fourth_method_shared_lock" => Some("woof"),
        _ => None,
    }
}

/// Whether a parameter counts as given: present and not empty, false, zero or null (Python's
/// truthiness, which Ironic's check uses).
fn given(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Number(number)) => number.as_f64() != Some(0.0),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(object)) => !object.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

#[async_trait]
impl VendorInterface for Fake {
    fn methods(&self) -> &'static [VendorMethod] {
        FAKE_VENDOR_METHODS
    }

    async fn check_call(
        &self,
        _node: &Node,
        method: &VendorMethod,
        args: &JsonObject,
    ) -> Result<(), DriverError> {
        if fake_vendor_expected(method.name).is_some() && !given(args.get("bar")) {
            return Err(DriverError::missing(
                "argument.bar",
                format!("Parameter 'bar' not passed to method '{}'.", method.name),
            ));
        }
        Ok(())
    }

    async fn call(
        &self,
        node: &mut Node,
        method: &VendorMethod,
        http_method: &str,
        args: &JsonObject,
    ) -> Result<Value, DriverError> {
        operate(node, "vendor").await?;
        match fake_vendor_expected(method.name) {
            Some(expected) => {
                let matched = args.get("bar").and_then(Value::as_str) == Some(expected);
                tracing::debug!(node = %node.uuid, method = method.name, matched, "fake vendor method");
                Ok(Value::Bool(matched))
            }
            None => {
                let args = Value::Object(args.clone());
                tracing::info!(
                    node = %node.uuid,
                    method = method.name,
                    http_method,
                    %args,
                    "fake vendor passthru called"
                );
                Ok(Value::Null)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    fn node(driver_info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
        node.driver_info = driver_info.as_object().unwrap().clone();
        node
    }

    #[tokio::test]
    async fn plain_fake_succeeds_at_once() {
        let mut node = node(json!({}));
        assert_eq!(Fake.get_power_state(&node).await, Ok(PowerState::Off));
        assert_eq!(Fake.inspect(&mut node).await, Ok(Inspection::Done));
        Fake.set_boot_device(&mut node, BootDevice::Disk, true)
            .await
            .unwrap();
        let setting = Fake.get_boot_device(&node).await.unwrap();
        assert_eq!(setting.device, Some(BootDevice::Disk));
        assert_eq!(setting.persistent, Some(true));
    }

    #[tokio::test]
    async fn driver_info_injects_failures_and_waits() {
        let mut node = node(json!({"fake_fail": "power, validate", "fake_wait": "inspect"}));
        let error = Fake.get_power_state(&node).await.unwrap_err();
        assert!(error.to_string().contains("'power'"), "{error}");
        assert!(Validate::validate(&Fake, &node).await.is_err());
        assert_eq!(Fake.inspect(&mut node).await, Ok(Inspection::Wait));
        assert_eq!(Fake.rescue(&mut node).await, Ok(Outcome::Done));
    }

    fn change(name: &str, value: &str) -> BiosChange {
        BiosChange {
            name: name.to_owned(),
            value: value.to_owned(),
        }
    }

    fn value_of(settings: &[BiosValue], name: &str) -> Option<String> {
        settings
            .iter()
            .find(|setting| setting.name == name)
            .and_then(|setting| setting.value.clone())
    }

    #[tokio::test]
    async fn fake_bios_is_ironics_it_takes_any_setting_and_lists_the_last_ones_given() {
        let mut node = node(json!({}));
        assert!(Fake.cache_settings(&node).await.unwrap().is_empty());
        // Metal3's settings: names no fixed BIOS would know.
        Fake.apply_configuration(
            &mut node,
            &[change("ProcTurboMode", "Disabled"), change("NumCores", "8")],
        )
        .await
        .unwrap();
        let settings = Fake.cache_settings(&node).await.unwrap();
        assert_eq!(
            value_of(&settings, "ProcTurboMode").as_deref(),
            Some("Disabled")
        );
        assert_eq!(value_of(&settings, "NumCores").as_deref(), Some("8"));
        assert!(settings.iter().all(|setting| setting.registry.is_empty()));

        // A later apply replaces the list, as Ironic's fake syncs its table to what it got.
        Fake.apply_configuration(&mut node, &[change("ProcTurboMode", "Enabled")])
            .await
            .unwrap();
        let settings = Fake.cache_settings(&node).await.unwrap();
        assert_eq!(settings.len(), 1, "{settings:?}");
        assert_eq!(
            value_of(&settings, "ProcTurboMode").as_deref(),
            Some("Enabled")
        );

        Fake.factory_reset(&mut node).await.unwrap();
        assert!(Fake.cache_settings(&node).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn fake_bios_reads_the_changes_an_older_ferric_kept() {
        let mut node = node(json!({}));
        node.driver_internal_info
            .insert(BIOS_KEY.to_owned(), json!({"BootMode": "Bios"}));
        let settings = Fake.cache_settings(&node).await.unwrap();
        assert_eq!(value_of(&settings, "BootMode").as_deref(), Some("Bios"));
    }

    #[tokio::test]
    async fn fake_firmware_is_ironics_no_components_and_nothing_flashed() {
        let mut node = node(json!({}));
        let update = FirmwareUpdate {
            component: "bios".to_owned(),
            url: "http://images/bios.bin".to_owned(),
            checksum: None,
        };
        assert_eq!(
            Fake.update(&mut node, std::slice::from_ref(&update)).await,
            Ok(Outcome::Done)
        );
        assert!(Fake.cache_components(&node).await.unwrap().is_empty());

        let mut waiting = self::node(json!({"fake_wait": "firmware"}));
        assert_eq!(
            Fake.update(&mut waiting, std::slice::from_ref(&update))
                .await,
            Ok(Outcome::Wait)
        );
        assert_eq!(
            Fake.update(&mut waiting, &[update]).await,
            Ok(Outcome::Done),
            "called again after the callback"
        );
    }

    #[test]
    fn delay_accepts_numbers_and_strings_and_is_capped() {
        assert_eq!(
            delay(&node(json!({"fake_delay": 0.5})), "power"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            delay(&node(json!({"fake_delay": "2"})), "deploy"),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            delay(&node(json!({"fake_delay": 1e9})), "power"),
            Some(MAX_DELAY)
        );
        assert_eq!(delay(&node(json!({"fake_delay": "soon"})), "power"), None);
        assert_eq!(delay(&node(json!({"fake_delay": -1})), "power"), None);
    }

    #[test]
    fn delay_per_operation_slows_only_what_it_names() {
        let slow_deploy = node(json!({"fake_delay": {"deploy": 30, "bios": "0.5"}}));
        assert_eq!(delay(&slow_deploy, "deploy"), Some(Duration::from_secs(30)));
        assert_eq!(
            delay(&slow_deploy, "bios"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(delay(&slow_deploy, "power"), None);
    }

    #[tokio::test]
    async fn a_polled_step_polls_fake_polls_times_then_finishes() {
        let mut node = node(json!({"fake_poll": "deploy", "fake_polls": 2}));
        let step = StepCall {
            interface: InterfaceKind::Deploy,
            step: "deploy".to_owned(),
            args: JsonObject::new(),
            priority: 100,
        };
        for polled in 1..=2 {
            assert_eq!(
                DeployInterface::execute_step(&Fake, &mut node, StepKind::Deploy, &step).await,
                Ok(Outcome::Poll(Duration::from_millis(100)))
            );
            assert_eq!(node.driver_internal_info[POLLED_KEY], polled);
            assert_eq!(
                node.driver_internal_info["deploy_progress"],
                json!({
                    "step": "write_image",
                    "bytes_written": (polled - 1) * FAKE_WRITE_PER_POLL,
                    "total_bytes": 2 * FAKE_WRITE_PER_POLL,
                })
            );
        }
        assert_eq!(
            DeployInterface::execute_step(&Fake, &mut node, StepKind::Deploy, &step).await,
            Ok(Outcome::Done)
        );
        assert!(!node.driver_internal_info.contains_key(POLLED_KEY));
        assert_eq!(
            node.driver_internal_info["deploy_progress"]["bytes_written"],
            2 * FAKE_WRITE_PER_POLL
        );
        // Other kinds are not polled.
        assert_eq!(
            DeployInterface::execute_step(&Fake, &mut node, StepKind::Clean, &step).await,
            Ok(Outcome::Done)
        );
    }
}
