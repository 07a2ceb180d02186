//! Secure boot for the virtual-media ISO (issue #23): firmware with secure boot on (and
//! Microsoft's keys enrolled, as servers ship) starts only signed EFI programs, so the ISO's
//! UEFI boot image carries Debian's signed chain instead of `grub-mkrescue`'s own GRUB:
//! Microsoft-signed shim as `\EFI\BOOT\BOOTX64.EFI`, and beside it Debian's signed monolithic
//! GRUB for CDs (`gcdx64.efi.signed` as `grubx64.efi`, which shim starts after checking its
//! signature). That GRUB finds the ISO by its `/.disk/info` and reads the same
//! `/boot/grub/grub.cfg` menu; it boots only a signed kernel, which Debian's is (the kernel
//! then locks itself down and loads only signed modules, which the ramdisk's are). The BIOS
//! boot image and the rest of the ISO are `grub-mkrescue`'s; the image is put together again
//! by `xorriso` with the new EFI boot image (mtools makes its FAT file system, without root).
//!
//! A node gets this ISO when `secure_boot` is `true` in `instance_info.capabilities` or
//! `properties.capabilities` (Ironic's capability), or its BMC reported secure boot on. The
//! chain boots with secure boot off as well.

use std::path::{Path, PathBuf};

use ferric_model::resources::Node;
use tokio::process::Command;

use crate::Component;
use crate::DriverError;
use crate::boot_mode::{boot_mode, capability};
use crate::interfaces::BootMode;

/// Debian's `shim-signed`: shim signed by Microsoft's UEFI CA.
pub const SHIM: &str = "/usr/lib/shim/shimx64.efi.signed";
/// Debian's `grub-efi-amd64-signed`: GRUB for CD images, signed by Debian.
pub const SIGNED_GRUB: &str = "/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed";
/// The tools that put the image together.
const TOOLS: [&str; 4] = ["xorriso", "mformat", "mmd", "mcopy"];

/// Whether the node's ISO must boot with secure boot on.
pub fn wanted(node: &Node) -> bool {
    let from = |field: Option<&serde_json::Value>| {
        field
            .and_then(|caps| capability(caps, "secure_boot"))
            .map(|value| value.eq_ignore_ascii_case("true"))
    };
    from(node.instance_info.get("capabilities"))
        .or_else(|| from(node.properties.get("capabilities")))
        .unwrap_or(node.secure_boot == Some(true))
}

/// Checks that a secure-boot ISO can be built for the node: UEFI, the signed binaries and
/// the tools on this conductor. Nothing to check for a node that does not want one.
pub fn check(node: &Node, find: impl Fn(&str) -> Option<PathBuf>) -> Result<(), DriverError> {
    if !wanted(node) {
        return Ok(());
    }
    let (mode, source) = boot_mode(node)?;
    if mode != BootMode::Uefi {
        return Err(DriverError::invalid(
            "capabilities.secure_boot",
            format!(
                "Node {}: secure boot is requested (capability secure_boot:true) but the node boots \
             in {mode} mode (from {}); secure boot is UEFI's: set boot_mode:uefi, or \
             secure_boot:false.",
                node.uuid,
                source.field()
            ),
        ));
    }
    for (file, package) in [
        (SHIM, "shim-signed"),
        (SIGNED_GRUB, "grub-efi-amd64-signed"),
    ] {
        if !Path::new(file).is_file() {
            return Err(DriverError::invalid(
                "capabilities.secure_boot",
                format!(
                    "Node {}: secure boot is requested (capability secure_boot:true), and its \
                 virtual-media ISO needs {file}, which is not on this conductor; install \
                 Debian's {package} (scripts/install-deps.sh --lab does), or set \
                 secure_boot:false.",
                    node.uuid
                ),
            ));
        }
    }
    if let Some(tool) = TOOLS.iter().find(|tool| find(tool).is_none()) {
        return Err(DriverError::invalid(
            "capabilities.secure_boot",
            format!(
                "Node {}: its secure-boot ISO is put together with {tool}, which is not installed \
             on this conductor; install Debian's xorriso and mtools.",
                node.uuid
            ),
        ));
    }
    Ok(())
}

