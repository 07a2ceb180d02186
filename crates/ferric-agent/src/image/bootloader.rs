//! `image.install_bootloader` (IPA's image extension) for partition images: makes the
//! deployed root partition bootable.
//!
//! - UEFI (an EFI system partition is given or found): the boot files the image carries under
//!   `/boot/efi/EFI` are copied from its root filesystem (read with `ext4-view`, ext2/3/4) into
//!   the ESP (written with `fatfs`), with `/boot/grub2/grub.cfg` and `grubenv` beside each
//!   loader that lacks them — IPA's "preserve EFI assets" path — then an NVRAM boot entry for
//!   the loader (a `BOOTX64.CSV`'s, else `BOOTX64.EFI`) is put first in `BootOrder` through
//!   efivarfs, as `efibootmgr` would. Nothing is mounted, so it works on a plain file too.
//! - BIOS: `grub-install` (or `grub2-install`) to the disk in a chroot of the mounted root
//!   partition, then `grub-mkconfig`, with busybox's `mount`/`chroot` from the ramdisk.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::layout::{self, Label, Listed, Part, Region};
use crate::agent::Invocation;
use crate::commands::{CommandError, Params};

/// The EFI global variable GUID that `Boot####` and `BootOrder` live under.
const EFI_GLOBAL: &str = "8be4df61-93ca-11d2-aa0d-00e098032b8c";
/// Where the kernel shows the firmware's variables.
pub const EFIVARS: &str = "/sys/firmware/efi/efivars";
/// NON_VOLATILE | BOOTSERVICE_ACCESS | RUNTIME_ACCESS.
const VAR_ATTRIBUTES: u32 = 0x7;

fn bootloader_error(details: impl Into<String>) -> CommandError {
    CommandError::new(
        "CommandExecutionError",
        "Error installing the bootloader",
        details,
    )
}

/// What `image.install_bootloader` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub root_uuid: String,
    pub efi_system_part_uuid: Option<String>,
    pub target_boot_mode: Option<String>,
    pub ignore_failure: bool,
    /// Whether a BIOS bootloader may be installed: that runs the deployed image's own
    /// `/bin/sh` and `grub-install` as root in a chroot with `/dev`, `/proc` and `/sys`
    /// mounted, i.e. code from a tenant's image with the ramdisk's full power. Off unless the
    /// lookup's `enable_bios_bootloader_install` says so (Ironic's default since
    /// CVE-2026-43003).
    pub allow_bios: bool,
}

impl Request {
    pub fn from_params(params: &Params) -> Result<Request, CommandError> {
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let root_uuid = text("root_uuid").ok_or_else(|| {
            CommandError::invalid_params(
                "root_uuid (the root partition's UUID from get_partition_uuids) is required",
            )
        })?;
        let target_boot_mode = text("target_boot_mode");
        if let Some(mode) = target_boot_mode.as_deref()
            && !["uefi", "bios"].contains(&mode)
        {
            return Err(CommandError::invalid_params(format!(
                "target_boot_mode \"{mode}\" is not uefi or bios"
            )));
        }
        if text("prep_boot_part_uuid").is_some() {
            return Err(CommandError::invalid_params(
                "PReP boot partitions (ppc64) are not supported by ferric-agent",
            ));
        }
        Ok(Request {
            root_uuid,
            efi_system_part_uuid: text("efi_system_part_uuid"),
            target_boot_mode,
            ignore_failure: params
                .get("ignore_bootloader_failure")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            allow_bios: false,
        })
    }
}

pub(crate) fn validate_install_bootloader(params: &Params) -> Result<(), CommandError> {
    Request::from_params(params).map(drop)
}

