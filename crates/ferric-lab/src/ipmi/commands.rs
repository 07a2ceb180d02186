//! The IPMI commands the virtual BMC answers, mapped onto [`MachineControl`].

use ferric_drivers::ipmi::rmcp::IpmiRequest;

use super::{
    INVALID_DATA_FIELD, IpmiBmc, Outcome, PRIVILEGE_ADMINISTRATOR, PRIVILEGE_OPERATOR,
    PRIVILEGE_USER, REQUEST_LENGTH_INVALID,
};
use crate::machine::{
    BootMode, BootOverride, BootSettings, BootTarget, MachineControl, MachineError, PowerAction,
    PowerState,
};

const NETFN_CHASSIS: u8 = 0x00;
const NETFN_APP: u8 = 0x06;

const GET_CHASSIS_STATUS: u8 = 0x01;
const CHASSIS_CONTROL: u8 = 0x02;
const SET_BOOT_OPTIONS: u8 = 0x08;
const GET_BOOT_OPTIONS: u8 = 0x09;

const GET_DEVICE_ID: u8 = 0x01;
const GET_CHANNEL_AUTH_CAPABILITIES: u8 = 0x38;
const SET_SESSION_PRIVILEGE: u8 = 0x3B;
const CLOSE_SESSION: u8 = 0x3C;
const GET_CHANNEL_CIPHER_SUITES: u8 = 0x54;
const ACTIVATE_PAYLOAD: u8 = 0x48;
const DEACTIVATE_PAYLOAD: u8 = 0x49;

/// Completion codes (IPMI 2.0 Table 5-2).
const OK: u8 = 0x00;
const PARAMETER_NOT_SUPPORTED: u8 = 0x80;
const PRIVILEGE_NOT_AVAILABLE: u8 = 0x81;
const INVALID_COMMAND: u8 = 0xC1;
const INSUFFICIENT_PRIVILEGE: u8 = 0xD4;
const NOT_IN_PRESENT_STATE: u8 = 0xD5;
const UNSPECIFIED_ERROR: u8 = 0xFF;

/// The LAN channel this BMC serves.
const LAN_CHANNEL: u8 = 0x01;

/// Boot device selectors of the boot flags (data byte 2, bits 5:2) and what they mean here.
/// Selector 3 ("force boot from default hard drive, request safe mode") boots the disk.
const DEVICES: [(u8, BootTarget); 5] = [
    (0x1, BootTarget::Pxe),
    (0x2, BootTarget::Hdd),
    (0x3, BootTarget::Hdd),
    (0x5, BootTarget::Cd),
    (0x6, BootTarget::BiosSetup),
];

/// The cipher suite records of Get Channel Cipher Suites (IPMI 2.0 §22.15): suite id, then
/// authentication, integrity (0x40 |) and confidentiality (0x80 |) algorithms.
const CIPHER_SUITE_RECORDS: [u8; 10] = [
    0xC0, 0x03, 0x01, 0x41, 0x81, // suite 3
    0xC0, 0x11, 0x03, 0x44, 0x81, // suite 17
];

impl Outcome {
    fn reply(completion: u8, data: Vec<u8>) -> Self {
        Self {
            completion,
            data,
            new_privilege: None,
            close: None,
        }
    }

    fn ok(data: Vec<u8>) -> Self {
        Self::reply(OK, data)
    }

    fn error(completion: u8) -> Self {
        Self::reply(completion, Vec::new())
    }
}

/// Commands answered before a session exists.
pub(super) fn sessionless(request: &IpmiRequest) -> (u8, Vec<u8>) {
    match (request.netfn, request.command) {
        (NETFN_APP, GET_CHANNEL_AUTH_CAPABILITIES) => channel_auth_capabilities(&request.data),
        (NETFN_APP, GET_CHANNEL_CIPHER_SUITES) => channel_cipher_suites(&request.data),
        (NETFN_APP | NETFN_CHASSIS, _) => (INSUFFICIENT_PRIVILEGE, Vec::new()),
        _ => (INVALID_COMMAND, Vec::new()),
    }
}

