//! Builds the lab's bootable test image from a kernel and an initramfs:
//! `cargo run -p ferric-lab --example boot_image -- KERNEL INITRAMFS OUTPUT [APPEND]`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kernel, initramfs, output, rest @ ..] = args.as_slice() else {
        return Err("usage: boot_image KERNEL INITRAMFS OUTPUT [APPEND]".into());
    };
    let work = tempfile::tempdir()?;
    ferric_lab::image::BootImage {
        kernel: kernel.into(),
        initramfs: initramfs.into(),
        append: rest
            .first()
            .cloned()
            .unwrap_or_else(|| "console=ttyS0".to_owned()),
        size_mib: 64,
    }
    .build(std::path::Path::new(output), work.path())?;
    println!("{output}");
    Ok(())
}
