//! In-band clean, deploy and service steps (`clean.*`, `deploy.*`, `service.*`): the step
//! lists the conductor merges into its plan, and their execution.

use serde_json::{Value, json};

use crate::agent::Invocation;
use crate::commands::{CommandError, Params};

/// The name the steps are listed under, and its version (the conductor passes it back as
/// `clean_version`; a different one means the ramdisk changed under a running clean).
pub const MANAGER: &str = "FerricHardwareManager";
pub const MANAGER_VERSION: &str = "1.0";

fn manager_version() -> Value {
    json!({ MANAGER: MANAGER_VERSION })
}

fn step(name: &str, priority: u32, description: &str, argsinfo: Value) -> Value {
    json!({
        "step": name,
        "priority": priority,
        "interface": "deploy",
        "reboot_requested": false,
        "abortable": true,
        "description": description,
        "argsinfo": argsinfo,
    })
}

/// A `raid.*` step: on demand only, not abortable (a half-built array is worse than either).
fn raid_step(name: &str, description: &str, argsinfo: Value) -> Value {
    json!({
        "step": name,
        "priority": 0,
        "interface": "raid",
        "reboot_requested": false,
        "abortable": false,
        "description": description,
        "argsinfo": argsinfo,
    })
}

/// The clean steps with IPA's generic priorities: metadata 99, full erase 10.
pub fn clean_steps() -> Value {
    json!([
        step(
            "erase_devices_metadata",
            99,
            "Erase partition tables and signatures at both ends of every disk",
            Value::Null
        ),
        step(
            "erase_devices",
            10,
            "Erase every disk: the disk's secure erase where it has one, else overwrite it",
            Value::Null
        ),
        raid_step(
            "create_configuration",
            "Build the node's target_raid_config as Linux software RAID (mdadm)",
            json!({
                "create_root_volume": {"description": "build the root volume (default true)", "required": false},
                "create_nonroot_volumes": {"description": "build the other volumes (default true)", "required": false},
                "delete_existing": {"description": "remove existing arrays first (default true)", "required": false},
            })
        ),
        raid_step(
            "delete_configuration",
            "Stop every software RAID array and clear its members",
            Value::Null
        ),
    ])
}

/// The deploy steps; priority 0 means "only when the conductor asks" (its own `write_image`
/// step at priority 80 calls ours).
pub fn deploy_steps() -> Value {
    json!([
        step(
            "write_image",
            0,
            "Write a whole-disk image and its config drive to the root disk",
            json!({
                "image_info": {"description": "the image: id, urls, disk_format, os_hash_algo/os_hash_value or checksum", "required": true},
                "configdrive": {"description": "base64 gzipped ISO or a URL", "required": false},
            })
        ),
        step(
            "erase_devices_metadata",
            0,
            "Erase partition tables and signatures at both ends of every disk",
            Value::Null
        ),
        raid_step(
            "apply_configuration",
            "Build the given RAID configuration as Linux software RAID (mdadm)",
            json!({
                "raid_config": {"description": "the target RAID configuration", "required": true},
                "delete_existing": {"description": "remove existing arrays first (default true)", "required": false},
            })
        ),
        raid_step(
            "delete_configuration",
            "Stop every software RAID array and clear its members",
            Value::Null
        ),
    ])
}

/// The service steps: software RAID on a deployed machine (on demand only).
pub fn service_steps() -> Value {
    json!([
        raid_step(
            "create_configuration",
            "Build the node's target_raid_config as Linux software RAID (mdadm)",
            json!({
                "create_root_volume": {"description": "build the root volume (default true)", "required": false},
                "create_nonroot_volumes": {"description": "build the other volumes (default true)", "required": false},
                "delete_existing": {"description": "remove existing arrays first (default true)", "required": false},
            })
        ),
        raid_step(
            "apply_configuration",
            "Build the given RAID configuration as Linux software RAID (mdadm)",
            json!({
                "raid_config": {"description": "the target RAID configuration", "required": true},
                "delete_existing": {"description": "remove existing arrays first (default true)", "required": false},
            })
        ),
        raid_step(
            "delete_configuration",
            "Stop every software RAID array and clear its members",
            Value::Null
        ),
    ])
}

pub(crate) fn get_service_steps_command(_: &Invocation) -> Result<Option<Value>, CommandError> {
    Ok(Some(json!({
        "service_steps": { MANAGER: service_steps() },
        "hardware_manager_version": manager_version(),
    })))
}

