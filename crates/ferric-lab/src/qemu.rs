//! A lab machine as a QEMU process: the real [`MachineControl`] behind every virtual BMC.
//!
//! Theory of operation (measured in `reference/lab-facts.md`): "powered off" means no QEMU
//! process; power-on starts QEMU with a `-boot` order computed from the stored boot settings;
//! hard off is QMP `quit`; soft off is `system_powerdown` and, if the guest ignores ACPI, `quit`
//! after a timeout; reset is `system_reset`. A one-time boot device uses `-boot once=X,order=Y`
//! (QEMU restores `order` on the next reset), so no `bootindex` properties are ever set: they
//! would override `-boot`. A boot change while running is applied by restarting the process on
//! the next restart request, because `-boot order` cannot be changed in a live QEMU.
//!
//! Boot mode UEFI runs OVMF from pflash (Debian's `ovmf`: the shared code image read-only,
//! the machine's own NVRAM variables file, copied from the template on first use) instead of
//! SeaBIOS. OVMF ignores `-boot`, so the order is `bootindex` properties, which QEMU hands it
//! as the fw_cfg `bootorder` file; the NIC then carries no option ROM (`romfile=`), so the
//! firmware's own PXE and HTTP boot clients do network boot, as on a real UEFI server. A
//! one-time override under UEFI marks the process for a restart at the next BMC restart, the
//! way back to the persistent order. UEFI HTTP boot turns the firmware's PXE off (fw_cfg
//! `opt/org.tianocore/IPv4PXESupport`), so the NIC's boot options are its HTTP ones.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::machine::{
    BootMode, BootOverride, BootSettings, BootTarget, Firmware, MachineControl, MachineError,
    MachineInfo, PowerAction, PowerState, VolumeDisk,
};
use crate::qmp::Qmp;
use crate::typist;

mod tuning;
pub use tuning::{accelerator, vcpus};

/// OVMF's code from Debian's `ovmf` package (4 MiB flash layout, no secure boot, no SMM), run
/// read-only from pflash; only needed for UEFI boot mode.
pub const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
/// The empty NVRAM variables store that matches [`OVMF_CODE`]; each machine gets a copy.
pub const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";
/// OVMF's secure-boot build (needs SMM, so a q35 machine) for `--firmware secure-boot`.
pub const OVMF_CODE_SECURE_BOOT: &str = "/usr/share/OVMF/OVMF_CODE_4M.ms.fd";
/// Its variables store with Microsoft's keys enrolled and secure boot on.
pub const OVMF_VARS_SECURE_BOOT: &str = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd";

/// The OVMF code and variables files a machine with `firmware` boots UEFI with.
pub fn ovmf(firmware: Firmware) -> [&'static str; 2] {
    match firmware {
        Firmware::SecureBoot => [OVMF_CODE_SECURE_BOOT, OVMF_VARS_SECURE_BOOT],
        Firmware::Uefi | Firmware::Bios => [OVMF_CODE, OVMF_VARS],
    }
}

/// The longest Unix socket path QEMU can listen on (`sun_path` holds 108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 108;

/// Everything needed to start one machine's QEMU.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub qemu_binary: PathBuf,
    pub tap: String,
    /// The machine's disks, first the one it boots from (two: software RAID can mirror them).
    pub disks: Vec<PathBuf>,
    /// Its NIC and disk controllers.
    pub hardware: crate::hardware::Hardware,
    /// Where the backing files of the RAID volumes its BMC builds go (`volume<N>.img`).
    pub volume_dir: PathBuf,
    pub console: PathBuf,
    pub qmp_socket: PathBuf,
    pub pid_file: PathBuf,
    pub log_file: PathBuf,
    /// The fw_cfg file holding `f8 03` (0x3f8, COM1) so SeaBIOS and iPXE print to the serial port.
    pub sercon_file: PathBuf,
    pub soft_off_timeout: Duration,
    /// UEFI (OVMF, legacy boot possible) or BIOS only.
    pub firmware: Firmware,
    /// The machine's UEFI variables (boot entries survive power cycles, as in a server's
    /// NVRAM); created from [`OVMF_VARS`] at the first UEFI power-on.
    pub nvram: PathBuf,
}

