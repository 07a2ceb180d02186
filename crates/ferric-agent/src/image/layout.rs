//! Partition images (`image_type=partition`, IPA's `work_on_disk`): the partition table the
//! agent makes on the root disk and the small filesystems it writes itself. As IPA orders
//! them: an EFI system partition (UEFI) or a BIOS boot partition (BIOS on GPT) first, then
//! swap, the config drive, and the root partition last; every partition starts on a MiB.
//! `gptman`/`mbrman` write the tables, `fatfs` formats the ESP, and a partition is read and
//! written through [`Region`], so all of it works on a plain file as on a disk.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use serde_json::{Value, json};

use crate::commands::{CommandError, Params};

const MIB: u64 = 1024 * 1024;
const SECTOR: u64 = 512;
/// IPA's `[disk_utils]efi_system_partition_size` and `bios_boot_partition_size`.
pub const ESP_MB: u64 = 550;
pub const BIOS_BOOT_MB: u64 = 1;
/// GPT types, as stored on disk (the first three fields little-endian).
pub const EFI_SYSTEM: uuid::Uuid = uuid::uuid!("C12A7328-F81F-11D2-BA4B-00A0C93EC93B");
const BIOS_BOOT: uuid::Uuid = uuid::uuid!("21686148-6449-6E6F-744E-656564454649");
const LINUX_SWAP: uuid::Uuid = uuid::uuid!("0657FD6D-A4AB-43C4-84E5-0933C84B4F4F");
const LINUX_DATA: uuid::Uuid = uuid::uuid!("0FC63DAF-8483-4772-8E79-3D69D8477DE4");

/// The firmware the deployed machine boots with (`deploy_boot_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootMode {
    Uefi,
    Bios,
}

/// The partition table kind (`disk_label`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Gpt,
    Msdos,
}

/// What `image_info` asks for a partition image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub boot_mode: BootMode,
    pub label: Label,
    pub root_mb: u64,
    pub swap_mb: u64,
}

fn whole_number(info: &Params, key: &str) -> Result<Option<u64>, CommandError> {
    match info.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number.as_u64().map(Some).ok_or_else(|| {
            CommandError::invalid_params(format!("image_info.{key} must be a whole number of MiB"))
        }),
        Some(Value::String(text)) => text.trim().parse().map(Some).map_err(|_| {
            CommandError::invalid_params(format!(
                "image_info.{key} must be a whole number of MiB, not \"{text}\""
            ))
        }),
        Some(other) => Err(CommandError::invalid_params(format!(
            "image_info.{key} must be a whole number of MiB, not {other}"
        ))),
    }
}

impl Layout {
    /// The layout of a partition image from `image_info` (`root_mb`, `swap_mb`,
    /// `ephemeral_mb`, `deploy_boot_mode`, `disk_label`), or `None` for a whole-disk image.
    pub fn from_image_info(info: &Params) -> Result<Option<Layout>, CommandError> {
        match info.get("image_type").and_then(Value::as_str) {
            None | Some("whole-disk") => return Ok(None),
            Some("partition") => {}
            Some(other) => {
                return Err(CommandError::invalid_params(format!(
                    "image_info.image_type \"{other}\" is not whole-disk or partition"
                )));
            }
        }
        let root_mb = whole_number(info, "root_mb")?
            .or(whole_number(info, "root_gb")?.map(|gb| gb * 1024))
            .filter(|mb| *mb > 0)
            .ok_or_else(|| {
                CommandError::invalid_params(
                    "a partition image needs image_info.root_mb (the root partition's size)",
                )
            })?;
        let swap_mb = whole_number(info, "swap_mb")?.unwrap_or(0);
        if whole_number(info, "ephemeral_mb")?.unwrap_or(0) > 0 {
            // TODO-compat: ephemeral partitions need a mkfs for ephemeral_format in the ramdisk.
            return Err(CommandError::invalid_params(
                "ferric-agent does not create ephemeral partitions: set ephemeral_gb to 0",
            ));
        }
        let boot_mode = match info.get("deploy_boot_mode").and_then(Value::as_str) {
            Some("uefi") => BootMode::Uefi,
            None | Some("bios") => BootMode::Bios,
            Some(other) => {
                return Err(CommandError::invalid_params(format!(
                    "image_info.deploy_boot_mode \"{other}\" is not uefi or bios"
                )));
            }
        };
        let label = match info.get("disk_label").and_then(Value::as_str) {
            Some("gpt") => Label::Gpt,
            Some("msdos") => Label::Msdos,
            // IPA: GPT for UEFI, MBR for BIOS unless asked.
            None if boot_mode == BootMode::Uefi => Label::Gpt,
            None => Label::Msdos,
            Some(other) => {
                return Err(CommandError::invalid_params(format!(
                    "image_info.disk_label \"{other}\" is not gpt or msdos"
                )));
            }
        };
        Ok(Some(Layout {
            boot_mode,
            label,
            root_mb,
            swap_mb,
        }))
    }
}

