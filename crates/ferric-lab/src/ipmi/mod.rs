//! The IPMI front-end of a virtual BMC: IPMI 2.0 over LAN (RMCP+, "lanplus") on UDP for one
//! machine, beside its Redfish front-end and sharing its [`MachineControl`].
//!
//! Session establishment is Get Channel Authentication Capabilities (and Get Channel Cipher
//! Suites), Open Session, RAKP 1–4 with cipher suite 3 or 17; after that every request is
//! signed and AES-encrypted. The packet layer — framing, HMACs, AES, the RAKP formulas — is
//! the client's (`ferric_drivers::ipmi::rmcp`), so both sides of a session come from one
//! implementation. One user exists: the lab's `admin` with the generated password, at most
//! ADMINISTRATOR. Commands: Get Device ID, Set Session Privilege Level, Close Session, Get
//! Chassis Status, Chassis Control, Set/Get System Boot Options (boot flags and the
//! parameters ipmitool writes around them), and Activate/Deactivate Payload for
//! Serial-over-LAN onto the machine's serial port ([`sol`]).
//!
//! Written here because no crate implements the BMC side of IPMI (the ones found are clients).

mod commands;
mod session;
mod sol;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ferric_drivers::ipmi::rmcp::{self, PAYLOAD_IPMI, PAYLOAD_SOL};
use tokio::net::UdpSocket;

use crate::machine::MachineControl;
use session::Sessions;

/// IPMI privilege levels (IPMI 2.0 §6.8).
const PRIVILEGE_USER: u8 = 2;
const PRIVILEGE_OPERATOR: u8 = 3;
const PRIVILEGE_ADMINISTRATOR: u8 = 4;

/// Completion codes more than one module answers with (IPMI 2.0 table 5-2).
const REQUEST_LENGTH_INVALID: u8 = 0xC7;
const INVALID_DATA_FIELD: u8 = 0xCC;

/// What a command did: its answer, and changes to the session it came in.
struct Outcome {
    completion: u8,
    data: Vec<u8>,
    new_privilege: Option<u8>,
    /// A session to forget once the answer is sent (Close Session).
    close: Option<u32>,
}

/// The boot option parameters ipmitool writes besides the boot flags.
#[derive(Debug, Default, Clone, Copy)]
struct BootParameters {
    /// Parameter 0: set in progress.
    set_in_progress: u8,
    /// Parameter 3: BMC boot flag valid bit clearing.
    valid_bit_clearing: u8,
    /// Parameter 4: boot info acknowledge (write mask applied to the data).
    info_acknowledge: u8,
}

/// One virtual BMC's IPMI service.
pub struct IpmiBmc<M> {
    machine: Arc<M>,
    username: Vec<u8>,
    password: Vec<u8>,
    /// The system GUID RAKP 2 and 4 carry: the machine's UUID.
    guid: [u8; 16],
    sessions: Mutex<Sessions>,
    boot_parameters: Mutex<BootParameters>,
    /// The active Serial-over-LAN payload, if any.
    sol: Mutex<Option<sol::SolLink>>,
    /// The UDP port [`serve`] answers on (Activate Payload names it).
    port: AtomicU16,
}

/// Why an IPMI BMC cannot be created.
#[derive(Debug, thiserror::Error)]
pub enum IpmiSetupError {
    #[error("IPMI user names are at most 16 bytes; {0:?} is longer")]
    Username(String),
    #[error("IPMI 2.0 passwords are at most 20 bytes; the given one has {0}")]
    Password(usize),
}

