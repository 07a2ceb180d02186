//! Erasing disks: partition metadata (`erase_devices_metadata`) and whole disks
//! (`erase_devices`: the disk's own secure erase where it has one, an overwrite otherwise).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::commands::{CommandError, Progress};
use crate::disk::BlockDevice;

/// How much of each end of a disk `erase_devices_metadata` zeroes: covers the MBR, both GPT
/// copies (34 sectors each) and the signatures of RAID/LVM/filesystems kept near either end.
pub const METADATA_BYTES: u64 = 1024 * 1024;
const OVERWRITE_CHUNK: usize = 4 * 1024 * 1024;

pub(crate) fn open_for_write(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

fn zero_range(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let zeros = vec![0u8; OVERWRITE_CHUNK.min(len as usize)];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], offset + done)?;
        done += n as u64;
    }
    Ok(())
}

/// Zeroes the first and last [`METADATA_BYTES`] of a disk of `size` bytes and flushes.
pub fn wipe_metadata(file: &File, size: u64) -> io::Result<()> {
    let head = METADATA_BYTES.min(size);
    zero_range(file, 0, head)?;
    if size > head {
        let tail_start = size.saturating_sub(METADATA_BYTES).max(head);
        zero_range(file, tail_start, size - tail_start)?;
    }
    file.sync_all()
}

fn erase_error(disk: &BlockDevice, error: impl std::fmt::Display) -> CommandError {
    CommandError::new(
        "BlockDeviceEraseError",
        "Error erasing block device",
        format!("Failed to erase block device {}: {error}", disk.name),
    )
}

/// `erase_devices_metadata` on every disk.
pub fn erase_metadata_all(disks: &[BlockDevice]) -> Result<Value, CommandError> {
    for disk in disks {
        let file = open_for_write(&disk.path).map_err(|error| erase_error(disk, error))?;
        wipe_metadata(&file, disk.size).map_err(|error| erase_error(disk, error))?;
        tracing::info!(disk = %disk.name, "partition metadata erased");
    }
    Ok(json!({"erased": disks.iter().map(|d| &d.name).collect::<Vec<_>>()}))
}

/// The erase settings Ironic passes in the node's `driver_internal_info` (IPA's defaults when
/// absent): `agent_enable_nvme_secure_erase` and `agent_enable_ata_secure_erase` (true), and
/// `agent_continue_if_secure_erase_failed` (false; the older `…_ata_erase_failed` too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EraseOptions {
    pub nvme_secure_erase: bool,
    pub ata_secure_erase: bool,
    pub continue_if_secure_erase_failed: bool,
}

impl Default for EraseOptions {
    fn default() -> Self {
        Self {
            nvme_secure_erase: true,
            ata_secure_erase: true,
            continue_if_secure_erase_failed: false,
        }
    }
}

impl EraseOptions {
    /// The options of `node` (the node document a clean step is sent with).
    pub fn from_node(node: Option<&Value>) -> Self {
        let info = node.map(|node| &node["driver_internal_info"]);
        let flag = |name: &str| info.and_then(|info| info[name].as_bool());
        let defaults = Self::default();
        Self {
            nvme_secure_erase: flag("agent_enable_nvme_secure_erase")
                .unwrap_or(defaults.nvme_secure_erase),
            ata_secure_erase: flag("agent_enable_ata_secure_erase")
                .unwrap_or(defaults.ata_secure_erase),
            continue_if_secure_erase_failed: flag("agent_continue_if_secure_erase_failed")
                .or_else(|| flag("agent_continue_if_ata_erase_failed"))
                .unwrap_or(defaults.continue_if_secure_erase_failed),
        }
    }
}

/// `erase_devices` on every disk; reports per disk how it was erased.
pub fn erase_all(
    disks: &[BlockDevice],
    options: EraseOptions,
    progress: &Progress,
) -> Result<Value, CommandError> {
    let mut methods = serde_json::Map::new();
    for disk in disks {
        let method = erase_device(disk, options, progress)?;
        tracing::info!(disk = %disk.name, %method, "disk erased");
        methods.insert(disk.name.clone(), json!(method));
    }
    Ok(json!({"erase_method": methods}))
}

