//! Serial-over-LAN (IPMI 2.0 §15, §24): the `ipmitool-socat` console interface, spoken
//! natively over an RMCP+ session instead of through `ipmitool sol activate` under `socat`.
//!
//! Attaching opens a session (the node's `ipmi_*` settings, as power control), sends Activate
//! Payload for SOL instance 1 with encryption and authentication, and then exchanges SOL
//! packets ([`SolPacket`], payload type 1) in the same session: each packet carrying
//! characters has a sequence number 1–15 and is acknowledged by the other side with the
//! number of characters it accepted; an unacknowledged packet is sent again after
//! `ipmi_retransmit_interval`, up to `retries` times, and a retransmission already seen is
//! acknowledged but not shown twice. Every 30 s of silence a Get Device ID keeps the session
//! from timing out. Detaching sends Deactivate Payload and Close Session.
//!
//! The BMC's answer to Activate Payload names a UDP port for the payload; Ferric uses the
//! session's own (every BMC seen answers the same port).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferric_model::resources::Node;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::info::IpmiInfo;
use super::rmcp::PAYLOAD_SOL;
use super::session::{IpmiError, Session, Timing};
use crate::Component;
use crate::DriverError;
use crate::bmc_state::BmcState;
use crate::console::{ConsoleInterface, ConsoleLink, LINK_QUEUE};
use crate::interfaces::Validate;

const NETFN_APP: u8 = 0x06;
const GET_DEVICE_ID: u8 = 0x01;
const ACTIVATE_PAYLOAD: u8 = 0x48;
const DEACTIVATE_PAYLOAD: u8 = 0x49;
/// The SOL payload instance Ferric activates.
const INSTANCE: u8 = 1;
/// Activate Payload's first auxiliary byte: encrypted and authenticated packets, serial alerts
/// deferred while SOL is active, the BMC asserts CTS/DCD at activation.
const ACTIVATE_OPTIONS: u8 = 0x80 | 0x40 | 0x04;
/// Characters per SOL packet we send (well below every BMC's inbound payload size).
const MAX_CHUNK: usize = 200;
/// Silence after which a Get Device ID keeps the session alive (ipmitool's interval).
const KEEPALIVE: Duration = Duration::from_secs(30);

/// Status bits of a BMC-to-console SOL packet (§15.9, Table 15-2, byte 4).
pub const STATUS_NACK: u8 = 0x40;
pub const STATUS_TRANSFER_UNAVAILABLE: u8 = 0x20;
pub const STATUS_DEACTIVATING: u8 = 0x10;

/// One SOL packet: the four header bytes and the characters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SolPacket {
    /// 1–15 for a packet carrying characters; 0 for an acknowledgement only.
    pub sequence: u8,
    /// The sequence number this packet acknowledges (or NACKs); 0 for none.
    pub ack_sequence: u8,
    /// How many characters of the acknowledged packet were accepted.
    pub accepted: u8,
    /// Operation (console to BMC) or status (BMC to console) bits.
    pub status: u8,
    pub data: Vec<u8>,
}

impl SolPacket {
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![
            self.sequence & 0x0F,
            self.ack_sequence & 0x0F,
            self.accepted,
            self.status,
        ];
        bytes.extend_from_slice(&self.data);
        bytes
    }

    /// `None` when shorter than the header.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let [sequence, ack_sequence, accepted, status, data @ ..] = bytes else {
            return None;
        };
        Some(Self {
            sequence: sequence & 0x0F,
            ack_sequence: ack_sequence & 0x0F,
            accepted: *accepted,
            status: *status,
            data: data.to_vec(),
        })
    }

    /// The acknowledgement of `self`, accepting all its characters.
    pub fn ack(&self) -> Self {
        Self {
            ack_sequence: self.sequence,
            accepted: u8::try_from(self.data.len()).unwrap_or(u8::MAX),
            ..Self::default()
        }
    }
}

/// The next SOL sequence number after `sequence` (1–15, wrapping past 0).
pub fn next_sequence(sequence: u8) -> u8 {
    if sequence >= 15 { 1 } else { sequence + 1 }
}

/// The `ipmitool-socat` console interface.
#[derive(Debug, Clone)]
pub(crate) struct IpmiSol {
    pub(crate) state: Arc<BmcState>,
}

#[async_trait]
impl Validate for IpmiSol {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        IpmiInfo::parse(node).map(|_| ())
    }
}

#[async_trait]
impl ConsoleInterface for IpmiSol {
    async fn attach(&self, node: &Node) -> Result<ConsoleLink, DriverError> {
        let info = IpmiInfo::parse(node)?;
        let settings = &self.state.settings;
        let timing = Timing {
            timeout: settings.ipmi_retransmit_interval,
            retries: settings.retries,
        };
        let mut session = Session::open(&info, timing, &self.state.ipmi_suites).await?;
        let activated = session
            .command(
                "Activate Payload (SOL)",
                NETFN_APP,
                ACTIVATE_PAYLOAD,
                &[PAYLOAD_SOL, INSTANCE, ACTIVATE_OPTIONS, 0, 0, 0],
            )
            .await;
        if let Err(error) = activated {
            let endpoint = session.endpoint().to_owned();
            session.close().await;
            return Err(activation_error(&endpoint, error));
        }
        let (output_tx, output) = mpsc::channel(LINK_QUEUE);
        let (input, input_rx) = mpsc::channel(LINK_QUEUE);
        tokio::spawn(async move {
            let result = relay(&mut session, timing, input_rx, &output_tx).await;
            let deactivate = session
                .command(
                    "Deactivate Payload (SOL)",
                    NETFN_APP,
                    DEACTIVATE_PAYLOAD,
                    &[PAYLOAD_SOL, INSTANCE, 0, 0, 0, 0],
                )
                .await;
            if let Err(error) = deactivate {
                tracing::debug!(bmc = %session.endpoint(), %error, "SOL deactivation failed");
            }
            session.close().await;
            if let Err(error) = result {
                let _ = output_tx.send(Err(error)).await;
            }
        });
        Ok(ConsoleLink { output, input })
    }
}

