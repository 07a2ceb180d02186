//! `ferric ramdisk build`: the reference ramdisk — the host's Debian kernel, an initramfs with
//! the drivers of common server NICs and disk controllers (and of QEMU guests), the firmware
//! files those drivers ask for, busybox, `ferric-agent` and the tools it calls (nvme-cli,
//! hdparm, ipmitool, mdadm, CA certificates) with the shared libraries they link, and an
//! `/init` that loads the modules, brings every NIC up by DHCP and runs the agent.
//!
//! The initramfs is written here as a gzipped newc cpio (`archive`), so no root, loop devices
//! or mounts are needed. Module dependencies come from the kernel's own `modules.dep` and
//! firmware names from each module's `.modinfo` (`modules`); the modules are loaded with
//! busybox `insmod` in dependency order, only those whose device is present (matched through
//! the kernel's `modules.alias`, `hardware`) and those no device asks for. Anything asked for that cannot be found stops the
//! build with its name and the Debian package that ships it — except firmware the default
//! drivers merely *may* request, which is listed as a warning (`--no-firmware` leaves all
//! firmware out).

mod archive;
mod error;
pub mod hardware;
pub mod modules;
pub mod programs;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use error::RamdiskError;
use error::read;
use modules::MODULE_DIR;
pub use modules::{NIC_MODULES, OTHER_MODULES, STORAGE_MODULES, default_modules, resolve_modules};
pub use programs::TOOLS;

use archive::Archive;

/// Where the kernel looks for firmware files.
const FIRMWARE_DIR: &str = "lib/firmware";

/// `ferric ramdisk …`.
#[derive(Debug, clap::Subcommand)]
pub enum RamdiskCommand {
    /// Build the agent ramdisk from this host's kernel: writes ferric-agent.kernel and
    /// ferric-agent.initramfs into DIR. Needs `busybox-static`, `linux-image-amd64`,
    /// `nvme-cli`, `hdparm`, `ipmitool`, `mdadm` and `ca-certificates`
    /// (`scripts/install-deps.sh --lab`), and for the drivers' firmware `firmware-misc-nonfree`
    /// (`scripts/install-deps.sh --firmware`). Boot it with `ipa-api-url=http://API:6385` (or
    /// `ferric.api_url=`) on the kernel command line.
    Build(BuildArgs),
}

/// Flags of `ferric ramdisk build`.
#[derive(Debug, Clone, clap::Args)]
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
    /// Where firmware files are found.
    #[arg(long, default_value = "/lib/firmware", value_name = "DIR")]
    pub firmware_dir: PathBuf,
    /// A statically linked busybox.
    #[arg(long, default_value = "/bin/busybox", value_name = "PATH")]
    pub busybox: PathBuf,
    /// Leave out the firmware files the drivers may request (a smaller image for machines
    /// whose NICs need none: virtio, e1000e, igb, ixgbe, i40e, mlx5, bnxt).
    #[arg(long)]
    pub no_firmware: bool,
    /// Another kernel module to load (with its dependencies); repeat or separate with commas.
    #[arg(long = "module", value_name = "NAME", value_delimiter = ',')]
    pub extra_modules: Vec<String>,
    /// Another firmware file, named as under --firmware-dir (e.g. `bnx2x/bnx2x-e2-7.13.21.0.fw`).
    #[arg(long = "firmware", value_name = "NAME", value_delimiter = ',')]
    pub extra_firmware: Vec<String>,
    /// Another file to pack: `SRC` (packed at the same path) or `SRC:DEST`. A dynamically
    /// linked program brings its shared libraries along.
    #[arg(long = "file", value_name = "SRC[:DEST]")]
    pub extra_files: Vec<String>,
    /// Where one of the agent's tools is on this host, when not where Debian puts it:
    /// `NAME=PATH` with NAME one of nvme, hdparm, ipmitool, mdadm, ca-certificates.
    #[arg(long = "tool", value_name = "NAME=PATH")]
    pub tool_paths: Vec<String>,
    /// Leave one of the agent's tools out (the steps that need it then fail saying so).
    #[arg(long = "without", value_name = "TOOL", value_delimiter = ',')]
    pub without: Vec<String>,
    /// Pack the agent with its debug info. By default it is left out (`strip --strip-debug`,
    /// when binutils is installed): a debug build's is most of the image.
    #[arg(long)]
    pub keep_debug: bool,
}

