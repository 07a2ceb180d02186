//! Serial-over-LAN on the virtual BMC (IPMI 2.0 §15, §24.1–24.2): Activate Payload (SOL,
//! instance 1) in an active session links the machine's serial port to that session's
//! console; Deactivate Payload or Close Session ends it. One SOL instance per BMC, as on most
//! real ones: a second activation is refused with "payload already active".
//!
//! Output: [`IpmiBmc::sol_tick`], run by the serve loop every [`TICK`], sends what the machine
//! wrote since the last packet (from the moment of activation on) in packets with sequence
//! numbers 1–15, one unacknowledged packet at a time, retransmitted after
//! [`RETRANSMIT`] up to [`ATTEMPTS`] times (then the console is taken for gone and SOL
//! deactivated). Input: packets from the console are acknowledged, and their characters,
//! once per sequence number, typed on the machine's serial port.

use std::time::{Duration, Instant};

use ferric_drivers::ipmi::rmcp::PAYLOAD_SOL;
use ferric_drivers::ipmi::sol::{SolPacket, next_sequence};

use super::IpmiBmc;
use crate::machine::MachineControl;

/// How often the serve loop looks for new serial output.
pub(super) const TICK: Duration = Duration::from_millis(50);
/// How long an unacknowledged packet waits before it is sent again.
const RETRANSMIT: Duration = Duration::from_millis(500);
/// Sends of one packet before the console counts as gone.
const ATTEMPTS: u32 = 10;
/// Characters per packet (the payload size Activate Payload announces).
const CHUNK: usize = 200;

/// Completion codes of the payload commands (§24.1).
pub(super) const PAYLOAD_ALREADY_ACTIVE: u8 = 0x80;
const PAYLOAD_NOT_ACTIVE: u8 = 0x80;

/// The active SOL payload.
pub(super) struct SolLink {
    session: u32,
    /// How far into the serial output the console has been sent (or has in flight).
    offset: u64,
    next: u8,
    unacked: Option<Unacked>,
    /// The sequence number of the last packet of characters the console sent.
    last_seen: u8,
}

struct Unacked {
    packet: SolPacket,
    sent: Instant,
    attempts: u32,
}

impl<M: MachineControl> IpmiBmc<M> {
    fn sol(&self) -> std::sync::MutexGuard<'_, Option<SolLink>> {
        self.sol
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Activate Payload: the answer's data, or a completion code.
    pub(super) fn sol_activate(&self, bmc_id: u32, data: &[u8]) -> Result<Vec<u8>, u8> {
        match data {
            [PAYLOAD_SOL, 1, ..] if data.len() >= 6 => {}
            [_, _, ..] if data.len() >= 6 => return Err(super::INVALID_DATA_FIELD),
            _ => return Err(super::REQUEST_LENGTH_INVALID),
        }
        let mut sol = self.sol();
        if sol.is_some() {
            return Err(PAYLOAD_ALREADY_ACTIVE);
        }
        *sol = Some(SolLink {
            session: bmc_id,
            offset: self.machine.serial_len(),
            next: 1,
            unacked: None,
            last_seen: 0,
        });
        let size = (CHUNK as u16).to_le_bytes();
        let port = self.port().to_le_bytes();
        Ok(vec![
            0, 0, 0, 0, // auxiliary data
            size[0], size[1], // inbound payload size
            size[0], size[1], // outbound payload size
            port[0], port[1], // payload UDP port: the BMC's own
            0xFF, 0xFF, // no VLAN
        ])
    }

    /// Deactivate Payload: ends SOL if it is active (in any session, as `ipmitool sol
    /// deactivate` expects).
    pub(super) fn sol_deactivate(&self, data: &[u8]) -> Result<Vec<u8>, u8> {
        match data {
            [PAYLOAD_SOL, 1, ..] => {}
            [_, _, ..] => return Err(super::INVALID_DATA_FIELD),
            _ => return Err(super::REQUEST_LENGTH_INVALID),
        }
        match self.sol().take() {
            Some(_) => Ok(Vec::new()),
            None => Err(PAYLOAD_NOT_ACTIVE),
        }
    }

    /// A closed or expired session takes its SOL payload with it.
    pub(super) fn sol_session_closed(&self, bmc_id: u32) {
        let mut sol = self.sol();
        if sol.as_ref().is_some_and(|link| link.session == bmc_id) {
            *sol = None;
        }
    }

    /// A SOL packet from the console of session `bmc_id`: takes its acknowledgement, types
    /// its characters, and answers the acknowledgement of them.
    pub(super) fn sol_packet(
        &self,
        bmc_id: u32,
        datagram: &[u8],
        peer: Option<std::net::SocketAddr>,
    ) -> Option<Vec<u8>> {
        let (payload, _) = self.open_sealed(bmc_id, datagram, peer)?;
        let packet = SolPacket::parse(&payload)?;
        let typed = {
            let mut sol = self.sol();
            let link = sol.as_mut().filter(|link| link.session == bmc_id)?;
            if packet.ack_sequence != 0
                && let Some(sent) = &link.unacked
                && sent.packet.sequence == packet.ack_sequence
            {
                // Characters the console did not accept are sent again.
                let refused = sent
                    .packet
                    .data
                    .len()
                    .saturating_sub(usize::from(packet.accepted));
                link.offset -= refused as u64;
                link.unacked = None;
            }
            let fresh = packet.sequence != 0 && packet.sequence != link.last_seen;
            if packet.sequence != 0 {
                link.last_seen = packet.sequence;
            }
            fresh.then_some(packet.data.clone())
        };
        if let Some(typed) = typed
            && !typed.is_empty()
        {
            self.machine.serial_write(&typed);
        }
        if packet.sequence == 0 {
            return None;
        }
        self.seal(bmc_id, PAYLOAD_SOL, &packet.ack().encode())
            .map(|(sealed, _)| sealed)
    }

    /// The next SOL packet for the console, if one is due (new output, or a retransmission),
    /// and where to send it.
    pub(super) fn sol_tick(&self) -> Option<(Vec<u8>, std::net::SocketAddr)> {
        let (session, packet) = {
            let mut sol = self.sol();
            let link = sol.as_mut()?;
            let packet = match &mut link.unacked {
                Some(sent) if sent.sent.elapsed() < RETRANSMIT => return None,
                Some(sent) if sent.attempts >= ATTEMPTS => {
                    tracing::info!(
                        machine = %self.machine.info().name,
                        "the SOL console stopped acknowledging; SOL deactivated"
                    );
                    *sol = None;
                    return None;
                }
                Some(sent) => {
                    sent.attempts += 1;
                    sent.sent = Instant::now();
                    sent.packet.clone()
                }
                None => {
                    let data = self.machine.serial_read(link.offset, CHUNK);
                    if data.is_empty() {
                        return None;
                    }
                    link.offset += data.len() as u64;
                    let packet = SolPacket {
                        sequence: link.next,
                        data,
                        ..SolPacket::default()
                    };
                    link.next = next_sequence(link.next);
                    link.unacked = Some(Unacked {
                        packet: packet.clone(),
                        sent: Instant::now(),
                        attempts: 1,
                    });
                    packet
                }
            };
            (link.session, packet)
        };
        match self.seal(session, PAYLOAD_SOL, &packet.encode()) {
            Some((sealed, Some(peer))) => Some((sealed, peer)),
            Some((_, None)) => None,
            None => {
                // The session is gone (closed or expired): so is its SOL.
                self.sol_session_closed(session);
                None
            }
        }
    }
}