/// Writes `output`: the ISO `input` (from `grub-mkrescue`, whose UEFI boot image is
/// `/efi.img`) with a UEFI boot image holding shim and the signed GRUB, and the
/// `/.disk/info` that GRUB finds the ISO by. `work` is a scratch directory.
pub async fn remaster(
    node: &Node,
    input: &Path,
    output: &Path,
    work: &Path,
) -> Result<(), DriverError> {
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        DriverError::failed(
            Component::Conductor,
            format!(
                "Could not build the secure-boot ISO of node {}: {what}: {error}",
                node.uuid
            ),
        )
    };
    let bytes: u64 = [SHIM, SIGNED_GRUB]
        .iter()
        .map(|file| std::fs::metadata(file).map(|meta| meta.len()))
        .sum::<std::io::Result<u64>>()
        .map_err(|error| failed("read the signed boot loaders", &error))?;
    let image = work.join("efi-secure-boot.img");
    let disk = work.join("disk");
    std::fs::create_dir_all(&disk)
        .and_then(|()| {
            std::fs::write(
                disk.join("info"),
                format!("Ferric agent for node {}\n", node.uuid),
            )
        })
        .map_err(|error| failed("write /.disk/info", &error))?;
    let steps: [(&str, Vec<String>); 4] = [
        (
            "mformat",
            vec![
                "-i".into(),
                image.display().to_string(),
                "-C".into(),
                "-T".into(),
                fat_sectors(bytes).to_string(),
                "-h".into(),
                "2".into(),
                "-s".into(),
                "32".into(),
                "-v".into(),
                "EFIBOOT".into(),
                "::".into(),
            ],
        ),
        (
            "mmd",
            vec![
                "-i".into(),
                image.display().to_string(),
                "::/EFI".into(),
                "::/EFI/BOOT".into(),
            ],
        ),
        (
            "mcopy",
            vec![
                "-i".into(),
                image.display().to_string(),
                SHIM.into(),
                "::/EFI/BOOT/BOOTX64.EFI".into(),
            ],
        ),
        (
            "mcopy",
            vec![
                "-i".into(),
                image.display().to_string(),
                SIGNED_GRUB.into(),
                "::/EFI/BOOT/grubx64.efi".into(),
            ],
        ),
    ];
    for (tool, args) in steps {
        run(tool, &args)
            .await
            .map_err(|error| failed(tool, &error))?;
    }
    let _ = std::fs::remove_file(output);
    let args: Vec<String> = [
        "-indev",
        &input.display().to_string(),
        "-outdev",
        &output.display().to_string(),
        // grub-mkrescue's El Torito entries and hybrid partition table point at its own
        // /efi.img; they are made anew: BIOS from GRUB's eltorito.img, UEFI from the new image.
        "-boot_image",
        "any",
        "discard",
        "-map",
        &image.display().to_string(),
        "/efi.img",
        "-map",
        &disk.display().to_string(),
        "/.disk",
        "-boot_image",
        "grub",
        "bin_path=/boot/grub/i386-pc/eltorito.img",
        "-boot_image",
        "any",
        "platform_id=0x00",
        "-boot_image",
        "any",
        "emul_type=no_emulation",
        "-boot_image",
        "any",
        "load_size=2048",
        "-boot_image",
        "any",
        "boot_info_table=on",
        "-boot_image",
        "grub",
        "grub2_boot_info=on",
        "-boot_image",
        "any",
        "next",
        "-boot_image",
        "any",
        "efi_path=/efi.img",
        "-boot_image",
        "any",
        "platform_id=0xef",
        "-boot_image",
        "any",
        "emul_type=no_emulation",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    run("xorriso", &args)
        .await
        .map_err(|error| failed("xorriso", &error))
}

/// The FAT image's size in 512-byte sectors: the files, a tenth more, 1 MiB for the file
/// system, in whole tracks of 2 heads × 32 sectors.
fn fat_sectors(bytes: u64) -> u64 {
    let sectors = bytes.div_ceil(512) * 11 / 10 + 2048;
    sectors.div_ceil(64) * 64
}

async fn run(tool: &str, args: &[String]) -> Result<(), String> {
    let output = Command::new(tool)
        .args(args)
        .output()
        .await
        .map_err(|error| format!("cannot run it: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.contains("UPDATE :"))
        .rev()
        .take(3)
        .collect();
    Err(format!(
        "{} ({})",
        tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        output.status
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    #[test]
    fn the_capability_asks_for_it_and_bios_or_missing_files_are_refused_with_the_fix() {
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Manageable);
        assert!(!wanted(&node));
        assert!(check(&node, |_| None).is_ok());
        node.properties.insert(
            "capabilities".into(),
            "boot_mode:uefi,secure_boot:true".into(),
        );
        assert!(wanted(&node));
        // This deployment asks for it off: instance_info wins.
        node.instance_info
            .insert("capabilities".into(), json!({"secure_boot": "false"}));
        assert!(!wanted(&node));
        node.instance_info.clear();
        let error = check(&node, |_| None).unwrap_err().to_string();
        let missing_files = !Path::new(SHIM).is_file() || !Path::new(SIGNED_GRUB).is_file();
        if missing_files {
            assert!(error.contains("scripts/install-deps.sh --lab"), "{error}");
        } else {
            assert!(
                error.contains("install Debian's xorriso and mtools"),
                "{error}"
            );
        }
        node.properties.insert(
            "capabilities".into(),
            "boot_mode:bios,secure_boot:true".into(),
        );
        let error = check(&node, |_| None).unwrap_err().to_string();
        assert!(
            error.contains("boots in bios mode") && error.contains("set boot_mode:uefi"),
            "{error}"
        );
        node.properties.clear();
        node.secure_boot = Some(true);
        assert!(wanted(&node));
    }

    #[test]
    fn the_fat_image_holds_the_files_in_whole_tracks() {
        let sectors = fat_sectors(4_883_832);
        assert!(sectors * 512 > 4_883_832 + (1 << 20));
        assert_eq!(sectors % 64, 0);
    }
}
