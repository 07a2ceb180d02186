//! Which kernel modules the ramdisk carries, in what order they load, and the firmware files
//! they ask for.
//!
//! Dependencies come from the kernel's own `modules.dep`. The firmware a module may request is
//! what its `.modinfo` section lists as `firmware=` (what `modinfo -F firmware` prints); it is
//! read straight from the module's ELF section headers, so no module tools are needed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::RamdiskError;

/// Where the modules go inside the initramfs.
pub(super) const MODULE_DIR: &str = "lib/modules/ferric";

/// Server and QEMU NICs: Intel (e1000, e1000e, igb, ixgbe, i40e, ice), Mellanox ConnectX
/// (mlx5_core), Broadcom (bnxt_en, tg3) and virtio.
pub const NIC_MODULES: &[&str] = &[
    "e1000e",
    "igb",
    "ixgbe",
    "i40e",
    "ice",
    "mlx5_core",
    "bnxt_en",
    "tg3",
    "e1000",
    "virtio_net",
];

/// Disk controllers: AHCI/SATA, NVMe, Broadcom/LSI MegaRAID and SAS HBAs (megaraid_sas,
/// mpt3sas), Microchip SmartPQI, virtio; `sd_mod` gives SCSI/SATA/SAS disks their block devices.
pub const STORAGE_MODULES: &[&str] = &[
    "ahci",
    "nvme",
    "megaraid_sas",
    "mpt3sas",
    "smartpqi",
    "virtio_blk",
    "virtio_scsi",
    "sd_mod",
];

/// Everything else: virtio's PCI transport, the filesystems of images and config drives, the
/// ACPI power button, software RAID (the `raid.*` steps), the IPMI device `ipmitool` reads
/// the BMC's address through, and efivarfs for the NVRAM boot entries of partition images.
pub const OTHER_MODULES: &[&str] = &[
    "virtio_pci",
    "crc32c_generic",
    "ext4",
    "vfat",
    "nls_cp437",
    "nls_iso8859_1",
    "button",
    "evdev",
    "md_mod",
    "raid0",
    "raid1",
    "raid10",
    "raid456",
    "ipmi_si",
    "ipmi_devintf",
    "efivarfs",
];

/// Every module the ramdisk loads by default (their dependencies join them).
pub fn default_modules() -> Vec<&'static str> {
    NIC_MODULES
        .iter()
        .chain(STORAGE_MODULES)
        .chain(OTHER_MODULES)
        .copied()
        .collect()
}