pub(crate) fn execute_service_step_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    check_version(&invocation.params, "service_version")?;
    let result = run_step(invocation, "service")?;
    Ok(Some(
        json!({"service_result": result, "service_step": invocation.params["step"]}),
    ))
}

pub(crate) fn get_clean_steps_command(_: &Invocation) -> Result<Option<Value>, CommandError> {
    Ok(Some(json!({
        "clean_steps": { MANAGER: clean_steps() },
        "hardware_manager_version": manager_version(),
    })))
}

pub(crate) fn get_deploy_steps_command(_: &Invocation) -> Result<Option<Value>, CommandError> {
    Ok(Some(json!({
        "deploy_steps": { MANAGER: deploy_steps() },
        "hardware_manager_version": manager_version(),
    })))
}

pub(crate) fn validate_execute_step(params: &Params) -> Result<(), CommandError> {
    let step = params
        .get("step")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            CommandError::invalid_params("step must be an object with a \"step\" name")
        })?;
    if !step.get("step").is_some_and(Value::is_string) {
        return Err(CommandError::invalid_params(
            "step.step must be the step's name",
        ));
    }
    if step
        .get("args")
        .is_some_and(|args| !args.is_object() && !args.is_null())
    {
        return Err(CommandError::invalid_params("step.args must be an object"));
    }
    Ok(())
}

fn check_version(params: &Params, key: &str) -> Result<(), CommandError> {
    match params.get(key) {
        // Absent or empty means "not checked", as in IPA (Ferric's conductor sends `{}`).
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(given)) if given.is_empty() => Ok(()),
        Some(given) if *given == manager_version() => Ok(()),
        Some(given) => Err(CommandError {
            version_mismatch: true,
            ..CommandError::new(
                "VersionMismatch",
                "Hardware manager version mismatch",
                format!(
                    "the step was planned with hardware manager versions {given}, this agent has {}",
                    manager_version()
                ),
            )
        }),
    }
}

fn unknown_step(name: &str, kind: &str) -> CommandError {
    CommandError::new(
        "HardwareManagerMethodNotFound",
        "No HardwareManager found to handle method",
        format!("no {kind} step named {name:?} in {MANAGER}"),
    )
}

/// Runs one step by name; shared by clean and deploy.
fn run_step(invocation: &Invocation, kind: &str) -> Result<Value, CommandError> {
    let params = &invocation.params;
    let step = &params["step"];
    let name = step["step"].as_str().unwrap_or_default();
    let agent = &invocation.agent;
    // Members of a software RAID array are erased through their array.
    let disks = || {
        crate::disk::writable(&agent.config).map_err(|error| {
            CommandError::new("HardwareError", "Cannot list disks", error.to_string())
        })
    };
    if step["interface"] == "raid" {
        let args = step["args"].as_object().cloned().unwrap_or_default();
        return match name {
            "create_configuration" | "apply_configuration" => {
                if name == "apply_configuration" && !args.contains_key("raid_config") {
                    return Err(CommandError::invalid_params(
                        "raid.apply_configuration needs the raid_config argument",
                    ));
                }
                crate::raid::create(&agent.config, params.get("node"), &args)
            }
            "delete_configuration" => {
                let removed = crate::raid::delete_all(&agent.config)?;
                Ok(json!({ "removed": removed }))
            }
            _ => Err(unknown_step(name, kind)),
        };
    }
    match (kind, name) {
        (_, "erase_devices_metadata") => crate::erase::erase_metadata_all(&disks()?),
        ("clean", "erase_devices") => crate::erase::erase_all(
            &disks()?,
            crate::erase::EraseOptions::from_node(params.get("node")),
            &invocation.progress,
        ),
        ("deploy", "write_image") => {
            let args = step["args"].as_object().cloned().unwrap_or_default();
            crate::image::validate_prepare_image(&args)?;
            crate::image::prepare_image(agent, &args, &invocation.progress, params.get("node"))
        }
        _ => Err(unknown_step(name, kind)),
    }
}

pub(crate) fn execute_clean_step_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    check_version(&invocation.params, "clean_version")?;
    let result = run_step(invocation, "clean")?;
    Ok(Some(
        json!({"clean_result": result, "clean_step": invocation.params["step"]}),
    ))
}

pub(crate) fn execute_deploy_step_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    check_version(&invocation.params, "deploy_version")?;
    let result = run_step(invocation, "deploy")?;
    Ok(Some(
        json!({"deploy_result": result, "deploy_step": invocation.params["step"]}),
    ))
}