/// One partition the agent made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// 1-based, as the kernel numbers it (`/dev/sda3`).
    pub number: u32,
    /// Bytes from the start of the disk.
    pub start: u64,
    pub size: u64,
    /// The unique partition GUID on GPT, `<disk signature>-<number>` on MBR (PARTUUID).
    pub partuuid: String,
}

/// The partitions of a partition-image deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitions {
    pub label: Label,
    pub esp: Option<Part>,
    pub bios_boot: Option<Part>,
    pub swap: Option<Part>,
    pub configdrive: Option<Part>,
    pub root: Part,
}

fn layout_error(details: impl Into<String>) -> CommandError {
    CommandError::new(
        "ImageWriteError",
        "Error creating the partitions for the image",
        details,
    )
}

/// Writes a new partition table on `file` (a disk of `disk_size` bytes) for `layout`, with a
/// config drive partition of `configdrive_bytes` when given.
pub fn create(
    file: &mut File,
    disk_size: u64,
    layout: &Layout,
    configdrive_bytes: Option<u64>,
) -> Result<Partitions, CommandError> {
    // (role, size in MiB, GPT type, MBR type)
    let mut wanted: Vec<(&str, u64, uuid::Uuid, u8)> = Vec::new();
    if layout.boot_mode == BootMode::Uefi {
        wanted.push(("esp", ESP_MB, EFI_SYSTEM, 0xef));
    } else if layout.label == Label::Gpt {
        wanted.push(("bios_boot", BIOS_BOOT_MB, BIOS_BOOT, 0));
    }
    if layout.swap_mb > 0 {
        wanted.push(("swap", layout.swap_mb, LINUX_SWAP, 0x82));
    }
    if let Some(bytes) = configdrive_bytes {
        wanted.push(("config-2", bytes.div_ceil(MIB).max(1), LINUX_DATA, 0x83));
    }
    wanted.push(("root", layout.root_mb, LINUX_DATA, 0x83));

    // 1 MiB before the first partition (table, boot code), 1 MiB kept at the end (GPT backup).
    let needed = wanted.iter().map(|(_, mb, _, _)| mb).sum::<u64>() * MIB + 2 * MIB;
    if needed > disk_size {
        return Err(layout_error(format!(
            "the partitions need {} MiB ({}) but the disk has {} MiB: lower root_gb or swap_mb",
            needed / MIB,
            wanted
                .iter()
                .map(|(role, mb, _, _)| format!("{role} {mb} MiB"))
                .collect::<Vec<_>>()
                .join(", "),
            disk_size / MIB
        )));
    }
    let mut placed = Vec::new();
    let mut start = MIB;
    for (number, (role, mb, gpt_type, mbr_type)) in (1u32..).zip(&wanted) {
        placed.push((*role, number, start, mb * MIB, *gpt_type, *mbr_type));
        start += mb * MIB;
    }
    let mut parts = Vec::new();
    match layout.label {
        Label::Gpt => {
            let disk_guid = *uuid::Uuid::new_v4().as_bytes();
            let mut gpt = gptman::GPT::new_from(file, SECTOR, disk_guid)
                .map_err(|error| layout_error(format!("cannot start a GPT: {error}")))?;
            for (role, number, start, size, gpt_type, _) in &placed {
                let unique = uuid::Uuid::new_v4();
                gpt[*number] = gptman::GPTPartitionEntry {
                    partition_type_guid: gpt_type.to_bytes_le(),
                    unique_partition_guid: unique.to_bytes_le(),
                    starting_lba: start / SECTOR,
                    ending_lba: (start + size) / SECTOR - 1,
                    attribute_bits: 0,
                    partition_name: (*role).into(),
                };
                parts.push((*role, *number, *start, *size, unique.to_string()));
            }
            gptman::GPT::write_protective_mbr_into(file, SECTOR)
                .and_then(|()| gpt.write_into(file).map(drop))
                .map_err(|error| layout_error(format!("cannot write the GPT: {error}")))?;
        }
        Label::Msdos => {
            let signature: [u8; 4] = rand::random();
            let mut mbr = mbrman::MBR::new_from(file, SECTOR as u32, signature)
                .map_err(|error| layout_error(format!("cannot start an MBR: {error}")))?;
            if placed.len() > 4 {
                return Err(layout_error(
                    "an MBR holds 4 primary partitions: use disk_label gpt",
                ));
            }
            let disk_id = u32::from_le_bytes(signature);
            for (role, number, start, size, _, mbr_type) in &placed {
                let (Ok(first), Ok(sectors)) =
                    (u32::try_from(start / SECTOR), u32::try_from(size / SECTOR))
                else {
                    return Err(layout_error(
                        "the partitions reach beyond 2 TiB, which an MBR cannot address: use \
                         disk_label gpt",
                    ));
                };
                let boot = if *role == "root" && layout.boot_mode == BootMode::Bios {
                    mbrman::BOOT_ACTIVE
                } else {
                    mbrman::BOOT_INACTIVE
                };
                if let Some(entry) = mbr.get_mut(*number as usize) {
                    *entry = mbrman::MBRPartitionEntry {
                        boot,
                        first_chs: mbrman::CHS::empty(),
                        sys: *mbr_type,
                        last_chs: mbrman::CHS::empty(),
                        starting_lba: first,
                        sectors,
                    };
                }
                parts.push((
                    *role,
                    *number,
                    *start,
                    *size,
                    format!("{disk_id:08x}-{number:02x}"),
                ));
            }
            mbr.write_into(file)
                .map_err(|error| layout_error(format!("cannot write the MBR: {error}")))?;
        }
    }
    file.flush()
        .map_err(|error| layout_error(error.to_string()))?;
    let take = |role: &str| {
        parts
            .iter()
            .find(|(name, ..)| *name == role)
            .map(|(_, number, start, size, partuuid)| Part {
                number: *number,
                start: *start,
                size: *size,
                partuuid: partuuid.clone(),
            })
    };
    Ok(Partitions {
        label: layout.label,
        esp: take("esp"),
        bios_boot: take("bios_boot"),
        swap: take("swap"),
        configdrive: take("config-2"),
        root: take("root").ok_or_else(|| layout_error("no root partition was placed"))?,
    })
}