/// A firmware file a packed driver may request but that is not on the build host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingFirmware {
    pub name: String,
    pub module: String,
    pub package: &'static str,
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
    /// The requested modules `/init` loads only when a device asks for them (the rest load on
    /// every machine).
    pub modules_by_device: Vec<String>,
    /// Firmware files packed (names under `/lib/firmware`), and their size.
    pub firmware: Vec<String>,
    pub firmware_bytes: u64,
    /// Firmware the drivers may request that was not found (not packed).
    pub missing_firmware: Vec<MissingFirmware>,
    /// Firmware left out on purpose (`--no-firmware`).
    pub firmware_left_out: bool,
    /// The tools packed and those left out (`--without`).
    pub tools: Vec<&'static str>,
    pub tools_left_out: Vec<&'static str>,
    /// `--file` destinations.
    pub files: Vec<String>,
    /// The agent's size as packed, and whether its debug info was stripped.
    pub agent_bytes: u64,
    pub agent_stripped: bool,
    pub libraries: Vec<PathBuf>,
}

/// A module file's ELF bytes: `.ko` as it is, `.ko.xz` unpacked with `xz -dc`.
pub(crate) fn read_module(path: &Path) -> Result<Vec<u8>, RamdiskError> {
    if path.extension().is_none_or(|extension| extension != "xz") {
        return read(path);
    }
    let unpack_error = |source| RamdiskError::UnpackModule {
        path: path.to_owned(),
        source,
    };
    let output = std::process::Command::new("xz")
        .arg("-dc")
        .arg(path)
        .output()
        .map_err(unpack_error)?;
    if !output.status.success() {
        return Err(unpack_error(io::Error::other(format!(
            "xz exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))));
    }
    Ok(output.stdout)
}

const MIB: f64 = 1048576.0;

/// `ferric ramdisk build`, printing what it made.
pub fn run(command: RamdiskCommand) -> anyhow::Result<()> {
    match command {
        RamdiskCommand::Build(args) => {
            let report = build(&args)?;
            print!("{}", describe(&report));
            Ok(())
        }
    }
}

/// What `ferric ramdisk build` prints: what is inside and how big it is.
pub fn describe(report: &BuildReport) -> String {
    let mut text = String::new();
    let mut line = |label: &str, value: String| text.push_str(&format!("{label:<10} {value}\n"));
    line(
        "kernel",
        format!("{} ({})", report.kernel.display(), report.kernel_version),
    );
    line(
        "initramfs",
        format!(
            "{} ({:.1} MiB gzipped, {:.1} MiB unpacked)",
            report.initramfs.display(),
            report.initramfs_bytes as f64 / MIB,
            report.unpacked_bytes as f64 / MIB
        ),
    );
    let drivers = |list: &[&str]| {
        list.iter()
            .map(|name| {
                if report.modules.iter().any(|module| module == name) {
                    (*name).to_owned()
                } else {
                    format!("{name} (built in)")
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    line("NICs", drivers(NIC_MODULES));
    line("storage", drivers(STORAGE_MODULES));
    line(
        "modules",
        format!(
            "{} with dependencies, in load order: {}",
            report.modules.len(),
            report.modules.join(" ")
        ),
    );
    if report.modules_by_device.is_empty() {
        line(
            "loading",
            "every module on every machine (no modules.alias to match devices with)".to_owned(),
        );
    } else {
        line(
            "loading",
            format!(
                "by device (PCI, virtio, ACPI, platform modalias): {}; the rest always \
                 (ferric.modules=all on the kernel command line loads every module)",
                report.modules_by_device.join(" ")
            ),
        );
    }
    if report.firmware_left_out {
        line("firmware", "left out (--no-firmware)".to_owned());
    } else if report.firmware.is_empty() {
        line("firmware", "none found".to_owned());
    } else {
        line(
            "firmware",
            format!(
                "{} files ({:.1} MiB): {}",
                report.firmware.len(),
                report.firmware_bytes as f64 / MIB,
                report.firmware.join(" ")
            ),
        );
    }
    for missing in &report.missing_firmware {
        line(
            "warning",
            format!(
                "firmware {} (requested by {}) is not on this host, so not packed: install \
                 Debian's {} (scripts/install-deps.sh --firmware) if your hardware needs it",
                missing.name, missing.module, missing.package
            ),
        );
    }
    line(
        "agent",
        format!(
            "{:.1} MiB{}",
            report.agent_bytes as f64 / MIB,
            if report.agent_stripped {
                " (debug info stripped)"
            } else {
                ""
            }
        ),
    );
    line(
        "tools",
        format!(
            "{} (and {} shared libraries)",
            report.tools.join(" "),
            report.libraries.len()
        ),
    );
    for name in &report.tools_left_out {
        if let Some(tool) = TOOLS.iter().find(|tool| tool.name == *name) {
            line(
                "left out",
                format!("{name} (--without); needed for {}", tool.purpose),
            );
        }
    }
    if !report.files.is_empty() {
        line("files", report.files.join(" "));
    }
    line(
        "boot with",
        "ipa-api-url=http://<ferric-api>:6385 (or ferric.api_url=) on the kernel command line"
            .to_owned(),
    );
    text
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

/// One file for the archive: where it goes, its mode and its bytes.
struct Packed {
    path: String,
    mode: u32,
    data: Vec<u8>,
}

/// The tools to pack (with their bytes), their names, and the names left out.
struct Tools {
    packed: Vec<Packed>,
    names: Vec<&'static str>,
    left_out: Vec<&'static str>,
}

/// The tools to pack, read from the host.
fn gather_tools(args: &BuildArgs, libraries: &mut Vec<PathBuf>) -> Result<Tools, RamdiskError> {
    let mut overrides = Vec::new();
    for spec in &args.tool_paths {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| RamdiskError::BadToolSpec(spec.clone()))?;
        if !TOOLS.iter().any(|tool| tool.name == name) {
            return Err(RamdiskError::UnknownTool(name.to_owned()));
        }
        overrides.push((name.to_owned(), PathBuf::from(path)));
    }
    for name in &args.without {
        if !TOOLS.iter().any(|tool| tool.name == name) {
            return Err(RamdiskError::UnknownTool(name.clone()));
        }
    }
    let (mut packed, mut names, mut left_out) = (Vec::new(), Vec::new(), Vec::new());
    for tool in TOOLS {
        if args.without.iter().any(|name| name == tool.name) {
            left_out.push(tool.name);
            continue;
        }
        let path = overrides
            .iter()
            .rev()
            .find(|(name, _)| name == tool.name)
            .map_or_else(|| PathBuf::from(tool.host_path), |(_, path)| path.clone());
        if !path.is_file() {
            return Err(RamdiskError::MissingTool {
                name: tool.name,
                purpose: tool.purpose,
                path,
                package: tool.package,
            });
        }
        let data = read(&path)?;
        if data.starts_with(b"\x7fELF") {
            programs::add_libraries(libraries, &path);
        }
        let mode = if tool.packed_as.starts_with("etc/") {
            0o644
        } else {
            0o755
        };
        packed.push(Packed {
            path: tool.packed_as.to_owned(),
            mode,
            data,
        });
        names.push(tool.name);
    }
    Ok(Tools {
        packed,
        names,
        left_out,
    })
}

/// The `--file` entries, read.
fn gather_files(
    args: &BuildArgs,
    libraries: &mut Vec<PathBuf>,
) -> Result<Vec<Packed>, RamdiskError> {
    args.extra_files
        .iter()
        .map(|spec| {
            let (source, destination) = match spec.split_once(':') {
                Some((source, destination)) => (PathBuf::from(source), destination.to_owned()),
                None => (PathBuf::from(spec), spec.clone()),
            };
            if !destination.starts_with('/') {
                return Err(RamdiskError::BadFileSpec(spec.clone()));
            }
            if !source.is_file() {
                return Err(RamdiskError::MissingFile(source));
            }
            let data = read(&source)?;
            if data.starts_with(b"\x7fELF") && !programs::is_static_elf(&data) {
                programs::add_libraries(libraries, &source);
            }
            let mode = fs::metadata(&source).map_or(0o644, |meta| {
                use std::os::unix::fs::PermissionsExt;
                meta.permissions().mode() & 0o777
            });
            Ok(Packed {
                path: destination,
                mode,
                data,
            })
        })
        .collect()
}

/// The firmware files the modules ask for (and those named with `--firmware`), read; the
/// default drivers' missing ones are returned, not errors.
fn gather_firmware(
    args: &BuildArgs,
    modules: &[(String, Vec<u8>)],
) -> Result<(Vec<Packed>, Vec<MissingFirmware>), RamdiskError> {
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    if !args.no_firmware {
        for (module, data) in modules {
            for name in modules::module_firmware(data) {
                if !wanted.iter().any(|(known, _)| *known == name) {
                    wanted.push((name, Some(module.clone())));
                }
            }
        }
    }
    for name in &args.extra_firmware {
        wanted.retain(|(known, _)| known != name);
        wanted.push((name.clone(), None));
    }
    let mut packed: Vec<Packed> = Vec::new();
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, module) in wanted {
        match (modules::find_firmware(&args.firmware_dir, &name), module) {
            (Some((path, packed_name)), _) => {
                if seen.insert(packed_name.clone()) {
                    packed.push(Packed {
                        path: format!("{FIRMWARE_DIR}/{packed_name}"),
                        mode: 0o644,
                        data: read(&path)?,
                    });
                }
            }
            (None, Some(module)) => missing.push(MissingFirmware {
                package: modules::firmware_package(&name),
                name,
                module,
            }),
            (None, None) => {
                return Err(RamdiskError::MissingFirmware {
                    package: modules::firmware_package(&name),
                    name,
                    dir: args.firmware_dir.clone(),
                });
            }
        }
    }
    Ok((packed, missing))
}

/// Builds the kernel and initramfs into `args.output`.
pub fn build(args: &BuildArgs) -> Result<BuildReport, RamdiskError> {
    let (kernel_path, kernel_version) =
        find_kernel(&args.boot_dir, args.kernel_version.as_deref())?;
    let modules_dir = args.modules_dir.join(&kernel_version);
    let mut wanted = default_modules();
    wanted.extend(args.extra_modules.iter().map(String::as_str));
    let tree = modules::ModuleTree::load(&modules_dir)?;
    // Without a modules.alias (not a Debian kernel tree) every module loads on every machine.
    let modules_alias = fs::read_to_string(modules_dir.join("modules.alias")).unwrap_or_default();
    let hardware = hardware::HardwareModules::new(&tree, &modules_alias, &wanted)?;
    let modules = tree
        .resolve(&wanted)?
        .into_iter()
        .map(|(name, file)| Ok((name, read_module(&modules_dir.join(file))?)))
        .collect::<Result<Vec<_>, RamdiskError>>()?;
    let (firmware, missing_firmware) = gather_firmware(args, &modules)?;
    let busybox = read(&args.busybox)?;
    if !programs::is_static_elf(&busybox) {
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
    let (agent, agent_stripped) = agent_binary(&agent_path, &args.output, args.keep_debug)?;
    let mut libraries = programs::shared_libraries(&agent_path);
    let Tools {
        packed: tools,
        names: tool_names,
        left_out: tools_left_out,
    } = gather_tools(args, &mut libraries)?;
    let files = gather_files(args, &mut libraries)?;
    let libraries_packed = libraries
        .iter()
        .map(|library| {
            Ok(Packed {
                path: library.to_string_lossy().into_owned(),
                mode: 0o755,
                data: read(library)?,
            })
        })
        .collect::<Result<Vec<_>, RamdiskError>>()?;

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
    let gzip = flate2::write::GzEncoder::new(io::BufWriter::new(file), flate2::Compression::best());
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
        archive.file("init", 0o755, archive::init_script().as_bytes())?;
        archive.file("bin/busybox", 0o755, &busybox)?;
        archive.entry("bin/sh", 0o120777, b"busybox", (0, 0))?;
        archive.file("bin/ferric-agent", 0o755, &agent)?;
        for entry in tools
            .iter()
            .chain(&files)
            .chain(&libraries_packed)
            .chain(&firmware)
        {
            archive.file(&entry.path, entry.mode, &entry.data)?;
        }
        let mut order = String::new();
        for (name, data) in &modules {
            archive.file(&format!("{MODULE_DIR}/{name}.ko"), 0o644, data)?;
            order.push_str(name);
            order.push('\n');
        }
        archive.file("etc/modules.order", 0o644, order.as_bytes())?;
        archive.file(hardware::HARDWARE_FILE, 0o644, hardware.script().as_bytes())?;
        archive.file(
            "usr/share/udhcpc/default.script",
            0o755,
            archive::UDHCPC_SCRIPT.as_bytes(),
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
        modules_by_device: hardware.by_device(),
        firmware_bytes: firmware.iter().map(|entry| entry.data.len() as u64).sum(),
        firmware: firmware
            .into_iter()
            .map(|entry| entry.path.trim_start_matches("lib/firmware/").to_owned())
            .collect(),
        missing_firmware,
        firmware_left_out: args.no_firmware,
        tools: tool_names,
        tools_left_out,
        files: files.into_iter().map(|entry| entry.path).collect(),
        agent_bytes: agent.len() as u64,
        agent_stripped,
        libraries,
    })
}

/// The agent's bytes, without debug info unless `keep_debug` (and binutils' `strip` is on
/// this host); says whether it stripped.
fn agent_binary(
    agent: &Path,
    work_dir: &Path,
    keep_debug: bool,
) -> Result<(Vec<u8>, bool), RamdiskError> {
    let data = read(agent)?;
    if keep_debug || !data.starts_with(b"\x7fELF") {
        return Ok((data, false));
    }
    fs::create_dir_all(work_dir).map_err(|source| RamdiskError::Write {
        path: work_dir.to_owned(),
        source,
    })?;
    let stripped = work_dir.join(".ferric-agent.stripped");
    let status = std::process::Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&stripped)
        .arg(agent)
        .status();
    let result = match status {
        Ok(status) if status.success() => read(&stripped).map(|data| (data, true)),
        // No binutils, or a file strip does not understand: pack it as it is.
        _ => Ok((data, false)),
    };
    let _ = fs::remove_file(&stripped);
    result
}