/// Activate Payload's refusals (§24.1) in words.
fn activation_error(endpoint: &str, error: IpmiError) -> DriverError {
    let advice = match &error {
        IpmiError::Completion { code: 0x80, .. } => {
            " — SOL is already active in another session (an ipmitool sol activate \
             elsewhere?); end it, e.g. with `ipmitool sol deactivate`"
        }
        IpmiError::Completion { code: 0x81, .. } => {
            " — SOL is disabled on the BMC; enable it (`ipmitool sol set enabled true`)"
        }
        IpmiError::Completion { code: 0x82, .. } => " — the BMC allows no more SOL sessions",
        IpmiError::Completion {
            code: 0x83 | 0x84, ..
        } => " — the BMC refuses SOL with encryption; enable encrypted SOL on the BMC",
        _ => "",
    };
    DriverError::failed(
        Component::Bmc,
        format!("IPMI BMC {endpoint}: cannot start Serial-over-LAN: {error}{advice}"),
    )
}

/// A packet we sent and the BMC has not acknowledged yet.
struct Unacked {
    packet: SolPacket,
    sent: Instant,
    attempts: u32,
}

/// Moves characters both ways until the input side is dropped (`Ok`) or the link breaks.
async fn relay(
    session: &mut Session,
    timing: Timing,
    mut input: mpsc::Receiver<Vec<u8>>,
    output: &mpsc::Sender<Result<Vec<u8>, DriverError>>,
) -> Result<(), DriverError> {
    let endpoint = session.endpoint().to_owned();
    let mut pending: VecDeque<u8> = VecDeque::new();
    let mut unacked: Option<Unacked> = None;
    let mut next = 1u8;
    let mut last_seen = 0u8;
    let mut last_heard = Instant::now();
    let mut input_open = true;
    loop {
        if unacked.is_none() && !pending.is_empty() {
            let take = pending.len().min(MAX_CHUNK);
            let packet = SolPacket {
                sequence: next,
                data: pending.drain(..take).collect(),
                ..SolPacket::default()
            };
            next = next_sequence(next);
            session.send_payload(PAYLOAD_SOL, &packet.encode()).await?;
            unacked = Some(Unacked {
                packet,
                sent: Instant::now(),
                attempts: 1,
            });
        }
        if !input_open && unacked.is_none() && pending.is_empty() {
            return Ok(());
        }
        let resend_at = unacked.as_ref().map_or(last_heard + KEEPALIVE, |unacked| {
            unacked.sent + timing.timeout
        });
        tokio::select! {
            received = session.receive_payload(PAYLOAD_SOL) => {
                let Some(packet) = SolPacket::parse(&received?) else { continue };
                last_heard = Instant::now();
                // A NACK means the BMC cannot take characters now: they are retransmitted on
                // the timer.
                if packet.ack_sequence != 0
                    && let Some(sent) = &unacked
                    && sent.packet.sequence == packet.ack_sequence
                    && packet.status & STATUS_NACK == 0
                {
                    // A partial acceptance: the rest goes again, first.
                    let accepted = usize::from(packet.accepted).min(sent.packet.data.len());
                    for byte in sent.packet.data[accepted..].iter().rev() {
                        pending.push_front(*byte);
                    }
                    unacked = None;
                }
                if packet.status & STATUS_DEACTIVATING != 0 {
                    return Err(DriverError::failed(Component::Bmc, format!(
                        "IPMI BMC {endpoint}: the BMC ended the Serial-over-LAN session"
                    )));
                }
                if packet.sequence != 0 {
                    session.send_payload(PAYLOAD_SOL, &packet.ack().encode()).await?;
                    if packet.sequence != last_seen && !packet.data.is_empty() {
                        last_seen = packet.sequence;
                        if output.send(Ok(packet.data)).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
            typed = input.recv(), if input_open => match typed {
                Some(bytes) => pending.extend(bytes),
                None => input_open = false,
            },
            () = tokio::time::sleep_until(resend_at) => {
                match &mut unacked {
                    Some(sent) if sent.attempts > timing.retries => {
                        return Err(DriverError::failed(Component::Bmc, format!(
                            "IPMI BMC {endpoint}: Serial-over-LAN characters were not \
                             acknowledged after {} attempts; the BMC may be unreachable",
                            sent.attempts
                        )));
                    }
                    Some(sent) => {
                        sent.attempts += 1;
                        sent.sent = Instant::now();
                        session.send_payload(PAYLOAD_SOL, &sent.packet.encode()).await?;
                    }
                    None => {
                        session.command("Get Device ID", NETFN_APP, GET_DEVICE_ID, &[]).await?;
                        last_heard = Instant::now();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip() {
        let packet = SolPacket {
            sequence: 3,
            ack_sequence: 2,
            accepted: 5,
            status: STATUS_NACK,
            data: b"boot".to_vec(),
        };
        assert_eq!(packet.encode(), [3, 2, 5, 0x40, b'b', b'o', b'o', b't']);
        assert_eq!(SolPacket::parse(&packet.encode()), Some(packet.clone()));
        assert_eq!(SolPacket::parse(&[1, 2, 3]), None);
        let ack = packet.ack();
        assert_eq!((ack.sequence, ack.ack_sequence, ack.accepted), (0, 3, 4));
    }

    #[test]
    fn sequence_numbers_skip_zero() {
        assert_eq!(next_sequence(1), 2);
        assert_eq!(next_sequence(15), 1);
    }
}