#[derive(Debug, Default)]
struct Process {
    child: Option<Child>,
    /// Boot settings changed while running: the next restart must restart the process.
    boot_dirty: bool,
    /// Set while a graceful shutdown is pending; the number identifies which request it was.
    soft_off: Option<u64>,
    next_request: u64,
}

#[derive(Debug)]
struct Shared {
    info: MachineInfo,
    config: QemuConfig,
    boot: Mutex<BootSettings>,
    process: tokio::sync::Mutex<Process>,
    /// The URL of the ISO in the CD drive; its copy is [`QemuMachine::media_file`].
    media: Mutex<Option<String>>,
    /// The RAID controller's volumes, presented from the next power-on.
    volumes: Mutex<Vec<VolumeDisk>>,
    /// What was typed over SOL, on its way to the serial port's socket ([`typist`]); started
    /// with the first keystroke.
    typist: Mutex<Option<std::sync::mpsc::Sender<Vec<u8>>>>,
}

/// The qdev id of the machine's CD drive (an IDE CD-ROM, empty until virtual media is
/// inserted through the BMC).
const CD_DEVICE: &str = "cd0";

/// One QEMU machine; cheap to clone (background shutdown tasks hold a clone).
#[derive(Debug, Clone)]
pub struct QemuMachine {
    shared: Arc<Shared>,
}

/// The `-boot` argument for a power-on with these settings, and the settings to keep
/// afterwards (a one-time override is consumed by the boot it applies to).
pub(crate) fn boot_argument(boot: BootSettings) -> (String, BootSettings) {
    let drive = |target: BootTarget| match target {
        // SeaBIOS has no HTTP boot: the NIC's PXE ROM is its network boot.
        BootTarget::Pxe | BootTarget::UefiHttp => "n",
        BootTarget::Cd => "d",
        // No override, disk and setup all start from the disk, as a server's default order does.
        BootTarget::None | BootTarget::Hdd | BootTarget::BiosSetup => "c",
    };
    // The persistent order always ends with the other device, so an empty disk falls through to
    // the network as on real hardware.
    let order = |target: BootTarget| match drive(target) {
        "n" => "nc",
        "d" => "dcn",
        _ => "cn",
    };
    // SeaBIOS has no setup screen; its boot menu is the closest thing.
    let menu = if boot.enabled != BootOverride::Disabled && boot.target == BootTarget::BiosSetup {
        ",menu=on,splash-time=5000"
    } else {
        ""
    };
    match boot.enabled {
        BootOverride::Disabled => (format!("order=cn{menu}"), boot),
        BootOverride::Continuous => (format!("order={}{menu}", order(boot.target)), boot),
        BootOverride::Once => {
            let after = BootSettings {
                enabled: BootOverride::Disabled,
                ..boot
            };
            (format!("once={},order=cn{menu}", drive(boot.target)), after)
        }
    }
}

/// A boot device as OVMF sees it through `bootindex`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UefiDevice {
    Disk,
    Network,
    Cd,
}

/// A UEFI power-on's boot order: the device that goes first (the others follow: disk, then
/// network), and whether the NIC boots by HTTP only (its PXE client turned off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UefiOrder {
    pub(crate) first: UefiDevice,
    pub(crate) http_only: bool,
}

impl UefiOrder {
    /// The `bootindex` of `device` (1 boots first).
    pub(crate) fn bootindex(self, device: UefiDevice) -> usize {
        let mut order = vec![self.first];
        for next in [UefiDevice::Disk, UefiDevice::Network, UefiDevice::Cd] {
            if !order.contains(&next) {
                order.push(next);
            }
        }
        order
            .iter()
            .position(|candidate| *candidate == device)
            .map_or(order.len() + 1, |index| index + 1)
    }
}

/// [`boot_argument`] for UEFI: the order of a power-on with these settings, and the settings
/// to keep afterwards (a one-time override is consumed by the boot it applies to).
pub(crate) fn uefi_order(boot: BootSettings) -> (UefiOrder, BootSettings) {
    let order = |target: BootTarget| UefiOrder {
        first: match target {
            BootTarget::Pxe | BootTarget::UefiHttp => UefiDevice::Network,
            BootTarget::Cd => UefiDevice::Cd,
            BootTarget::None | BootTarget::Hdd | BootTarget::BiosSetup => UefiDevice::Disk,
        },
        http_only: target == BootTarget::UefiHttp,
    };
    match boot.enabled {
        BootOverride::Disabled => (order(BootTarget::None), boot),
        BootOverride::Continuous => (order(boot.target), boot),
        BootOverride::Once => (
            order(boot.target),
            BootSettings {
                enabled: BootOverride::Disabled,
                ..boot
            },
        ),
    }
}