pub(super) fn module_name(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

/// The kernel's `modules.dep` and `modules.builtin`: which file each module is in and what it
/// depends on.
pub struct ModuleTree {
    dep_path: PathBuf,
    builtin: BTreeSet<String>,
    files: BTreeMap<String, PathBuf>,
    deps: BTreeMap<String, Vec<String>>,
}

impl ModuleTree {
    /// Reads the tree of one kernel version (`/lib/modules/VERSION`).
    pub fn load(modules_dir: &Path) -> Result<Self, RamdiskError> {
        let dep_path = modules_dir.join("modules.dep");
        let dep_text = String::from_utf8_lossy(&super::error::read(&dep_path)?).into_owned();
        let builtin = fs::read_to_string(modules_dir.join("modules.builtin"))
            .unwrap_or_default()
            .lines()
            .map(module_name)
            .collect();
        let mut files = BTreeMap::new();
        let mut deps = BTreeMap::new();
        for line in dep_text.lines() {
            let Some((file, rest)) = line.split_once(':') else {
                continue;
            };
            let name = module_name(file);
            files.insert(name.clone(), PathBuf::from(file));
            deps.insert(name, rest.split_whitespace().map(module_name).collect());
        }
        Ok(Self {
            dep_path,
            builtin,
            files,
            deps,
        })
    }

    /// The modules to load, dependencies first, with their files relative to the modules
    /// tree. A module that is built into the kernel needs no file and is left out.
    pub fn resolve(&self, wanted: &[&str]) -> Result<Vec<(String, PathBuf)>, RamdiskError> {
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        fn visit(
            name: &str,
            deps: &BTreeMap<String, Vec<String>>,
            seen: &mut BTreeSet<String>,
            order: &mut Vec<String>,
        ) {
            if !seen.insert(name.to_owned()) {
                return;
            }
            for dep in deps.get(name).into_iter().flatten() {
                visit(dep, deps, seen, order);
            }
            order.push(name.to_owned());
        }
        for module in wanted {
            let name = module.replace('-', "_");
            if self.files.contains_key(&name) {
                visit(&name, &self.deps, &mut seen, &mut order);
            } else if !self.builtin.contains(&name) {
                return Err(RamdiskError::MissingModule {
                    module: name,
                    dep: self.dep_path.clone(),
                });
            }
        }
        order
            .into_iter()
            .map(|name| {
                let file = self.files.get(&name).cloned().unwrap_or_default();
                let path = file.to_string_lossy();
                // Debian's newer kernels (6.12 on) ship their modules XZ-compressed; they are
                // unpacked when packed, so busybox `insmod` loads them as they are.
                if !(path.ends_with(".ko") || path.ends_with(".ko.xz")) {
                    return Err(RamdiskError::CompressedModule(file.display().to_string()));
                }
                Ok((name, file))
            })
            .collect()
    }
}

/// The modules to load, dependencies first, with their files relative to the modules tree.
/// A module that is built into the kernel needs no file and is left out.
pub fn resolve_modules(
    modules_dir: &Path,
    wanted: &[&str],
) -> Result<Vec<(String, PathBuf)>, RamdiskError> {
    ModuleTree::load(modules_dir)?.resolve(wanted)
}

/// The `firmware=` entries of a module's `.modinfo` section (none for a file that is not a
/// 64-bit little-endian ELF or has no such section).
pub fn module_firmware(module: &[u8]) -> Vec<String> {
    let Some(modinfo) = elf_section(module, ".modinfo") else {
        return Vec::new();
    };
    modinfo
        .split(|byte| *byte == 0)
        .filter_map(|entry| entry.strip_prefix(b"firmware="))
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect()
}

/// The bytes of the section called `wanted` in a 64-bit little-endian ELF file.
fn elf_section<'a>(elf: &'a [u8], wanted: &str) -> Option<&'a [u8]> {
    if !elf.starts_with(b"\x7fELF") || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    let section_headers = usize::try_from(u64_at(0x28)?).ok()?;
    let header_size = usize::from(u16_at(0x3a)?);
    let n_sections = usize::from(u16_at(0x3c)?);
    let names_index = usize::from(u16_at(0x3e)?);
    // (name offset, file offset, size) of section `index`.
    let section = |index: usize| {
        let at = section_headers.checked_add(index.checked_mul(header_size)?)?;
        Some((
            usize::try_from(u32_at(at)?).ok()?,
            usize::try_from(u64_at(at + 0x18)?).ok()?,
            usize::try_from(u64_at(at + 0x20)?).ok()?,
        ))
    };
    let bytes = |offset: usize, size: usize| elf.get(offset..offset.checked_add(size)?);
    let (_, names_offset, names_size) = section(names_index)?;
    let names = bytes(names_offset, names_size)?;
    (0..n_sections).find_map(|index| {
        let (name, offset, size) = section(index)?;
        let name = names.get(name..)?;
        let name = &name[..name.iter().position(|byte| *byte == 0)?];
        (name == wanted.as_bytes())
            .then(|| bytes(offset, size))
            .flatten()
    })
}