pub(crate) fn install_bootloader_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    let mut request = Request::from_params(&invocation.params)?;
    request.allow_bios = invocation.agent.bios_bootloader_install_allowed();
    let disk = super::root_disk(&invocation.agent, None)?;
    // /sys as the agent reads it (a fixture directory in tests).
    let sys = &invocation.agent.config.sys_root;
    let efivars = sys.join(EFIVARS.trim_start_matches("/sys/"));
    let uefi = sys.join("firmware/efi").exists();
    // The boot loader may write into the image's pieces that peers still fetch from here.
    if let Some(held) = invocation.agent.peer_swarm() {
        held.mark_changed();
    }
    let outcome = install(&disk.path, &request, &efivars, uefi);
    match outcome {
        Ok(message) => {
            tracing::info!(device = %disk.name, %message, "bootloader installed");
            Ok(Some(
                json!({"result": format!("install_bootloader: {message}")}),
            ))
        }
        Err(error) if request.ignore_failure => {
            tracing::error!(device = %disk.name, error = %error.details, "bootloader installation failed; ignored as asked");
            Ok(Some(json!({
                "result": format!("install_bootloader: failed and ignored: {}", error.details),
            })))
        }
        Err(error) => Err(error),
    }
}

/// Installs the bootloader on the disk at `disk_path`; `efivars` is where NVRAM entries go
/// when `uefi_firmware` says the machine runs under UEFI.
pub fn install(
    disk_path: &Path,
    request: &Request,
    efivars: &Path,
    uefi_firmware: bool,
) -> Result<String, CommandError> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(disk_path)
        .map_err(|error| {
            bootloader_error(format!("cannot open {}: {error}", disk_path.display()))
        })?;
    let root = layout::find_by_uuid(&mut file, &request.root_uuid).ok_or_else(|| {
        CommandError::new(
            "DeviceNotFound",
            "Error finding the root partition",
            format!(
                "no partition on {} has the UUID or PARTUUID {}",
                disk_path.display(),
                request.root_uuid
            ),
        )
    })?;
    let esp = match &request.efi_system_part_uuid {
        Some(uuid) => Some(layout::find_by_uuid(&mut file, uuid).ok_or_else(|| {
            CommandError::new(
                "DeviceNotFound",
                "Error finding the EFI system partition",
                format!(
                    "no partition on {} has the UUID or PARTUUID {uuid}",
                    disk_path.display()
                ),
            )
        })?),
        None if request.target_boot_mode.as_deref() == Some("uefi") => Some(
            layout::list(&mut file)
                .into_iter()
                .find(Listed::is_esp)
                .ok_or_else(|| {
                    bootloader_error(format!(
                        "UEFI boot was asked but {} has no EFI system partition",
                        disk_path.display()
                    ))
                })?,
        ),
        None => None,
    };
    match esp {
        Some(esp) => install_uefi(&mut file, &root.part, &esp.part, efivars, uefi_firmware),
        None if request.allow_bios => install_grub_bios(disk_path, &root.part),
        None => Err(bootloader_error(format!(
            "{} has no EFI system partition, and installing a BIOS bootloader is disabled: it \
             would run the deployed image's own grub-install as root. Deploy a whole-disk \
             image, or boot the node in UEFI mode; for images you trust, set \
             agent_enable_bios_bootloader_install = true in Ferric's settings.",
            disk_path.display()
        ))),
    }
}

/// Copies the image's EFI boot files into the ESP and adds the NVRAM entry.
fn install_uefi(
    file: &mut File,
    root: &Part,
    esp: &Part,
    efivars: &Path,
    uefi_firmware: bool,
) -> Result<String, CommandError> {
    let copied = copy_efi_assets(file, root, esp)?;
    let loader = find_loader(file, esp)?;
    let label = table_label(file);
    let entry = if !uefi_firmware {
        "no NVRAM entry: the agent does not run under UEFI".to_owned()
    } else {
        let mounted = ensure_efivarfs(efivars);
        match mounted.and_then(|()| {
            add_boot_entry(efivars, &loader.label, esp, label, &loader.path)
                .map_err(|error| error.to_string())
        }) {
            Ok(number) => format!(
                "NVRAM entry Boot{number:04X} \"{}\" first in BootOrder",
                loader.label
            ),
            // The firmware still finds the removable-media path on its own.
            Err(error) if loader.path.eq_ignore_ascii_case("\\EFI\\BOOT\\BOOTX64.EFI") => {
                tracing::warn!(%error, "no NVRAM boot entry; the firmware boots the removable-media path");
                format!(
                    "no NVRAM entry ({error}); the firmware boots {}",
                    loader.path
                )
            }
            Err(error) => {
                return Err(bootloader_error(format!(
                    "cannot add the NVRAM boot entry for {}: {error}",
                    loader.path
                )));
            }
        }
    };
    Ok(format!(
        "UEFI: {copied} files copied from the image's /boot/efi/EFI to the EFI system \
         partition {}; loader {}; {entry}",
        esp.number, loader.path
    ))
}

