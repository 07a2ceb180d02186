//! RAID as steps (`raid.create_configuration`, `raid.delete_configuration`, and in deploy
//! steps `raid.apply_configuration`): the target configuration's schema, what a node records
//! once volumes exist, and the `fake` and `agent` implementations (`no-raid` is in `noop.rs`).
//!
//! Theory of operation: the operator stores a target with `PUT /v1/nodes/{node}/states/raid`
//! (checked here by [`check_target`] and the implementation's own rules), then runs a step.
//! The `agent` implementation builds Linux software RAID with mdadm in the ramdisk: each
//! logical disk is one array over whole disks, with its superblock at the end of each member
//! (metadata 1.0), so every member starts with the array's first sector and firmware boots any
//! of them like a plain disk — a whole-disk image written onto the root array boots without a
//! bootloader installed per member. Whatever built the volumes, [`record_created`] stores them
//! in `raid_config` and points `properties.root_device` at the root volume, so the deploy that
//! follows writes the image onto it.

use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node};
use serde_json::{Value, json};

use crate::Component;
use crate::DriverError;
use crate::direct::{AgentStep, DirectDeploy};
use crate::interfaces::{Outcome, RaidInterface, StepCall, StepDef, StepKind, Validate};

/// The RAID levels a target may name (Ironic's schema).
pub const RAID_LEVELS: &[&str] = &["0", "1", "2", "5", "6", "1+0", "5+0", "6+0"];

/// The levels Linux software RAID builds, with the fewest member disks each needs.
pub const SOFTWARE_LEVELS: &[(&str, usize)] = &[("0", 2), ("1", 2), ("5", 3), ("6", 4), ("1+0", 4)];

/// Where the root device hint set by a RAID step is remembered, so deleting the volumes
/// removes only a hint that RAID set.
const ROOT_HINT_KEY: &str = "raid_root_device";

const CREATE_ARGS: &[(&str, &str)] = &[
    (
        "create_root_volume",
        "Build the logical disk marked is_root_volume (default true).",
    ),
    (
        "create_nonroot_volumes",
        "Build the other logical disks (default true).",
    ),
    (
        "delete_existing",
        "Remove every existing volume first (default true).",
    ),
];
const APPLY_ARGS: &[(&str, &str)] = &[
    (
        "raid_config",
        "The target RAID configuration to build (as PUT /states/raid takes it). Required.",
    ),
    (
        "delete_existing",
        "Remove every existing volume first (default true).",
    ),
];

fn step(step: &'static str, argsinfo: &'static [(&'static str, &'static str)]) -> StepDef {
    StepDef {
        interface: InterfaceKind::Raid,
        step,
        priority: 0,
        abortable: false,
        argsinfo,
    }
}

/// The steps of an implemented RAID interface: on demand only (priority 0), not abortable (a
/// half-built array is worse than a finished one).
pub fn raid_steps(kind: StepKind) -> Vec<StepDef> {
    match kind {
        StepKind::Clean | StepKind::Service => vec![
            step("create_configuration", CREATE_ARGS),
            step("delete_configuration", &[]),
        ],
        StepKind::Deploy => vec![
            step("apply_configuration", APPLY_ARGS),
            step("delete_configuration", &[]),
        ],
    }
}

fn invalid(message: impl std::fmt::Display) -> DriverError {
    DriverError::invalid(
        "node.target_raid_config",
        format!("RAID config validation error: {message}"),
    )
}

