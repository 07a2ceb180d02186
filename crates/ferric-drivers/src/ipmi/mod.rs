//! The `ipmi` hardware type's power and management interfaces, over IPMI 2.0 RMCP+
//! ("lanplus") spoken natively: no process per call. They are named `ipmitool`, as Ironic's
//! are, so clients that name them (Metal3, scripts) work unchanged.
//!
//! Each call opens one RMCP+ session (cipher suite 17 or 3, as `ipmi_cipher_suite` says or
//! else the best one the BMC lists), sends its chassis commands and closes it, under the BMC's request limit. Power actions wait until Get Chassis Status
//! shows the state they lead to. Reboot is "power off, then on", as Ironic's is, because a
//! chassis power cycle is refused by BMCs whose machine is off.
//!
//! [`rmcp`] (packets and keys, no IO) is public because the lab's virtual BMC
//! (`ferric_lab::ipmi`) builds the other side of the same sessions from it.
//!
//! RMCP+ is written here rather than taken from a crate: `ipmi-rs` implements only RAKP-HMAC-SHA1
//! (no cipher suite 17) over blocking sockets, and `rust-ipmi` calls itself a learning project not
//! meant for production. Packets and session are written on the RustCrypto crates (`hmac`, `sha1`,
//! `sha2`, `aes`, `cbc`), checked against OpenIPMI's `ipmi_sim` and `ipmitool`, and tested through
//! the API against `ipmi_sim` and pyghmi's `fakebmc` (suite 3 only) in
//! `crates/ferric-api/tests/bmc_emulators.rs`.

mod info;
pub mod rmcp;
mod session;
pub mod sol;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::{Node, PowerState};

pub(crate) use info::PROPERTIES;
pub(crate) use session::SuiteCache;
pub(crate) use sol::IpmiSol;

use crate::Component;
use crate::DriverError;
use crate::bmc_state::BmcState;
use crate::interfaces::{
    BootDevice, BootDeviceSetting, BootMode, ManagementInterface, PowerAction, PowerInterface,
    Validate,
};
use info::IpmiInfo;
use session::{IpmiError, Session, Timing};

const NETFN_CHASSIS: u8 = 0x00;
const GET_CHASSIS_STATUS: u8 = 0x01;
const CHASSIS_CONTROL: u8 = 0x02;
const SET_BOOT_OPTIONS: u8 = 0x08;
const GET_BOOT_OPTIONS: u8 = 0x09;
/// The boot options parameter holding the boot flags.
const BOOT_FLAGS: u8 = 0x05;

/// Chassis Control (IPMI 2.0 §28.3) operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChassisControl {
    PowerDown = 0x00,
    PowerUp = 0x01,
    #[allow(
        dead_code,
        reason = "part of the command's vocabulary; reboot is off + on"
    )]
    PowerCycle = 0x02,
    #[allow(
        dead_code,
        reason = "part of the command's vocabulary; reboot is off + on"
    )]
    HardReset = 0x03,
    DiagnosticInterrupt = 0x04,
    SoftShutdown = 0x05,
}

/// Boot devices and their boot flag selectors (data byte 2, bits 5:2).
const DEVICES: [(BootDevice, u8); 5] = [
    (BootDevice::Pxe, 0x1),
    (BootDevice::Disk, 0x2),
    (BootDevice::Safe, 0x3),
    (BootDevice::Cdrom, 0x5),
    (BootDevice::Bios, 0x6),
];

/// The `ipmitool` power and management interface; one value serves both kinds.
#[derive(Debug, Clone)]
pub(crate) struct Ipmi {
    pub(crate) state: Arc<BmcState>,
}

impl From<IpmiError> for DriverError {
    fn from(error: IpmiError) -> Self {
        DriverError::failed(Component::Bmc, error.to_string())
    }
}

impl Ipmi {
    /// Runs `work` in a fresh session under the BMC's request limit.
    async fn with_session<T>(
        &self,
        info: &IpmiInfo,
        work: impl AsyncFnOnce(&mut Session) -> Result<T, DriverError>,
    ) -> Result<T, DriverError> {
        let _slot = self.state.ipmi_limits.acquire(&info.endpoint()).await;
        let settings = &self.state.settings;
        let timing = Timing {
            timeout: settings.ipmi_retransmit_interval,
            retries: settings.retries,
        };
        let mut session = Session::open(info, timing, &self.state.ipmi_suites).await?;
        let result = work(&mut session).await;
        session.close().await;
        result
    }

    async fn control(session: &mut Session, control: ChassisControl) -> Result<(), DriverError> {
        session
            .command(
                "Chassis Control",
                NETFN_CHASSIS,
                CHASSIS_CONTROL,
                &[control as u8],
            )
            .await?;
        Ok(())
    }