impl QemuMachine {
    pub fn new(info: MachineInfo, config: QemuConfig) -> Self {
        // A machine starts in its firmware's default mode, as a server leaves the factory.
        let boot = BootSettings {
            mode: config.firmware.boot_modes()[0],
            ..BootSettings::default()
        };
        Self {
            shared: Arc::new(Shared {
                info,
                config,
                boot: Mutex::new(boot),
                process: tokio::sync::Mutex::new(Process::default()),
                media: Mutex::new(None),
                volumes: Mutex::new(Vec::new()),
                typist: Mutex::new(None),
            }),
        }
    }

    fn name(&self) -> String {
        self.shared.info.name.clone()
    }

    fn stored_boot(&self) -> BootSettings {
        *self
            .shared
            .boot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn store_boot(&self, boot: BootSettings) {
        *self
            .shared
            .boot
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = boot;
    }

    fn qmp(&self) -> Qmp {
        Qmp::new(&self.shared.config.qmp_socket)
    }

    fn qmp_error(
        &self,
        operation: &'static str,
    ) -> impl FnOnce(crate::qmp::QmpError) -> MachineError {
        let machine = self.name();
        move |source| MachineError::Qmp {
            machine,
            operation,
            source: Box::new(source),
        }
    }

    fn process_error(
        &self,
        operation: &'static str,
    ) -> impl FnOnce(std::io::Error) -> MachineError {
        let machine = self.name();
        move |source| MachineError::Process {
            machine,
            operation,
            source,
        }
    }

    /// Whether QEMU runs; reaps it (and forgets pending work) when it has exited.
    fn is_alive(&self, process: &mut Process) -> bool {
        let Some(child) = process.child.as_mut() else {
            return false;
        };
        match child.try_wait() {
            Ok(None) => true,
            Ok(Some(_)) | Err(_) => {
                process.child = None;
                process.soft_off = None;
                process.boot_dirty = false;
                let _ = std::fs::remove_file(&self.shared.config.pid_file);
                false
            }
        }
    }

    fn command(&self, boot: BootSettings) -> Result<Command, MachineError> {
        let info = &self.shared.info;
        let config = &self.shared.config;
        let uefi = (boot.mode == BootMode::Uefi).then(|| uefi_order(boot).0);
        let volumes: Vec<(PathBuf, VolumeDisk)> = self
            .stored_volumes()
            .into_iter()
            .map(|volume| (self.volume_file(&volume), volume))
            .collect();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.log_file)
            .map_err(self.process_error("open the QEMU log"))?;
        let log_for_stderr = log
            .try_clone()
            .map_err(self.process_error("open the QEMU log"))?;
        let mut command = Command::new(&config.qemu_binary);
        command
            .arg("-name")
            .arg(format!("guest={},process=qemu-{}", info.name, info.name))
            // No /dev/kvm on most lab hosts; TCG is slow but everything the lab needs works.
            .args(accelerator(
                std::env::var("FERRIC_LAB_ACCEL").ok().as_deref(),
            ))
            .arg("-machine")
            // Secure boot's OVMF needs SMM, which QEMU emulates on q35 only; its flash is then
            // writable by SMM code only.
            .args(match config.firmware {
                Firmware::SecureBoot => &[
                    "q35,smm=on",
                    "-global",
                    "driver=cfi.pflash01,property=secure,value=on",
                ][..],
                Firmware::Uefi | Firmware::Bios => &["pc"][..],
            })
            .args(["-nodefaults", "-no-user-config"])
            .args(["-display", "none", "-vga", "none"])
            .arg("-m")
            .arg(info.memory_mib.to_string())
            .arg("-smp")
            .arg(vcpus(info.cpus, std::env::var("FERRIC_LAB_CPUS").ok().as_deref()).to_string())
            .arg("-uuid")
            .arg(&info.uuid)
            .arg("-smbios")
            .arg(format!(
                "type=1,manufacturer=Ferric,product=Ferric Lab Machine,serial={},uuid={}",
                info.serial, info.uuid
            ))
            .arg("-chardev")
            .arg(self.console_chardev())
            .args(["-serial", "chardev:console"])
            .arg("-fw_cfg")
            .arg(format!(
                "name=etc/sercon-port,file={}",
                config.sercon_file.display()
            ))
            .args(
                config.hardware.disk_arguments(
                    &config.disks,
                    // Under UEFI only the first disk is a boot device, as the boot order names it;
                    // a RAID volume takes its place, as a server boots its controller's disk.
                    &uefi
                        .filter(|_| volumes.is_empty())
                        .map_or(String::new(), |order| {
                            format!(",bootindex={}", order.bootindex(UefiDevice::Disk))
                        }),
                ),
            )
            .args(crate::hardware::volume_arguments(
                &volumes,
                &uefi.map_or(String::new(), |order| {
                    format!(",bootindex={}", order.bootindex(UefiDevice::Disk))
                }),
            ))
            .args(self.cd_drive_args(uefi))
            .arg("-netdev")
            .arg(format!(
                "tap,id=net0,ifname={},script=no,downscript=no",
                config.tap
            ))
            .arg("-device")
            .arg(format!(
                "{},netdev=net0,mac={}{}{}",
                config.hardware.nic_model(),
                info.mac,
                config.hardware.nic_rom(uefi.is_some()),
                uefi.map_or(String::new(), |order| format!(
                    ",bootindex={}",
                    order.bootindex(UefiDevice::Network)
                )),
            ))
            .arg("-qmp")
            .arg(format!(
                "unix:{},server=on,wait=off",
                config.qmp_socket.display()
            ))
            // Detached from our stdio: a pipe held open by QEMU would keep callers waiting.
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_for_stderr));
        match uefi {
            None => {
                command.arg("-boot").arg(boot_argument(boot).0);
            }
            Some(order) => {
                command
                    .arg("-drive")
                    .arg(format!(
                        "if=pflash,format=raw,unit=0,readonly=on,file={}",
                        ovmf(config.firmware)[0]
                    ))
                    .arg("-drive")
                    .arg(format!(
                        "if=pflash,format=raw,unit=1,file={}",
                        config.nvram.display()
                    ))
                    // No IPv6 PXE: the lab's segment has router advertisements but no DHCPv6,
                    // and a firmware trying it only waits.
                    .args(["-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=no"]);
                if order.http_only {
                    command.args(["-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=no"]);
                }
            }
        }
        Ok(command)
    }

    async fn start(&self, process: &mut Process) -> Result<(), MachineError> {
        let config = &self.shared.config;
        let boot = self.stored_boot();
        let (argument, after) = match boot.mode {
            BootMode::Legacy => boot_argument(boot),
            BootMode::Uefi => {
                if !config.nvram.exists() {
                    std::fs::copy(ovmf(config.firmware)[1], &config.nvram)
                        .map_err(self.process_error("create the UEFI variables file"))?;
                }
                let (order, after) = uefi_order(boot);
                (format!("UEFI {order:?}"), after)
            }
        };
        let _ = std::fs::remove_file(&config.qmp_socket);
        let log_start = std::fs::metadata(&config.log_file).map_or(0, |meta| meta.len());
        let mut child = self
            .command(boot)?
            .spawn()
            .map_err(self.process_error("start QEMU"))?;
        tracing::info!(machine = %self.shared.info.name, boot = %argument, "powered on");
        if let Some(pid) = child.id() {
            std::fs::write(&config.pid_file, format!("{pid}\n"))
                .map_err(self.process_error("write the QEMU pid file"))?;
        }
        // Ready when QMP answers; a bad tap or ROM makes QEMU exit within this window.
        for _ in 0..100 {
            if let Ok(Some(_status)) = child.try_wait() {
                let _ = std::fs::remove_file(&config.pid_file);
                return Err(MachineError::StartFailed {
                    machine: self.name(),
                    log: config.log_file.display().to_string(),
                    tail: read_tail(&config.log_file, log_start),
                });
            }
            if self.qmp().query_status().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.store_boot(after);
        process.child = Some(child);
        // OVMF's order lives in the running process (bootindex): after a one-time override a
        // BMC restart must start a new process to return to the persistent order. SeaBIOS's
        // `-boot once` restores the order by itself.
        process.boot_dirty = boot.mode == BootMode::Uefi && after != boot;
        process.soft_off = None;
        Ok(())
    }

    async fn stop(&self, process: &mut Process) -> Result<(), MachineError> {
        if !self.is_alive(process) {
            return Ok(());
        }
        // `quit` takes ~0.2 s; a QEMU that does not answer is killed.
        if let Err(error) = self.qmp().execute("quit", None).await {
            tracing::warn!(machine = %self.shared.info.name, %error, "QMP quit failed; killing QEMU");
        }
        if let Some(child) = process.child.as_mut() {
            let exited = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            if !matches!(exited, Ok(Ok(_))) {
                child
                    .kill()
                    .await
                    .map_err(self.process_error("kill QEMU"))?;
            }
        }
        process.child = None;
        process.soft_off = None;
        process.boot_dirty = false;
        let _ = std::fs::remove_file(&self.shared.config.pid_file);
        let _ = std::fs::remove_file(&self.shared.config.qmp_socket);
        tracing::info!(machine = %self.shared.info.name, "powered off");
        Ok(())
    }

    /// Asks the guest to shut down; a background task pulls the plug after the timeout and,
    /// for a restart, powers the machine on again.
    async fn graceful(&self, process: &mut Process, restart: bool) -> Result<(), MachineError> {
        if !self.is_alive(process) {
            return if restart {
                self.start(process).await
            } else {
                Ok(())
            };
        }
        self.qmp()
            .execute("system_powerdown", None)
            .await
            .map_err(self.qmp_error("request an ACPI shutdown"))?;
        process.next_request += 1;
        let request = process.next_request;
        process.soft_off = Some(request);
        let machine = self.clone();
        tokio::spawn(async move { machine.finish_graceful(request, restart).await });
        Ok(())
    }

    async fn finish_graceful(&self, request: u64, restart: bool) {
        let deadline = tokio::time::Instant::now() + self.shared.config.soft_off_timeout;
        loop {
            {
                let mut process = self.shared.process.lock().await;
                if process.soft_off != Some(request) {
                    return; // superseded by another power request
                }
                let alive = self.is_alive(&mut process);
                let timed_out = tokio::time::Instant::now() >= deadline;
                if !alive || timed_out {
                    let mut result = self.stop(&mut process).await;
                    if result.is_ok() && restart {
                        result = self.start(&mut process).await;
                    }
                    if let Err(error) = result {
                        tracing::warn!(machine = %self.shared.info.name, error = %error, "graceful power change failed");
                    }
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The serial port's back-end. A listening Unix socket, so that what is typed over SOL
    /// reaches the machine ([`MachineControl::serial_write`] connects and writes), whose log
    /// file is the console log: QEMU writes everything the machine prints there whether or not
    /// anyone is connected (append: the console keeps every boot, like a BMC's serial log).
    /// A socket path too long for `sun_path` falls back to the plain log file (no input).
    fn console_chardev(&self) -> String {
        let log = self.shared.config.console.display();
        let socket = self.console_socket();
        if socket.as_os_str().len() < MAX_SOCKET_PATH {
            format!(
                "socket,id=console,path={},server=on,wait=off,logfile={log},logappend=on",
                socket.display()
            )
        } else {
            format!("file,id=console,path={log},append=on")
        }
    }

    /// The serial port's socket: beside the machine's console log.
    fn console_socket(&self) -> PathBuf {
        self.shared.config.console.with_file_name("console.sock")
    }

    /// Where the BMC keeps its copy of the inserted ISO: beside the machine's console log.
    fn media_file(&self) -> PathBuf {
        self.shared.config.console.with_file_name("vmedia.iso")
    }

    fn stored_media(&self) -> Option<String> {
        self.shared
            .media
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn store_media(&self, url: Option<String>) {
        *self
            .shared
            .media
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = url;
    }

    /// The CD drive: an IDE CD-ROM on the second channel, holding the inserted ISO if any
    /// (under UEFI with its place in the boot order).
    fn cd_drive_args(&self, uefi: Option<UefiOrder>) -> [String; 4] {
        let medium = if self.stored_media().is_some() {
            format!(",file={},format=raw", self.media_file().display())
        } else {
            String::new()
        };
        [
            "-drive".to_owned(),
            format!("if=none,id=cdrom,media=cdrom,readonly=on{medium}"),
            "-device".to_owned(),
            format!(
                "ide-cd,drive=cdrom,id={CD_DEVICE},bus=ide.1,unit=0{}",
                uefi.map_or(String::new(), |order| format!(
                    ",bootindex={}",
                    order.bootindex(UefiDevice::Cd)
                ))
            ),
        ]
    }

    /// Downloads `url` to the media file, as a BMC streams an image from a web server.
    async fn download(&self, url: &str) -> Result<(), MachineError> {
        let failed = |message: String| MachineError::Unsupported {
            machine: self.name(),
            message,
        };
        let response = reqwest::get(url)
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|error| {
                failed(format!(
                    "cannot fetch the virtual media image {url}: {error}"
                ))
            })?;
        let bytes = response.bytes().await.map_err(|error| {
            failed(format!(
                "cannot fetch the virtual media image {url}: {error}"
            ))
        })?;
        let target = self.media_file();
        let partial = target.with_extension("iso.partial");
        tokio::fs::write(&partial, &bytes)
            .await
            .map_err(self.process_error("store the virtual media image"))?;
        tokio::fs::rename(&partial, &target)
            .await
            .map_err(self.process_error("store the virtual media image"))
    }

    /// Stops QEMU for `lab down` / BMC shutdown.
    pub async fn shutdown(&self) -> Result<(), MachineError> {
        let mut process = self.shared.process.lock().await;
        self.stop(&mut process).await
    }
}

/// The log's text written since `from`, shortened to its last lines, for error messages.
fn read_tail(path: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let _ = file.seek(SeekFrom::Start(from));
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

impl MachineControl for QemuMachine {
    fn info(&self) -> &MachineInfo {
        &self.shared.info
    }

    // The serial port's output is the console log file (every boot appended), so Serial-over-
    // LAN reads what the machine writes from there; what is typed goes in through the serial
    // port's socket (`console_chardev`).
    fn serial_len(&self) -> u64 {
        std::fs::metadata(&self.shared.config.console).map_or(0, |meta| meta.len())
    }

    fn serial_read(&self, offset: u64, max: usize) -> Vec<u8> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(&self.shared.config.console) else {
            return Vec::new();
        };
        if file.seek(SeekFrom::Start(offset)).is_err() {
            return Vec::new();
        }
        let mut bytes = Vec::with_capacity(max);
        match file.take(max as u64).read_to_end(&mut bytes) {
            Ok(_) => bytes,
            Err(_) => Vec::new(),
        }
    }

    fn serial_write(&self, bytes: &[u8]) {
        // Handed to the machine's typist thread, in order: the BMC's loop never waits on QEMU.
        let mut slot = self
            .shared
            .typist
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let sender = slot.get_or_insert_with(|| typist::start(&self.name(), self.console_socket()));
        if sender.send(bytes.to_vec()).is_err() {
            tracing::debug!(machine = %self.name(), "characters typed over SOL dropped: no typist");
        }
    }

    async fn power_state(&self) -> Result<PowerState, MachineError> {
        let mut process = self.shared.process.lock().await;
        if !self.is_alive(&mut process) {
            return Ok(PowerState::Off);
        }
        if process.soft_off.is_some() {
            return Ok(PowerState::PoweringOff);
        }
        // Alive is On; query-status tells a machine that stopped itself (paused after an
        // error, or shut down with -no-shutdown) from one that runs.
        match self.qmp().query_status().await {
            Ok(status) if status == "shutdown" => Ok(PowerState::Off),
            Ok(_) => Ok(PowerState::On),
            Err(error) => Err(MachineError::Qmp {
                machine: self.name(),
                operation: "read the power state",
                source: Box::new(error),
            }),
        }
    }

    async fn power(&self, action: PowerAction) -> Result<(), MachineError> {
        let mut process = self.shared.process.lock().await;
        let alive = self.is_alive(&mut process);
        match action {
            PowerAction::On if alive => Ok(()),
            PowerAction::On => self.start(&mut process).await,
            PowerAction::ForceOff => self.stop(&mut process).await,
            PowerAction::GracefulShutdown => self.graceful(&mut process, false).await,
            PowerAction::GracefulRestart => self.graceful(&mut process, true).await,
            PowerAction::ForceRestart if alive && !process.boot_dirty => {
                process.soft_off = None;
                self.qmp()
                    .execute("system_reset", None)
                    .await
                    .map_err(self.qmp_error("reset"))?;
                Ok(())
            }
            // A restart after a boot change, or a power cycle: a new process with the new order.
            PowerAction::ForceRestart | PowerAction::PowerCycle => {
                self.stop(&mut process).await?;
                self.start(&mut process).await
            }
            PowerAction::Nmi if alive => {
                self.qmp()
                    .execute("inject-nmi", None)
                    .await
                    .map_err(self.qmp_error("inject an NMI"))?;
                Ok(())
            }
            PowerAction::Nmi => Err(MachineError::Unsupported {
                machine: self.name(),
                message: "cannot inject an NMI into a machine that is off".into(),
            }),
        }
    }

    fn boot(&self) -> BootSettings {
        self.stored_boot()
    }

    fn boot_modes(&self) -> &'static [BootMode] {
        self.shared.config.firmware.boot_modes()
    }

    async fn set_boot(&self, boot: BootSettings) -> Result<(), MachineError> {
        if !self.boot_modes().contains(&boot.mode) {
            return Err(MachineError::Unsupported {
                machine: self.name(),
                message: format!(
                    "its firmware is {:?}, which boots {:?} only; ask for that boot mode",
                    self.shared.config.firmware,
                    self.boot_modes()
                ),
            });
        }
        if boot.mode == BootMode::Uefi
            && let Some(missing) = ovmf(self.shared.config.firmware)
                .into_iter()
                .find(|path| !Path::new(path).exists())
        {
            return Err(MachineError::Unsupported {
                machine: self.name(),
                message: format!(
                    "UEFI boot needs {missing} (Debian package ovmf); install it or use Legacy"
                ),
            });
        }
        let mut process = self.shared.process.lock().await;
        if self.is_alive(&mut process) && boot != self.stored_boot() {
            process.boot_dirty = true;
        }
        self.store_boot(boot);
        Ok(())
    }

    fn media(&self) -> Option<String> {
        self.stored_media()
    }

    async fn insert_media(&self, url: &str) -> Result<(), MachineError> {
        let mut process = self.shared.process.lock().await;
        if self.is_alive(&mut process) && self.stored_media().is_some() {
            self.change_medium(None).await?;
        }
        self.download(url).await?;
        if self.is_alive(&mut process) {
            self.change_medium(Some(&self.media_file())).await?;
        }
        self.store_media(Some(url.to_owned()));
        tracing::info!(machine = %self.shared.info.name, url, "virtual media inserted");
        Ok(())
    }

    async fn eject_media(&self) -> Result<(), MachineError> {
        let mut process = self.shared.process.lock().await;
        if self.is_alive(&mut process) {
            self.change_medium(None).await?;
        }
        self.store_media(None);
        let _ = std::fs::remove_file(self.media_file());
        tracing::info!(machine = %self.shared.info.name, "virtual media ejected");
        Ok(())
    }

    async fn set_volumes(&self, volumes: Vec<VolumeDisk>) -> Result<(), MachineError> {
        let mut process = self.shared.process.lock().await;
        // A new volume is a blank (sparse) disk of its size; a deleted one's data is gone.
        for volume in &volumes {
            let file = self.volume_file(volume);
            if !file.exists() {
                File::create(&file)
                    .and_then(|created| created.set_len(volume.bytes))
                    .map_err(self.process_error("create a RAID volume's backing file"))?;
            }
        }
        for old in self.stored_volumes() {
            if !volumes.iter().any(|volume| volume.id == old.id) {
                let _ = std::fs::remove_file(self.volume_file(&old));
            }
        }
        tracing::info!(machine = %self.shared.info.name, volumes = volumes.len(), "RAID volumes changed; presented from the next power-on");
        *self
            .shared
            .volumes
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = volumes;
        // The disks are QEMU's command line: the next restart starts a new process.
        if self.is_alive(&mut process) {
            process.boot_dirty = true;
        }
        Ok(())
    }
}

impl QemuMachine {
    fn stored_volumes(&self) -> Vec<VolumeDisk> {
        self.shared
            .volumes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn volume_file(&self, volume: &VolumeDisk) -> PathBuf {
        self.shared
            .config
            .volume_dir
            .join(format!("volume{}.img", volume.id))
    }

    /// Changes the running machine's CD (QMP `blockdev-change-medium`, or `eject`).
    async fn change_medium(&self, file: Option<&Path>) -> Result<(), MachineError> {
        match file {
            Some(file) => self
                .qmp()
                .execute(
                    "blockdev-change-medium",
                    Some(serde_json::json!({
                        "id": CD_DEVICE,
                        "filename": file.display().to_string(),
                        "format": "raw",
                        "read-only-mode": "read-only",
                    })),
                )
                .await
                .map(drop)
                .map_err(self.qmp_error("insert the virtual CD")),
            None => self
                .qmp()
                .execute(
                    "eject",
                    Some(serde_json::json!({"id": CD_DEVICE, "force": true})),
                )
                .await
                .map(drop)
                .map_err(self.qmp_error("eject the virtual CD")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(target: BootTarget, enabled: BootOverride) -> BootSettings {
        BootSettings {
            target,
            enabled,
            mode: BootMode::Legacy,
        }
    }

    #[test]
    fn once_boots_the_target_then_falls_back() {
        let (argument, after) = boot_argument(settings(BootTarget::Pxe, BootOverride::Once));
        assert_eq!(argument, "once=n,order=cn");
        assert_eq!(after.enabled, BootOverride::Disabled);
        assert_eq!(after.target, BootTarget::Pxe);
    }

    #[test]
    fn continuous_sets_the_order() {
        let cases = [
            (BootTarget::Pxe, "order=nc"),
            (BootTarget::Hdd, "order=cn"),
            (BootTarget::Cd, "order=dcn"),
            (BootTarget::BiosSetup, "order=cn,menu=on,splash-time=5000"),
        ];
        for (target, expected) in cases {
            let (argument, after) = boot_argument(settings(target, BootOverride::Continuous));
            assert_eq!(argument, expected, "{target:?}");
            assert_eq!(after, settings(target, BootOverride::Continuous));
        }
        let (argument, _) = boot_argument(settings(BootTarget::Pxe, BootOverride::Disabled));
        assert_eq!(argument, "order=cn");
    }

    fn uefi(target: BootTarget, enabled: BootOverride) -> BootSettings {
        BootSettings {
            target,
            enabled,
            mode: BootMode::Uefi,
        }
    }

    #[test]
    fn uefi_orders_are_bootindexes() {
        // No override: the disk first, the network after it (an empty disk falls through).
        let (order, _) = uefi_order(uefi(BootTarget::Pxe, BootOverride::Disabled));
        assert_eq!(order.bootindex(UefiDevice::Disk), 1);
        assert_eq!(order.bootindex(UefiDevice::Network), 2);
        assert!(!order.http_only);
        // Once: the network this time, then back to no override.
        let (order, after) = uefi_order(uefi(BootTarget::Pxe, BootOverride::Once));
        assert_eq!(order.bootindex(UefiDevice::Network), 1);
        assert_eq!(order.bootindex(UefiDevice::Disk), 2);
        assert_eq!(after, uefi(BootTarget::Pxe, BootOverride::Disabled));
        // HTTP boot is the network without PXE.
        let (order, after) = uefi_order(uefi(BootTarget::UefiHttp, BootOverride::Continuous));
        assert_eq!(order.bootindex(UefiDevice::Network), 1);
        assert!(order.http_only);
        assert_eq!(after, uefi(BootTarget::UefiHttp, BootOverride::Continuous));
        let (order, _) = uefi_order(uefi(BootTarget::Cd, BootOverride::Once));
        assert_eq!(
            [UefiDevice::Cd, UefiDevice::Disk, UefiDevice::Network].map(|d| order.bootindex(d)),
            [1, 2, 3]
        );
    }
}
