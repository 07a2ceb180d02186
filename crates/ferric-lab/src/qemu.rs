//! A lab machine as a QEMU process: the real [`MachineControl`] behind every virtual BMC.
//!
//! Theory of operation (measured in `reference/lab-facts.md`): "powered off" means no QEMU
//! process; power-on starts QEMU with a `-boot` order computed from the stored boot settings;
//! hard off is QMP `quit`; soft off is `system_powerdown` and, if the guest ignores ACPI, `quit`
//! after a timeout; reset is `system_reset`. A one-time boot device uses `-boot once=X,order=Y`
//! (QEMU restores `order` on the next reset), so no `bootindex` properties are ever set: they
//! would override `-boot`. A boot change while running is applied by restarting the process on
//! the next restart request, because `-boot order` cannot be changed in a live QEMU.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::machine::{
    BootMode, BootOverride, BootSettings, BootTarget, MachineControl, MachineError, MachineInfo,
    PowerAction, PowerState,
};
use crate::qmp::Qmp;

/// Where Debian's `ovmf` package puts the UEFI firmware; only needed for UEFI boot mode.
pub const OVMF_PATH: &str = "/usr/share/ovmf/OVMF.fd";

/// Everything needed to start one machine's QEMU.
#[derive(Debug, Clone)]
pub struct QemuConfig {
    pub qemu_binary: PathBuf,
    pub tap: String,
    /// The machine's disks, first the one it boots from (two: software RAID can mirror them).
    pub disks: Vec<PathBuf>,
    /// Its NIC and disk controllers.
    pub hardware: crate::hardware::Hardware,
    pub console: PathBuf,
    pub qmp_socket: PathBuf,
    pub pid_file: PathBuf,
    pub log_file: PathBuf,
    /// The fw_cfg file holding `f8 03` (0x3f8, COM1) so SeaBIOS and iPXE print to the serial port.
    pub sercon_file: PathBuf,
    pub soft_off_timeout: Duration,
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
}

/// One QEMU machine; cheap to clone (background shutdown tasks hold a clone).
#[derive(Debug, Clone)]
pub struct QemuMachine {
    shared: Arc<Shared>,
}

/// The `-boot` argument for a power-on with these settings, and the settings to keep
/// afterwards (a one-time override is consumed by the boot it applies to).
pub(crate) fn boot_argument(boot: BootSettings) -> (String, BootSettings) {
    let drive = |target: BootTarget| match target {
        BootTarget::Pxe => "n",
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

impl QemuMachine {
    pub fn new(info: MachineInfo, config: QemuConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                info,
                config,
                boot: Mutex::new(BootSettings::default()),
                process: tokio::sync::Mutex::new(Process::default()),
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

    fn command(&self, boot_argument: &str, boot: BootSettings) -> Result<Command, MachineError> {
        let info = &self.shared.info;
        let config = &self.shared.config;
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
            // No /dev/kvm on lab hosts; TCG is slow but everything the lab needs works.
            .args([
                "-accel",
                "tcg",
                "-machine",
                "pc",
                "-nodefaults",
                "-no-user-config",
            ])
            .args(["-display", "none", "-vga", "none"])
            .arg("-m")
            .arg(info.memory_mib.to_string())
            .arg("-smp")
            .arg(info.cpus.to_string())
            .arg("-uuid")
            .arg(&info.uuid)
            .arg("-smbios")
            .arg(format!(
                "type=1,manufacturer=Ferric,product=Ferric Lab Machine,serial={},uuid={}",
                info.serial, info.uuid
            ))
            .arg("-chardev")
            // append=on: the console keeps every boot, like a BMC's serial log.
            .arg(format!(
                "file,id=console,path={},append=on",
                config.console.display()
            ))
            .args(["-serial", "chardev:console"])
            .arg("-fw_cfg")
            .arg(format!(
                "name=etc/sercon-port,file={}",
                config.sercon_file.display()
            ))
            .args(config.hardware.disk_arguments(&config.disks))
            .arg("-netdev")
            .arg(format!(
                "tap,id=net0,ifname={},script=no,downscript=no",
                config.tap
            ))
            // No `romfile=`: QEMU's default for virtio-net is iPXE's efi-virtio.rom from
            // `ipxe-qemu`, and naming that same file explicitly made SeaBIOS skip the ROM
            // (QEMU 7.2, SeaBIOS 1.16.2): no network boot entry at all.
            .arg("-device")
            .arg(format!(
                "{},netdev=net0,mac={}",
                config.hardware.nic_model(),
                info.mac
            ))
            .arg("-boot")
            .arg(boot_argument)
            .arg("-qmp")
            .arg(format!(
                "unix:{},server=on,wait=off",
                config.qmp_socket.display()
            ))
            // Detached from our stdio: a pipe held open by QEMU would keep callers waiting.
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_for_stderr));
        if boot.mode == BootMode::Uefi {
            command.arg("-bios").arg(OVMF_PATH);
        }
        Ok(command)
    }

    async fn start(&self, process: &mut Process) -> Result<(), MachineError> {
        let config = &self.shared.config;
        let boot = self.stored_boot();
        let (argument, after) = boot_argument(boot);
        let _ = std::fs::remove_file(&config.qmp_socket);
        let log_start = std::fs::metadata(&config.log_file).map_or(0, |meta| meta.len());
        let mut child = self
            .command(&argument, boot)?
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
        process.boot_dirty = false;
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

    async fn set_boot(&self, boot: BootSettings) -> Result<(), MachineError> {
        if boot.mode == BootMode::Uefi && !Path::new(OVMF_PATH).exists() {
            return Err(MachineError::Unsupported {
                machine: self.name(),
                message: format!(
                    "UEFI boot needs {OVMF_PATH} (Debian package ovmf); install it or use Legacy"
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
}
