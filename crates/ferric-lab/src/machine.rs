//! The machine-control core every BMC front-end shares: power and boot operations in the
//! vocabulary of a BMC, not of one protocol.
//!
//! Redfish (`redfish.rs`) maps its resources onto [`MachineControl`]; the IPMI front-end will map
//! chassis control and "set system boot options" onto the same calls, so the two protocols can
//! never disagree about a machine. The QEMU implementation lives in `qemu.rs`, and a fake for
//! tests in [`fake`].

use std::future::Future;

use serde::{Deserialize, Serialize};

/// What a BMC knows about its machine without asking it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub name: String,
    pub uuid: String,
    pub serial: String,
    pub mac: String,
    pub memory_mib: u32,
    pub cpus: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    On,
    Off,
    /// A graceful shutdown was requested and the machine has not stopped yet.
    PoweringOff,
}

/// Power operations, named after Redfish's ResetType because it is the richest vocabulary;
/// IPMI chassis control maps onto a subset (up → On, down → ForceOff, soft → GracefulShutdown,
/// hard reset → ForceRestart, cycle → PowerCycle, diag → Nmi).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerAction {
    On,
    ForceOff,
    GracefulShutdown,
    GracefulRestart,
    ForceRestart,
    PowerCycle,
    Nmi,
}

impl PowerAction {
    pub const ALL: [PowerAction; 7] = [
        PowerAction::On,
        PowerAction::ForceOff,
        PowerAction::GracefulShutdown,
        PowerAction::GracefulRestart,
        PowerAction::ForceRestart,
        PowerAction::PowerCycle,
        PowerAction::Nmi,
    ];

    pub fn redfish_name(self) -> &'static str {
        match self {
            PowerAction::On => "On",
            PowerAction::ForceOff => "ForceOff",
            PowerAction::GracefulShutdown => "GracefulShutdown",
            PowerAction::GracefulRestart => "GracefulRestart",
            PowerAction::ForceRestart => "ForceRestart",
            PowerAction::PowerCycle => "PowerCycle",
            PowerAction::Nmi => "Nmi",
        }
    }

    pub fn from_redfish_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|action| action.redfish_name() == name)
    }
}

/// The boot device for the next boot(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootTarget {
    None,
    Pxe,
    Hdd,
    Cd,
    BiosSetup,
    /// UEFI HTTP boot (Redfish `UefiHttp`): the firmware's HTTP client, not its PXE client.
    UefiHttp,
}

/// Whether the boot target applies to the next boot only, to every boot, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootOverride {
    Disabled,
    Once,
    Continuous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BootMode {
    Legacy,
    #[serde(rename = "UEFI")]
    Uefi,
}

/// The firmware a machine has, as `lab up --firmware` chose it: `Uefi` machines run OVMF
/// and can also boot legacy (SeaBIOS, as a server's compatibility module does); `Bios`
/// machines are legacy-only, as old servers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Firmware {
    #[default]
    Uefi,
    Bios,
    /// UEFI with secure boot on: OVMF's secure-boot build with Microsoft's keys enrolled
    /// (Debian's `OVMF_CODE_4M.ms.fd` / `OVMF_VARS_4M.ms.fd`) on a q35 machine with SMM. It
    /// starts only signed boot loaders, and boots UEFI only, as a secure-boot server with its
    /// compatibility module off.
    #[serde(rename = "secure-boot")]
    #[value(name = "secure-boot")]
    SecureBoot,
}