/// As IPA's `erase_block_device`: an NVMe disk is formatted by the controller, another disk
/// gets an ATA secure erase where it supports one; a secure erase that is supported but
/// fails is an error unless `continue_if_secure_erase_failed`, and only then, or where no
/// secure erase exists, is the disk overwritten with zeros.
fn erase_device(
    disk: &BlockDevice,
    options: EraseOptions,
    progress: &Progress,
) -> Result<String, CommandError> {
    if disk.path.starts_with("/dev") {
        let secure = if is_nvme(disk) {
            if options.nvme_secure_erase {
                nvme_format(disk).map(Some)
            } else {
                Ok(None)
            }
        } else if options.ata_secure_erase {
            ata_secure_erase(disk).map(|done| done.then(|| "ATA secure erase".to_owned()))
        } else {
            Ok(None)
        };
        match secure {
            Ok(Some(method)) => return Ok(method),
            Ok(None) => {}
            Err(error) if options.continue_if_secure_erase_failed => {
                tracing::warn!(disk = %disk.name, error = %error.details, "secure erase failed; overwriting with zeros (agent_continue_if_secure_erase_failed)");
            }
            Err(error) => {
                return Err(erase_error(
                    disk,
                    format!(
                        "{}; the disk was not overwritten instead because \
                         agent_continue_if_secure_erase_failed is not set",
                        error.details
                    ),
                ));
            }
        }
    }
    overwrite(disk, progress)?;
    Ok("overwrite with zeros".to_owned())
}

fn is_nvme(disk: &BlockDevice) -> bool {
    disk.name.starts_with("/dev/nvme")
}

