//! The test image the lab suites deploy: a 64 MiB GPT disk (ESP, UEFI-bootable kernel and an
//! initramfs of busybox) whose `/init` prints a fresh marker on the serial console forever,
//! so a suite knows the machine booted what was written to its disk.

use std::path::Path;

use anyhow::Context as _;

/// Builds `DIR/boot/images/marker.img`, with `DIR/marker` (the text it prints: `PREFIX-PID`)
/// and `DIR/marker.img.sha256` beside it. Needs busybox-static and a `/boot/vmlinuz-*`.
pub fn build_marker_image(dir: &Path, prefix: &str) -> anyhow::Result<()> {
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
    let image = dir.join("boot/images/marker.img");
    ferric_lab::image::BootImage {
        kernel,
        initramfs,
        append: "console=ttyS0 quiet".into(),
        size_mib: 64,
    }
    .build(&image, &dir.join("image-work"))?;
    std::fs::write(dir.join("marker"), &marker)?;
    let digest = super::sha256_hex(&std::fs::read(&image)?);
    std::fs::write(dir.join("marker.img.sha256"), digest)?;
    Ok(())
}
