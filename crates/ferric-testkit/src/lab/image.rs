//! The test images the lab suites deploy: a kernel and an initramfs of busybox whose `/init`
//! prints a fresh marker on the serial console forever, so a suite knows the machine booted
//! what was written to its disk; and the 64 MiB GPT disk (ESP, UEFI-bootable) built of them.
//! A suite that needs another shape (a root filesystem, a live ISO) builds it of the same
//! kernel and initramfs ([`marker_boot`]).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// What boots to the marker: the host's newest kernel and the marker's initramfs.
pub struct MarkerBoot {
    /// The text `/init` prints (`PREFIX-PID`), also in `DIR/marker`.
    pub marker: String,
    /// The host's newest `/boot/vmlinuz-*`.
    pub kernel: PathBuf,
    /// `DIR/marker.initramfs`: busybox and the `/init` that prints the marker.
    pub initramfs: PathBuf,
}

/// Writes `DIR/marker` (`PREFIX-PID`) and `DIR/marker.initramfs`, and finds the kernel to boot
/// it. Needs busybox-static and a `/boot/vmlinuz-*`.
pub fn marker_boot(dir: &Path, prefix: &str) -> anyhow::Result<MarkerBoot> {
    let marker = format!("{prefix}-{}", std::process::id());
    let init = format!(
        "#!/bin/busybox sh\n\
         /bin/busybox mkdir -p /dev /proc\n\
         /bin/busybox mount -t devtmpfs dev /dev\n\
         while true; do echo {marker} > /dev/ttyS0; /bin/busybox sleep 2; done\n"
    );
    let busybox = std::fs::read("/bin/busybox").context("busybox-static is missing")?;
    let mut archive = Vec::new();
    {
        let mut gzip = flate2::write::GzEncoder::new(&mut archive, flate2::Compression::fast());
        let mut out: &mut dyn std::io::Write = &mut gzip;
        let entries: [(&str, u32, &[u8]); 4] = [
            ("bin", 0o040755, b""),
            ("dev", 0o040755, b""),
            ("bin/busybox", 0o100755, &busybox),
            ("init", 0o100755, init.as_bytes()),
        ];
        for (inode, (name, mode, data)) in (1u32..).zip(entries) {
            let mut writer = cpio::newc::Builder::new(name)
                .ino(inode)
                .mode(mode)
                .nlink(1)
                .write(out, u32::try_from(data.len())?);
            std::io::Write::write_all(&mut writer, data)?;
            out = writer.finish()?;
        }
        cpio::newc::trailer(out)?;
        gzip.finish()?;
    }
    let initramfs = dir.join("marker.initramfs");
    std::fs::write(&initramfs, archive)?;
    let kernel = std::fs::read_dir("/boot")?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("vmlinuz-"))
        })
        .max()
        .context("no /boot/vmlinuz-*: install linux-image-amd64")?;
    std::fs::write(dir.join("marker"), &marker)?;
    Ok(MarkerBoot {
        marker,
        kernel,
        initramfs,
    })
}

/// Builds `DIR/boot/images/marker.img` of [`marker_boot`]'s kernel and initramfs, with
/// `DIR/marker` (the text it prints: `PREFIX-PID`) and `DIR/marker.img.sha256` beside it;
/// what it boots, for a suite that builds more of it.
pub fn build_marker_image(dir: &Path, prefix: &str) -> anyhow::Result<MarkerBoot> {
    let boot = marker_boot(dir, prefix)?;
    let image = dir.join("boot/images/marker.img");
    ferric_lab::image::BootImage {
        kernel: boot.kernel.clone(),
        initramfs: boot.initramfs.clone(),
        append: "console=ttyS0 quiet".into(),
        size_mib: 64,
    }
    .build(&image, &dir.join("image-work"))?;
    let digest = super::sha256_hex(&std::fs::read(&image)?);
    std::fs::write(dir.join("marker.img.sha256"), digest)?;
    Ok(boot)
}
