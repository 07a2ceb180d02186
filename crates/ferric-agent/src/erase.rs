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

/// `erase_devices` on every disk; reports per disk how it was erased.
pub fn erase_all(disks: &[BlockDevice], progress: &Progress) -> Result<Value, CommandError> {
    let mut methods = serde_json::Map::new();
    for disk in disks {
        let method = erase_device(disk, progress)?;
        tracing::info!(disk = %disk.name, method, "disk erased");
        methods.insert(disk.name.clone(), json!(method));
    }
    Ok(json!({"erase_method": methods}))
}

fn erase_device(disk: &BlockDevice, progress: &Progress) -> Result<&'static str, CommandError> {
    if disk.path.starts_with("/dev") {
        let name = disk.name.trim_start_matches("/dev/");
        if name.starts_with("nvme") && nvme_format(disk)? {
            return Ok("nvme format (secure erase)");
        }
        if ata_secure_erase(disk)? {
            return Ok("ATA secure erase");
        }
    }
    overwrite(disk, progress)?;
    Ok("overwrite with zeros")
}

/// `nvme format -s1` (user-data erase) when the controller supports the format command.
fn nvme_format(disk: &BlockDevice) -> Result<bool, CommandError> {
    let Ok(output) = Command::new("nvme")
        .args(["id-ctrl", &disk.name, "-o", "json"])
        .output()
    else {
        return Ok(false);
    };
    let Ok(controller) = serde_json::from_slice::<Value>(&output.stdout) else {
        return Ok(false);
    };
    // OACS bit 1: Format NVM supported.
    if controller["oacs"]
        .as_u64()
        .is_none_or(|oacs| oacs & 0b10 == 0)
    {
        return Ok(false);
    }
    let status = Command::new("nvme")
        .args(["format", &disk.name, "-s", "1", "-f"])
        .status()
        .map_err(|error| erase_error(disk, error))?;
    if status.success() {
        Ok(true)
    } else {
        Err(erase_error(
            disk,
            format!("nvme format exited with {status}"),
        ))
    }
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
