//! A small bootable disk image for end-to-end tests and demos: a GPT disk whose one partition,
//! an EFI system partition (FAT), holds a kernel and an initramfs and boots them both ways —
//! legacy BIOS through syslinux (`gptmbr.bin` in the protective MBR chains to the partition
//! marked legacy-BIOS-bootable) and UEFI through syslinux's EFI build at the removable-media
//! path `\EFI\BOOT\BOOTX64.EFI`, which firmware boots with no boot entry of its own. Deployed
//! to a lab machine, it proves that the disk the agent wrote is the disk that booted (its
//! `/init` prints a marker on the serial console).
//!
//! Built from files only (lab-facts: no loop devices or mounts, which this host cannot do):
//! `mkfs.vfat -C` makes the partition as a file, `syslinux --install` (the mtools flavour)
//! makes it BIOS-bootable, `mcopy` fills it, and the partition is copied into the disk file
//! behind a GPT from `sfdisk`, with syslinux's `gptmbr.bin` as boot code.
//!
//! Beside it, [`RootFsImage`]: the root filesystem of a partition image (ext4 from
//! `mkfs.ext4 -d`), whose `/boot/efi/EFI` the agent copies into the ESP it creates.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::host::{self, HostError};

/// Where Debian's syslinux keeps its boot code for GPT disks (the protective MBR's).
pub const SYSLINUX_MBR: &str = "/usr/lib/syslinux/mbr/gptmbr.bin";
/// syslinux for UEFI x86-64 (Debian's `syslinux-efi`) and its core module.
pub const SYSLINUX_EFI: &str = "/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi";
pub const SYSLINUX_EFI_CORE: &str = "/usr/lib/syslinux/modules/efi64/ldlinux.e64";
/// The GPT type of an EFI system partition.
const ESP_TYPE: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";

/// The partition starts at 1 MiB, as partitioning tools align it.
const PARTITION_START_SECTOR: u64 = 2048;
const SECTOR: u64 = 512;

/// What goes into the image.
#[derive(Debug, Clone)]
pub struct BootImage {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    /// The kernel command line (`console=ttyS0` to reach the serial console).
    pub append: String,
    /// Disk size in MiB; must hold the kernel and the initramfs with some room.
    pub size_mib: u64,
}

fn file_error(path: &Path, source: std::io::Error) -> HostError {
    HostError::File {
        path: path.to_owned(),
        source,
    }
}

impl BootImage {
    /// Writes the raw disk image to `output`, using `work` for intermediate files.
    pub fn build(&self, output: &Path, work: &Path) -> Result<(), HostError> {
        std::fs::create_dir_all(work).map_err(|source| file_error(work, source))?;
        let disk_bytes = self.size_mib * 1024 * 1024;
        // 1 MiB before the partition (protective MBR, GPT) and 1 MiB after it (the backup GPT).
        let partition_bytes = disk_bytes - 2 * PARTITION_START_SECTOR * SECTOR;

        // The FAT partition as a file, bootable by syslinux, with the kernel and initramfs.
        let partition = work.join("partition.img");
        let _ = std::fs::remove_file(&partition);
        host::run(
            "mkfs.vfat",
            [
                "-n".to_owned(),
                "FERRICTEST".to_owned(),
                "-C".to_owned(),
                partition.display().to_string(),
                (partition_bytes / 1024).to_string(),
            ],
        )?;
        host::run(
            "syslinux",
            ["--install".to_owned(), partition.display().to_string()],
        )?;
        let config = work.join("syslinux.cfg");
        std::fs::write(
            &config,
            format!(
                "SERIAL 0 115200\nDEFAULT test\nPROMPT 0\nTIMEOUT 0\nLABEL test\n  \
                 KERNEL /vmlinuz\n  INITRD /initrd\n  APPEND {}\n",
                self.append
            ),
        )
        .map_err(|source| file_error(&config, source))?;
        let image = |arguments: &[&str]| {
            host::run(
                "mmd",
                ["-i".to_owned(), partition.display().to_string()]
                    .into_iter()
                    .chain(arguments.iter().map(|argument| (*argument).to_owned())),
            )
        };
        image(&["::EFI", "::EFI/BOOT"])?;
        let (efi, efi_core) = (
            PathBuf::from(SYSLINUX_EFI),
            PathBuf::from(SYSLINUX_EFI_CORE),
        );
        for (source, name) in [
            (&self.kernel, "vmlinuz"),
            (&self.initramfs, "initrd"),
            (&config, "syslinux.cfg"),
            // UEFI: syslinux.efi reads its core module and configuration beside itself.
            (&efi, "EFI/BOOT/BOOTX64.EFI"),
            (&efi_core, "EFI/BOOT/ldlinux.e64"),
            (&config, "EFI/BOOT/syslinux.cfg"),
        ] {
            host::run(
                "mcopy",
                [
                    "-o".to_owned(),
                    "-i".to_owned(),
                    partition.display().to_string(),
                    source.display().to_string(),
                    format!("::{name}"),
                ],
            )?;
        }

        // The disk: GPT behind a protective MBR with syslinux's boot code, the partition at 1 MiB.
        let disk = std::fs::File::create(output).map_err(|source| file_error(output, source))?;
        disk.set_len(disk_bytes)
            .map_err(|source| file_error(output, source))?;
        drop(disk);
        sfdisk(
            output,
            &format!(
                "label: gpt\nstart={PARTITION_START_SECTOR}, size={}, type={ESP_TYPE}, \
                 name=ESP, attrs=\"LegacyBIOSBootable\"\n",
                partition_bytes / SECTOR
            ),
        )?;
        let mbr = std::fs::read(SYSLINUX_MBR)
            .map_err(|source| file_error(Path::new(SYSLINUX_MBR), source))?;
        let mut disk = std::fs::OpenOptions::new()
            .write(true)
            .open(output)
            .map_err(|source| file_error(output, source))?;
        // The boot code is the first 440 bytes; the partition table after it stays.
        disk.write_all(&mbr[..mbr.len().min(440)])
            .map_err(|source| file_error(output, source))?;
        disk.seek(SeekFrom::Start(PARTITION_START_SECTOR * SECTOR))
            .map_err(|source| file_error(output, source))?;
        let mut part =
            std::fs::File::open(&partition).map_err(|source| file_error(&partition, source))?;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = part
                .read(&mut buffer)
                .map_err(|source| file_error(&partition, source))?;
            if read == 0 {
                break;
            }
            disk.write_all(&buffer[..read])
                .map_err(|source| file_error(output, source))?;
        }
        disk.sync_all()
            .map_err(|source| file_error(output, source))?;
        Ok(())
    }
}