/// A partition of an open disk as a stream of its own (`fatfs` formats and fills it) and as
/// an `ext4-view` source.
#[derive(Debug)]
pub struct Region {
    file: File,
    start: u64,
    size: u64,
    position: u64,
}

impl Region {
    pub fn new(file: &File, start: u64, size: u64) -> io::Result<Region> {
        Ok(Region {
            file: file.try_clone()?,
            start,
            size,
            position: 0,
        })
    }

    fn clamp(&self, len: usize) -> usize {
        (self.size.saturating_sub(self.position)).min(len as u64) as usize
    }
}

impl Read for Region {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = self.clamp(buf.len());
        let n = self
            .file
            .read_at(&mut buf[..len], self.start + self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

impl Write for Region {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let len = self.clamp(buf.len());
        if len == 0 && !buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "write past the end of the partition",
            ));
        }
        let n = self
            .file
            .write_at(&buf[..len], self.start + self.position)?;
        self.position += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for Region {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(delta) => self.size.checked_add_signed(delta),
            SeekFrom::Current(delta) => self.position.checked_add_signed(delta),
        };
        let target = target.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "seek before the partition")
        })?;
        self.position = target;
        Ok(target)
    }
}

impl ext4_view::Ext4Read for Region {
    fn read(
        &mut self,
        start_byte: u64,
        dst: &mut [u8],
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync + 'static>> {
        if start_byte + dst.len() as u64 > self.size {
            return Err(format!(
                "read of {} bytes at {start_byte} goes past the partition ({} bytes)",
                dst.len(),
                self.size
            )
            .into());
        }
        self.file.read_exact_at(dst, self.start + start_byte)?;
        Ok(())
    }
}