impl Firmware {
    /// The boot modes the machine can boot in, its default first.
    pub fn boot_modes(self) -> &'static [BootMode] {
        match self {
            Firmware::Uefi => &[BootMode::Uefi, BootMode::Legacy],
            Firmware::Bios => &[BootMode::Legacy],
            Firmware::SecureBoot => &[BootMode::Uefi],
        }
    }

    /// What a lab state file written before `--firmware` existed had: BIOS machines.
    pub fn legacy() -> Self {
        Firmware::Bios
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootSettings {
    pub target: BootTarget,
    pub enabled: BootOverride,
    pub mode: BootMode,
}

impl Default for BootSettings {
    fn default() -> Self {
        Self {
            target: BootTarget::None,
            enabled: BootOverride::Disabled,
            mode: BootMode::Legacy,
        }
    }
}

/// A logical disk the machine's RAID controller presents: a volume its BMC built out of band
/// (`redfish/raid.rs`). The guest sees one SCSI disk of `bytes` with this serial and WWN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeDisk {
    /// Unique on the machine; names the volume's backing file.
    pub id: u32,
    pub bytes: u64,
    pub serial: String,
    /// The NAA identifier (VPD page 0x83) the guest reads as `wwid` `naa.<16 hex digits>`.
    pub wwn: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("machine {machine}: {message}")]
    Unsupported { machine: String, message: String },
    #[error("machine {machine}: cannot {operation}")]
    Qmp {
        machine: String,
        operation: &'static str,
        #[source]
        source: Box<crate::qmp::QmpError>,
    },
    #[error("machine {machine}: cannot {operation}")]
    Process {
        machine: String,
        operation: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("machine {machine}: QEMU exited while starting; its log {log} says: {tail}")]
    StartFailed {
        machine: String,
        log: String,
        tail: String,
    },
}

/// Power and boot control of one machine, shared by every BMC protocol front-end.
///
/// Futures are `Send` so axum (and later an IPMI UDP loop) can run them on any worker.
pub trait MachineControl: Send + Sync + 'static {
    fn info(&self) -> &MachineInfo;
    fn power_state(&self) -> impl Future<Output = Result<PowerState, MachineError>> + Send;
    fn power(&self, action: PowerAction) -> impl Future<Output = Result<(), MachineError>> + Send;
    fn boot(&self) -> BootSettings;
    /// The boot modes the machine supports (a BMC's allowable `BootSourceOverrideMode`s).
    fn boot_modes(&self) -> &'static [BootMode] {
        Firmware::Uefi.boot_modes()
    }
    /// Stores boot settings; they take effect at the next power-on or restart.
    fn set_boot(&self, boot: BootSettings)
    -> impl Future<Output = Result<(), MachineError>> + Send;
    /// The URL of the image the machine's virtual CD drive presents, if any.
    fn media(&self) -> Option<String>;
    /// Fetches the ISO at `url` and puts it into the machine's CD drive (at once if it runs,
    /// else at power-on), replacing what was there.
    fn insert_media(&self, url: &str) -> impl Future<Output = Result<(), MachineError>> + Send;
    /// Empties the CD drive.
    fn eject_media(&self) -> impl Future<Output = Result<(), MachineError>> + Send;
    /// The volumes the RAID controller presents from the next power-on on (the BMC built or
    /// deleted some at a reset); a running machine keeps its disks until it starts again.
    fn set_volumes(
        &self,
        volumes: Vec<VolumeDisk>,
    ) -> impl Future<Output = Result<(), MachineError>> + Send;
    /// How many bytes the machine has written on its serial console so far: where a
    /// Serial-over-LAN session starts relaying. Machines without one answer 0.
    fn serial_len(&self) -> u64 {
        0
    }
    /// Up to `max` bytes the machine wrote on its serial console from `offset` on.
    fn serial_read(&self, _offset: u64, _max: usize) -> Vec<u8> {
        Vec::new()
    }
    /// Characters typed on the serial console through Serial-over-LAN; a serial port that
    /// takes no input drops them.
    fn serial_write(&self, _bytes: &[u8]) {}
}

/// An in-memory machine with the same contract, for front-end tests.
pub mod fake {
    use std::sync::Mutex;

    use crate::machine::*;