/// A root filesystem image for partition-image deploys (`image_type=partition`): an ext4
/// filesystem made from a directory by `mkfs.ext4 -d` (no mounts), with the kernel and
/// initramfs under `/boot` and the UEFI boot files the agent copies to the ESP it makes under
/// `/boot/efi/EFI/BOOT`: syslinux.efi as the removable-media loader `BOOTX64.EFI`, its core
/// module, its configuration, and the kernel and initramfs it loads (syslinux reads them from
/// the ESP it started from).
#[derive(Debug, Clone)]
pub struct RootFsImage {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    /// The kernel command line.
    pub append: String,
    /// The filesystem's size in MiB.
    pub size_mib: u64,
    /// The filesystem UUID (what the agent reports as the root partition's `root uuid`).
    pub uuid: String,
}

impl RootFsImage {
    /// Writes the raw ext4 image to `output`, using `work` for the directory tree.
    pub fn build(&self, output: &Path, work: &Path) -> Result<(), HostError> {
        let tree = work.join("rootfs");
        let _ = std::fs::remove_dir_all(&tree);
        let efi_boot = tree.join("boot/efi/EFI/BOOT");
        std::fs::create_dir_all(&efi_boot).map_err(|source| file_error(&efi_boot, source))?;
        for dir in ["etc", "dev", "proc", "sys"] {
            let path = tree.join(dir);
            std::fs::create_dir_all(&path).map_err(|source| file_error(&path, source))?;
        }
        let config = format!(
            "SERIAL 0 115200\nDEFAULT test\nPROMPT 0\nTIMEOUT 0\nLABEL test\n  \
             KERNEL /EFI/BOOT/vmlinuz\n  INITRD /EFI/BOOT/initrd\n  APPEND {}\n",
            self.append
        );
        let copies = [
            (self.kernel.clone(), tree.join("boot/vmlinuz")),
            (self.initramfs.clone(), tree.join("boot/initrd.img")),
            (self.kernel.clone(), efi_boot.join("vmlinuz")),
            (self.initramfs.clone(), efi_boot.join("initrd")),
            (PathBuf::from(SYSLINUX_EFI), efi_boot.join("BOOTX64.EFI")),
            (
                PathBuf::from(SYSLINUX_EFI_CORE),
                efi_boot.join("ldlinux.e64"),
            ),
        ];
        for (from, to) in copies {
            std::fs::copy(&from, &to).map_err(|source| file_error(&from, source))?;
        }
        let cfg = efi_boot.join("syslinux.cfg");
        std::fs::write(&cfg, config).map_err(|source| file_error(&cfg, source))?;
        let hostname = tree.join("etc/hostname");
        std::fs::write(&hostname, "ferric-partition-test\n")
            .map_err(|source| file_error(&hostname, source))?;
        let _ = std::fs::remove_file(output);
        host::run(
            "mkfs.ext4",
            [
                "-q".to_owned(),
                "-F".to_owned(),
                "-L".to_owned(),
                "root".to_owned(),
                "-U".to_owned(),
                self.uuid.clone(),
                "-d".to_owned(),
                tree.display().to_string(),
                output.display().to_string(),
                format!("{}M", self.size_mib),
            ],
        )?;
        Ok(())
    }
}

/// Runs `sfdisk DISK` with `script` on its standard input.
fn sfdisk(disk: &Path, script: &str) -> Result<(), HostError> {
    let mut child = std::process::Command::new("sfdisk")
        .arg("--quiet")
        .arg("--no-reread")
        .arg("--no-tell-kernel")
        .arg(disk)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| HostError::Spawn {
            program: "sfdisk".to_owned(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|source| file_error(disk, source))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|source| HostError::Spawn {
            program: "sfdisk".to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(HostError::Failed {
            command: format!("sfdisk {}", disk.display()),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// Whether `disk` starts with a partition table (the boot signature `55 AA` at byte 510, of a
/// DOS table or of GPT's protective MBR). Cleaning through the agent wipes it.
pub fn has_partition_table(disk: &Path) -> std::io::Result<bool> {
    let mut sector = [0u8; 512];
    std::fs::File::open(disk)?.read_exact(&mut sector)?;
    Ok(sector[510] == 0x55 && sector[511] == 0xAA)
}