    /// Polls Get Chassis Status until it shows `expected`, for at most `timeout`.
    async fn wait_for(
        &self,
        info: &IpmiInfo,
        session: &mut Session,
        expected: PowerState,
        timeout: Duration,
    ) -> Result<(), DriverError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let state = power_state(session).await?;
            if state == expected {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(DriverError::failed(
                    Component::Bmc,
                    format!(
                        "IPMI BMC {}: the power state is still \"{state}\" {} s after the request; \
                     expected \"{expected}\"",
                        info.endpoint(),
                        timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(self.state.settings.power_state_poll_interval).await;
        }
    }

    async fn boot_flags(session: &mut Session) -> Result<[u8; 2], DriverError> {
        let data = session
            .command(
                "Get System Boot Options",
                NETFN_CHASSIS,
                GET_BOOT_OPTIONS,
                &[BOOT_FLAGS, 0, 0],
            )
            .await?;
        // Parameter version, parameter selector, then the five boot flag bytes.
        match data.get(2..4) {
            Some([flags, device]) => Ok([*flags, *device]),
            _ => Err(DriverError::failed(
                Component::Bmc,
                "The BMC answered Get System Boot Options without boot flags.".to_owned(),
            )),
        }
    }
}

async fn power_state(session: &mut Session) -> Result<PowerState, DriverError> {
    let data = session
        .command("Get Chassis Status", NETFN_CHASSIS, GET_CHASSIS_STATUS, &[])
        .await?;
    match data.first() {
        Some(state) if state & 0x01 != 0 => Ok(PowerState::On),
        Some(_) => Ok(PowerState::Off),
        None => Err(DriverError::failed(
            Component::Bmc,
            "The BMC answered Get Chassis Status without data.".to_owned(),
        )),
    }
}

#[async_trait]
impl Validate for Ipmi {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        IpmiInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl PowerInterface for Ipmi {
    async fn get_power_state(&self, node: &Node) -> Result<PowerState, DriverError> {
        let info = IpmiInfo::parse(node)?;
        self.with_session(&info, async |session| power_state(session).await)
            .await
    }

    async fn set_power(
        &self,
        node: &Node,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), DriverError> {
        let info = IpmiInfo::parse(node)?;
        let change = self.state.settings.power_state_change_timeout;
        let soft = timeout.unwrap_or(change);
        self.with_session(&info, async |session| match action {
            PowerAction::On => {
                Self::control(session, ChassisControl::PowerUp).await?;
                self.wait_for(&info, session, PowerState::On, change).await
            }
            PowerAction::Off => {
                Self::control(session, ChassisControl::PowerDown).await?;
                self.wait_for(&info, session, PowerState::Off, change).await
            }
            PowerAction::SoftOff => {
                Self::control(session, ChassisControl::SoftShutdown).await?;
                self.wait_for(&info, session, PowerState::Off, soft).await
            }
            PowerAction::Reboot | PowerAction::SoftReboot => {
                if power_state(session).await? == PowerState::On {
                    let (control, wait) = if action == PowerAction::Reboot {
                        (ChassisControl::PowerDown, change)
                    } else {
                        (ChassisControl::SoftShutdown, soft)
                    };
                    Self::control(session, control).await?;
                    self.wait_for(&info, session, PowerState::Off, wait).await?;
                }
                Self::control(session, ChassisControl::PowerUp).await?;
                self.wait_for(&info, session, PowerState::On, change).await
            }
        })
        .await
    }

    fn supported_power_actions(&self) -> &'static [PowerAction] {
        &PowerAction::ALL
    }

    fn bmc_address(&self, node: &Node) -> Option<String> {
        IpmiInfo::parse(node).ok().map(|info| info.endpoint())
    }
}

#[async_trait]
impl ManagementInterface for Ipmi {
    fn supported_boot_devices(&self, _node: &Node) -> Vec<BootDevice> {
        DEVICES.iter().map(|(device, _)| *device).collect()
    }

    async fn get_boot_device(&self, node: &Node) -> Result<BootDeviceSetting, DriverError> {
        let info = IpmiInfo::parse(node)?;
        let [flags, device] = self
            .with_session(&info, async |session| Self::boot_flags(session).await)
            .await?;
        let selector = (device >> 2) & 0x0F;
        Ok(BootDeviceSetting {
            device: DEVICES
                .iter()
                .find(|(_, code)| *code == selector)
                .map(|(device, _)| *device),
            // Only meaningful while the BMC marks the flags valid.
            persistent: (flags & 0x80 != 0).then_some(flags & 0x40 != 0),
        })
    }

    async fn set_boot_device(
        &self,
        node: &mut Node,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), DriverError> {
        let info = IpmiInfo::parse(node)?;
        let selector = DEVICES
            .iter()
            .find(|(candidate, _)| *candidate == device)
            .map(|(_, code)| *code)
            .ok_or_else(|| {
                DriverError::invalid(
                    "argument.boot_device",
                    format!("The ipmitool management interface cannot set boot device {device}."),
                )
            })?;
        // The node's boot mode rides on the EFI flag (Ironic's default: UEFI).
        let efi = crate::boot_mode::boot_mode(node)?.0 == BootMode::Uefi;
        let flags = 0x80 | if persistent { 0x40 } else { 0 } | if efi { 0x20 } else { 0 };
        self.with_session(&info, async |session| {
            session
                .command(
                    "Set System Boot Options",
                    NETFN_CHASSIS,
                    SET_BOOT_OPTIONS,
                    &[BOOT_FLAGS, flags, selector << 2, 0, 0, 0],
                )
                .await?;
            Ok(())
        })
        .await
    }

    async fn get_boot_mode(&self, node: &Node) -> Result<Option<BootMode>, DriverError> {
        let info = IpmiInfo::parse(node)?;
        let [flags, _] = self
            .with_session(&info, async |session| Self::boot_flags(session).await)
            .await?;
        Ok((flags & 0x80 != 0).then_some(if flags & 0x20 != 0 {
            BootMode::Uefi
        } else {
            BootMode::Bios
        }))
    }

    /// IPMI has no boot mode setting of its own: the mode rides on the EFI flag of each
    /// boot device request, so it is recorded on the node for the next one.
    async fn set_boot_mode(&self, node: &mut Node, mode: BootMode) -> Result<(), DriverError> {
        IpmiInfo::parse(node)?;
        node.boot_mode = Some(mode.as_str().to_owned());
        Ok(())
    }

    async fn inject_nmi(&self, node: &Node) -> Result<(), DriverError> {
        let info = IpmiInfo::parse(node)?;
        self.with_session(&info, async |session| {
            Self::control(session, ChassisControl::DiagnosticInterrupt).await
        })
        .await
    }
}