fn channel_auth_capabilities(data: &[u8]) -> (u8, Vec<u8>) {
    let [channel, privilege, ..] = data else {
        return (REQUEST_LENGTH_INVALID, Vec::new());
    };
    if !matches!(channel & 0x0F, 0x0E | LAN_CHANNEL) || privilege & 0x0F > PRIVILEGE_ADMINISTRATOR {
        return (INVALID_DATA_FIELD, Vec::new());
    }
    (
        OK,
        vec![
            LAN_CHANNEL,
            // IPMI 2.0 extended capabilities present; no IPMI 1.5 authentication types.
            0x80,
            // Non-null user names only; per-message and user-level authentication on.
            0x04,
            // IPMI 2.0 (RMCP+) connections supported.
            0x02,
            // OEM id and auxiliary data: none.
            0x00,
            0x00,
            0x00,
            0x00,
        ],
    )
}

fn channel_cipher_suites(data: &[u8]) -> (u8, Vec<u8>) {
    let [channel, _payload_type, index, ..] = data else {
        return (REQUEST_LENGTH_INVALID, Vec::new());
    };
    if !matches!(channel & 0x0F, 0x0E | LAN_CHANNEL) {
        return (INVALID_DATA_FIELD, Vec::new());
    }
    let start = usize::from(index & 0x3F) * 16;
    let mut reply = vec![LAN_CHANNEL];
    reply.extend(CIPHER_SUITE_RECORDS.iter().skip(start).take(16));
    (OK, reply)
}

/// Commands in an active session `bmc_id` at `privilege`.
pub(super) async fn in_session<M: MachineControl>(
    bmc: &IpmiBmc<M>,
    request: &IpmiRequest,
    bmc_id: u32,
    privilege: u8,
) -> Outcome {
    let needs = |level: u8| privilege >= level;
    match (request.netfn, request.command) {
        (NETFN_APP, GET_CHANNEL_AUTH_CAPABILITIES | GET_CHANNEL_CIPHER_SUITES) => {
            let (completion, data) = sessionless(request);
            Outcome::reply(completion, data)
        }
        (NETFN_APP, GET_DEVICE_ID) => Outcome::ok(device_id()),
        (NETFN_APP, SET_SESSION_PRIVILEGE) => set_privilege(bmc, request, bmc_id, privilege),
        (NETFN_APP, CLOSE_SESSION) => close_session(bmc, request, bmc_id),
        // SOL's default privilege is USER (§26.7, "SOL privilege level").
        (NETFN_APP, ACTIVATE_PAYLOAD) if needs(PRIVILEGE_USER) => {
            match bmc.sol_activate(bmc_id, &request.data) {
                Ok(data) => Outcome::ok(data),
                Err(completion) => Outcome::error(completion),
            }
        }
        (NETFN_APP, DEACTIVATE_PAYLOAD) if needs(PRIVILEGE_USER) => {
            match bmc.sol_deactivate(&request.data) {
                Ok(data) => Outcome::ok(data),
                Err(completion) => Outcome::error(completion),
            }
        }
        (NETFN_APP, ACTIVATE_PAYLOAD | DEACTIVATE_PAYLOAD) => {
            Outcome::error(INSUFFICIENT_PRIVILEGE)
        }
        (NETFN_CHASSIS, GET_CHASSIS_STATUS) if needs(PRIVILEGE_USER) => chassis_status(bmc).await,
        (NETFN_CHASSIS, CHASSIS_CONTROL) if needs(PRIVILEGE_OPERATOR) => {
            chassis_control(bmc, &request.data).await
        }
        (NETFN_CHASSIS, GET_BOOT_OPTIONS) if needs(PRIVILEGE_USER) => {
            get_boot_options(bmc, &request.data)
        }
        (NETFN_CHASSIS, SET_BOOT_OPTIONS) if needs(PRIVILEGE_OPERATOR) => {
            set_boot_options(bmc, &request.data).await
        }
        (
            NETFN_CHASSIS,
            GET_CHASSIS_STATUS | CHASSIS_CONTROL | GET_BOOT_OPTIONS | SET_BOOT_OPTIONS,
        ) => Outcome::error(INSUFFICIENT_PRIVILEGE),
        _ => Outcome::error(INVALID_COMMAND),
    }
}

fn device_id() -> Vec<u8> {
    vec![
        0x20, // device id
        0x01, // device revision; no SDRs
        0x01, // firmware 1.
        0x00, // .00 (BCD), normal operation
        0x02, // IPMI version 2.0
        0x80, // additional device support: chassis device
        0x00, 0x00, 0x00, // manufacturer id: none (a virtual BMC)
        0x00, 0x00, // product id
    ]
}