    #[derive(Debug)]
    pub struct FakeMachine {
        info: MachineInfo,
        state: Mutex<(PowerState, BootSettings, Vec<PowerAction>)>,
        media: Mutex<Option<String>>,
        volumes: Mutex<Vec<VolumeDisk>>,
        firmware: Firmware,
        /// What the machine wrote on its serial console, and what was typed on it.
        serial: Mutex<(Vec<u8>, Vec<u8>)>,
    }

    impl FakeMachine {
        pub fn new(info: MachineInfo) -> Self {
            Self {
                info,
                state: Mutex::new((PowerState::Off, BootSettings::default(), Vec::new())),
                media: Mutex::new(None),
                volumes: Mutex::new(Vec::new()),
                firmware: Firmware::Uefi,
                serial: Mutex::new((Vec::new(), Vec::new())),
            }
        }

        /// The same machine with `firmware` (`Bios`: legacy boot only, no UEFI HTTP boot).
        #[must_use]
        pub fn with_firmware(mut self, firmware: Firmware) -> Self {
            self.firmware = firmware;
            self
        }

        /// The machine writes `bytes` on its serial console.
        pub fn serial_print(&self, bytes: &[u8]) {
            self.serial_lock().0.extend_from_slice(bytes);
        }

        /// What was typed on the serial console so far.
        pub fn serial_typed(&self) -> Vec<u8> {
            self.serial_lock().1.clone()
        }

        fn serial_lock(&self) -> std::sync::MutexGuard<'_, (Vec<u8>, Vec<u8>)> {
            self.serial
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        /// The volumes the BMC last gave the machine.
        pub fn volumes(&self) -> Vec<VolumeDisk> {
            self.volumes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        }

        /// The power actions received so far, oldest first.
        pub fn actions(&self) -> Vec<PowerAction> {
            self.lock().2.clone()
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, (PowerState, BootSettings, Vec<PowerAction>)> {
            // A poisoned lock only means another test thread panicked; the data is still usable.
            self.state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }

    impl MachineControl for FakeMachine {
        fn info(&self) -> &MachineInfo {
            &self.info
        }

        async fn power_state(&self) -> Result<PowerState, MachineError> {
            Ok(self.lock().0)
        }

        async fn power(&self, action: PowerAction) -> Result<(), MachineError> {
            let mut state = self.lock();
            state.2.push(action);
            match action {
                PowerAction::On
                | PowerAction::ForceRestart
                | PowerAction::GracefulRestart
                | PowerAction::PowerCycle => {
                    state.0 = PowerState::On;
                    if state.1.enabled == BootOverride::Once {
                        state.1.enabled = BootOverride::Disabled;
                    }
                }
                PowerAction::ForceOff | PowerAction::GracefulShutdown => state.0 = PowerState::Off,
                PowerAction::Nmi => {}
            }
            Ok(())
        }

        fn boot(&self) -> BootSettings {
            self.lock().1
        }

        fn boot_modes(&self) -> &'static [BootMode] {
            self.firmware.boot_modes()
        }

        async fn set_boot(&self, boot: BootSettings) -> Result<(), MachineError> {
            self.lock().1 = boot;
            Ok(())
        }

        fn media(&self) -> Option<String> {
            self.media
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        }

        async fn insert_media(&self, url: &str) -> Result<(), MachineError> {
            *self
                .media
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(url.to_owned());
            Ok(())
        }

        async fn eject_media(&self) -> Result<(), MachineError> {
            *self
                .media
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            Ok(())
        }

        async fn set_volumes(&self, volumes: Vec<VolumeDisk>) -> Result<(), MachineError> {
            *self
                .volumes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = volumes;
            Ok(())
        }

        fn serial_len(&self) -> u64 {
            self.serial_lock().0.len() as u64
        }

        fn serial_read(&self, offset: u64, max: usize) -> Vec<u8> {
            let serial = self.serial_lock();
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(serial.0.len());
            serial.0[start..].iter().take(max).copied().collect()
        }

        fn serial_write(&self, bytes: &[u8]) {
            self.serial_lock().1.extend_from_slice(bytes);
        }
    }
}