impl<M: MachineControl> IpmiBmc<M> {
    pub fn new(machine: Arc<M>, username: &str, password: &str) -> Result<Self, IpmiSetupError> {
        if username.len() > 16 {
            return Err(IpmiSetupError::Username(username.to_owned()));
        }
        if password.len() > 20 {
            return Err(IpmiSetupError::Password(password.len()));
        }
        let guid = guid_from_uuid(&machine.info().uuid);
        Ok(Self {
            machine,
            username: username.as_bytes().to_vec(),
            password: password.as_bytes().to_vec(),
            guid,
            sessions: Mutex::new(Sessions::default()),
            boot_parameters: Mutex::new(BootParameters::default()),
            sol: Mutex::new(None),
            port: AtomicU16::new(623),
        })
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        // The table stays consistent even if a holder panicked: every change is one insert or
        // remove.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn boot_parameters(&self) -> MutexGuard<'_, BootParameters> {
        self.boot_parameters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn port(&self) -> u16 {
        self.port.load(Ordering::Relaxed)
    }

    /// Answers one datagram; `None` when it gets no answer (not IPMI, unknown session, failed
    /// integrity check — a BMC stays silent rather than help a prober).
    pub async fn handle(&self, datagram: &[u8]) -> Option<Vec<u8>> {
        self.handle_from(datagram, None).await
    }

    /// [`IpmiBmc::handle`] for a datagram from `peer`, where the session's SOL output goes.
    pub async fn handle_from(&self, datagram: &[u8], peer: Option<SocketAddr>) -> Option<Vec<u8>> {
        let Some(session_id) = rmcp::peek_session_id(datagram) else {
            // IPMI 1.5 framing: only the pre-session commands are answered.
            let packet = rmcp::parse_packet(datagram, None).ok()?;
            let request = rmcp::parse_ipmi_request(&packet.payload).ok()?;
            let (completion, data) = commands::sessionless(&request);
            return Some(rmcp::ipmi15_packet(&rmcp::ipmi_response(
                &request, completion, &data,
            )));
        };
        let payload_type = datagram.get(5).map(|flags| flags & 0x3F)?;
        if session_id == 0 {
            let packet = rmcp::parse_packet(datagram, None).ok()?;
            return match payload_type {
                PAYLOAD_IPMI => {
                    let request = rmcp::parse_ipmi_request(&packet.payload).ok()?;
                    let (completion, data) = commands::sessionless(&request);
                    Some(rmcp::unauthenticated_packet(
                        PAYLOAD_IPMI,
                        &rmcp::ipmi_response(&request, completion, &data),
                    ))
                }
                rmcp::PAYLOAD_OPEN_SESSION_REQUEST => self.open_session(&packet.payload),
                rmcp::PAYLOAD_RAKP_1 => self.rakp1(&packet.payload),
                rmcp::PAYLOAD_RAKP_3 => self.rakp3(&packet.payload),
                _ => None,
            };
        }
        if !rmcp::is_sealed(datagram) {
            return None;
        }
        match payload_type {
            PAYLOAD_IPMI => {
                let (payload, privilege) = self.open_sealed(session_id, datagram, peer)?;
                let request = rmcp::parse_ipmi_request(&payload).ok()?;
                let outcome = commands::in_session(self, &request, session_id, privilege).await;
                self.seal_reply(session_id, &request, outcome)
            }
            PAYLOAD_SOL => self.sol_packet(session_id, datagram, peer),
            _ => None,
        }
    }
}

/// Serves `bmc` on `socket` until `stop` completes; each datagram is handled in its own task
/// so a slow power action does not hold up other sessions.
pub async fn serve<M: MachineControl>(
    socket: UdpSocket,
    bmc: Arc<IpmiBmc<M>>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    if let Ok(address) = socket.local_addr() {
        bmc.port.store(address.port(), Ordering::Relaxed);
    }
    let socket = Arc::new(socket);
    let mut buffer = vec![0u8; 2048];
    let mut sol_tick = tokio::time::interval(sol::TICK);
    sol_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(stop);
    loop {
        let (length, peer) = tokio::select! {
            () = &mut stop => return Ok(()),
            _ = sol_tick.tick() => {
                if let Some((packet, peer)) = bmc.sol_tick()
                    && let Err(error) = socket.send_to(&packet, peer).await
                {
                    tracing::debug!(%peer, %error, "cannot send SOL output");
                }
                continue;
            }
            received = socket.recv_from(&mut buffer) => match received {
                Ok(received) => received,
                // ICMP errors from earlier replies surface here on some systems; keep serving.
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(error) => return Err(error),
            },
        };
        let datagram = buffer[..length].to_vec();
        let (socket, bmc) = (socket.clone(), bmc.clone());
        tokio::spawn(async move {
            if let Some(reply) = bmc.handle_from(&datagram, Some(peer)).await
                && let Err(error) = socket.send_to(&reply, peer).await
            {
                tracing::debug!(%peer, %error, "cannot answer an IPMI request");
            }
        });
    }
}

/// The SMBIOS-style GUID bytes of a UUID string; all zeros if it is not one.
fn guid_from_uuid(uuid: &str) -> [u8; 16] {
    let hex: Vec<u8> = uuid
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|digit| match digit {
            b'0'..=b'9' => digit - b'0',
            _ => (digit | 0x20) - b'a' + 10,
        })
        .collect();
    let mut guid = [0u8; 16];
    if hex.len() == 32 {
        for (byte, pair) in guid.iter_mut().zip(hex.chunks(2)) {
            *byte = (pair[0] << 4) | pair[1];
        }
    }
    guid
}
