//! Partition-table work after a whole-disk image is written: move the GPT backup header to the
//! real end of the disk, add the config drive partition (`config-2`, the last 64 MiB), and
//! read partition UUIDs. `gptman` and `mbrman` do the table formats.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use base64::Engine;
use serde_json::{Value, json};

use crate::commands::CommandError;

/// The largest config drive Ironic sends, and the size of its partition.
pub const CONFIGDRIVE_MAX: u64 = 64 * 1024 * 1024;
/// GPT type GUID "Linux filesystem data" 0FC63DAF-8483-4772-8E79-3D69D8477DE4, as stored.
const LINUX_DATA: [u8; 16] = [
    0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4,
];
/// GPT type GUID of an EFI system partition C12A7328-F81F-11D2-BA4B-00A0C93EC93B, as stored.
const EFI_SYSTEM: [u8; 16] = [
    0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b,
];
/// MBR limit: a partition must end below 2 TiB.
const MBR_LIMIT: u64 = 2 * 1024 * 1024 * 1024 * 1024;

fn configdrive_error(details: impl Into<String>) -> CommandError {
    CommandError::new(
        "ConfigDriveError",
        "Error writing the config drive",
        details,
    )
}

/// Decodes the `configdrive` parameter: a URL to download, or base64 of a gzipped (or plain)
/// ISO. At most 64 MiB either way.
pub fn decode_configdrive(
    value: &str,
    http: &reqwest::blocking::Client,
) -> Result<Vec<u8>, CommandError> {
    let raw = if value.starts_with("http://") || value.starts_with("https://") {
        let response = http
            .get(value)
            .send()
            .and_then(|response| response.error_for_status())
            .map_err(|error| configdrive_error(format!("cannot download {value}: {error}")))?;
        let mut body = Vec::new();
        response
            .take(CONFIGDRIVE_MAX * 2 + 1)
            .read_to_end(&mut body)
            .map_err(|error| configdrive_error(format!("cannot download {value}: {error}")))?;
        if body.len() as u64 > CONFIGDRIVE_MAX * 2 {
            return Err(configdrive_error(
                "the config drive download is larger than 128 MiB",
            ));
        }
        // A URL may serve the same base64+gzip text or the ISO itself.
        match base64::engine::general_purpose::STANDARD.decode(body.trim_ascii()) {
            Ok(decoded) => decoded,
            Err(_) => body,
        }
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|error| {
                configdrive_error(format!("the config drive is not base64: {error}"))
            })?
    };
    let data = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut inflated = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .take(CONFIGDRIVE_MAX + 1)
            .read_to_end(&mut inflated)
            .map_err(|error| {
                configdrive_error(format!("the config drive is not valid gzip: {error}"))
            })?;
        inflated
    } else {
        raw
    };
    if data.is_empty() {
        return Err(configdrive_error("the config drive is empty"));
    }
    if data.len() as u64 > CONFIGDRIVE_MAX {
        return Err(configdrive_error(format!(
            "the config drive is larger than {} MiB",
            CONFIGDRIVE_MAX / 1024 / 1024
        )));
    }
    Ok(data)
}

/// If the disk has a GPT whose backup header is not at the end (the image was smaller than
/// the disk), rewrites both headers for the disk's real size. Returns whether it had a GPT.
pub fn fix_gpt(file: &mut File) -> Result<bool, CommandError> {
    let Ok(mut gpt) = gptman::GPT::find_from(file) else {
        return Ok(false);
    };
    let sector_size = gpt.sector_size;
    gpt.header
        .update_from(file, sector_size)
        .and_then(|()| gpt.write_into(file).map(|_| ()))
        .map_err(|error| {
            CommandError::internal(format!("cannot rewrite the GPT for the disk size: {error}"))
        })?;
    Ok(true)
}

/// Writes `data` to a new partition in the last 64 MiB of the disk, named `config-2` on GPT.
pub fn write_configdrive(file: &mut File, data: &[u8]) -> Result<String, CommandError> {
    let disk_size = file
        .seek(SeekFrom::End(0))
        .map_err(|error| configdrive_error(error.to_string()))?;
    let start = if let Ok(mut gpt) = gptman::GPT::find_from(file) {
        let sector = gpt.sector_size;
        gpt.header
            .update_from(file, sector)
            .map_err(|error| configdrive_error(format!("cannot read the GPT: {error}")))?;
        let sectors = CONFIGDRIVE_MAX / sector;
        let start = gpt.find_last_place(sectors).ok_or_else(|| {
            configdrive_error("no free 64 MiB at the end of the disk for the config drive")
        })?;
        let slot = (1..=gpt.header.number_of_partition_entries)
            .find(|&i| gpt[i].is_unused())
            .ok_or_else(|| configdrive_error("the GPT has no free partition entry"))?;
        gpt[slot] = gptman::GPTPartitionEntry {
            partition_type_guid: LINUX_DATA,
            unique_partition_guid: *uuid::Uuid::new_v4().as_bytes(),
            starting_lba: start,
            ending_lba: start + sectors - 1,
            attribute_bits: 0,
            partition_name: "config-2".into(),
        };
        gpt.write_into(file)
            .map_err(|error| configdrive_error(format!("cannot write the GPT: {error}")))?;
        start * sector
    } else if let Ok(mut mbr) = mbrman::MBR::read_from(file, 512) {
        let end = disk_size.min(MBR_LIMIT) / 512;
        let sectors = CONFIGDRIVE_MAX / 512;
        let start = (end - sectors) / 2048 * 2048;
        let overlaps = mbr.iter().any(|(_, part)| {
            part.is_used()
                && u64::from(part.starting_lba) < start + sectors
                && u64::from(part.starting_lba) + u64::from(part.sectors) > start
        });
        if overlaps {
            return Err(configdrive_error(
                "the last 64 MiB of the disk (below 2 TiB) are not free for the config drive",
            ));
        }
        let slot = (1..=4)
            .find(|&i| mbr.get(i).is_some_and(|part| part.is_unused()))
            .ok_or_else(|| configdrive_error("the MBR has no free primary partition slot"))?;
        let start_lba = u32::try_from(start)
            .map_err(|_| configdrive_error("the config drive lies beyond the MBR's reach"))?;
        if let Some(part) = mbr.get_mut(slot) {
            *part = mbrman::MBRPartitionEntry {
                boot: mbrman::BOOT_INACTIVE,
                first_chs: mbrman::CHS::empty(),
                sys: 0x83,
                last_chs: mbrman::CHS::empty(),
                starting_lba: start_lba,
                sectors: sectors as u32,
            };
        }
        mbr.write_into(file)
            .map_err(|error| configdrive_error(format!("cannot write the MBR: {error}")))?;
        start * 512
    } else {
        return Err(configdrive_error(
            "the image has no partition table, so there is nowhere to add the config drive partition",
        ));
    };
    file.write_all_at(data, start)
        .and_then(|()| {
            let rest = CONFIGDRIVE_MAX - data.len() as u64;
            file.write_all_at(&vec![0u8; rest as usize], start + data.len() as u64)
        })
        .and_then(|()| file.flush())
        .map_err(|error| configdrive_error(format!("cannot write the config drive: {error}")))?;
    Ok(format!("config drive written at byte {start}"))
}

