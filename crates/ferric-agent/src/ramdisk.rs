//! `ferric ramdisk build`: the reference ramdisk — the host's Debian kernel, an initramfs with
//! the kernel modules a server (or a QEMU guest) needs, busybox, `ferric-agent` and the shared
//! libraries it links, and an `/init` that loads the modules, brings every NIC up by DHCP and
//! runs the agent.
//!
//! The initramfs is written here as a gzipped newc cpio (the `cpio` crate does the format), so
//! no root, loop devices or mounts are needed. Module dependencies come from the kernel's own
//! `modules.dep`; they are loaded with busybox `insmod` in dependency order.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The modules the ramdisk loads (their dependencies join them): NICs and disks of servers
/// and of QEMU guests, the filesystems of images and config drives, and the ACPI power button.
pub const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_net",
    "virtio_blk",
    "virtio_scsi",
    "e1000",
    "e1000e",
    "ahci",
    "sd_mod",
    "nvme",
    "crc32c_generic",
    "ext4",
    "vfat",
    "nls_cp437",
    "nls_iso8859_1",
    "button",
    "evdev",
    // Software RAID (the `raid.*` steps): md itself and the levels mdadm builds.
    "md_mod",
    "raid0",
    "raid1",
    "raid10",
    "raid456",
];

/// Where the modules go inside the initramfs.
const MODULE_DIR: &str = "lib/modules/ferric";

/// `ferric ramdisk …`.
#[derive(Debug, clap::Subcommand)]
pub enum RamdiskCommand {
    /// Build the agent ramdisk from this host's kernel: writes ferric-agent.kernel and
    /// ferric-agent.initramfs into DIR. Needs `busybox-static` and `linux-image-amd64`
    /// (`scripts/install-deps.sh --lab`). Boot it with `ipa-api-url=http://API:6385` (or
    /// `ferric.api_url=`) on the kernel command line.
    Build(BuildArgs),
}

/// Flags of `ferric ramdisk build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Directory to write the kernel and the initramfs to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub output: PathBuf,
    /// The agent binary to pack (default: `ferric-agent` beside the `ferric` binary). A release
    /// build (`cargo build --release -p ferric-agent`) makes a much smaller ramdisk.
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Kernel version to use (default: the newest /boot/vmlinuz-*).
    #[arg(long, value_name = "VERSION")]
    pub kernel_version: Option<String>,
    /// Where kernels are found.
    #[arg(long, default_value = "/boot", value_name = "DIR")]
    pub boot_dir: PathBuf,
    /// Where kernel modules are found.
    #[arg(long, default_value = "/lib/modules", value_name = "DIR")]
    pub modules_dir: PathBuf,
    /// A statically linked busybox.
    #[arg(long, default_value = "/bin/busybox", value_name = "PATH")]
    pub busybox: PathBuf,
    /// mdadm, for software RAID (packed with the libraries it links; `apt-get install
    /// mdadm`). Without it the ramdisk builds no RAID: the `raid.*` steps then fail saying so.
    #[arg(long, default_value = "/sbin/mdadm", value_name = "PATH")]
    pub mdadm: PathBuf,
}

/// Why the ramdisk could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RamdiskError {
    #[error("no kernel in {0}: install linux-image-amd64 (scripts/install-deps.sh --lab)")]
    NoKernel(PathBuf),
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("module {module} is neither in {dep} nor built into the kernel")]
    MissingModule { module: String, dep: PathBuf },
    #[error("module file {0} is compressed; this builder packs uncompressed modules only")]
    CompressedModule(String),
    #[error("{0} is not a statically linked program: install busybox-static")]
    BusyboxNotStatic(PathBuf),
    #[error(
        "the agent binary {0} does not exist: build it (cargo build --release -p ferric-agent) or pass --agent"
    )]
    NoAgent(PathBuf),
}

/// What `build` produced.
#[derive(Debug, Clone)]
pub struct BuildReport {
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub kernel_version: String,
    pub initramfs_bytes: u64,
    pub unpacked_bytes: u64,
    /// Module names in load order.
    pub modules: Vec<String>,
    pub libraries: Vec<PathBuf>,
    /// Whether mdadm is in it (software RAID).
    pub mdadm: bool,
}

