//! Linux software RAID (`raid.create_configuration`, `raid.apply_configuration`,
//! `raid.delete_configuration`): md arrays built with `mdadm` from the node's target RAID
//! configuration.
//!
//! Each logical disk becomes one array, `/dev/md<index in the target>`, over whole disks with
//! its superblock at the end of each member (metadata 1.0): a member's first sector is the
//! array's first sector, so a whole-disk image written onto the root array boots from any
//! member without a bootloader installed per disk. The members are picked by the logical
//! disk's `physical_disks` (device names or root device hint objects), else the first
//! `number_of_physical_disks` disks by name, else every disk. The answer lists the arrays
//! built, the root one with a `root_device_hint` the conductor turns into
//! `properties.root_device`.

use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};

use crate::commands::CommandError;
use crate::config::AgentConfig;
use crate::disk::{self, BlockDevice};

/// The GiB size_gb counts in.
const GIB: u64 = 1024 * 1024 * 1024;

/// What mdadm reserves at the end of each member for a 1.0 superblock and its bitmap, at
/// most; a fixed size_gb must leave this much room.
const SUPERBLOCK_RESERVE: u64 = 128 * 1024;

fn raid_error(details: impl Into<String>) -> CommandError {
    CommandError::new(
        "SoftwareRAIDError",
        "Error building or removing software RAID",
        details,
    )
}

/// One array to build.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayPlan {
    /// `/dev/md0`, …
    pub device: String,
    /// mdadm's name of the level: `0`, `1`, `5`, `6`, `10`.
    pub level: &'static str,
    pub members: Vec<BlockDevice>,
    /// What each member contributes (`mdadm --size`, KiB), or everything (`MAX`).
    pub member_kib: Option<u64>,
    /// The logical disk as the target gave it.
    pub logical_disk: Map<String, Value>,
}

/// mdadm's level and the fewest members it takes, by Ironic's level name.
fn level_of(raid_level: &str) -> Option<(&'static str, usize)> {
    match raid_level {
        "0" => Some(("0", 2)),
        "1" => Some(("1", 2)),
        "5" => Some(("5", 3)),
        "6" => Some(("6", 4)),
        "1+0" => Some(("10", 4)),
        _ => None,
    }
}

/// How many members' worth of data a volume of `level` over `count` members holds.
fn data_members(level: &str, count: u64) -> u64 {
    match level {
        "0" => count,
        "5" => count - 1,
        "6" => count - 2,
        "10" => count / 2,
        _ => 1,
    }
}