/// Formats `part` as FAT (FAT32 at the ESP's size) labelled `EFI-PART` like IPA's
/// `mkfs -n efi-part`; returns the volume id as blkid shows it (`ABCD-1234`).
pub fn format_esp(file: &File, part: &Part) -> Result<String, CommandError> {
    let volume_id: u32 = rand::random();
    let region = Region::new(file, part.start, part.size)
        .map_err(|error| layout_error(error.to_string()))?;
    fatfs::format_volume(
        region,
        fatfs::FormatVolumeOptions::new()
            .volume_id(volume_id)
            .volume_label(*b"EFI-PART   "),
    )
    .map_err(|error| layout_error(format!("cannot format the EFI system partition: {error}")))?;
    Ok(fat_id(volume_id))
}

fn fat_id(volume_id: u32) -> String {
    format!("{:04X}-{:04X}", volume_id >> 16, volume_id & 0xffff)
}

/// Writes a Linux swap signature (v1, label `swap1` as IPA's `mkswap -L swap1`) to `part`.
pub fn write_swap(file: &File, part: &Part) -> Result<String, CommandError> {
    const PAGE: u64 = 4096;
    let pages = part.size / PAGE;
    if pages < 10 {
        return Err(layout_error("the swap partition is smaller than 10 pages"));
    }
    let id = uuid::Uuid::new_v4();
    let mut header = vec![0u8; PAGE as usize];
    header[1024..1028].copy_from_slice(&1u32.to_le_bytes());
    header[1028..1032].copy_from_slice(&((pages - 1) as u32).to_le_bytes());
    header[1036..1052].copy_from_slice(id.as_bytes());
    header[1052..1057].copy_from_slice(b"swap1");
    header[PAGE as usize - 10..].copy_from_slice(b"SWAPSPACE2");
    file.write_all_at(&header, part.start)
        .map_err(|error| layout_error(format!("cannot write the swap signature: {error}")))?;
    Ok(id.to_string())
}

/// The UUID of the filesystem in a partition, as blkid reports it: ext2/3/4 from its
/// superblock, FAT from its volume id. `None` when neither is found.
pub fn filesystem_uuid(file: &File, start: u64, size: u64) -> Option<String> {
    let mut block = [0u8; 2048];
    if size < block.len() as u64 {
        return None;
    }
    file.read_exact_at(&mut block, start).ok()?;
    // ext: the superblock at 1024, magic 0xEF53 at +0x38, the UUID at +0x68.
    if block[1024 + 0x38..1024 + 0x3a] == [0x53, 0xef] {
        let bytes: [u8; 16] = block[1024 + 0x68..1024 + 0x78].try_into().ok()?;
        return Some(uuid::Uuid::from_bytes(bytes).to_string());
    }
    // FAT32 keeps its volume id at 0x43, FAT12/16 at 0x27; the boot signature 0x29 before it.
    if block[510..512] == [0x55, 0xaa] {
        for (signature, id) in [(0x42, 0x43), (0x26, 0x27)] {
            if block[signature] == 0x29 {
                let volume_id = u32::from_le_bytes(block[id..id + 4].try_into().ok()?);
                return Some(fat_id(volume_id));
            }
        }
    }
    None
}

/// A partition of the disk as a table lists it, for finding one by UUID later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub part: Part,
    /// The GPT type, or the MBR type as `0xNN`.
    pub kind: String,
}

impl Listed {
    pub fn is_esp(&self) -> bool {
        self.kind == EFI_SYSTEM.to_string() || self.kind == "0xef"
    }
}