fn table_label(file: &mut File) -> Label {
    if gptman::GPT::find_from(file).is_ok() {
        Label::Gpt
    } else {
        Label::Msdos
    }
}

/// Copies `/boot/efi/EFI` of the root filesystem into the ESP's `\EFI`; returns how many
/// files were copied.
fn copy_efi_assets(file: &File, root: &Part, esp: &Part) -> Result<usize, CommandError> {
    let region = Region::new(file, root.start, root.size)
        .map_err(|error| bootloader_error(error.to_string()))?;
    let rootfs = ext4_view::Ext4::load(Box::new(region)).map_err(|error| {
        bootloader_error(format!(
            "cannot read the root filesystem on partition {} ({error}): ferric-agent reads \
             ext2/3/4 root filesystems",
            root.number
        ))
    })?;
    if !rootfs.exists("/boot/efi/EFI").unwrap_or(false) {
        return Err(bootloader_error(
            "the image has no UEFI boot files: its root filesystem has no /boot/efi/EFI \
             (build the image with its EFI loader, e.g. grub or shim, installed under \
             /boot/efi)",
        ));
    }
    let esp_region = Region::new(file, esp.start, esp.size)
        .map_err(|error| bootloader_error(error.to_string()))?;
    let fat = fatfs::FileSystem::new(esp_region, fatfs::FsOptions::new()).map_err(|error| {
        bootloader_error(format!(
            "the EFI system partition {} is not FAT: {error}",
            esp.number
        ))
    })?;
    let efi = fat
        .root_dir()
        .create_dir("EFI")
        .map_err(|error| bootloader_error(format!("cannot write to the ESP: {error}")))?;
    let mut copied = copy_tree(&rootfs, "/boot/efi/EFI", &efi)?;
    // IPA: grub's config and environment go beside each loader directory lacking them.
    for name in ["grub.cfg", "grubenv"] {
        let Ok(data) = rootfs.read(format!("/boot/grub2/{name}").as_str()) else {
            continue;
        };
        for entry in efi.iter().flatten() {
            let vendor = entry.file_name();
            if !entry.is_dir() || vendor == "." || vendor == ".." {
                continue;
            }
            let dir = entry.to_dir();
            if dir.open_file(name).is_err() {
                write_fat_file(&dir, name, &data)?;
                copied += 1;
            }
        }
    }
    drop(efi);
    fat.unmount()
        .map_err(|error| bootloader_error(format!("cannot finish the ESP: {error}")))?;
    Ok(copied)
}

fn copy_tree<T: fatfs::ReadWriteSeek>(
    rootfs: &ext4_view::Ext4,
    from: &str,
    to: &fatfs::Dir<'_, T>,
) -> Result<usize, CommandError> {
    let read_error =
        |error: ext4_view::Ext4Error| bootloader_error(format!("cannot read {from}: {error}"));
    let mut copied = 0;
    for entry in rootfs.read_dir(from).map_err(read_error)? {
        let entry = entry.map_err(read_error)?;
        let Ok(name) = entry.file_name().as_str().map(str::to_owned) else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        let path = format!("{from}/{name}");
        let kind = entry.file_type().map_err(read_error)?;
        if kind.is_dir() {
            let dir = to.create_dir(&name).map_err(|error| {
                bootloader_error(format!("cannot create {name} on the ESP: {error}"))
            })?;
            copied += copy_tree(rootfs, &path, &dir)?;
        } else if kind.is_regular_file() || kind.is_symlink() {
            let data = rootfs.read(path.as_str()).map_err(read_error)?;
            write_fat_file(to, &name, &data)?;
            copied += 1;
        }
    }
    Ok(copied)
}