/// Picks the members of each logical disk among `disks` and checks sizes and counts. Only
/// the logical disks that `create_root` / `create_nonroot` select are planned; array numbers
/// follow the position in the target so they do not move when some are skipped.
pub fn plan(
    logical_disks: &[Value],
    disks: &[BlockDevice],
    create_root: bool,
    create_nonroot: bool,
) -> Result<Vec<ArrayPlan>, CommandError> {
    if logical_disks.is_empty() {
        return Err(raid_error(
            "the node has no target RAID configuration (target_raid_config.logical_disks is \
             empty)",
        ));
    }
    let candidates: Vec<&BlockDevice> = disks.iter().filter(|d| !disk::is_array(d)).collect();
    let mut used: Vec<String> = Vec::new();
    let mut plans = Vec::new();
    for (index, logical) in logical_disks.iter().enumerate() {
        let logical = logical
            .as_object()
            .ok_or_else(|| raid_error(format!("logical disk {index} is not an object")))?;
        let at = |message: String| raid_error(format!("logical disk {index}: {message}"));
        let is_root = logical.get("is_root_volume").and_then(Value::as_bool) == Some(true);
        if (is_root && !create_root) || (!is_root && !create_nonroot) {
            continue;
        }
        if logical.get("controller").and_then(Value::as_str) != Some("software") {
            return Err(at(
                "only \"controller\": \"software\" can be built by the agent".to_owned(),
            ));
        }
        let raid_level = logical
            .get("raid_level")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (level, minimum) = level_of(raid_level)
            .ok_or_else(|| at(format!("software RAID cannot build level {raid_level:?}")))?;
        let free: Vec<&BlockDevice> = candidates
            .iter()
            .copied()
            .filter(|disk| !used.contains(&disk.name))
            .collect();
        let members: Vec<BlockDevice> =
            match logical.get("physical_disks").and_then(Value::as_array) {
                Some(wanted) => {
                    let mut members = Vec::new();
                    for hint in wanted {
                        let hints = match hint {
                            Value::String(name) => json!({ "name": name }),
                            other => other.clone(),
                        };
                        let hints = hints.as_object().cloned().unwrap_or_default();
                        let mut found = None;
                        for disk in &free {
                            let taken = members.iter().any(|m: &BlockDevice| m.name == disk.name);
                            if !taken
                                && disk::matches_hints(disk, &hints)
                                    .map_err(|error| at(error.to_string()))?
                            {
                                found = Some((*disk).clone());
                                break;
                            }
                        }
                        members.push(found.ok_or_else(|| {
                            at(format!(
                                "no free disk matches {hint}; disks: {}",
                                describe(&candidates)
                            ))
                        })?);
                    }
                    members
                }
                None => {
                    let wanted = logical
                        .get("number_of_physical_disks")
                        .and_then(Value::as_u64)
                        .map(|count| count as usize);
                    let free_disks: Vec<BlockDevice> =
                        free.iter().map(|disk| (*disk).clone()).collect();
                    match wanted {
                        Some(count) => free_disks.into_iter().take(count).collect(),
                        None => free_disks,
                    }
                }
            };
        if members.len() < minimum {
            return Err(at(format!(
                "RAID {raid_level} needs at least {minimum} disks, {} available ({})",
                members.len(),
                members
                    .iter()
                    .map(|disk| disk.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if level == "10" && members.len() % 2 == 1 {
            return Err(at(format!(
                "RAID 1+0 needs an even number of disks, {} given",
                members.len()
            )));
        }
        let smallest = members.iter().map(|disk| disk.size).min().unwrap_or(0);
        let member_kib = match logical.get("size_gb") {
            Some(Value::Number(size_gb)) => {
                let size_gb = size_gb.as_u64().unwrap_or(0);
                let per_member =
                    (size_gb * GIB).div_ceil(data_members(level, members.len() as u64));
                if per_member + SUPERBLOCK_RESERVE > smallest {
                    return Err(at(format!(
                        "{size_gb} GiB at RAID {raid_level} needs {per_member} bytes on each of \
                         {} disks, but the smallest has {smallest}",
                        members.len()
                    )));
                }
                Some(per_member / 1024)
            }
            _ => None,
        };
        used.extend(members.iter().map(|disk| disk.name.clone()));
        plans.push(ArrayPlan {
            device: format!("/dev/md{index}"),
            level,
            members,
            member_kib,
            logical_disk: logical.clone(),
        });
    }
    Ok(plans)
}

fn describe(disks: &[&BlockDevice]) -> String {
    disks
        .iter()
        .map(|disk| format!("{} ({} bytes)", disk.name, disk.size))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mdadm command line that builds `plan`.
pub fn create_args(plan: &ArrayPlan) -> Vec<String> {
    let mut args = vec![
        "--create".to_owned(),
        plan.device.clone(),
        "--run".to_owned(),
        "--metadata=1.0".to_owned(),
        format!("--level={}", plan.level),
        format!("--raid-devices={}", plan.members.len()),
    ];
    if let Some(kib) = plan.member_kib {
        args.push(format!("--size={kib}"));
    }
    if let Some(name) = plan.logical_disk.get("volume_name").and_then(Value::as_str) {
        args.push(format!("--name={name}"));
    }
    args.extend(
        plan.members
            .iter()
            .map(|disk| disk.path.display().to_string()),
    );
    args
}

/// Runs mdadm; its output, or its words on failure.
fn mdadm(config: &AgentConfig, args: &[String]) -> Result<String, CommandError> {
    tracing::info!(args = ?args, "mdadm");
    let output = Command::new(&config.mdadm)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| {
            raid_error(format!(
                "cannot run {}: {error} (the ramdisk needs mdadm for software RAID)",
                config.mdadm.display()
            ))
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        return Err(raid_error(format!(
            "mdadm {} failed ({}): {}",
            args.join(" "),
            output.status,
            text.trim()
        )));
    }
    Ok(text)
}

fn wipe(disk: &BlockDevice) -> Result<(), CommandError> {
    let file = crate::erase::open_for_write(&disk.path)
        .and_then(|file| crate::erase::wipe_metadata(&file, disk.size).map(|()| file));
    file.map(drop)
        .map_err(|error| raid_error(format!("cannot wipe {}: {error}", disk.name)))
}

/// Stops every array and clears its members (superblocks and both ends).
pub fn delete_all(config: &AgentConfig) -> Result<Vec<String>, CommandError> {
    let disks = disk::list(config).map_err(|error| raid_error(error.to_string()))?;
    let mut removed = Vec::new();
    for array in disks.iter().filter(|disk| disk::is_array(disk)) {
        mdadm(config, &["--stop".to_owned(), array.name.clone()])?;
        for member in disks
            .iter()
            .filter(|disk| disk.raid_member_of.as_deref() == Some(array.name.as_str()))
        {
            mdadm(
                config,
                &[
                    "--zero-superblock".to_owned(),
                    member.path.display().to_string(),
                ],
            )?;
            wipe(member)?;
        }
        tracing::info!(array = %array.name, "software RAID array removed");
        removed.push(array.name.clone());
    }
    Ok(removed)
}

fn flag(args: &Map<String, Value>, name: &str) -> bool {
    args.get(name).and_then(Value::as_bool).unwrap_or(true)
}

/// Size of a block device from sysfs, in bytes.
fn sysfs_size(config: &AgentConfig, device: &str) -> Option<u64> {
    let name = device.trim_start_matches("/dev/");
    std::fs::read_to_string(config.sys_root.join("block").join(name).join("size"))
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|sectors| sectors * 512)
}

/// `raid.create_configuration` / `raid.apply_configuration`: builds the target, answers
/// `{"logical_disks": [...]}` with what was built.
pub fn create(
    config: &AgentConfig,
    node: Option<&Value>,
    args: &Map<String, Value>,
) -> Result<Value, CommandError> {
    let target = match args.get("raid_config") {
        Some(config) => config.clone(),
        None => node
            .map(|node| node["target_raid_config"].clone())
            .unwrap_or(Value::Null),
    };
    let logical_disks = target["logical_disks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if flag(args, "delete_existing") {
        delete_all(config)?;
    }
    let disks = disk::list(config).map_err(|error| raid_error(error.to_string()))?;
    if let Some(member) = disks.iter().find(|disk| disk.raid_member_of.is_some()) {
        return Err(raid_error(format!(
            "{} is still a member of {}: run raid.delete_configuration first, or leave \
             delete_existing true",
            member.name,
            member.raid_member_of.as_deref().unwrap_or_default()
        )));
    }
    let plans = plan(
        &logical_disks,
        &disks,
        flag(args, "create_root_volume"),
        flag(args, "create_nonroot_volumes"),
    )?;
    let mut built = Vec::new();
    for plan in &plans {
        // Old partition tables and signatures would make mdadm ask before using a disk.
        for member in &plan.members {
            wipe(member)?;
        }
        mdadm(config, &create_args(plan))?;
        let mut logical = plan.logical_disk.clone();
        if let Some(size) = sysfs_size(config, &plan.device) {
            logical.insert("size_gb".into(), (size / GIB).into());
        }
        logical.insert(
            "physical_disks".into(),
            plan.members
                .iter()
                .map(|disk| Value::String(disk.name.clone()))
                .collect(),
        );
        if logical.get("is_root_volume").and_then(Value::as_bool) == Some(true) {
            logical.insert("root_device_hint".into(), json!({ "name": plan.device }));
        }
        tracing::info!(array = %plan.device, level = plan.level, "software RAID array built");
        built.push(Value::Object(logical));
    }
    Ok(json!({ "logical_disks": built }))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn disk(name: &str, gib: u64) -> BlockDevice {
        BlockDevice {
            name: name.to_owned(),
            model: None,
            size: gib * GIB,
            rotational: false,
            wwn: None,
            serial: Some(format!("S-{}", name.trim_start_matches("/dev/"))),
            vendor: None,
            wwn_with_extension: None,
            wwn_vendor_extension: None,
            hctl: None,
            by_path: None,
            logical_sectors: None,
            physical_sectors: None,
            tran: None,
            path: PathBuf::from(name),
            raid_member_of: None,
        }
    }

    fn names(plan: &ArrayPlan) -> Vec<&str> {
        plan.members.iter().map(|d| d.name.as_str()).collect()
    }

    #[test]
    fn a_mirror_over_two_named_disks_becomes_one_mdadm_call() {
        let disks = [
            disk("/dev/vda", 4),
            disk("/dev/vdb", 4),
            disk("/dev/vdc", 8),
        ];
        let target = json!([{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true,
            "controller": "software", "volume_name": "root",
            "physical_disks": [{"name": "/dev/vda"}, "/dev/vdb"]}]);
        let plans = plan(target.as_array().unwrap(), &disks, true, true).expect("plan");
        assert_eq!(plans.len(), 1);
        assert_eq!(names(&plans[0]), ["/dev/vda", "/dev/vdb"]);
        assert_eq!(
            create_args(&plans[0]),
            [
                "--create",
                "/dev/md0",
                "--run",
                "--metadata=1.0",
                "--level=1",
                "--raid-devices=2",
                "--name=root",
                "/dev/vda",
                "/dev/vdb"
            ]
        );
    }

    #[test]
    fn members_come_from_hints_counts_or_every_disk_and_are_used_once() {
        let disks = [
            disk("/dev/sda", 10),
            disk("/dev/sdb", 10),
            disk("/dev/sdc", 10),
            disk("/dev/sdd", 10),
        ];
        let target = json!([
            {"size_gb": 4, "raid_level": "1", "is_root_volume": true, "controller": "software",
             "physical_disks": [{"serial": "S-sdc"}, {"serial": "S-sdd"}]},
            {"size_gb": "MAX", "raid_level": "0", "controller": "software",
             "number_of_physical_disks": 2}]);
        let plans = plan(target.as_array().unwrap(), &disks, true, true).expect("plan");
        assert_eq!(names(&plans[0]), ["/dev/sdc", "/dev/sdd"]);
        assert_eq!(plans[0].member_kib, Some(4 * 1024 * 1024));
        assert_eq!(names(&plans[1]), ["/dev/sda", "/dev/sdb"]);
        assert_eq!(plans[1].device, "/dev/md1");
        // Only the non-root volume: its number stays md1.
        let plans = plan(target.as_array().unwrap(), &disks, false, true).expect("plan");
        assert_eq!(plans.len(), 1);
        assert_eq!(plans[0].device, "/dev/md1");
    }

    #[test]
    fn impossible_targets_say_why() {
        let disks = [disk("/dev/sda", 4), disk("/dev/sdb", 4)];
        let refuse = |target: Value| {
            plan(target.as_array().unwrap(), &disks, true, true)
                .unwrap_err()
                .details
        };
        let few = refuse(json!([{"size_gb": "MAX", "raid_level": "5", "controller": "software"}]));
        assert!(few.contains("at least 3 disks"), "{few}");
        let big = refuse(json!([{"size_gb": 5, "raid_level": "1", "controller": "software"}]));
        assert!(big.contains("smallest has"), "{big}");
        let absent = refuse(
            json!([{"size_gb": "MAX", "raid_level": "1", "controller": "software",
            "physical_disks": ["/dev/sda", "/dev/sdz"]}]),
        );
        assert!(
            absent.contains("no free disk matches \"/dev/sdz\""),
            "{absent}"
        );
        let hardware = refuse(json!([{"size_gb": "MAX", "raid_level": "1"}]));
        assert!(
            hardware.contains("\"controller\": \"software\""),
            "{hardware}"
        );
        let none = plan(&[], &disks, true, true).unwrap_err().details;
        assert!(none.contains("no target RAID configuration"), "{none}");
    }
}