fn read(path: &Path) -> Result<Vec<u8>, RamdiskError> {
    fs::read(path).map_err(|source| RamdiskError::Read {
        path: path.to_owned(),
        source,
    })
}

/// `ferric ramdisk build`, printing what it made.
pub fn run(command: RamdiskCommand) -> anyhow::Result<()> {
    match command {
        RamdiskCommand::Build(args) => {
            let report = build(&args)?;
            println!(
                "kernel     {} ({})",
                report.kernel.display(),
                report.kernel_version
            );
            println!(
                "initramfs  {} ({:.1} MiB gzipped, {:.1} MiB unpacked)",
                report.initramfs.display(),
                report.initramfs_bytes as f64 / 1048576.0,
                report.unpacked_bytes as f64 / 1048576.0
            );
            println!("modules    {}", report.modules.join(" "));
            if !report.mdadm {
                println!(
                    "no mdadm   {} is missing: this ramdisk cannot build software RAID \
                     (apt-get install mdadm)",
                    args.mdadm.display()
                );
            }
            println!(
                "boot with  ipa-api-url=http://<ferric-api>:6385 (or ferric.api_url=) on the kernel command line"
            );
            Ok(())
        }
    }
}

/// The newest `vmlinuz-*` in `boot_dir`, or the one of `version`.
fn find_kernel(boot_dir: &Path, version: Option<&str>) -> Result<(PathBuf, String), RamdiskError> {
    if let Some(version) = version {
        let path = boot_dir.join(format!("vmlinuz-{version}"));
        return if path.is_file() {
            Ok((path, version.to_owned()))
        } else {
            Err(RamdiskError::NoKernel(boot_dir.to_owned()))
        };
    }
    let entries =
        fs::read_dir(boot_dir).map_err(|_| RamdiskError::NoKernel(boot_dir.to_owned()))?;
    let mut versions: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .strip_prefix("vmlinuz-")
                .map(str::to_owned)
        })
        .collect();
    versions.sort_by_key(|version| version_key(version));
    let version = versions
        .pop()
        .ok_or_else(|| RamdiskError::NoKernel(boot_dir.to_owned()))?;
    Ok((boot_dir.join(format!("vmlinuz-{version}")), version))
}

/// Sorts `6.1.0-9` before `6.1.0-10`: numbers compare as numbers.
fn version_key(version: &str) -> Vec<(u64, String)> {
    version
        .split(['.', '-', '+', '~'])
        .map(|part| (part.parse().unwrap_or(0), part.to_owned()))
        .collect()
}

fn module_name(file: &str) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

/// The modules to load, dependencies first, with their files relative to the modules tree.
pub fn resolve_modules(
    modules_dir: &Path,
    wanted: &[&str],
) -> Result<Vec<(String, PathBuf)>, RamdiskError> {
    let dep_path = modules_dir.join("modules.dep");
    let dep_text = String::from_utf8_lossy(&read(&dep_path)?).into_owned();
    let builtin: BTreeSet<String> = fs::read_to_string(modules_dir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .map(module_name)
        .collect();
    let mut files = BTreeMap::new();
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in dep_text.lines() {
        let Some((file, rest)) = line.split_once(':') else {
            continue;
        };
        let name = module_name(file);
        files.insert(name.clone(), PathBuf::from(file));
        deps.insert(name, rest.split_whitespace().map(module_name).collect());
    }
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
        if files.contains_key(&name) {
            visit(&name, &deps, &mut seen, &mut order);
        } else if !builtin.contains(&name) {
            return Err(RamdiskError::MissingModule {
                module: name,
                dep: dep_path,
            });
        }
    }
    order
        .into_iter()
        .map(|name| {
            let file = files.get(&name).cloned().unwrap_or_default();
            if !file.to_string_lossy().ends_with(".ko") {
                return Err(RamdiskError::CompressedModule(file.display().to_string()));
            }
            Ok((name, file))
        })
        .collect()
}