/// The firmware file `name` under `firmware_dir`, as the kernel looks it up: the plain file or
/// its `.xz` / `.zst` compressed form. Returns the path and the name to pack it under.
pub fn find_firmware(firmware_dir: &Path, name: &str) -> Option<(PathBuf, String)> {
    ["", ".xz", ".zst"].iter().find_map(|suffix| {
        let packed = format!("{name}{suffix}");
        let path = firmware_dir.join(&packed);
        path.is_file().then_some((path, packed))
    })
}

/// The Debian package that ships firmware `name` (bookworm, `non-free-firmware`), for the
/// message when it is missing.
pub fn firmware_package(name: &str) -> &'static str {
    const PACKAGES: &[(&str, &str)] = &[
        ("bnx2x/", "firmware-bnx2x"),
        ("bnx2/", "firmware-bnx2"),
        ("qed/", "firmware-qlogic"),
        ("ql2", "firmware-qlogic"),
        ("rtl_nic/", "firmware-realtek"),
        ("cxgb4/", "firmware-misc-nonfree"),
        ("tigon/", "firmware-misc-nonfree"),
        ("intel/", "firmware-misc-nonfree"),
        ("mellanox/", "firmware-misc-nonfree"),
    ];
    PACKAGES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map_or("a Debian non-free-firmware package", |(_, package)| package)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A minimal 64-bit ELF file with a `.modinfo` section holding `entries`.
    pub(crate) fn elf_with_modinfo(entries: &[&str]) -> Vec<u8> {
        let mut modinfo = Vec::new();
        for entry in entries {
            modinfo.extend_from_slice(entry.as_bytes());
            modinfo.push(0);
        }
        let names = b"\0.modinfo\0.shstrtab\0";
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let modinfo_at = elf.len();
        elf.extend_from_slice(&modinfo);
        let names_at = elf.len();
        elf.extend_from_slice(names);
        let headers_at = elf.len();
        let mut header = |name: u32, offset: usize, size: usize| {
            let mut bytes = vec![0u8; 64];
            bytes[..4].copy_from_slice(&name.to_le_bytes());
            bytes[0x18..0x20].copy_from_slice(&(offset as u64).to_le_bytes());
            bytes[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            elf.extend_from_slice(&bytes);
        };
        header(0, 0, 0);
        header(1, modinfo_at, modinfo.len());
        header(10, names_at, names.len());
        elf[0x28..0x30].copy_from_slice(&(headers_at as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        elf[0x3e..0x40].copy_from_slice(&2u16.to_le_bytes());
        elf
    }

    #[test]
    fn firmware_comes_from_the_modinfo_section() {
        let elf = elf_with_modinfo(&[
            "license=GPL",
            "firmware=tigon/tg3.bin",
            "firmware=tigon/tg3_tso.bin",
            "depends=libphy",
        ]);
        assert_eq!(
            module_firmware(&elf),
            ["tigon/tg3.bin", "tigon/tg3_tso.bin"]
        );
        assert!(module_firmware(b"not an ELF file").is_empty());
        // Truncated section headers are no section, not a panic.
        assert!(module_firmware(&elf[..elf.len() - 40]).is_empty());
    }

    #[test]
    fn firmware_is_found_plain_or_compressed_and_missing_ones_name_a_package() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("intel/ice/ddp")).expect("dir");
        fs::write(dir.path().join("intel/ice/ddp/ice.pkg.xz"), b"ddp").expect("fw");
        let (path, packed) = find_firmware(dir.path(), "intel/ice/ddp/ice.pkg").expect("found");
        assert_eq!(packed, "intel/ice/ddp/ice.pkg.xz");
        assert!(path.ends_with("ice.pkg.xz"));
        assert!(find_firmware(dir.path(), "tigon/tg3.bin").is_none());
        assert_eq!(firmware_package("tigon/tg3.bin"), "firmware-misc-nonfree");
        assert_eq!(firmware_package("bnx2x/bnx2x-e2.fw"), "firmware-bnx2x");
        assert_eq!(
            firmware_package("vendor/thing.bin"),
            "a Debian non-free-firmware package"
        );
    }
}