fn set_privilege<M: MachineControl>(
    bmc: &IpmiBmc<M>,
    request: &IpmiRequest,
    bmc_id: u32,
    privilege: u8,
) -> Outcome {
    let Some(requested) = request.data.first().map(|byte| byte & 0x0F) else {
        return Outcome::error(REQUEST_LENGTH_INVALID);
    };
    if requested == 0 {
        return Outcome::ok(vec![privilege]);
    }
    if requested > PRIVILEGE_ADMINISTRATOR {
        return Outcome::error(INVALID_DATA_FIELD);
    }
    match bmc.max_privilege(bmc_id) {
        Some(max) if requested <= max => Outcome {
            new_privilege: Some(requested),
            ..Outcome::ok(vec![requested])
        },
        _ => Outcome::error(PRIVILEGE_NOT_AVAILABLE),
    }
}

fn close_session<M: MachineControl>(
    bmc: &IpmiBmc<M>,
    request: &IpmiRequest,
    bmc_id: u32,
) -> Outcome {
    let Some(&[a, b, c, d]) = request.data.get(..4) else {
        return Outcome::error(REQUEST_LENGTH_INVALID);
    };
    let target = u32::from_le_bytes([a, b, c, d]);
    // Only the session itself may be closed this way (closing others needs a handle, and
    // ADMINISTRATOR, which this BMC does not offer).
    if target != bmc_id || !bmc.has_session(target) {
        // 0x87: invalid session id in request.
        return Outcome::error(0x87);
    }
    Outcome {
        close: Some(target),
        ..Outcome::ok(Vec::new())
    }
}

async fn chassis_status<M: MachineControl>(bmc: &IpmiBmc<M>) -> Outcome {
    match bmc.machine.power_state().await {
        Ok(state) => {
            // Byte 1: bit 0 power is on; power restore policy "stays off" (bits 6:5 = 0).
            let on = u8::from(state != PowerState::Off);
            Outcome::ok(vec![on, 0x00, 0x00])
        }
        Err(error) => machine_failed("read the power state", &error),
    }
}

async fn chassis_control<M: MachineControl>(bmc: &IpmiBmc<M>, data: &[u8]) -> Outcome {
    let Some(control) = data.first().map(|byte| byte & 0x0F) else {
        return Outcome::error(REQUEST_LENGTH_INVALID);
    };
    let action = match control {
        0x00 => PowerAction::ForceOff,
        0x01 => PowerAction::On,
        0x02 => PowerAction::PowerCycle,
        0x03 => PowerAction::ForceRestart,
        0x04 => PowerAction::Nmi,
        0x05 => PowerAction::GracefulShutdown,
        _ => return Outcome::error(INVALID_DATA_FIELD),
    };
    if matches!(
        action,
        PowerAction::PowerCycle | PowerAction::ForceRestart | PowerAction::Nmi
    ) {
        // As on real BMCs, these act on a running machine only (IPMI 2.0 §28.3).
        match bmc.machine.power_state().await {
            Ok(PowerState::Off) => return Outcome::error(NOT_IN_PRESENT_STATE),
            Ok(_) => {}
            Err(error) => return machine_failed("read the power state", &error),
        }
    }
    match bmc.machine.power(action).await {
        Ok(()) => Outcome::ok(Vec::new()),
        Err(error @ MachineError::Unsupported { .. }) => {
            tracing::warn!(machine = %bmc.machine.info().name, %error, "chassis control refused");
            Outcome::error(NOT_IN_PRESENT_STATE)
        }
        Err(error) => machine_failed(action.redfish_name(), &error),
    }
}

fn machine_failed(operation: &str, error: &MachineError) -> Outcome {
    tracing::error!(%error, operation, "IPMI request failed on the machine");
    Outcome::error(UNSPECIFIED_ERROR)
}

/// Boot flags (parameter 5) from the stored boot settings.
fn boot_flags(boot: BootSettings) -> [u8; 5] {
    let mut flags = 0u8;
    if boot.enabled != BootOverride::Disabled {
        flags |= 0x80;
    }
    if boot.enabled == BootOverride::Continuous {
        flags |= 0x40;
    }
    if boot.mode == BootMode::Uefi {
        flags |= 0x20;
    }
    let selector = DEVICES
        .iter()
        .find(|(_, target)| *target == boot.target)
        .map_or(0, |(selector, _)| *selector);
    [flags, selector << 2, 0, 0, 0]
}

