//! `ferric ramdisk build` on a fake host: a kernel, a modules tree, firmware, tools.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::Path;

use super::*;

/// The fake kernel's modules.alias: PCI, virtio and ACPI devices, and aliases of buses `/init`
/// does not scan (a file system, SCSI disks), whose modules load always.
const MODULES_ALIAS: &str = "\
alias pci:v00008086d000010D3sv*sd*bc*sc*i* e1000e
alias pci:v*d*sv*sd*bc01sc06i01* ahci
alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci
alias virtio:d00000001v* virtio_net
alias acpi*:LNXPWRBN:* button
alias fs-ext4 ext4
alias scsi:t-0x00* sd_mod
alias pci:v000015B3d0000101Dsv*sd*bc*sc*i* mlx5_core
alias auxiliary:mlx5_core.eth mlx5_core
";

/// A fake host: a kernel, a modules tree with dependencies (tg3 asks for two firmware files,
/// one of which exists), a "static" busybox and every tool.
fn fake_host(root: &Path) -> BuildArgs {
    let boot = root.join("boot");
    fs::create_dir_all(&boot).expect("boot");
    fs::write(boot.join("vmlinuz-6.1.0-9-amd64"), b"old kernel").expect("kernel");
    fs::write(boot.join("vmlinuz-6.1.0-10-amd64"), b"KERNEL").expect("kernel");
    let modules = root.join("modules/6.1.0-10-amd64");
    fs::create_dir_all(modules.join("kernel")).expect("modules");
    let mut dep = String::new();
    for name in default_modules() {
        let file = format!("kernel/{}.ko", name.replace('_', "-"));
        let content = if name == "tg3" {
            modules::tests::elf_with_modinfo(&[
                "firmware=tigon/tg3.bin",
                "firmware=tigon/tg3_tso.bin",
            ])
        } else {
            name.as_bytes().to_vec()
        };
        fs::write(modules.join(&file), content).expect("module");
        let deps = match name {
            "virtio_net" => " kernel/net-failover.ko kernel/failover.ko",
            "ext4" => " kernel/jbd2.ko kernel/mbcache.ko",
            _ => "",
        };
        dep.push_str(&format!("{file}:{deps}\n"));
    }
    for extra in ["net-failover", "failover", "jbd2", "mbcache", "bonding"] {
        fs::write(modules.join(format!("kernel/{extra}.ko")), extra).expect("module");
    }
    dep.push_str("kernel/net-failover.ko: kernel/failover.ko\nkernel/failover.ko:\n");
    dep.push_str("kernel/jbd2.ko:\nkernel/mbcache.ko:\nkernel/bonding.ko:\n");
    fs::write(modules.join("modules.dep"), dep).expect("dep");
    fs::write(modules.join("modules.alias"), MODULES_ALIAS).expect("alias");
    let firmware = root.join("firmware");
    fs::create_dir_all(firmware.join("tigon")).expect("firmware");
    fs::write(firmware.join("tigon/tg3.bin"), b"TG3 FIRMWARE").expect("firmware");
    fs::write(firmware.join("extra.bin"), b"EXTRA").expect("firmware");
    // A 64-bit ELF header with no program headers: static.
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    fs::write(root.join("busybox"), &elf).expect("busybox");
    fs::write(root.join("agent"), b"#!/bin/true agent").expect("agent");
    let tools = root.join("tools");
    fs::create_dir_all(&tools).expect("tools");
    let tool_paths = TOOLS
        .iter()
        .map(|tool| {
            let path = tools.join(tool.name);
            fs::write(&path, format!("fake {}", tool.name)).expect("tool");
            format!("{}={}", tool.name, path.display())
        })
        .collect();
    BuildArgs {
        output: root.join("out"),
        agent: Some(root.join("agent")),
        kernel_version: None,
        boot_dir: boot,
        modules_dir: root.join("modules"),
        firmware_dir: firmware,
        busybox: root.join("busybox"),
        no_firmware: false,
        extra_modules: Vec::new(),
        extra_firmware: Vec::new(),
        extra_files: Vec::new(),
        tool_paths,
        without: Vec::new(),
        keep_debug: false,
    }
}

/// Every entry of the initramfs: name → (mode, content).
fn unpack(initramfs: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut gzip = flate2::read::GzDecoder::new(fs::File::open(initramfs).expect("open"));
    let mut cpio_bytes = Vec::new();
    gzip.read_to_end(&mut cpio_bytes).expect("gunzip");
    let mut files = BTreeMap::new();
    let mut rest = &cpio_bytes[..];
    loop {
        let mut reader = cpio::NewcReader::new(rest).expect("entry");
        if reader.entry().is_trailer() {
            break;
        }
        let name = reader.entry().name().to_owned();
        let mode = reader.entry().mode();
        let mut content = Vec::new();
        reader.read_to_end(&mut content).expect("content");
        files.insert(name, (mode, content));
        rest = reader.finish().expect("next");
    }
    files
}