/// Whether an ELF file has no program interpreter (is statically linked).
fn is_static_elf(bytes: &[u8]) -> bool {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    if !bytes.starts_with(b"\x7fELF") || bytes.get(4) != Some(&2) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..u64::from(phnum)).all(|index| {
        let at = (phoff + index * u64::from(phentsize)) as usize;
        // PT_INTERP = 3
        bytes.get(at..at + 4) != Some(&3u32.to_le_bytes())
    })
}

/// The shared libraries `ldd` lists for `binary` (none for a static or non-ELF file).
fn shared_libraries(binary: &Path) -> Vec<PathBuf> {
    let Ok(output) = Command::new("ldd").arg(binary).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let before_address = line.split(" (0x").next()?;
            let path = before_address.rsplit("=> ").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// A newc archive being written: regular files, directories, device nodes.
struct Archive<W: Write> {
    out: Option<W>,
    inode: u32,
    directories: BTreeSet<String>,
    unpacked: u64,
}

impl<W: Write> Archive<W> {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) -> io::Result<()> {
        self.inode += 1;
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("archive already finished"))?;
        let mut writer = cpio::newc::Builder::new(name)
            .ino(self.inode)
            .mode(mode)
            .nlink(if mode & 0o170000 == 0o040000 { 2 } else { 1 })
            .rdev_major(rdev.0)
            .rdev_minor(rdev.1)
            .write(out, data.len() as u32);
        writer.write_all(data)?;
        self.out = Some(writer.finish()?);
        self.unpacked += data.len() as u64;
        Ok(())
    }

    fn directory(&mut self, path: &str) -> io::Result<()> {
        let mut prefix = String::new();
        for part in path.split('/').filter(|part| !part.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.directories.insert(prefix.clone()) {
                let name = prefix.clone();
                self.entry(&name, 0o040755, &[], (0, 0))?;
            }
        }
        Ok(())
    }

    fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.directory(parent)?;
        }
        self.entry(path, 0o100000 | mode, data, (0, 0))
    }

    fn finish(mut self) -> io::Result<W> {
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("archive already finished"))?;
        cpio::newc::trailer(out)
    }
}

/// The `/init` script.
fn init_script() -> String {
    format!(
        r#"#!/bin/sh
# /init of the Ferric agent ramdisk, written by `ferric ramdisk build`.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
exec </dev/console >/dev/console 2>&1
mkdir -p /tmp /run /var/log
echo "ferric ramdisk: loading modules"
for module in $(cat /etc/modules.order); do
  insmod "/{MODULE_DIR}/$module.ko" 2>/dev/null || echo "ferric ramdisk: insmod $module failed"
done
# Software RAID built by an earlier ramdisk (the `raid.*` steps) comes back as it was.
if [ -x /sbin/mdadm ]; then
  mkdir -p /run/mdadm /etc/mdadm
  mdadm --assemble --scan --run 2>&1 | sed 's/^/ferric ramdisk: /'
fi
# The ACPI power button (soft power off): button + evdev are loaded; acpid runs poweroff.
mkdir -p /etc/acpi/PWRF
printf '#!/bin/sh\npoweroff -f\n' > /etc/acpi/PWRF/00000080
chmod 755 /etc/acpi/PWRF/00000080
acpid -c /etc/acpi 2>/dev/null
echo "ferric ramdisk: bringing up the network"
ip link set lo up
for path in /sys/class/net/*; do
  name=${{path##*/}}
  [ "$name" = lo ] && continue
  # NICs the node's network_data (virtual media, no DHCP) names get static addresses from
  # ferric-agent instead.
  grep -qi "$(cat "$path/address")" /etc/ferric/network_data.json 2>/dev/null && continue
  ip link set "$name" up
  udhcpc -i "$name" -s /usr/share/udhcpc/default.script -t 20 -T 2 -b -S &
done
grep -qE 'ipa-api-url=|ferric.api_url=' /proc/cmdline ||
  echo "ferric ramdisk: no ipa-api-url= or ferric.api_url= on the kernel command line"
while true; do
  echo "ferric ramdisk: starting ferric-agent"
  /bin/ferric-agent 2>&1 | tee -a /var/log/ferric-agent.log
  echo "ferric ramdisk: ferric-agent stopped; restarting in 5 s"
  sleep 5
done
"#
    )
}