fn get_boot_options<M: MachineControl>(bmc: &IpmiBmc<M>, data: &[u8]) -> Outcome {
    let Some(parameter) = data.first().map(|byte| byte & 0x7F) else {
        return Outcome::error(REQUEST_LENGTH_INVALID);
    };
    let stored = *bmc.boot_parameters();
    let value = match parameter {
        0x00 => vec![stored.set_in_progress],
        0x03 => vec![stored.valid_bit_clearing],
        0x04 => vec![0x00, stored.info_acknowledge],
        0x05 => boot_flags(bmc.machine.boot()).to_vec(),
        _ => return Outcome::error(PARAMETER_NOT_SUPPORTED),
    };
    // Parameter version 1, the selector (bit 7 clear: valid), then the data.
    let mut reply = vec![0x01, parameter];
    reply.extend(value);
    Outcome::ok(reply)
}

async fn set_boot_options<M: MachineControl>(bmc: &IpmiBmc<M>, data: &[u8]) -> Outcome {
    let Some((selector, value)) = data.split_first() else {
        return Outcome::error(REQUEST_LENGTH_INVALID);
    };
    match selector & 0x7F {
        0x00 => match value.first() {
            Some(state) if state & 0x03 != 0x03 => {
                bmc.boot_parameters().set_in_progress = state & 0x03;
                Outcome::ok(Vec::new())
            }
            Some(_) => Outcome::error(INVALID_DATA_FIELD),
            None => Outcome::error(REQUEST_LENGTH_INVALID),
        },
        0x03 => match value.first() {
            Some(bits) => {
                bmc.boot_parameters().valid_bit_clearing = bits & 0x1F;
                Outcome::ok(Vec::new())
            }
            None => Outcome::error(REQUEST_LENGTH_INVALID),
        },
        0x04 => match value {
            [mask, bits, ..] => {
                let mut stored = bmc.boot_parameters();
                stored.info_acknowledge = (stored.info_acknowledge & !mask) | (bits & mask);
                Outcome::ok(Vec::new())
            }
            _ => Outcome::error(REQUEST_LENGTH_INVALID),
        },
        0x05 => match value {
            [flags, device, ..] if value.len() >= 5 => set_boot_flags(bmc, *flags, *device).await,
            _ => Outcome::error(REQUEST_LENGTH_INVALID),
        },
        _ => Outcome::error(PARAMETER_NOT_SUPPORTED),
    }
}

async fn set_boot_flags<M: MachineControl>(bmc: &IpmiBmc<M>, flags: u8, device: u8) -> Outcome {
    let selector = (device >> 2) & 0x0F;
    let mode = if flags & 0x20 != 0 {
        BootMode::Uefi
    } else {
        BootMode::Legacy
    };
    let boot = if flags & 0x80 == 0 || selector == 0 {
        // Flags not valid, or "no override": the machine boots its default order.
        BootSettings {
            target: BootTarget::None,
            enabled: BootOverride::Disabled,
            mode,
        }
    } else {
        let Some(target) = DEVICES
            .iter()
            .find(|(candidate, _)| *candidate == selector)
            .map(|(_, target)| *target)
        else {
            return Outcome::error(INVALID_DATA_FIELD);
        };
        BootSettings {
            target,
            enabled: if flags & 0x40 != 0 {
                BootOverride::Continuous
            } else {
                BootOverride::Once
            },
            mode,
        }
    };
    match bmc.machine.set_boot(boot).await {
        Ok(()) => Outcome::ok(Vec::new()),
        // A machine without UEFI firmware boots legacy whatever the EFI bit says, as BIOS-only
        // servers do; Get System Boot Options then shows the flag cleared.
        Err(error @ MachineError::Unsupported { .. }) if mode == BootMode::Uefi => {
            tracing::warn!(machine = %bmc.machine.info().name, %error, "ignoring the EFI boot flag");
            let legacy = BootSettings {
                mode: BootMode::Legacy,
                ..boot
            };
            match bmc.machine.set_boot(legacy).await {
                Ok(()) => Outcome::ok(Vec::new()),
                Err(error) => machine_failed("set the boot device", &error),
            }
        }
        Err(error @ MachineError::Unsupported { .. }) => {
            tracing::warn!(machine = %bmc.machine.info().name, %error, "boot device refused");
            Outcome::error(INVALID_DATA_FIELD)
        }
        Err(error) => machine_failed("set the boot device", &error),
    }
}
