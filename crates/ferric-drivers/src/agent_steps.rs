//! The steps an agent offers (`reference/ironic.md` §4.2): what `clean.get_clean_steps`,
//! `deploy.get_deploy_steps` and `service.get_service_steps` answered, checked and cached in
//! the node's `driver_internal_info` under Ironic's names, so that an unmodified
//! ironic-python-agent with custom hardware managers and `ferric-agent` are driven alike.
//!
//! The agent answers `{"<kind>_steps": {"<HardwareManager>": [step, …]},
//! "hardware_manager_version": {"<manager>": "<version>"}}`, each step
//! `{step, priority, interface, reboot_requested, abortable, argsinfo}`. The steps are kept
//! by interface in `agent_cached_<kind>_steps` (with `agent_cached_<kind>_steps_refreshed`,
//! a timestamp), the versions in `hardware_manager_version`: the conductor sends them back as
//! `<kind>_version` with every `execute_<kind>_step`, and an agent whose hardware managers
//! changed since answers `CLEAN_VERSION_MISMATCH`.

use ferric_model::resources::{InterfaceKind, JsonObject, Node};
use serde_json::Value;

use crate::interfaces::StepKind;

/// Where the agent's hardware manager versions are kept (one for every kind, as Ironic).
pub const VERSION_KEY: &str = "hardware_manager_version";

/// `agent_cached_<kind>_steps`: the agent's steps by interface.
pub fn cache_key(kind: StepKind) -> String {
    format!("agent_cached_{}_steps", kind.as_str())
}

fn refreshed_key(kind: StepKind) -> String {
    format!("agent_cached_{}_steps_refreshed", kind.as_str())
}

/// Every `driver_internal_info` key of this module: forgotten with the agent.
pub fn keys() -> Vec<String> {
    let mut keys = vec![VERSION_KEY.to_owned()];
    for kind in [StepKind::Clean, StepKind::Deploy, StepKind::Service] {
        keys.push(cache_key(kind));
        keys.push(refreshed_key(kind));
    }
    keys
}

/// One step the agent offers.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentStepDef {
    pub interface: InterfaceKind,
    pub step: String,
    pub priority: u32,
    /// Ironic reads a missing `abortable` as false.
    pub abortable: bool,
    pub reboot_requested: bool,
    /// `{"<arg>": {"description": …, "required": bool}}`, when the agent describes them.
    pub argsinfo: Option<JsonObject>,
}

impl AgentStepDef {
    /// The names of the arguments the step declares as required.
    pub fn required_args(&self) -> Vec<&str> {
        self.argsinfo
            .iter()
            .flatten()
            .filter(|(_, info)| info.get("required").and_then(Value::as_bool) == Some(true))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    fn from_json(step: &JsonObject) -> Option<Self> {
        Some(Self {
            interface: InterfaceKind::from_name(step.get("interface")?.as_str()?)?,
            step: step.get("step")?.as_str()?.to_owned(),
            priority: u32::try_from(step.get("priority")?.as_u64()?).ok()?,
            abortable: step.get("abortable").and_then(Value::as_bool) == Some(true),
            reboot_requested: step.get("reboot_requested").and_then(Value::as_bool) == Some(true),
            argsinfo: step.get("argsinfo").and_then(Value::as_object).cloned(),
        })
    }
}

/// Checks what `<kind>.get_<kind>_steps` answered (its `command_result`) and returns the steps
/// by interface, as they are cached, and the hardware manager versions. The error names what
/// the agent got wrong.
pub fn parse(kind: StepKind, result: &Value) -> Result<(JsonObject, JsonObject), String> {
    let list_key = format!("{}_steps", kind.as_str());
    let command = format!("get_{}_steps", kind.as_str());
    let answer = result.as_object().ok_or_else(|| {
        format!("the agent answered {command} with {result}, which is not an object")
    })?;
    let missing: Vec<&str> = [list_key.as_str(), VERSION_KEY]
        .into_iter()
        .filter(|key| !answer.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the agent's answer to {command} lacks {} (it has: {})",
            missing.join(" and "),
            answer.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let versions = answer[VERSION_KEY].as_object().cloned().ok_or_else(|| {
        format!(
            "the agent's hardware_manager_version is {}, not an object of manager names and \
             versions",
            answer[VERSION_KEY]
        )
    })?;
    let managers = answer[&list_key].as_object().ok_or_else(|| {
        format!(
            "the agent's {list_key} is {}, not an object of hardware managers and their steps",
            answer[&list_key]
        )
    })?;
    let mut by_interface: std::collections::BTreeMap<&'static str, Vec<Value>> =
        std::collections::BTreeMap::new();
    for (manager, steps) in managers {
        let steps = steps.as_array().ok_or_else(|| {
            format!("hardware manager {manager} lists its {list_key} as {steps}, not a list")
        })?;
        for step in steps {
            let object = step
                .as_object()
                .ok_or_else(|| format!("hardware manager {manager} offers a step {step}"))?;
            let missing: Vec<&str> = ["interface", "step", "priority"]
                .into_iter()
                .filter(|key| !object.contains_key(*key))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "hardware manager {manager} offers the step {step} without {}",
                    missing.join(", ")
                ));
            }
            let parsed = AgentStepDef::from_json(object).ok_or_else(|| {
                format!(
                    "hardware manager {manager} offers the step {step}: its step must be a \
                     name, its interface one of {}, its priority a whole number ≥ 0",
                    InterfaceKind::ALL.map(InterfaceKind::as_str).join(", ")
                )
            })?;
            if let Some(args) = object.get("argsinfo")
                && !args.is_null()
                && !args.is_object()
            {
                return Err(format!(
                    "hardware manager {manager} describes the arguments of {} as {args}, not \
                     an object",
                    parsed.step
                ));
            }
            let mut cached = object.clone();
            if kind == StepKind::Clean {
                cached.insert("requires_ramdisk".into(), true.into());
            }
            by_interface
                .entry(parsed.interface.as_str())
                .or_default()
                .push(Value::Object(cached));
        }
    }
    let by_interface = by_interface
        .into_iter()
        .map(|(interface, steps)| (interface.to_owned(), Value::Array(steps)))
        .collect();
    Ok((by_interface, versions))
}