#[test]
fn the_initramfs_holds_init_agent_drivers_firmware_and_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = fake_host(dir.path());
    args.extra_modules = vec!["bonding".into()];
    args.extra_firmware = vec!["extra.bin".into()];
    fs::write(dir.path().join("note.txt"), b"hello").expect("file");
    args.extra_files = vec![format!(
        "{}:/etc/note.txt",
        dir.path().join("note.txt").display()
    )];
    let report = build(&args).expect("build");
    assert_eq!(report.kernel_version, "6.1.0-10-amd64");
    assert_eq!(fs::read(&report.kernel).expect("kernel"), b"KERNEL");
    let position = |name: &str| report.modules.iter().position(|m| m == name).expect(name);
    assert!(position("failover") < position("net_failover"));
    assert!(position("net_failover") < position("virtio_net"));
    assert!(position("jbd2") < position("ext4"));
    for driver in NIC_MODULES
        .iter()
        .chain(STORAGE_MODULES)
        .chain(["bonding"].iter())
    {
        position(driver);
    }
    assert_eq!(report.firmware, ["tigon/tg3.bin", "extra.bin"]);
    assert_eq!(
        report.missing_firmware,
        [MissingFirmware {
            name: "tigon/tg3_tso.bin".into(),
            module: "tg3".into(),
            package: "firmware-misc-nonfree",
        }]
    );
    assert_eq!(
        report.tools,
        TOOLS.iter().map(|tool| tool.name).collect::<Vec<_>>()
    );

    let files = unpack(&report.initramfs);
    let (mode, init) = &files["init"];
    assert_eq!(mode & 0o777, 0o755);
    let init = String::from_utf8_lossy(init);
    assert!(init.contains("udhcpc") && init.contains("/bin/ferric-agent"));
    assert_eq!(files["bin/ferric-agent"].1, b"#!/bin/true agent");
    assert!(files.contains_key("etc/ferric-ramdisk"));
    assert_eq!(files["dev/console"].0 & 0o170000, 0o020000);
    let order = String::from_utf8_lossy(&files["etc/modules.order"].1).into_owned();
    assert_eq!(order.lines().collect::<Vec<_>>(), report.modules);
    assert_eq!(files["lib/modules/ferric/virtio_net.ko"].1, b"virtio_net");
    assert_eq!(files["lib/firmware/tigon/tg3.bin"].1, b"TG3 FIRMWARE");
    assert_eq!(files["lib/firmware/extra.bin"].1, b"EXTRA");
    assert_eq!(files["usr/sbin/nvme"].1, b"fake nvme");
    assert_eq!(files["usr/sbin/nvme"].0 & 0o777, 0o755);
    assert_eq!(files["usr/bin/ipmitool"].1, b"fake ipmitool");
    assert_eq!(
        files["etc/ssl/certs/ca-certificates.crt"].1,
        b"fake ca-certificates"
    );
    assert_eq!(files["etc/note.txt"].1, b"hello");

    let printed = describe(&report);
    for expected in [
        "NICs       e1000e igb ixgbe i40e ice mlx5_core bnxt_en tg3",
        "storage    ahci nvme megaraid_sas mpt3sas smartpqi",
        "firmware   2 files",
        "warning    firmware tigon/tg3_tso.bin (requested by tg3)",
        "install Debian's firmware-misc-nonfree",
        "tools      nvme hdparm ipmitool mdadm ca-certificates",
        "MiB gzipped",
    ] {
        assert!(
            printed.contains(expected),
            "{expected:?} not in:\n{printed}"
        );
    }
}

#[test]
fn no_firmware_leaves_it_out_and_without_leaves_a_tool_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = fake_host(dir.path());
    args.no_firmware = true;
    args.without = vec!["ipmitool".into()];
    args.tool_paths
        .retain(|spec| !spec.starts_with("ipmitool="));
    let report = build(&args).expect("build");
    assert!(report.firmware.is_empty() && report.missing_firmware.is_empty());
    assert_eq!(report.tools_left_out, ["ipmitool"]);
    let files = unpack(&report.initramfs);
    assert!(!files.keys().any(|name| name.starts_with("lib/firmware/")));
    assert!(!files.contains_key("usr/bin/ipmitool"));
    let printed = describe(&report);
    assert!(printed.contains("left out (--no-firmware)"), "{printed}");
    assert!(
        printed.contains("ipmitool (--without); needed for the BMC address in the inventory"),
        "{printed}"
    );
}