fn write_fat_file<T: fatfs::ReadWriteSeek>(
    dir: &fatfs::Dir<'_, T>,
    name: &str,
    data: &[u8],
) -> Result<(), CommandError> {
    use std::io::Write;
    let mut file = dir
        .create_file(name)
        .map_err(|error| bootloader_error(format!("cannot create {name} on the ESP: {error}")))?;
    file.truncate()
        .and_then(|()| file.write_all(data))
        .and_then(|()| file.flush())
        .map_err(|error| bootloader_error(format!("cannot write {name} on the ESP: {error}")))
}

/// The loader an NVRAM entry points at, as a firmware path, and the entry's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    pub path: String,
    pub label: String,
}

/// IPA's choice: a shim's `BOOTX64.CSV` names the loader and the label; else `BOOTX64.EFI`.
fn find_loader(file: &File, esp: &Part) -> Result<Loader, CommandError> {
    let region = Region::new(file, esp.start, esp.size)
        .map_err(|error| bootloader_error(error.to_string()))?;
    let fat = fatfs::FileSystem::new(region, fatfs::FsOptions::new())
        .map_err(|error| bootloader_error(format!("cannot read the ESP: {error}")))?;
    let efi = fat
        .root_dir()
        .open_dir("EFI")
        .map_err(|error| bootloader_error(format!("the ESP has no \\EFI: {error}")))?;
    let mut fallback = None;
    for entry in efi.iter().flatten() {
        let vendor = entry.file_name();
        if !entry.is_dir() || vendor == "." || vendor == ".." {
            continue;
        }
        for file in entry.to_dir().iter().flatten() {
            let name = file.file_name();
            if name.eq_ignore_ascii_case("BOOTX64.CSV") {
                let mut raw = Vec::new();
                use std::io::Read;
                file.to_file()
                    .read_to_end(&mut raw)
                    .map_err(|error| bootloader_error(format!("cannot read {name}: {error}")))?;
                if let Some((loader, label)) = parse_boot_csv(&raw) {
                    return Ok(Loader {
                        path: format!("\\EFI\\{vendor}\\{loader}"),
                        label,
                    });
                }
            } else if name.eq_ignore_ascii_case("BOOTX64.EFI") && fallback.is_none() {
                fallback = Some(format!("\\EFI\\{vendor}\\{name}"));
            }
        }
    }
    fallback
        .map(|path| Loader {
            path,
            label: "ferric1".to_owned(),
        })
        .ok_or_else(|| {
            bootloader_error(
                "the image's /boot/efi/EFI holds no x86-64 loader (no BOOTX64.CSV or \
                 BOOTX64.EFI)",
            )
        })
}

/// `shimx64.efi,label,,description` in UTF-16 (as shim ships it) or ASCII.
pub fn parse_boot_csv(raw: &[u8]) -> Option<(String, String)> {
    let text = if raw.starts_with(&[0xff, 0xfe]) {
        let units: Vec<u16> = raw[2..]
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(raw).into_owned()
    };
    let line = text.lines().find(|line| !line.trim().is_empty())?;
    let mut fields = line.split(',');
    let loader = fields.next()?.trim().to_owned();
    let label = fields.next()?.trim().to_owned();
    (!loader.is_empty() && !label.is_empty()).then_some((loader, label))
}

/// Mounts efivarfs where the kernel shows it, unless it is there already.
fn ensure_efivarfs(efivars: &Path) -> Result<(), String> {
    let has_vars = std::fs::read_dir(efivars)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    if has_vars {
        return Ok(());
    }
    // Only the kernel's own place is ever mounted (never a fixture directory in tests).
    if efivars != Path::new(EFIVARS) {
        return Err(format!("no EFI variables under {}", efivars.display()));
    }
    run(Command::new("mount")
        .args(["-t", "efivarfs", "efivarfs"])
        .arg(efivars))
}