/// Caches a parsed answer on the node.
pub fn store(node: &mut Node, kind: StepKind, steps: JsonObject, versions: JsonObject) {
    let info = &mut node.driver_internal_info;
    info.insert(VERSION_KEY.into(), Value::Object(versions));
    info.insert(cache_key(kind), Value::Object(steps));
    info.insert(refreshed_key(kind), chrono::Utc::now().to_rfc3339().into());
}

/// The cached steps of `kind` (none before the agent was asked).
pub fn cached(node: &Node, kind: StepKind) -> Vec<AgentStepDef> {
    node.driver_internal_info
        .get(&cache_key(kind))
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|by_interface| by_interface.values())
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(Value::as_object)
        .filter_map(AgentStepDef::from_json)
        .collect()
}

/// The hardware manager versions to send back with a step (`null` before the agent was
/// asked: the agent then checks nothing).
pub fn version(node: &Node) -> Value {
    node.driver_internal_info
        .get(VERSION_KEY)
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What IPA's `clean.get_clean_steps` answers (generic hardware manager, abridged).
    fn ipa_clean_steps() -> Value {
        json!({
            "clean_steps": {"GenericHardwareManager": [
                {"step": "erase_devices", "priority": 10, "interface": "deploy",
                 "reboot_requested": false, "abortable": true},
                {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy",
                 "reboot_requested": false, "abortable": true},
                {"step": "clean_uefi_nvram", "priority": 0, "interface": "deploy",
                 "reboot_requested": false, "abortable": true,
                 "argsinfo": {"match_patterns": {"description": "…", "required": false}}},
                {"step": "delete_configuration", "priority": 0, "interface": "raid",
                 "reboot_requested": false, "abortable": true},
            ], "CustomManager": [
                {"step": "flash_nic", "priority": 50, "interface": "deploy",
                 "reboot_requested": false,
                 "argsinfo": {"url": {"description": "firmware", "required": true}}},
            ]},
            "hardware_manager_version": {"generic_hardware_manager": "1.2", "custom": "3"},
        })
    }

    #[test]
    fn ipa_answers_are_cached_by_interface_with_their_versions() {
        let (steps, versions) = parse(StepKind::Clean, &ipa_clean_steps()).expect("valid");
        assert_eq!(steps["deploy"].as_array().map(Vec::len), Some(4));
        assert_eq!(steps["raid"].as_array().map(Vec::len), Some(1));
        assert_eq!(steps["deploy"][0]["requires_ramdisk"], true);
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "fake-hardware",
            ferric_model::ProvisionState::Cleaning,
        );
        assert_eq!(version(&node), Value::Null);
        store(&mut node, StepKind::Clean, steps, versions);
        assert_eq!(version(&node)["custom"], "3");
        let offered = cached(&node, StepKind::Clean);
        let flash = offered
            .iter()
            .find(|step| step.step == "flash_nic")
            .unwrap();
        assert_eq!(flash.priority, 50);
        assert!(!flash.abortable, "a missing abortable reads as false");
        assert_eq!(flash.required_args(), ["url"]);
        assert!(cached(&node, StepKind::Deploy).is_empty());
        for key in keys() {
            node.driver_internal_info.remove(&key);
        }
        assert!(node.driver_internal_info.is_empty());
    }

    #[test]
    fn answers_ferric_cannot_use_are_named() {
        for (answer, says) in [
            (json!([]), "not an object"),
            (json!({"clean_steps": {}}), "lacks hardware_manager_version"),
            (
                json!({"clean_steps": {}, "hardware_manager_version": "1.0"}),
                "not an object of manager names",
            ),
            (
                json!({"clean_steps": {"M": {}}, "hardware_manager_version": {}}),
                "not a list",
            ),
            (
                json!({"clean_steps": {"M": [{"step": "x", "interface": "deploy"}]},
                       "hardware_manager_version": {}}),
                "without priority",
            ),
            (
                json!({"clean_steps": {"M": [{"step": "x", "interface": "nic", "priority": 1}]},
                       "hardware_manager_version": {}}),
                "its interface one of",
            ),
            (
                json!({"clean_steps": {"M": [{"step": "x", "interface": "deploy", "priority": -1}]},
                       "hardware_manager_version": {}}),
                "whole number",
            ),
        ] {
            let error = parse(StepKind::Clean, &answer).unwrap_err();
            assert!(error.contains(says), "{answer}: {error}");
        }
    }
}
