//! Block devices (from `/sys/block`, or the files/devices given with `--disk`) and the choice
//! of the root disk by Ironic's root device hints.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::config::AgentConfig;

/// The smallest disk picked when no hints are given (IPA's default).
pub const MIN_ROOT_DISK_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// A disk as the inventory shows it (§4.4) plus where to open it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockDevice {
    /// `/dev/sda`, or the path given with `--disk`.
    pub name: String,
    pub model: Option<String>,
    pub size: u64,
    pub rotational: bool,
    pub wwn: Option<String>,
    pub serial: Option<String>,
    pub vendor: Option<String>,
    pub wwn_with_extension: Option<String>,
    pub wwn_vendor_extension: Option<String>,
    pub hctl: Option<String>,
    pub by_path: Option<String>,
    pub logical_sectors: Option<u64>,
    pub physical_sectors: Option<u64>,
    pub tran: Option<String>,
    /// Where the agent opens the disk.
    #[serde(skip)]
    pub path: PathBuf,
    /// The software RAID array (`/dev/md0`) this disk is a member of: the array is written,
    /// erased and deployed to, never its members one by one.
    #[serde(skip)]
    pub raid_member_of: Option<String>,
}

/// Why no disk could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error("no disk matches the root device hints {hints}; disks: {disks}")]
    NoMatch { hints: String, disks: String },
    #[error(
        "{disk} is a member of the software RAID array {array}: name the array instead (a RAID step sets properties.root_device to it)"
    )]
    RaidMember { disk: String, array: String },
    #[error("no disk of at least 4 GiB found; disks: {0}")]
    NoneLargeEnough(String),
    #[error("invalid root device hint {name}: {reason}")]
    InvalidHint { name: String, reason: String },
    #[error("cannot read disk {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// The size of a file or block device: seeking to the end works for both.
pub fn device_size(path: &Path) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut file = fs::File::open(path)?;
    file.seek(SeekFrom::End(0))
}

/// Every disk: `--disk` overrides, else `/sys/block` without loop, ram, zram, device-mapper
/// and CD-ROM devices. Software RAID arrays (`md*`) are listed as disks, and their members
/// carry [`BlockDevice::raid_member_of`]; [`writable`] leaves the members out.
pub fn list(config: &AgentConfig) -> Result<Vec<BlockDevice>, DiskError> {
    if !config.disks.is_empty() {
        return config
            .disks
            .iter()
            .map(|path| {
                let size = device_size(path).map_err(|source| DiskError::Io {
                    path: path.clone(),
                    source,
                })?;
                Ok(BlockDevice {
                    name: path.display().to_string(),
                    model: Some("file".to_owned()),
                    size,
                    rotational: false,
                    wwn: None,
                    serial: None,
                    vendor: None,
                    wwn_with_extension: None,
                    wwn_vendor_extension: None,
                    hctl: None,
                    by_path: None,
                    logical_sectors: Some(512),
                    physical_sectors: Some(512),
                    tran: None,
                    path: path.clone(),
                    raid_member_of: None,
                })
            })
            .collect();
    }
    let block = config.sys_root.join("block");
    let Ok(entries) = fs::read_dir(&block) else {
        return Ok(Vec::new());
    };
    let mut disks = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if ["loop", "ram", "zram", "dm-", "sr", "fd", "nbd"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
        {
            continue;
        }
        let dir = entry.path();
        let array_level = name
            .starts_with("md")
            .then(|| read_trimmed(&dir.join("md/level")))
            .flatten();
        if name.starts_with("md") && array_level.is_none() {
            // An md device that is not an array (or not yet assembled).
            continue;
        }
        let sectors: u64 = read_trimmed(&dir.join("size"))
            .and_then(|text| text.parse().ok())
            .unwrap_or(0);
        if sectors == 0 {
            continue;
        }
        let device = dir.join("device");
        let hctl = fs::read_link(&device)
            .ok()
            .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|last| last.split(':').count() == 4);
        let wwid = read_trimmed(&dir.join("wwid")).or_else(|| read_trimmed(&device.join("wwid")));
        disks.push(BlockDevice {
            name: format!("/dev/{name}"),
            model: array_level
                .map(|level| format!("Linux software RAID ({level})"))
                .or_else(|| read_trimmed(&device.join("model"))),
            size: sectors * 512,
            rotational: read_trimmed(&dir.join("queue/rotational")).as_deref() == Some("1"),
            wwn: read_trimmed(&device.join("wwid"))
                .filter(|w| w.starts_with("naa.") || w.starts_with("eui."))
                .map(|w| format!("0x{}", &w[4..]))
                .or_else(|| wwid.clone()),
            serial: read_trimmed(&dir.join("serial"))
                .or_else(|| read_trimmed(&device.join("serial")))
                .or_else(|| read_trimmed(&device.join("vpd_pg80"))),
            vendor: read_trimmed(&device.join("vendor")),
            wwn_with_extension: None,
            wwn_vendor_extension: None,
            hctl,
            by_path: None,
            logical_sectors: read_trimmed(&dir.join("queue/logical_block_size"))
                .and_then(|t| t.parse().ok()),
            physical_sectors: read_trimmed(&dir.join("queue/physical_block_size"))
                .and_then(|t| t.parse().ok()),
            tran: None,
            path: PathBuf::from(format!("/dev/{name}")),
            raid_member_of: None,
        });
    }
    // Members of an array are listed under /sys/block/mdN/slaves.
    for array in disks.clone().iter().filter(|disk| is_array(disk)) {
        let short = array.name.trim_start_matches("/dev/");
        let Ok(members) = fs::read_dir(block.join(short).join("slaves")) else {
            continue;
        };
        for member in members.flatten() {
            let member = format!("/dev/{}", member.file_name().to_string_lossy());
            if let Some(disk) = disks.iter_mut().find(|disk| disk.name == member) {
                disk.raid_member_of = Some(array.name.clone());
            }
        }
    }
    disks.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(disks)
}