/// The `EFI_LOAD_OPTION` of an entry booting `loader` from the partition `esp`.
pub fn load_option(description: &str, esp: &Part, label: Label, loader: &str) -> Vec<u8> {
    let mut path = Vec::new();
    // Hard drive media device path (type 4, subtype 1, 42 bytes).
    path.extend_from_slice(&[4, 1, 42, 0]);
    path.extend_from_slice(&esp.number.to_le_bytes());
    path.extend_from_slice(&(esp.start / 512).to_le_bytes());
    path.extend_from_slice(&(esp.size / 512).to_le_bytes());
    match label {
        Label::Gpt => {
            let guid = uuid::Uuid::parse_str(&esp.partuuid).unwrap_or_default();
            path.extend_from_slice(&guid.to_bytes_le());
            path.extend_from_slice(&[2, 2]);
        }
        Label::Msdos => {
            let disk_id = esp
                .partuuid
                .split('-')
                .next()
                .and_then(|id| u32::from_str_radix(id, 16).ok())
                .unwrap_or(0);
            path.extend_from_slice(&disk_id.to_le_bytes());
            path.extend_from_slice(&[0; 12]);
            path.extend_from_slice(&[1, 1]);
        }
    }
    // File path media device path (type 4, subtype 4): the loader, NUL-terminated UTF-16.
    let name: Vec<u8> = loader
        .encode_utf16()
        .chain([0])
        .flat_map(u16::to_le_bytes)
        .collect();
    path.extend_from_slice(&[4, 4]);
    path.extend_from_slice(&((4 + name.len()) as u16).to_le_bytes());
    path.extend_from_slice(&name);
    // End of the device path.
    path.extend_from_slice(&[0x7f, 0xff, 4, 0]);

    let mut option = Vec::new();
    option.extend_from_slice(&1u32.to_le_bytes()); // LOAD_OPTION_ACTIVE
    option.extend_from_slice(&(path.len() as u16).to_le_bytes());
    option.extend(
        description
            .encode_utf16()
            .chain([0])
            .flat_map(u16::to_le_bytes),
    );
    option.extend_from_slice(&path);
    option
}

fn var_path(efivars: &Path, name: &str) -> PathBuf {
    efivars.join(format!("{name}-{EFI_GLOBAL}"))
}

/// Description of a `Boot####` variable's load option (after the attribute word).
fn option_description(option: &[u8]) -> Option<String> {
    let text = option.get(6..)?;
    let units: Vec<u16> = text
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .take_while(|unit| *unit != 0)
        .collect();
    Some(String::from_utf16_lossy(&units))
}

fn write_var(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut content = VAR_ATTRIBUTES.to_le_bytes().to_vec();
    content.extend_from_slice(data);
    if path.exists() {
        // efivarfs marks Boot#### and BootOrder immutable; `efibootmgr` lifts the flag
        // before writing, and so does this (a filesystem without inode flags has none).
        let file = File::open(path)?;
        if let Ok(flags) = rustix::fs::ioctl_getflags(&file)
            && flags.contains(rustix::fs::IFlags::IMMUTABLE)
        {
            rustix::fs::ioctl_setflags(&file, flags - rustix::fs::IFlags::IMMUTABLE)?;
        }
    }
    // efivarfs takes a variable in one write, and replaces it when the file exists.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.write_all(&content)?;
    // A plain file (tests) keeps old bytes past a shorter value; efivarfs shows the new size.
    if file.metadata()?.len() > content.len() as u64 {
        file.set_len(content.len() as u64)?;
    }
    Ok(())
}