fn guid_string(bytes: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes_le(*bytes).to_string()
}

/// `standby.get_partition_uuids`-style facts about a disk's table.
pub fn partition_uuids(file: &mut File) -> Value {
    if let Ok(gpt) = gptman::GPT::find_from(file) {
        let esp = gpt
            .iter()
            .find(|(_, part)| part.is_used() && part.partition_type_guid == EFI_SYSTEM)
            .map(|(_, part)| guid_string(&part.unique_partition_guid));
        let first = gpt
            .iter()
            .find(|(_, part)| part.is_used())
            .map(|(_, part)| guid_string(&part.unique_partition_guid));
        return json!({
            "partition_table_type": "gpt",
            "disk_guid": guid_string(&gpt.header.disk_guid),
            "root uuid": first,
            "efi system partition uuid": esp,
            "PReP Boot partition uuid": null,
        });
    }
    if let Ok(mbr) = mbrman::MBR::read_from(file, 512) {
        let signature = mbr.header.disk_signature;
        return json!({
            "partition_table_type": "msdos",
            "disk_identifier": format!("{:02x}{:02x}{:02x}{:02x}", signature[3], signature[2], signature[1], signature[0]),
            "root uuid": null,
            "efi system partition uuid": null,
            "PReP Boot partition uuid": null,
        });
    }
    json!({"partition_table_type": null, "root uuid": null, "efi system partition uuid": null, "PReP Boot partition uuid": null})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip_base64(data: &[u8]) -> String {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).expect("gzip");
        base64::engine::general_purpose::STANDARD.encode(encoder.finish().expect("gzip"))
    }

    #[test]
    fn configdrive_decodes_base64_gzip_and_plain() {
        let http = reqwest::blocking::Client::new();
        assert_eq!(
            decode_configdrive(&gzip_base64(b"iso"), &http).expect("gz"),
            b"iso"
        );
        let plain = base64::engine::general_purpose::STANDARD.encode(b"plain");
        assert_eq!(decode_configdrive(&plain, &http).expect("plain"), b"plain");
        assert!(decode_configdrive("!!!", &http).is_err());
    }

    #[test]
    fn configdrive_lands_in_a_config_2_partition_at_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("disk");
        let size = 256 * 1024 * 1024u64;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        file.set_len(size).expect("size");
        // An "image" of 32 MiB with a GPT: the disk is larger, so the backup header is wrong.
        let mut image = std::io::Cursor::new(vec![0u8; 32 * 1024 * 1024]);
        let mut gpt = gptman::GPT::new_from(&mut image, 512, [7; 16]).expect("gpt");
        gpt[1] = gptman::GPTPartitionEntry {
            partition_type_guid: LINUX_DATA,
            unique_partition_guid: [9; 16],
            starting_lba: 2048,
            ending_lba: 4095,
            attribute_bits: 0,
            partition_name: "root".into(),
        };
        gpt.write_into(&mut image).expect("write gpt");
        file.write_all_at(image.get_ref(), 0).expect("image");
        assert!(fix_gpt(&mut file).expect("fix"));
        write_configdrive(&mut file, b"CONFIG").expect("configdrive");
        let gpt = gptman::GPT::find_from(&mut file).expect("gpt after");
        let (_, part) = gpt
            .iter()
            .find(|(_, part)| part.partition_name.as_str() == "config-2")
            .expect("config-2 partition");
        assert!(
            part.ending_lba * 512 >= size - 2 * 1024 * 1024,
            "at the end"
        );
        let mut found = [0u8; 6];
        file.read_exact_at(&mut found, part.starting_lba * 512)
            .expect("read");
        assert_eq!(&found, b"CONFIG");
        assert_eq!(partition_uuids(&mut file)["partition_table_type"], "gpt");
    }

    #[test]
    fn no_partition_table_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("disk");
        std::fs::write(&path, vec![0u8; 1 << 20]).expect("write");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let error = write_configdrive(&mut file, b"x").expect_err("no table");
        assert!(
            error.details.contains("no partition table"),
            "{}",
            error.details
        );
    }
}