const UDHCPC_SCRIPT: &str = r#"#!/bin/sh
# udhcpc event handler of the Ferric agent ramdisk.
case "$1" in
  deconfig)
    ip -4 addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    for gateway in $router; do
      ip route add default via "$gateway" dev "$interface" 2>/dev/null
      break
    done
    : > /etc/resolv.conf
    for server in $dns; do echo "nameserver $server" >> /etc/resolv.conf; done
    echo "ferric ramdisk: $interface has $ip/${mask:-24}"
    ;;
esac
"#;

/// Builds the kernel and initramfs into `args.output`.
pub fn build(args: &BuildArgs) -> Result<BuildReport, RamdiskError> {
    let (kernel_path, kernel_version) =
        find_kernel(&args.boot_dir, args.kernel_version.as_deref())?;
    let modules_dir = args.modules_dir.join(&kernel_version);
    let modules = resolve_modules(&modules_dir, MODULES)?;
    let busybox = read(&args.busybox)?;
    if !is_static_elf(&busybox) {
        return Err(RamdiskError::BusyboxNotStatic(args.busybox.clone()));
    }
    let agent_path = match &args.agent {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("ferric-agent")))
            .unwrap_or_else(|| PathBuf::from("ferric-agent")),
    };
    if !agent_path.is_file() {
        return Err(RamdiskError::NoAgent(agent_path));
    }
    let agent = read(&agent_path)?;
    let mut libraries = shared_libraries(&agent_path);
    let mdadm = if args.mdadm.is_file() {
        let program = read(&args.mdadm)?;
        for library in shared_libraries(&args.mdadm) {
            if !libraries.contains(&library) {
                libraries.push(library);
            }
        }
        Some(program)
    } else {
        None
    };

    fs::create_dir_all(&args.output).map_err(|source| RamdiskError::Write {
        path: args.output.clone(),
        source,
    })?;
    let initramfs_path = args.output.join("ferric-agent.initramfs");
    let write_error = |source| RamdiskError::Write {
        path: initramfs_path.clone(),
        source,
    };
    let file = fs::File::create(&initramfs_path).map_err(write_error)?;
    let gzip =
        flate2::write::GzEncoder::new(io::BufWriter::new(file), flate2::Compression::default());
    let mut archive = Archive {
        out: Some(gzip),
        inode: 0,
        directories: BTreeSet::new(),
        unpacked: 0,
    };
    let mut pack = || -> io::Result<u64> {
        for dir in [
            "proc", "sys", "dev", "tmp", "run", "var/log", "etc", "sbin", "usr/bin", "usr/sbin",
            "root", "mnt",
        ] {
            archive.directory(dir)?;
        }
        archive.entry("dev/console", 0o020600, &[], (5, 1))?;
        archive.entry("dev/null", 0o020666, &[], (1, 3))?;
        archive.file("init", 0o755, init_script().as_bytes())?;
        archive.file("bin/busybox", 0o755, &busybox)?;
        archive.entry("bin/sh", 0o120777, b"busybox", (0, 0))?;
        archive.file("bin/ferric-agent", 0o755, &agent)?;
        if let Some(mdadm) = &mdadm {
            archive.file("sbin/mdadm", 0o755, mdadm)?;
        }
        for library in &libraries {
            let data = fs::read(library)?;
            archive.file(&library.to_string_lossy(), 0o755, &data)?;
        }
        let mut order = String::new();
        for (name, file) in &modules {
            let data = fs::read(modules_dir.join(file))?;
            archive.file(&format!("{MODULE_DIR}/{name}.ko"), 0o644, &data)?;
            order.push_str(name);
            order.push('\n');
        }
        archive.file("etc/modules.order", 0o644, order.as_bytes())?;
        archive.file(
            "usr/share/udhcpc/default.script",
            0o755,
            UDHCPC_SCRIPT.as_bytes(),
        )?;
        archive.file(
            crate::power::RAMDISK_MARKER,
            0o644,
            format!(
                "ferric-agent {} ramdisk, kernel {kernel_version}\n",
                crate::AGENT_VERSION
            )
            .as_bytes(),
        )?;
        Ok(archive.unpacked)
    };
    let unpacked = pack().map_err(write_error)?;
    let gzip = archive.finish().map_err(write_error)?;
    gzip.finish()
        .and_then(|mut buffered| buffered.flush())
        .map_err(write_error)?;

    let kernel_out = args.output.join("ferric-agent.kernel");
    fs::copy(&kernel_path, &kernel_out).map_err(|source| RamdiskError::Write {
        path: kernel_out.clone(),
        source,
    })?;
    let initramfs_bytes = fs::metadata(&initramfs_path).map_err(write_error)?.len();
    Ok(BuildReport {
        kernel: kernel_out,
        initramfs: initramfs_path,
        kernel_version,
        initramfs_bytes,
        unpacked_bytes: unpacked,
        modules: modules.into_iter().map(|(name, _)| name).collect(),
        libraries,
        mdadm: mdadm.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A fake host: a kernel, a modules tree with dependencies, a "static" busybox.
    fn fake_host(root: &Path) -> BuildArgs {
        let boot = root.join("boot");
        fs::create_dir_all(&boot).expect("boot");
        fs::write(boot.join("vmlinuz-6.1.0-9-amd64"), b"old kernel").expect("kernel");
        fs::write(boot.join("vmlinuz-6.1.0-10-amd64"), b"KERNEL").expect("kernel");
        let modules = root.join("modules/6.1.0-10-amd64");
        fs::create_dir_all(modules.join("kernel")).expect("modules");
        let mut dep = String::new();
        let all: Vec<&str> = MODULES.to_vec();
        for name in &all {
            let file = format!("kernel/{}.ko", name.replace('_', "-"));
            fs::write(modules.join(&file), name.as_bytes()).expect("module");
            let deps = match *name {
                "virtio_net" => " kernel/net-failover.ko kernel/failover.ko",
                "ext4" => " kernel/jbd2.ko kernel/mbcache.ko",
                _ => "",
            };
            dep.push_str(&format!("{file}:{deps}\n"));
        }
        for extra in ["net-failover", "failover", "jbd2", "mbcache"] {
            fs::write(modules.join(format!("kernel/{extra}.ko")), extra).expect("module");
        }
        dep.push_str("kernel/net-failover.ko: kernel/failover.ko\nkernel/failover.ko:\n");
        dep.push_str("kernel/jbd2.ko:\nkernel/mbcache.ko:\n");
        fs::write(modules.join("modules.dep"), dep).expect("dep");
        // A 64-bit ELF header with no program headers: static.
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        fs::write(root.join("busybox"), &elf).expect("busybox");
        fs::write(root.join("agent"), b"#!/bin/true agent").expect("agent");
        BuildArgs {
            output: root.join("out"),
            agent: Some(root.join("agent")),
            kernel_version: None,
            boot_dir: boot,
            modules_dir: root.join("modules"),
            busybox: root.join("busybox"),
            mdadm: root.join("no-mdadm"),
        }
    }

    #[test]
    fn the_initramfs_holds_init_agent_and_modules_in_dependency_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let args = fake_host(dir.path());
        let report = build(&args).expect("build");
        assert_eq!(report.kernel_version, "6.1.0-10-amd64");
        assert_eq!(fs::read(&report.kernel).expect("kernel"), b"KERNEL");
        let position = |name: &str| report.modules.iter().position(|m| m == name).expect(name);
        assert!(position("failover") < position("net_failover"));
        assert!(position("net_failover") < position("virtio_net"));
        assert!(position("jbd2") < position("ext4"));

        let mut gzip =
            flate2::read::GzDecoder::new(fs::File::open(&report.initramfs).expect("open"));
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
    }

    #[test]
    fn missing_pieces_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = fake_host(dir.path());
        fs::write(&args.busybox, b"#!/bin/sh dynamic").expect("busybox");
        assert!(matches!(
            build(&args),
            Err(RamdiskError::BusyboxNotStatic(_))
        ));
        args.boot_dir = dir.path().join("nowhere");
        assert!(matches!(build(&args), Err(RamdiskError::NoKernel(_))));
        let error = resolve_modules(&dir.path().join("modules/6.1.0-10-amd64"), &["nosuch"])
            .expect_err("unknown module");
        assert!(error.to_string().contains("nosuch"));
    }
}