/// Adds (or replaces, by description) a `Boot####` entry and puts it first in `BootOrder`;
/// returns its number.
pub fn add_boot_entry(
    efivars: &Path,
    description: &str,
    esp: &Part,
    label: Label,
    loader: &str,
) -> std::io::Result<u16> {
    let mut used = Vec::new();
    let mut same = None;
    for entry in std::fs::read_dir(efivars)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = name
            .strip_suffix(&format!("-{EFI_GLOBAL}"))
            .and_then(|stem| stem.strip_prefix("Boot"))
            .filter(|hex| hex.len() == 4)
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
        else {
            continue;
        };
        used.push(number);
        let content = std::fs::read(entry.path()).unwrap_or_default();
        if content.get(4..).and_then(option_description).as_deref() == Some(description) {
            same = Some(number);
        }
    }
    let number = match same {
        Some(number) => number,
        None => (0..=u16::MAX)
            .find(|number| !used.contains(number))
            .ok_or_else(|| std::io::Error::other("every Boot#### number is taken"))?,
    };
    let boot = var_path(efivars, &format!("Boot{number:04X}"));
    write_var(&boot, &load_option(description, esp, label, loader))?;
    let order_path = var_path(efivars, "BootOrder");
    let old: Vec<u16> = std::fs::read(&order_path)
        .ok()
        .and_then(|content| content.get(4..).map(<[u8]>::to_vec))
        .unwrap_or_default()
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    let order: Vec<u8> = std::iter::once(number)
        .chain(old.into_iter().filter(|entry| *entry != number))
        .flat_map(u16::to_le_bytes)
        .collect();
    write_var(&order_path, &order)?;
    Ok(number)
}

fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let output = command
        .output()
        .map_err(|error| format!("cannot run {shown}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The block device of partition `number` of `disk` (`/dev/sda3`, `/dev/nvme0n1p3`).
pub fn partition_device(disk: &Path, number: u32) -> PathBuf {
    let text = disk.display().to_string();
    if text.ends_with(|c: char| c.is_ascii_digit()) {
        PathBuf::from(format!("{text}p{number}"))
    } else {
        PathBuf::from(format!("{text}{number}"))
    }
}

/// BIOS: grub-install to the disk from a chroot of the mounted root partition.
fn install_grub_bios(disk: &Path, root: &Part) -> Result<String, CommandError> {
    // The kernel must see the partitions the agent wrote.
    if let Err(error) = run(Command::new("blockdev").arg("--rereadpt").arg(disk)) {
        tracing::warn!(%error, "re-reading the partition table failed");
    }
    let device = partition_device(disk, root.number);
    let target = tempfile::tempdir()
        .map_err(|error| bootloader_error(format!("no temporary directory: {error}")))?;
    let path = target.path().to_owned();
    let mut mounted: Vec<PathBuf> = Vec::new();
    let result = (|| -> Result<String, String> {
        run(Command::new("mount").arg(&device).arg(&path))?;
        mounted.push(path.clone());
        for (kind, dir) in [("devtmpfs", "dev"), ("proc", "proc"), ("sysfs", "sys")] {
            let at = path.join(dir);
            run(Command::new("mount").args(["-t", kind, kind]).arg(&at))?;
            mounted.push(at);
        }
        let grub = if path.join("usr/sbin/grub2-install").exists() {
            "grub2"
        } else if path.join("usr/sbin/grub-install").exists() {
            "grub"
        } else {
            return Err(
                "the image has no grub-install or grub2-install in /usr/sbin, so no BIOS \
                 bootloader can be installed from it"
                    .to_owned(),
            );
        };
        let shell = |script: String| {
            run(Command::new("chroot")
                .arg(&path)
                .args(["/bin/sh", "-c", &script])
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
        };
        shell(format!(
            "{grub}-install --target=i386-pc {}",
            disk.display()
        ))?;
        shell(format!("{grub}-mkconfig -o /boot/{grub}/grub.cfg"))?;
        Ok(format!(
            "BIOS: {grub}-install to {} from the image on {}",
            disk.display(),
            device.display()
        ))
    })();
    for at in mounted.iter().rev() {
        if let Err(error) = run(Command::new("umount").arg(at)) {
            tracing::warn!(%error, "unmount after grub-install failed");
        }
    }
    result.map_err(bootloader_error)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::image::layout::{BootMode, Layout};

    const MIB: u64 = 1024 * 1024;
    const ROOT_UUID: &str = "5c1b1e36-3b3c-4d1e-9a3e-0d6a1f0e4b21";

    /// A root filesystem as `mkfs.ext4 -d` makes it from `tree` (no mount needed).
    fn rootfs(dir: &Path, tree: &[(&str, &[u8])]) -> Vec<u8> {
        let root = dir.join("tree");
        for (path, data) in tree {
            let at = root.join(path);
            std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
            std::fs::write(at, data).expect("write");
        }
        std::fs::create_dir_all(&root).expect("mkdir");
        let image = dir.join("rootfs.ext4");
        let status = Command::new("mkfs.ext4")
            .args(["-q", "-F", "-U", ROOT_UUID, "-d"])
            .arg(&root)
            .arg(&image)
            .arg("16M")
            .status()
            .expect("mkfs.ext4 (e2fsprogs) runs");
        assert!(status.success());
        std::fs::read(image).expect("read rootfs")
    }

    /// A UEFI partition-image deployment of `rootfs` on a file disk, as prepare_image leaves it.
    fn deployed(dir: &Path, rootfs: &[u8]) -> (PathBuf, Value) {
        let path = dir.join("disk");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("disk");
        file.set_len(1024 * MIB).expect("size");
        let layout = Layout {
            boot_mode: BootMode::Uefi,
            label: Label::Gpt,
            root_mb: 64,
            swap_mb: 0,
        };
        let made = layout::create(&mut file, 1024 * MIB, &layout, None).expect("layout");
        file.write_all_at(rootfs, made.root.start).expect("rootfs");
        let uuids = crate::image::finish_partitions(&file, &made, None).expect("finish");
        (path, uuids)
    }

    fn request(uuids: &Value) -> Request {
        Request {
            root_uuid: uuids["root uuid"].as_str().expect("root").to_owned(),
            efi_system_part_uuid: uuids["efi system partition uuid"]
                .as_str()
                .map(str::to_owned),
            target_boot_mode: Some("uefi".into()),
            ignore_failure: false,
            allow_bios: false,
        }
    }

    fn read_esp(disk: &Path, path: &str) -> Vec<u8> {
        use std::io::Read;
        let mut file = File::open(disk).expect("open");
        let esp = layout::list(&mut file)
            .into_iter()
            .find(Listed::is_esp)
            .expect("esp");
        let region = Region::new(&file, esp.part.start, esp.part.size).expect("region");
        let fat = fatfs::FileSystem::new(region, fatfs::FsOptions::new()).expect("fat");
        let mut data = Vec::new();
        fat.root_dir()
            .open_file(path)
            .expect("file on the ESP")
            .read_to_end(&mut data)
            .expect("read");
        data
    }

    #[test]
    fn uefi_copies_the_images_efi_files_and_adds_a_boot_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv: Vec<u8> = [0xff, 0xfe]
            .into_iter()
            .chain(
                "shimx64.efi,debian,,This is the boot entry for debian\n"
                    .encode_utf16()
                    .flat_map(u16::to_le_bytes),
            )
            .collect();
        let fs = rootfs(
            dir.path(),
            &[
                ("boot/efi/EFI/BOOT/BOOTX64.EFI", b"fallback loader"),
                ("boot/efi/EFI/debian/shimx64.efi", b"shim"),
                ("boot/efi/EFI/debian/BOOTX64.CSV", &csv),
                ("boot/grub2/grub.cfg", b"menuentry"),
                ("etc/hostname", b"deployed"),
            ],
        );
        let (disk, uuids) = deployed(dir.path(), &fs);
        assert_eq!(uuids["root uuid"], ROOT_UUID, "the filesystem's UUID");
        let efivars = dir.path().join("efivars");
        std::fs::create_dir(&efivars).expect("efivars");
        // The firmware's own entries stay behind ours.
        write_var(&var_path(&efivars, "Boot0000"), &[1, 0, 0, 0]).expect("var");
        write_var(&var_path(&efivars, "BootOrder"), &[0, 0]).expect("order");

        let message = install(&disk, &request(&uuids), &efivars, true).expect("installed");
        assert!(message.contains("Boot0001"), "{message}");
        assert_eq!(read_esp(&disk, "EFI/BOOT/BOOTX64.EFI"), b"fallback loader");
        assert_eq!(read_esp(&disk, "EFI/debian/shimx64.efi"), b"shim");
        assert_eq!(read_esp(&disk, "EFI/debian/grub.cfg"), b"menuentry");
        let order = std::fs::read(var_path(&efivars, "BootOrder")).expect("order");
        assert_eq!(order, [7, 0, 0, 0, 1, 0, 0, 0]);
        let entry = std::fs::read(var_path(&efivars, "Boot0001")).expect("entry");
        assert_eq!(option_description(&entry[4..]).as_deref(), Some("debian"));
        let loader: Vec<u8> = "\\EFI\\debian\\shimx64.efi"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert!(entry.windows(loader.len()).any(|window| window == loader));

        // Again (a retried step): the same entry, not a second one.
        install(&disk, &request(&uuids), &efivars, true).expect("again");
        let entries = std::fs::read_dir(&efivars)
            .expect("list")
            .filter(|entry| {
                entry
                    .as_ref()
                    .is_ok_and(|entry| entry.file_name().to_string_lossy().starts_with("Boot0"))
            })
            .count();
        assert_eq!(entries, 2);
    }

    #[test]
    fn without_uefi_firmware_the_removable_path_is_enough() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = rootfs(dir.path(), &[("boot/efi/EFI/BOOT/BOOTX64.EFI", b"loader")]);
        let (disk, uuids) = deployed(dir.path(), &fs);
        let message =
            install(&disk, &request(&uuids), Path::new("/nonexistent"), false).expect("ok");
        assert!(message.contains("\\EFI\\BOOT\\BOOTX64.EFI"), "{message}");
        assert!(message.contains("no NVRAM entry"), "{message}");
        assert_eq!(read_esp(&disk, "EFI/BOOT/BOOTX64.EFI"), b"loader");
    }

    #[test]
    fn an_image_without_efi_files_or_an_unknown_root_fails_clearly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = rootfs(dir.path(), &[("etc/hostname", b"x")]);
        let (disk, uuids) = deployed(dir.path(), &fs);
        let error = install(&disk, &request(&uuids), Path::new("/nonexistent"), false)
            .expect_err("no EFI files");
        assert!(error.details.contains("/boot/efi/EFI"), "{}", error.details);
        let mut wrong = request(&uuids);
        wrong.root_uuid = "00000000-0000-0000-0000-000000000001".into();
        let error = install(&disk, &wrong, Path::new("/nonexistent"), false).expect_err("root");
        assert_eq!(error.kind, "DeviceNotFound");
    }

    #[test]
    fn a_bios_install_is_refused_unless_the_lookup_allowed_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = rootfs(
            dir.path(),
            &[("usr/sbin/grub-install", b"#!/bin/sh\nexit 0\n")],
        );
        let (disk, uuids) = deployed(dir.path(), &fs);
        let mut bios = request(&uuids);
        bios.efi_system_part_uuid = None;
        bios.target_boot_mode = Some("bios".into());
        let error = install(&disk, &bios, Path::new("/nonexistent"), false)
            .expect_err("a BIOS install without permission");
        assert!(
            error
                .details
                .contains("agent_enable_bios_bootloader_install"),
            "{}",
            error.details
        );
        let params = |value: Value| value.as_object().expect("object").clone();
        let parsed = Request::from_params(&params(json!({"root_uuid": "x"}))).expect("valid");
        assert!(!parsed.allow_bios);
    }

    #[test]
    fn requests_and_small_parts() {
        let params = |value: Value| value.as_object().expect("object").clone();
        assert!(Request::from_params(&params(json!({}))).is_err());
        assert!(
            Request::from_params(&params(
                json!({"root_uuid": "x", "target_boot_mode": "efi"})
            ))
            .is_err()
        );
        let ok = Request::from_params(&params(json!({
            "root_uuid": "x", "efi_system_part_uuid": "y", "target_boot_mode": "uefi",
            "ignore_bootloader_failure": true,
        })))
        .expect("valid");
        assert!(ok.ignore_failure);
        assert_eq!(
            parse_boot_csv(b"grubx64.efi,centos,,x"),
            Some(("grubx64.efi".into(), "centos".into()))
        );
        assert_eq!(
            partition_device(Path::new("/dev/sda"), 3),
            PathBuf::from("/dev/sda3")
        );
        assert_eq!(
            partition_device(Path::new("/dev/nvme0n1"), 2),
            PathBuf::from("/dev/nvme0n1p2")
        );
    }
}