/// The NVMe Format NVM command with the strongest secure erase the controller offers
/// (`nvme id-ctrl`): cryptographic erase (`-s 2`) when FNA bit 2 says it is supported, else a
/// user-data erase (`-s 1`). A controller without Format NVM (OACS bit 1) is an error.
fn nvme_format(disk: &BlockDevice) -> Result<String, CommandError> {
    let output = Command::new("nvme")
        .args(["id-ctrl", &disk.name, "-o", "json"])
        .output()
        .map_err(|error| erase_error(disk, format!("cannot run nvme (nvme-cli): {error}")))?;
    if !output.status.success() {
        return Err(erase_error(
            disk,
            format!(
                "nvme id-ctrl failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    let controller: Value = serde_json::from_slice(&output.stdout)
        .map_err(|error| erase_error(disk, format!("nvme id-ctrl printed no JSON: {error}")))?;
    let ses = nvme_secure_erase_setting(&controller).ok_or_else(|| {
        erase_error(
            disk,
            "the NVMe controller does not support the Format NVM command",
        )
    })?;
    tracing::info!(disk = %disk.name, ses, "nvme format");
    let output = Command::new("nvme")
        .args(["format", &disk.name, "-s", &ses.to_string(), "-f"])
        .output()
        .map_err(|error| erase_error(disk, error))?;
    if !output.status.success() {
        return Err(erase_error(
            disk,
            format!(
                "nvme format -s {ses} exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    Ok(match ses {
        2 => "nvme format -s 2 (cryptographic erase)".to_owned(),
        _ => "nvme format -s 1 (user data erase)".to_owned(),
    })
}

/// The Secure Erase Setting for `nvme format` from `nvme id-ctrl -o json`: 2 (crypto erase)
/// when FNA bit 2 is set, 1 (user data erase) otherwise; `None` without Format NVM support.
fn nvme_secure_erase_setting(controller: &Value) -> Option<u8> {
    let oacs = controller["oacs"].as_u64()?;
    if oacs & 0b10 == 0 {
        return None;
    }
    let fna = controller["fna"].as_u64().unwrap_or(0);
    Some(if fna & 0b100 != 0 { 2 } else { 1 })
}

/// ATA security erase through hdparm when the drive supports it and is not frozen.
fn ata_secure_erase(disk: &BlockDevice) -> Result<bool, CommandError> {
    let Ok(output) = Command::new("hdparm").args(["-I", &disk.name]).output() else {
        return Ok(false);
    };
    let info = String::from_utf8_lossy(&output.stdout);
    let Some(security) = info.split("Security:").nth(1) else {
        return Ok(false);
    };
    let security = security.split("\n\n").next().unwrap_or_default();
    let lines: Vec<String> = security
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let has = |text: &str| lines.iter().any(|line| line == text);
    if !has("supported") || !has("not frozen") || !has("not enabled") {
        return Ok(false);
    }
    for args in [
        vec![
            "--user-master",
            "u",
            "--security-set-pass",
            "NULL",
            &disk.name,
        ],
        vec!["--user-master", "u", "--security-erase", "NULL", &disk.name],
    ] {
        let status = Command::new("hdparm")
            .args(&args)
            .status()
            .map_err(|error| erase_error(disk, error))?;
        if !status.success() {
            return Err(erase_error(
                disk,
                format!("hdparm {} exited with {status}", args.join(" ")),
            ));
        }
    }
    Ok(true)
}

fn overwrite(disk: &BlockDevice, progress: &Progress) -> Result<(), CommandError> {
    let file = open_for_write(&disk.path).map_err(|error| erase_error(disk, error))?;
    let zeros = vec![0u8; OVERWRITE_CHUNK];
    let mut offset = 0u64;
    let mut last_report = 0u64;
    while offset < disk.size {
        let n = (disk.size - offset).min(OVERWRITE_CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], offset)
            .map_err(|error| erase_error(disk, error))?;
        offset += n as u64;
        if offset - last_report >= 256 * 1024 * 1024 || offset == disk.size {
            last_report = offset;
            progress.set(json!({"device": disk.name, "bytes_erased": offset, "total": disk.size}));
        }
    }
    file.sync_all().map_err(|error| erase_error(disk, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_format_picks_crypto_erase_when_offered() {
        assert_eq!(
            nvme_secure_erase_setting(&json!({"oacs": 0x17, "fna": 4})),
            Some(2)
        );
        assert_eq!(
            nvme_secure_erase_setting(&json!({"oacs": 0x02, "fna": 0})),
            Some(1)
        );
        assert_eq!(nvme_secure_erase_setting(&json!({"oacs": 0x01})), None);
        assert_eq!(nvme_secure_erase_setting(&json!({})), None);
    }

    #[test]
    fn erase_options_follow_ironics_driver_internal_info() {
        assert_eq!(EraseOptions::from_node(None), EraseOptions::default());
        let node = json!({"driver_internal_info": {
            "agent_enable_nvme_secure_erase": false,
            "agent_continue_if_ata_erase_failed": true,
        }});
        assert_eq!(
            EraseOptions::from_node(Some(&node)),
            EraseOptions {
                nvme_secure_erase: false,
                ata_secure_erase: true,
                continue_if_secure_erase_failed: true,
            }
        );
    }

    #[test]
    fn files_are_overwritten_with_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("disk");
        std::fs::write(&path, vec![7u8; 3 * 1024 * 1024]).expect("write");
        let mut config = crate::AgentConfig::new(Vec::new());
        config.disks = vec![path.clone()];
        let disks = crate::disk::list(&config).expect("disks");
        let result =
            erase_all(&disks, EraseOptions::default(), &Progress::detached()).expect("erase");
        assert_eq!(
            result["erase_method"][path.display().to_string()],
            "overwrite with zeros"
        );
        assert!(std::fs::read(&path).expect("read").iter().all(|b| *b == 0));
    }

    #[test]
    fn metadata_wipe_zeroes_both_ends_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("disk");
        let size = 4 * METADATA_BYTES;
        std::fs::write(&path, vec![0xabu8; size as usize]).expect("write");
        let file = open_for_write(&path).expect("open");
        wipe_metadata(&file, size).expect("wipe");
        let content = std::fs::read(&path).expect("read");
        let mb = METADATA_BYTES as usize;
        assert!(content[..mb].iter().all(|b| *b == 0));
        assert!(content[content.len() - mb..].iter().all(|b| *b == 0));
        assert!(content[mb..content.len() - mb].iter().all(|b| *b == 0xab));
    }

    #[test]
    fn tiny_disks_are_wiped_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("disk");
        std::fs::write(&path, vec![1u8; 1000]).expect("write");
        let file = open_for_write(&path).expect("open");
        wipe_metadata(&file, 1000).expect("wipe");
        assert!(std::fs::read(&path).expect("read").iter().all(|b| *b == 0));
    }
}