/// Whether `disk` is a software RAID array.
pub fn is_array(disk: &BlockDevice) -> bool {
    disk.name.starts_with("/dev/md")
}

/// The disks the agent writes to and erases: every disk but members of a software RAID array
/// (their array is in the list instead).
pub fn writable(config: &AgentConfig) -> Result<Vec<BlockDevice>, DiskError> {
    Ok(list(config)?
        .into_iter()
        .filter(|disk| disk.raid_member_of.is_none())
        .collect())
}

/// Whether `disk` matches every root device hint in `hints` (an object).
pub fn matches_hints(
    disk: &BlockDevice,
    hints: &serde_json::Map<String, Value>,
) -> Result<bool, DiskError> {
    for (name, hint) in hints {
        if !hint_matches(disk, name, hint)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Picks the root disk: the first that matches every hint, or with no hints the smallest disk
/// of at least 4 GiB (ties by name).
pub fn choose_root(disks: &[BlockDevice], hints: Option<&Value>) -> Result<BlockDevice, DiskError> {
    let describe = || {
        disks
            .iter()
            .map(|disk| format!("{} ({} bytes)", disk.name, disk.size))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match hints
        .and_then(Value::as_object)
        .filter(|hints| !hints.is_empty())
    {
        Some(hints) => {
            for disk in disks {
                if matches_hints(disk, hints)? {
                    if let Some(array) = &disk.raid_member_of {
                        return Err(DiskError::RaidMember {
                            disk: disk.name.clone(),
                            array: array.clone(),
                        });
                    }
                    return Ok(disk.clone());
                }
            }
            Err(DiskError::NoMatch {
                hints: Value::Object(hints.clone()).to_string(),
                disks: describe(),
            })
        }
        None => disks
            .iter()
            .filter(|disk| disk.size >= MIN_ROOT_DISK_BYTES && disk.raid_member_of.is_none())
            .min_by(|a, b| a.size.cmp(&b.size).then_with(|| a.name.cmp(&b.name)))
            .cloned()
            .ok_or_else(|| DiskError::NoneLargeEnough(describe())),
    }
}

fn hint_matches(disk: &BlockDevice, name: &str, hint: &Value) -> Result<bool, DiskError> {
    let invalid = |reason: &str| DiskError::InvalidHint {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    match name {
        "size" => {
            let gib = disk.size / (1024 * 1024 * 1024);
            match hint {
                Value::Number(number) => Ok(number.as_u64() == Some(gib)),
                Value::String(text) => compare_number(gib, text).ok_or_else(|| invalid("expected a size in GiB, optionally with an operator (>=, <=, ==, !=, <, >)")),
                _ => Err(invalid("expected a number of GiB")),
            }
        }
        "rotational" => {
            let wanted = match hint {
                Value::Bool(flag) => *flag,
                Value::String(text) => matches!(
                    text.to_ascii_lowercase().as_str(),
                    "true" | "1" | "yes" | "on"
                ),
                Value::Number(number) => number.as_u64() == Some(1),
                _ => return Err(invalid("expected true or false")),
            };
            Ok(disk.rotational == wanted)
        }
        "name" => {
            let Some(text) = hint.as_str() else {
                return Err(invalid("expected a string"));
            };
            let wanted = if text.starts_with('/') {
                text.to_owned()
            } else {
                format!("/dev/{text}")
            };
            Ok(disk.name == wanted || disk.name == text)
        }
        "model"
        | "serial"
        | "wwn"
        | "vendor"
        | "hctl"
        | "by_path"
        | "wwn_with_extension"
        | "wwn_vendor_extension" => {
            let Some(text) = hint.as_str() else {
                return Err(invalid("expected a string"));
            };
            let actual = match name {
                "model" => &disk.model,
                "serial" => &disk.serial,
                "wwn" => &disk.wwn,
                "vendor" => &disk.vendor,
                "hctl" => &disk.hctl,
                "by_path" => &disk.by_path,
                "wwn_with_extension" => &disk.wwn_with_extension,
                _ => &disk.wwn_vendor_extension,
            };
            Ok(actual
                .as_deref()
                .is_some_and(|actual| compare_string(actual, text)))
        }
        // Hints the agent cannot see are ignored, as unknown hints are in IPA.
        _ => Ok(true),
    }
}

/// `"100"`, `">= 100"`, `"<= 200"`, `"== 50"`, `"!= 1"`, `"< 3"`, `"> 3"`.
fn compare_number(actual: u64, hint: &str) -> Option<bool> {
    let hint = hint.trim();
    for (operator, test) in [
        (">=", (|a: u64, b: u64| a >= b) as fn(u64, u64) -> bool),
        ("<=", |a, b| a <= b),
        ("==", |a, b| a == b),
        ("!=", |a, b| a != b),
        (">", |a, b| a > b),
        ("<", |a, b| a < b),
    ] {
        if let Some(rest) = hint.strip_prefix(operator) {
            return rest.trim().parse().ok().map(|wanted| test(actual, wanted));
        }
    }
    hint.parse().ok().map(|wanted: u64| actual == wanted)
}

/// Plain equality (case-insensitive, as oslo's matcher), or `s== x`, `s!= x`, `<in> x`.
fn compare_string(actual: &str, hint: &str) -> bool {
    let hint = hint.trim();
    if let Some(rest) = hint.strip_prefix("s==") {
        actual == rest.trim()
    } else if let Some(rest) = hint.strip_prefix("s!=") {
        actual != rest.trim()
    } else if let Some(rest) = hint.strip_prefix("<in>") {
        actual.contains(rest.trim())
    } else {
        actual.eq_ignore_ascii_case(hint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn disk(name: &str, gib: u64) -> BlockDevice {
        BlockDevice {
            name: name.to_owned(),
            model: Some("QEMU HARDDISK".to_owned()),
            size: gib * 1024 * 1024 * 1024,
            rotational: name.ends_with('b'),
            wwn: Some(format!("0x{gib:x}")),
            serial: Some(format!("SER{gib}")),
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

    #[test]
    fn default_is_the_smallest_disk_of_at_least_4_gib() {
        let disks = [
            disk("/dev/sda", 100),
            disk("/dev/sdb", 2),
            disk("/dev/sdc", 10),
        ];
        assert_eq!(choose_root(&disks, None).expect("root").name, "/dev/sdc");
        assert!(matches!(
            choose_root(&[disk("/dev/sda", 1)], None),
            Err(DiskError::NoneLargeEnough(_))
        ));
    }

    #[test]
    fn hints_pick_by_every_field() {
        let disks = [
            disk("/dev/sda", 100),
            disk("/dev/sdb", 20),
            disk("/dev/sdc", 10),
        ];
        let pick = |hints: Value| choose_root(&disks, Some(&hints)).map(|d| d.name);
        assert_eq!(pick(json!({"size": 20})).expect("size"), "/dev/sdb");
        assert_eq!(pick(json!({"size": ">= 50"})).expect("op"), "/dev/sda");
        assert_eq!(
            pick(json!({"serial": "ser10"})).expect("serial"),
            "/dev/sdc"
        );
        assert_eq!(pick(json!({"wwn": "0x64"})).expect("wwn"), "/dev/sda");
        assert_eq!(pick(json!({"name": "sdc"})).expect("name"), "/dev/sdc");
        assert_eq!(pick(json!({"rotational": true})).expect("rot"), "/dev/sdb");
        assert_eq!(
            pick(json!({"model": "<in> HARD", "size": "< 15"})).expect("model"),
            "/dev/sdc"
        );
        assert!(matches!(
            pick(json!({"serial": "none"})),
            Err(DiskError::NoMatch { .. })
        ));
        assert!(matches!(
            pick(json!({"size": "lots"})),
            Err(DiskError::InvalidHint { .. })
        ));
    }
}