/// The used partitions of the disk's table (GPT or MBR primaries).
pub fn list(file: &mut File) -> Vec<Listed> {
    if let Ok(gpt) = gptman::GPT::find_from(file) {
        let sector = gpt.sector_size;
        return gpt
            .iter()
            .filter(|(_, entry)| entry.is_used())
            .map(|(number, entry)| Listed {
                part: Part {
                    number,
                    start: entry.starting_lba * sector,
                    size: (entry.ending_lba + 1 - entry.starting_lba) * sector,
                    partuuid: uuid::Uuid::from_bytes_le(entry.unique_partition_guid).to_string(),
                },
                kind: uuid::Uuid::from_bytes_le(entry.partition_type_guid).to_string(),
            })
            .collect();
    }
    if let Ok(mbr) = mbrman::MBR::read_from(file, SECTOR as u32) {
        let disk_id = u32::from_le_bytes(mbr.header.disk_signature);
        return mbr
            .iter()
            .filter(|(number, entry)| entry.is_used() && *number <= 4)
            .map(|(number, entry)| Listed {
                part: Part {
                    number: number as u32,
                    start: u64::from(entry.starting_lba) * SECTOR,
                    size: u64::from(entry.sectors) * SECTOR,
                    partuuid: format!("{disk_id:08x}-{number:02x}"),
                },
                kind: format!("{:#04x}", entry.sys),
            })
            .collect();
    }
    Vec::new()
}

/// The partition whose filesystem UUID or PARTUUID is `wanted` (case-insensitive).
pub fn find_by_uuid(file: &mut File, wanted: &str) -> Option<Listed> {
    let wanted = wanted.trim().to_ascii_lowercase();
    list(file).into_iter().find(|listed| {
        listed.part.partuuid.to_ascii_lowercase() == wanted
            || filesystem_uuid(file, listed.part.start, listed.part.size)
                .is_some_and(|found| found.to_ascii_lowercase() == wanted)
    })
}