#[test]
fn missing_pieces_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = fake_host(dir.path());
    let fails = |change: &dyn Fn(&mut BuildArgs)| {
        let mut changed = args.clone();
        change(&mut changed);
        build(&changed).expect_err("must fail").to_string()
    };

    let error = fails(&|args| args.tool_paths.push("nvme=/no/such/nvme".into()));
    assert!(
        error.contains("nvme")
            && error.contains("install nvme-cli")
            && error.contains("--without nvme"),
        "{error}"
    );
    let error = fails(&|args| args.without = vec!["nvme-cli".into()]);
    assert!(
        error.contains("no tool named \"nvme-cli\"") && error.contains("hdparm"),
        "{error}"
    );
    let error = fails(&|args| args.extra_firmware = vec!["bnx2x/bnx2x-e2.fw".into()]);
    assert!(
        error.contains("bnx2x/bnx2x-e2.fw") && error.contains("firmware-bnx2x"),
        "{error}"
    );
    let error = fails(&|args| args.extra_modules = vec!["nosuch".into()]);
    assert!(error.contains("nosuch"), "{error}");
    let error = fails(&|args| args.extra_files = vec!["/no/such/file".into()]);
    assert!(error.contains("/no/such/file"), "{error}");
    let error = fails(&|args| args.tool_paths = vec!["nvme".into()]);
    assert!(error.contains("NAME=PATH"), "{error}");
    let error = fails(&|args| {
        fs::write(&args.busybox, b"#!/bin/sh dynamic").expect("busybox");
    });
    assert!(error.contains("busybox-static"), "{error}");
    let error = fails(&|args| args.boot_dir = dir.path().join("nowhere"));
    assert!(error.contains("linux-image-amd64"), "{error}");
}

#[test]
fn init_loads_what_the_devices_ask_for_and_the_rest_always() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = build(&fake_host(dir.path())).expect("build");
    assert_eq!(
        report.modules_by_device,
        [
            "e1000e",
            "mlx5_core",
            "ahci",
            "virtio_pci",
            "virtio_net",
            "button"
        ]
    );
    let files = unpack(&report.initramfs);
    let fragment = String::from_utf8_lossy(&files["etc/modules.hardware"].1).into_owned();
    let init = String::from_utf8_lossy(&files["init"].1).into_owned();
    assert!(
        init.contains(". /etc/modules.hardware") && init.contains("ferric.modules=all"),
        "{init}"
    );
    // The fragment, sourced by a POSIX shell, given an Intel 82574L NIC, an AHCI controller,
    // a virtio NIC and the ACPI power button (and devices no packed driver matches).
    let fragment_path = dir.path().join("modules.hardware");
    fs::write(&fragment_path, &fragment).expect("fragment");
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            ". \"$0\"; wanted=; for alias in \
             pci:v00008086d000010D3sv00008086sd0000A01Fbc02sc00i00 \
             pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01 \
             pci:v00008086d000029C0sv00001AF4sd00001100bc06sc00i00 \
             virtio:d00000001v00001AF4 acpi:LNXPWRBN: acpi:PNP0A08:PNP0A03: \
             platform:serial8250; do hardware_modules \"$alias\"; done; \
             echo \"$wanted\"; echo \"$always\"",
        )
        .arg(&fragment_path)
        .output()
        .expect("sh");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = stdout.lines();
    let wanted: Vec<&str> = lines.next().expect("wanted").split_whitespace().collect();
    assert_eq!(
        wanted,
        [
            "e1000e",
            "ahci",
            "failover",
            "net_failover",
            "virtio_net",
            "button"
        ]
    );
    let always: Vec<&str> = lines.next().expect("always").split_whitespace().collect();
    for module in [
        "jbd2", "mbcache", "ext4", "sd_mod", "md_mod", "raid1", "ipmi_si",
    ] {
        assert!(always.contains(&module), "{module} not in {always:?}");
    }
    for module in report.modules_by_device.iter() {
        assert!(!always.contains(&module.as_str()), "{module} in {always:?}");
    }
    assert!(
        describe(&report).contains("by device (PCI, virtio, ACPI, platform modalias): e1000e"),
        "{}",
        describe(&report)
    );
}

#[test]
fn xz_compressed_modules_are_packed_unpacked_and_other_compression_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = fake_host(dir.path());
    let modules = dir.path().join("modules/6.1.0-10-amd64");
    // jbd2 as Debian's 6.12 kernels ship every module: `kernel/jbd2.ko.xz` in modules.dep.
    let status = std::process::Command::new("xz")
        .arg(modules.join("kernel/jbd2.ko"))
        .status()
        .expect("xz");
    assert!(status.success());
    let dep = fs::read_to_string(modules.join("modules.dep"))
        .expect("dep")
        .replace("kernel/jbd2.ko", "kernel/jbd2.ko.xz");
    fs::write(modules.join("modules.dep"), &dep).expect("dep");
    let report = build(&args).expect("build");
    assert!(report.modules.iter().any(|module| module == "jbd2"));
    let files = unpack(&report.initramfs);
    assert_eq!(files["lib/modules/ferric/jbd2.ko"].1, b"jbd2");

    fs::write(
        modules.join("modules.dep"),
        dep.replace("kernel/jbd2.ko.xz", "kernel/jbd2.ko.zst"),
    )
    .expect("dep");
    match build(&args) {
        Err(RamdiskError::CompressedModule(file)) => assert_eq!(file, "kernel/jbd2.ko.zst"),
        other => panic!("expected CompressedModule, got {other:?}"),
    }
}