/// The logical disks of a target (an empty object means "no RAID").
pub fn logical_disks(target: &JsonObject) -> &[Value] {
    target
        .get("logical_disks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Checks `target` against Ironic's schema for a target RAID configuration. `{}` (clear the
/// target) is valid.
pub fn check_target(target: &JsonObject) -> Result<(), DriverError> {
    if target.is_empty() {
        return Ok(());
    }
    if let Some(extra) = target.keys().find(|key| *key != "logical_disks") {
        return Err(invalid(format!(
            "unknown property \"{extra}\"; a target RAID configuration has only \
             \"logical_disks\"."
        )));
    }
    let disks = target
        .get("logical_disks")
        .and_then(Value::as_array)
        .filter(|disks| !disks.is_empty())
        .ok_or_else(|| invalid("\"logical_disks\" must be a non-empty list."))?;
    let mut roots = 0;
    for (index, disk) in disks.iter().enumerate() {
        let disk = disk
            .as_object()
            .ok_or_else(|| invalid(format!("logical disk {index} must be an object.")))?;
        let at = |message: String| invalid(format!("logical disk {index}: {message}"));
        match disk.get("raid_level").and_then(Value::as_str) {
            Some(level) if RAID_LEVELS.contains(&level) => {}
            Some(level) => {
                return Err(at(format!(
                    "raid_level \"{level}\" is not one of {}.",
                    RAID_LEVELS.join(", ")
                )));
            }
            None => {
                return Err(at(format!(
                    "\"raid_level\" is required, one of {} (as a string).",
                    RAID_LEVELS.join(", ")
                )));
            }
        }
        match disk.get("size_gb") {
            Some(Value::String(max)) if max == "MAX" => {}
            Some(Value::Number(number)) if number.as_u64().is_some() => {}
            Some(other) => {
                return Err(at(format!(
                    "size_gb must be a whole number of GiB or \"MAX\", not {other}."
                )));
            }
            None => return Err(at("\"size_gb\" is required (GiB, or \"MAX\").".to_owned())),
        }
        for (key, value) in disk {
            let fine = match key.as_str() {
                "raid_level" | "size_gb" => true,
                "volume_name" | "controller" => value.is_string(),
                "is_root_volume" | "share_physical_disks" => value.is_boolean(),
                "disk_type" => matches!(value.as_str(), Some("hdd" | "ssd")),
                "interface_type" => matches!(value.as_str(), Some("sata" | "scsi" | "sas")),
                "number_of_physical_disks" => value.as_u64().is_some_and(|count| count >= 1),
                "physical_disks" => value
                    .as_array()
                    .is_some_and(|disks| disks.iter().all(|d| d.is_string() || d.is_object())),
                _ => {
                    return Err(at(format!(
                        "unknown property \"{key}\" (known: raid_level, size_gb, volume_name, \
                         is_root_volume, share_physical_disks, disk_type, interface_type, \
                         number_of_physical_disks, controller, physical_disks)."
                    )));
                }
            };
            if !fine {
                return Err(at(format!("{key} has an invalid value {value}.")));
            }
        }
        if disk.get("is_root_volume").and_then(Value::as_bool) == Some(true) {
            roots += 1;
        }
    }
    if roots > 1 {
        return Err(invalid(
            "only one logical disk may have is_root_volume true.",
        ));
    }
    Ok(())
}

/// What Linux software RAID can build (the `agent` implementation): every logical disk says
/// `"controller": "software"`, at a level mdadm builds, on whole disks no other logical disk
/// uses.
pub fn check_software_target(target: &JsonObject) -> Result<(), DriverError> {
    check_target(target)?;
    let disks = logical_disks(target);
    for (index, disk) in disks.iter().enumerate() {
        let at = |message: String| invalid(format!("logical disk {index}: {message}"));
        if disk.get("controller").and_then(Value::as_str) != Some("software") {
            return Err(at(
                "raid_interface agent builds Linux software RAID only: set \"controller\": \
                 \"software\" (hardware RAID needs the BMC's raid interface, e.g. redfish)."
                    .to_owned(),
            ));
        }
        let level = disk["raid_level"].as_str().unwrap_or_default();
        let Some((_, minimum)) = SOFTWARE_LEVELS.iter().find(|(name, _)| *name == level) else {
            return Err(at(format!(
                "software RAID builds levels {}, not {level}.",
                SOFTWARE_LEVELS
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if let Some(members) = disk.get("physical_disks").and_then(Value::as_array)
            && members.len() < *minimum
        {
            return Err(at(format!(
                "RAID {level} needs at least {minimum} physical disks, {} given.",
                members.len()
            )));
        }
        if disks.len() > 1 && disk.get("physical_disks").is_none() {
            return Err(at(
                "with more than one logical disk each one must list its \"physical_disks\" \
                 (software RAID uses whole disks, one logical disk per disk)."
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

/// Records volumes that now exist: `raid_config` lists them, and the root volume's
/// `root_device_hint` (and its size, when known) become the node's `root_device` and
/// `local_gb`.
pub fn record_created(node: &mut Node, logical_disks: Vec<Value>) {
    let root = logical_disks
        .iter()
        .find(|disk| disk.get("is_root_volume").and_then(Value::as_bool) == Some(true))
        .cloned();
    node.raid_config = json!({ "logical_disks": logical_disks })
        .as_object()
        .cloned()
        .unwrap_or_default();
    let Some(root) = root else {
        return;
    };
    if let Some(hint) = root.get("root_device_hint").filter(|hint| hint.is_object()) {
        node.properties.insert("root_device".into(), hint.clone());
        node.driver_internal_info
            .insert(ROOT_HINT_KEY.into(), hint.clone());
    }
    if let Some(size) = root.get("size_gb").and_then(Value::as_u64) {
        node.properties.insert("local_gb".into(), size.into());
    }
}

/// Forgets the volumes after they were deleted, and the root device hint RAID set (it names a
/// device that no longer exists).
pub fn record_deleted(node: &mut Node) {
    node.raid_config.clear();
    if let Some(hint) = node.driver_internal_info.remove(ROOT_HINT_KEY)
        && node.properties.get("root_device") == Some(&hint)
    {
        node.properties.remove("root_device");
    }
}

pub(crate) fn flag(args: &JsonObject, name: &str) -> Result<bool, DriverError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(true),
        Some(Value::Bool(flag)) => Ok(*flag),
        Some(other) => Err(DriverError::invalid(
            format!("argument.{name}"),
            format!("The RAID step argument {name} must be true or false, not {other}."),
        )),
    }
}

/// The target a create step builds: the node's `target_raid_config`, or for
/// `apply_configuration` the `raid_config` argument (which then becomes the target).
pub(crate) fn target_for(
    node: &mut Node,
    step: &StepCall,
    check: fn(&JsonObject) -> Result<(), DriverError>,
) -> Result<JsonObject, DriverError> {
    if step.step == "apply_configuration" {
        let config = step
            .args
            .get("raid_config")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| {
                DriverError::missing(
                    "argument.raid_config",
                    "raid.apply_configuration needs the \"raid_config\" argument: the target \
                     RAID configuration to build."
                        .to_owned(),
                )
            })?;
        check(&config)?;
        node.target_raid_config = config;
    }
    if logical_disks(&node.target_raid_config).is_empty() {
        return Err(DriverError::missing(
            "node.target_raid_config",
            format!(
                "Node {} has no target RAID configuration: set one with PUT \
             /v1/nodes/{}/states/raid (baremetal node set --target-raid-config) before \
             raid.create_configuration.",
                node.uuid, node.uuid
            ),
        ));
    }
    check(&node.target_raid_config)?;
    Ok(node.target_raid_config.clone())
}

pub(crate) fn unknown_step(step: &StepCall) -> DriverError {
    DriverError::invalid(
        "argument.step",
        format!(
            "The RAID interface has no step \"{}\"; it offers create_configuration, \
         delete_configuration and (in deploy steps) apply_configuration.",
            step.step
        ),
    )
}

/// The fake RAID: the target's volumes exist as soon as they are asked for, named
/// `/dev/md0`, `/dev/md1`, … like software RAID's.
pub(crate) async fn fake_step(node: &mut Node, step: &StepCall) -> Result<Outcome, DriverError> {
    match step.step.as_str() {
        "create_configuration" | "apply_configuration" => {
            let target = target_for(node, step, check_target)?;
            let create_root = flag(&step.args, "create_root_volume")?;
            let create_others = flag(&step.args, "create_nonroot_volumes")?;
            let disks = logical_disks(&target)
                .iter()
                .filter(|disk| {
                    if disk.get("is_root_volume").and_then(Value::as_bool) == Some(true) {
                        create_root
                    } else {
                        create_others
                    }
                })
                .enumerate()
                .map(|(index, disk)| {
                    let mut disk = disk.clone();
                    disk["root_device_hint"] = json!({ "name": format!("/dev/md{index}") });
                    disk
                })
                .collect();
            record_created(node, disks);
            Ok(Outcome::Done)
        }
        "delete_configuration" => {
            record_deleted(node);
            Ok(Outcome::Done)
        }
        _ => Err(unknown_step(step)),
    }
}

/// The `agent` RAID interface: Linux software RAID, built by the ramdisk agent with mdadm
/// (needs the `direct` deploy interface, whose ramdisk runs the steps).
pub struct AgentRaid {
    pub(crate) deploy: Option<Arc<DirectDeploy>>,
}

impl std::fmt::Debug for AgentRaid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRaid").finish_non_exhaustive()
    }
}

impl AgentRaid {
    fn deploy(&self, node: &Node) -> Result<&DirectDeploy, DriverError> {
        self.deploy.as_deref().ok_or_else(|| {
            DriverError::invalid(
                "node.deploy_interface",
                format!(
                    "raid_interface agent builds software RAID in the agent ramdisk, which node {} \
                 boots only with deploy_interface direct (it has {}).",
                    node.uuid,
                    node.deploy_interface.as_deref().unwrap_or("none")
                ),
            )
        })
    }
}

#[async_trait]
impl Validate for AgentRaid {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        self.deploy(node)?;
        check_software_target(&node.target_raid_config)
    }
}

#[async_trait]
impl RaidInterface for AgentRaid {
    fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        raid_steps(kind)
    }

    fn needs_agent(&self) -> bool {
        true
    }

    fn validate_target(&self, _node: &Node, target: &JsonObject) -> Result<(), DriverError> {
        check_software_target(target)
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        let deploy = self.deploy(node)?;
        let creates = matches!(
            step.step.as_str(),
            "create_configuration" | "apply_configuration"
        );
        if creates {
            target_for(node, step, check_software_target)?;
            flag(&step.args, "create_root_volume")?;
            flag(&step.args, "create_nonroot_volumes")?;
        } else if step.step != "delete_configuration" {
            // Another RAID step the agent offered (a hardware manager's own): run it there.
            return match deploy.run_agent_step(node, kind, step).await? {
                AgentStep::Running(outcome) => Ok(outcome),
                AgentStep::Finished(_) => Ok(Outcome::Done),
            };
        }
        flag(&step.args, "delete_existing")?;
        let result = match deploy.run_agent_step(node, kind, step).await? {
            AgentStep::Running(outcome) => return Ok(outcome),
            AgentStep::Finished(result) => result,
        };
        if creates {
            // The agent answers with the volumes it built (IPA's form: the step's result).
            let built = result
                .get(format!("{}_result", kind.as_str()))
                .and_then(|inner| inner.get("logical_disks"))
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| {
                    DriverError::failed(
                        Component::Agent,
                        format!(
                            "The agent finished {} without listing the volumes it built: {result}",
                            step.step
                        ),
                    )
                })?;
            record_created(node, built);
        } else {
            record_deleted(node);
        }
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn targets_are_checked_against_the_schema() {
        let good = object(json!({"logical_disks": [
            {"size_gb": "MAX", "raid_level": "1", "is_root_volume": true, "controller": "software",
             "physical_disks": [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]},
            {"size_gb": 10, "raid_level": "0", "volume_name": "scratch"}]}));
        check_target(&good).expect("valid");
        check_target(&JsonObject::new()).expect("empty clears");
        for (bad, says) in [
            (json!({"logical_disks": []}), "non-empty"),
            (json!({"disks": []}), "unknown property \"disks\""),
            (
                json!({"logical_disks": [{"size_gb": 1}]}),
                "\"raid_level\" is required",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "7"}]}),
                "not one of",
            ),
            (
                json!({"logical_disks": [{"size_gb": -1, "raid_level": "1"}]}),
                "whole number",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "colour": "red"}]}),
                "unknown property \"colour\"",
            ),
            (
                json!({"logical_disks": [{"size_gb": 1, "raid_level": "1", "disk_type": "tape"}]}),
                "disk_type",
            ),
            (
                json!({"logical_disks": [
                {"size_gb": 1, "raid_level": "1", "is_root_volume": true},
                {"size_gb": 1, "raid_level": "1", "is_root_volume": true}]}),
                "only one",
            ),
        ] {
            let error = check_target(&object(bad)).unwrap_err().to_string();
            assert!(error.contains(says), "{error} should say {says}");
        }
    }

    #[test]
    fn software_raid_needs_the_software_controller_and_enough_disks() {
        let software =
            |disk: Value| check_software_target(&object(json!({"logical_disks": [disk]})));
        software(json!({"size_gb": "MAX", "raid_level": "1", "controller": "software"}))
            .expect("ok");
        let hardware = software(json!({"size_gb": "MAX", "raid_level": "1"})).unwrap_err();
        assert!(
            hardware
                .to_string()
                .contains("\"controller\": \"software\""),
            "{hardware}"
        );
        let level =
            software(json!({"size_gb": "MAX", "raid_level": "5+0", "controller": "software"}))
                .unwrap_err();
        assert!(level.to_string().contains("0, 1, 5, 6, 1+0"), "{level}");
        let few = software(
            json!({"size_gb": "MAX", "raid_level": "5", "controller": "software",
            "physical_disks": ["/dev/sda", "/dev/sdb"]}),
        )
        .unwrap_err();
        assert!(few.to_string().contains("at least 3"), "{few}");
    }

    #[tokio::test]
    async fn the_root_volume_becomes_the_root_device_and_goes_with_it() {
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "fake-hardware",
            ferric_model::state::ProvisionState::Manageable,
        );
        node.properties
            .insert("root_device".into(), json!({"serial": "old"}));
        let create = StepCall {
            interface: InterfaceKind::Raid,
            step: "create_configuration".into(),
            args: JsonObject::new(),
            priority: 0,
        };
        let missing = fake_step(&mut node, &create).await.unwrap_err();
        assert!(missing.to_string().contains("PUT /v1/nodes/"), "{missing}");
        node.target_raid_config = object(json!({"logical_disks": [
            {"size_gb": 100, "raid_level": "1", "is_root_volume": true}]}));
        fake_step(&mut node, &create).await.expect("created");
        assert_eq!(node.properties["root_device"], json!({"name": "/dev/md0"}));
        assert_eq!(node.properties["local_gb"], json!(100));
        assert_eq!(node.raid_config["logical_disks"][0]["raid_level"], "1");
        let delete = StepCall {
            step: "delete_configuration".into(),
            ..create
        };
        fake_step(&mut node, &delete).await.expect("deleted");
        assert!(node.raid_config.is_empty());
        assert!(!node.properties.contains_key("root_device"));
    }
}