/// The `get_partition_uuids` answer for a partition-image deployment (IPA's keys).
pub fn uuids_json(partitions: &Partitions, root_uuid: &str, esp_uuid: Option<&str>) -> Value {
    let path = |part: &Option<Part>| part.as_ref().map(|part| part.number);
    json!({
        "partition_table_type": match partitions.label { Label::Gpt => "gpt", Label::Msdos => "msdos" },
        "root uuid": root_uuid,
        "efi system partition uuid": esp_uuid,
        "PReP Boot partition uuid": null,
        "partitions": {
            "root": partitions.root.number,
            "efi system partition": path(&partitions.esp),
            "BIOS Boot partition": path(&partitions.bios_boot),
            "swap": path(&partitions.swap),
            "configdrive": path(&partitions.configdrive),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn disk(dir: &std::path::Path, mib: u64) -> File {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("disk"))
            .expect("create disk");
        file.set_len(mib * MIB).expect("size disk");
        file
    }

    fn info(value: Value) -> Params {
        value.as_object().expect("object").clone()
    }

    #[test]
    fn image_info_reads_the_layout_like_ipa() {
        assert_eq!(Layout::from_image_info(&info(json!({}))).expect("wd"), None);
        let uefi = Layout::from_image_info(&info(json!({
            "image_type": "partition", "root_mb": 10240, "swap_mb": "512",
            "ephemeral_mb": 0, "deploy_boot_mode": "uefi",
        })))
        .expect("partition")
        .expect("layout");
        assert_eq!(
            uefi,
            Layout {
                boot_mode: BootMode::Uefi,
                label: Label::Gpt,
                root_mb: 10240,
                swap_mb: 512
            }
        );
        let bios = Layout::from_image_info(&info(json!({
            "image_type": "partition", "root_gb": 2,
        })))
        .expect("partition")
        .expect("layout");
        assert_eq!((bios.label, bios.root_mb), (Label::Msdos, 2048));
        for (bad, says) in [
            (json!({"image_type": "partition"}), "root_mb"),
            (
                json!({"image_type": "partition", "root_mb": "ten"}),
                "whole number",
            ),
            (
                json!({"image_type": "partition", "root_mb": 1, "ephemeral_mb": 5}),
                "ephemeral",
            ),
            (
                json!({"image_type": "partition", "root_mb": 1, "disk_label": "sun"}),
                "gpt or msdos",
            ),
            (json!({"image_type": "floppy"}), "whole-disk or partition"),
        ] {
            let error = Layout::from_image_info(&info(bad)).expect_err("refused");
            assert_eq!(error.code, 400);
            assert!(error.details.contains(says), "{}", error.details);
        }
    }

    #[test]
    fn uefi_gpt_puts_the_esp_first_and_root_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = disk(dir.path(), 2048);
        let layout = Layout {
            boot_mode: BootMode::Uefi,
            label: Label::Gpt,
            root_mb: 1024,
            swap_mb: 64,
        };
        let made = create(&mut file, 2048 * MIB, &layout, Some(3000)).expect("layout");
        let esp = made.esp.clone().expect("esp");
        assert_eq!((esp.number, esp.start, esp.size), (1, MIB, ESP_MB * MIB));
        assert_eq!(made.swap.as_ref().map(|part| part.number), Some(2));
        assert_eq!(made.configdrive.as_ref().map(|part| part.size), Some(MIB));
        assert_eq!(made.root.number, 4);
        assert_eq!(made.root.size, 1024 * MIB);
        assert_eq!(made.root.start % MIB, 0);
        let listed = list(&mut file);
        assert_eq!(listed.len(), 4);
        assert!(listed[0].is_esp());
        assert_eq!(listed[3].part, made.root);
        let gpt = gptman::GPT::find_from(&mut file).expect("gpt reads back");
        assert_eq!(gpt[4].partition_name.as_str(), "root");
        assert_eq!(gpt[3].partition_name.as_str(), "config-2");
    }

    #[test]
    fn bios_layouts_boot_from_mbr_or_a_bios_boot_partition() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = disk(dir.path(), 64);
        let mut layout = Layout {
            boot_mode: BootMode::Bios,
            label: Label::Msdos,
            root_mb: 32,
            swap_mb: 0,
        };
        let made = create(&mut file, 64 * MIB, &layout, None).expect("mbr");
        assert_eq!((made.esp.clone(), made.root.number), (None, 1));
        let mbr = mbrman::MBR::read_from(&mut file, 512).expect("mbr reads back");
        assert_eq!(mbr[1].boot, mbrman::BOOT_ACTIVE);
        assert_eq!(mbr[1].sys, 0x83);
        assert!(
            made.root.partuuid.ends_with("-01"),
            "{}",
            made.root.partuuid
        );
        assert_eq!(
            find_by_uuid(&mut file, &made.root.partuuid),
            list(&mut file).pop()
        );

        layout.label = Label::Gpt;
        let made = create(&mut file, 64 * MIB, &layout, None).expect("gpt");
        let boot = made.bios_boot.expect("bios boot partition");
        assert_eq!((boot.number, boot.size), (1, MIB));
        assert_eq!(made.root.number, 2);
    }

    #[test]
    fn a_disk_too_small_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = disk(dir.path(), 600);
        let layout = Layout {
            boot_mode: BootMode::Uefi,
            label: Label::Gpt,
            root_mb: 1024,
            swap_mb: 0,
        };
        let error = create(&mut file, 600 * MIB, &layout, None).expect_err("too small");
        assert!(error.details.contains("lower root_gb"), "{}", error.details);
    }

    #[test]
    fn esp_swap_and_ext_uuids_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut file = disk(dir.path(), 1024);
        let layout = Layout {
            boot_mode: BootMode::Uefi,
            label: Label::Gpt,
            root_mb: 128,
            swap_mb: 16,
        };
        let made = create(&mut file, 1024 * MIB, &layout, None).expect("layout");
        let esp = made.esp.expect("esp");
        let id = format_esp(&file, &esp).expect("format");
        assert_eq!(filesystem_uuid(&file, esp.start, esp.size), Some(id));
        let swap = made.swap.expect("swap");
        write_swap(&file, &swap).expect("swap");
        let mut magic = [0u8; 10];
        file.read_exact_at(&mut magic, swap.start + 4096 - 10)
            .expect("read");
        assert_eq!(&magic, b"SWAPSPACE2");
        assert_eq!(
            filesystem_uuid(&file, made.root.start, made.root.size),
            None
        );
    }
}
