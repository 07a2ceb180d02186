//! One RMCP+ session with a BMC over UDP: Get Channel Authentication Capabilities, Get
//! Channel Cipher Suites (unless `ipmi_cipher_suite` names one), Open Session, RAKP 1–4, Set
//! Session Privilege Level, then signed and encrypted requests, and Close Session. Each
//! datagram exchange is retransmitted after `read_timeout` up to `retries` times; a reply
//! that does not belong to the request (a late answer to an earlier retransmission) is
//! skipped.
//!
//! The cipher suite is picked as ipmitool picks it: from the suites the BMC lists, 17, else
//! 3. Asking is needed, not just proposing 17 and falling back on refusal: some BMCs (pyghmi's
//! fakebmc among them) accept any proposal and answer in suite 3's algorithms. A BMC that does
//! not know the command gets 17, then 3. The suite that worked is remembered per BMC address
//! ([`SuiteCache`]) and forgotten when a session with it fails.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::net::UdpSocket;

use super::info::IpmiInfo;
use super::rmcp::{
    self, CipherSuite, PAYLOAD_IPMI, PAYLOAD_OPEN_SESSION_REQUEST, PAYLOAD_OPEN_SESSION_RESPONSE,
    PAYLOAD_RAKP_1, PAYLOAD_RAKP_2, PAYLOAD_RAKP_3, PAYLOAD_RAKP_4, Rakp, SessionKeys,
};
use crate::bmc::lock;

/// NetFn Application and its pre-session commands (IPMI 2.0 §22.13, §22.15).
const NETFN_APP: u8 = 0x06;
const GET_CHANNEL_AUTH_CAPABILITIES: u8 = 0x38;
const GET_CHANNEL_CIPHER_SUITES: u8 = 0x54;
/// Get Channel Cipher Suites answers at most this many record bytes per page (list index).
const CIPHER_SUITE_PAGE: usize = 16;

/// Why an IPMI exchange failed; every message names the BMC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IpmiError {
    #[error(
        "IPMI BMC {endpoint}: authentication failed ({reason}) — check \
         ipmi_username/ipmi_password"
    )]
    Auth { endpoint: String, reason: String },
    #[error(
        "IPMI BMC {endpoint}: no answer after {attempts} attempts ({reason}) — check \
         ipmi_address/ipmi_port and that the BMC is reachable from the conductor"
    )]
    Unreachable {
        endpoint: String,
        attempts: u32,
        reason: String,
    },
    #[error(
        "IPMI BMC {endpoint}: cannot open an RMCP+ session with cipher suite {suite}: {reason}"
    )]
    Session {
        endpoint: String,
        suite: u8,
        reason: String,
    },
    #[error("IPMI BMC {endpoint}: {command} failed with completion code {code:#04x} ({meaning})")]
    Completion {
        endpoint: String,
        command: &'static str,
        code: u8,
        meaning: &'static str,
    },
    #[error(
        "IPMI BMC {endpoint}: no cipher suite in common: the BMC offers {offered}, and Ferric \
         speaks 17 and 3 (the suites with AES encryption) — enable cipher suite 17 or 3 on the \
         BMC's LAN channel, or set driver_info/ipmi_cipher_suite to 17 or 3 if the BMC accepts \
         a suite it does not list"
    )]
    NoCommonSuite { endpoint: String, offered: String },
    #[error("IPMI BMC {endpoint}: {reason}")]
    Protocol { endpoint: String, reason: String },
}

/// The cipher suite that last opened a session with each BMC (`host:port`), so sessions after
/// the first skip Get Channel Cipher Suites.
#[derive(Debug, Default)]
pub(crate) struct SuiteCache(Mutex<HashMap<String, CipherSuite>>);

impl SuiteCache {
    fn get(&self, endpoint: &str) -> Option<CipherSuite> {
        lock(&self.0).get(endpoint).copied()
    }

    fn set(&self, endpoint: &str, suite: Option<CipherSuite>) {
        let mut suites = lock(&self.0);
        match suite {
            Some(suite) => suites.insert(endpoint.to_owned(), suite),
            None => suites.remove(endpoint),
        };
    }
}

/// Timing of the datagram exchanges.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) timeout: Duration,
    pub(crate) retries: u32,
}

/// An open RMCP+ session.
pub(crate) struct Session {
    socket: UdpSocket,
    endpoint: String,
    timing: Timing,
    keys: SessionKeys,
    bmc_session_id: u32,
    /// The next session sequence number we send (starts at 1).
    sequence: u32,
    /// The next IPMI request sequence (6 bits).
    request_sequence: u8,
}

/// The name-only lookup bit of the RAKP 1 role byte: the BMC finds the user by name.
const NAME_ONLY_LOOKUP: u8 = 0x10;

impl Session {
    /// Opens a session with `info.cipher_suite`, or else the suite `cache` remembers for
    /// this BMC, or else the one picked from those the BMC lists.
    pub(crate) async fn open(
        info: &IpmiInfo,
        timing: Timing,
        cache: &SuiteCache,
    ) -> Result<Self, IpmiError> {
        let endpoint = info.endpoint();
        let socket = UdpSocket::bind(if info.address.contains(':') {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        })
        .await
        .map_err(|error| protocol(&endpoint, format!("cannot open a UDP socket: {error}")))?;
        socket
            .connect((info.address.as_str(), info.port))
            .await
            .map_err(|error| IpmiError::Unreachable {
                endpoint: endpoint.clone(),
                attempts: 1,
                reason: format!("cannot resolve or route to it: {error}"),
            })?;
        let mut link = Link {
            socket,
            endpoint,
            timing,
        };
        link.channel_capabilities(info).await?;
        let chosen = info.cipher_suite.or_else(|| cache.get(&link.endpoint));
        let suites = match chosen {
            Some(suite) => vec![suite],
            None => link.offered_suites().await?,
        };
        let mut last_error = None;
        for (index, suite) in suites.iter().enumerate() {
            let handshake = link.handshake(info, *suite).await;
            if info.cipher_suite.is_none() {
                cache.set(&link.endpoint, handshake.is_ok().then_some(*suite));
            }
            match handshake {
                Ok((keys, bmc_session_id)) => {
                    let mut session = Session {
                        socket: link.socket,
                        endpoint: link.endpoint,
                        timing: link.timing,
                        keys,
                        bmc_session_id,
                        sequence: 1,
                        request_sequence: 1,
                    };
                    session
                        .command(
                            "Set Session Privilege Level",
                            NETFN_APP,
                            0x3B,
                            &[info.privilege as u8],
                        )
                        .await?;
                    return Ok(session);
                }
                // The BMC does not offer this suite: try the next one.
                Err(HandshakeError::SuiteRefused(error)) if index + 1 < suites.len() => {
                    tracing::debug!(bmc = %link.endpoint, suite = suite.id(), %error, "cipher suite refused");
                    last_error = Some(error);
                }
                Err(HandshakeError::SuiteRefused(error) | HandshakeError::Other(error)) => {
                    return Err(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| protocol(&link.endpoint, "no cipher suite to try".into())))
    }

    /// Sends an IPMI request in the session and returns the response data (completion code
    /// 0), or the completion code as an error.
    pub(crate) async fn command(
        &mut self,
        name: &'static str,
        netfn: u8,
        command: u8,
        data: &[u8],
    ) -> Result<Vec<u8>, IpmiError> {
        let request_sequence = self.request_sequence;
        self.request_sequence = (self.request_sequence + 1) & 0x3F;
        let message = rmcp::ipmi_request(netfn, command, request_sequence, data);
        let attempts = self.timing.retries + 1;
        let mut buffer = [0u8; 1024];
        let mut last_reason = String::from("timed out");
        for _ in 0..attempts {
            let packet =
                rmcp::session_packet(&self.keys, self.bmc_session_id, self.sequence, &message);
            self.sequence = self.sequence.wrapping_add(1).max(1);
            self.socket
                .send(&packet)
                .await
                .map_err(|error| self.unreachable(1, error.to_string()))?;
            let deadline = tokio::time::Instant::now() + self.timing.timeout;
            loop {
                let received =
                    match tokio::time::timeout_at(deadline, self.socket.recv(&mut buffer)).await {
                        Err(_) => break,
                        Ok(Err(error)) => {
                            last_reason = error.to_string();
                            break;
                        }
                        Ok(Ok(length)) => length,
                    };
                let Ok(packet) = rmcp::parse_packet(&buffer[..received], Some(&self.keys)) else {
                    continue;
                };
                if packet.payload_type != PAYLOAD_IPMI {
                    continue;
                }
                let Ok(response) = rmcp::parse_ipmi_response(&packet.payload) else {
                    continue;
                };
                if response.sequence != request_sequence
                    || response.command != command
                    || response.netfn != netfn + 1
                {
                    continue;
                }
                if response.completion != 0 {
                    return Err(IpmiError::Completion {
                        endpoint: self.endpoint.clone(),
                        command: name,
                        code: response.completion,
                        meaning: completion_meaning(response.completion),
                    });
                }
                return Ok(response.data);
            }
        }
        Err(self.unreachable(attempts, format!("{name}: {last_reason}")))
    }

    /// Sends one session packet of `payload_type` without waiting for anything (SOL packets,
    /// whose acknowledgements the caller matches itself).
    pub(crate) async fn send_payload(
        &mut self,
        payload_type: u8,
        payload: &[u8],
    ) -> Result<(), IpmiError> {
        let packet = rmcp::session_payload_packet(
            &self.keys,
            self.bmc_session_id,
            self.sequence,
            payload_type,
            payload,
        );
        self.sequence = self.sequence.wrapping_add(1).max(1);
        self.socket
            .send(&packet)
            .await
            .map_err(|error| self.unreachable(1, error.to_string()))?;
        Ok(())
    }

    /// The next authentic session packet of `payload_type` the BMC sends (others are
    /// skipped); waits as long as it takes, so callers bound it with a timeout.
    pub(crate) async fn receive_payload(&mut self, payload_type: u8) -> Result<Vec<u8>, IpmiError> {
        let mut buffer = [0u8; 1024];
        loop {
            let length = self
                .socket
                .recv(&mut buffer)
                .await
                .map_err(|error| self.unreachable(1, error.to_string()))?;
            let Ok(packet) = rmcp::parse_packet(&buffer[..length], Some(&self.keys)) else {
                continue;
            };
            if packet.payload_type == payload_type {
                return Ok(packet.payload);
            }
        }
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Closes the session; failures only get logged (the BMC drops idle sessions anyway).
    pub(crate) async fn close(mut self) {
        let id = self.bmc_session_id.to_le_bytes();
        if let Err(error) = self.command("Close Session", NETFN_APP, 0x3C, &id).await {
            tracing::debug!(bmc = %self.endpoint, %error, "closing the IPMI session failed");
        }
    }

    fn unreachable(&self, attempts: u32, reason: String) -> IpmiError {
        IpmiError::Unreachable {
            endpoint: self.endpoint.clone(),
            attempts,
            reason,
        }
    }
}

fn protocol(endpoint: &str, reason: String) -> IpmiError {
    IpmiError::Protocol {
        endpoint: endpoint.to_owned(),
        reason,
    }
}

enum HandshakeError {
    /// The BMC refused the proposed algorithms.
    SuiteRefused(IpmiError),
    Other(IpmiError),
}

impl From<IpmiError> for HandshakeError {
    fn from(error: IpmiError) -> Self {
        Self::Other(error)
    }
}

/// The socket before a session exists.
struct Link {
    socket: UdpSocket,
    endpoint: String,
    timing: Timing,
}

impl Link {
    /// Sends `packet` and returns the first reply `accept` takes, retransmitting on silence.
    async fn exchange<T>(
        &self,
        what: &str,
        packet: &[u8],
        mut accept: impl FnMut(&[u8]) -> Option<T>,
    ) -> Result<T, IpmiError> {
        let attempts = self.timing.retries + 1;
        let mut buffer = [0u8; 1024];
        let mut last_reason = String::from("timed out");
        for _ in 0..attempts {
            self.socket
                .send(packet)
                .await
                .map_err(|error| IpmiError::Unreachable {
                    endpoint: self.endpoint.clone(),
                    attempts: 1,
                    reason: error.to_string(),
                })?;
            let deadline = tokio::time::Instant::now() + self.timing.timeout;
            loop {
                match tokio::time::timeout_at(deadline, self.socket.recv(&mut buffer)).await {
                    Err(_) => break,
                    Ok(Err(error)) => {
                        // ICMP port unreachable shows as "Connection refused" on the next
                        // receive of a connected socket: nobody listens there.
                        last_reason = error.to_string();
                        break;
                    }
                    Ok(Ok(length)) => {
                        if let Some(value) = accept(&buffer[..length]) {
                            return Ok(value);
                        }
                    }
                }
            }
        }
        Err(IpmiError::Unreachable {
            endpoint: self.endpoint.clone(),
            attempts,
            reason: format!("{what}: {last_reason}"),
        })
    }

    /// Get Channel Authentication Capabilities: checks the BMC speaks IPMI 2.0.
    async fn channel_capabilities(&mut self, info: &IpmiInfo) -> Result<(), IpmiError> {
        // Channel "this one" (0x0E) with the bit asking for IPMI 2.0 extended data.
        let message = rmcp::ipmi_request(
            NETFN_APP,
            GET_CHANNEL_AUTH_CAPABILITIES,
            0,
            &[0x8E, info.privilege as u8],
        );
        let response = self
            .exchange(
                "Get Channel Authentication Capabilities",
                &rmcp::ipmi15_packet(&message),
                |bytes| {
                    let packet = rmcp::parse_packet(bytes, None).ok()?;
                    let response = rmcp::parse_ipmi_response(&packet.payload).ok()?;
                    (response.command == GET_CHANNEL_AUTH_CAPABILITIES).then_some(response)
                },
            )
            .await?;
        if response.completion != 0 {
            return Err(IpmiError::Completion {
                endpoint: self.endpoint.clone(),
                command: "Get Channel Authentication Capabilities",
                code: response.completion,
                meaning: completion_meaning(response.completion),
            });
        }
        // Byte 2 bit 7: IPMI 2.0 extended capabilities present; byte 4 bit 1: IPMI 2.0.
        let supports_v2 = response.data.get(1).is_some_and(|byte| byte & 0x80 != 0)
            && response.data.get(3).is_none_or(|byte| byte & 0x02 != 0);
        if !supports_v2 {
            return Err(protocol(
                &self.endpoint,
                "the BMC does not offer IPMI 2.0 (RMCP+) on this channel".to_owned(),
            ));
        }
        Ok(())
    }

    /// The suites to try, in order, from Get Channel Cipher Suites: the preferred one the BMC
    /// lists, or 17 then 3 when the BMC does not answer the command.
    async fn offered_suites(&mut self) -> Result<Vec<CipherSuite>, IpmiError> {
        let fallback = vec![CipherSuite::Seventeen, CipherSuite::Three];
        let mut data = Vec::new();
        // The list index (6 bits) picks the page; BMCs that ignore it (pyghmi's) answer one
        // short page, which ends the list.
        for index in 0..0x40u8 {
            // Channel "this one", payload type IPMI, list by cipher suite (bit 7).
            let message = rmcp::ipmi_request(
                NETFN_APP,
                GET_CHANNEL_CIPHER_SUITES,
                index,
                &[0x0E, PAYLOAD_IPMI, 0x80 | index],
            );
            let answer = self
                .exchange(
                    "Get Channel Cipher Suites",
                    &rmcp::ipmi15_packet(&message),
                    |bytes| {
                        let packet = rmcp::parse_packet(bytes, None).ok()?;
                        let response = rmcp::parse_ipmi_response(&packet.payload).ok()?;
                        (response.command == GET_CHANNEL_CIPHER_SUITES
                            && response.sequence == index)
                            .then_some(response)
                    },
                )
                .await;
            let response = match answer {
                Ok(response) if response.completion == 0 => response,
                Ok(response) => {
                    tracing::debug!(bmc = %self.endpoint, completion = response.completion,
                        "Get Channel Cipher Suites refused; trying suites 17, then 3");
                    return Ok(fallback);
                }
                Err(error) => {
                    tracing::debug!(bmc = %self.endpoint, %error,
                        "Get Channel Cipher Suites unanswered; trying suites 17, then 3");
                    return Ok(fallback);
                }
            };
            // The channel number, then up to a page of record bytes.
            let page = response.data.get(1..).unwrap_or_default();
            data.extend_from_slice(page);
            if page.len() < CIPHER_SUITE_PAGE {
                break;
            }
        }
        let offered = rmcp::parse_cipher_suite_records(&data);
        if offered.is_empty() {
            return Ok(fallback);
        }
        match rmcp::preferred_suite(&offered) {
            Some(suite) => Ok(vec![suite]),
            None => Err(IpmiError::NoCommonSuite {
                endpoint: self.endpoint.clone(),
                offered: offered
                    .iter()
                    .map(|record| record.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Open Session and RAKP 1–4; the session keys and the BMC's session id.
    async fn handshake(
        &mut self,
        info: &IpmiInfo,
        suite: CipherSuite,
    ) -> Result<(SessionKeys, u32), HandshakeError> {
        let endpoint = self.endpoint.clone();
        let session_error = |reason: String| IpmiError::Session {
            endpoint: endpoint.clone(),
            suite: suite.id(),
            reason,
        };
        let console_session_id: u32 = rand::random::<u32>().max(1);
        let tag: u8 = rand::random();

        let request = rmcp::open_session_request(tag, console_session_id, suite);
        let response = self
            .exchange(
                "Open Session",
                &rmcp::unauthenticated_packet(PAYLOAD_OPEN_SESSION_REQUEST, &request),
                |bytes| {
                    let packet = rmcp::parse_packet(bytes, None).ok()?;
                    (packet.payload_type == PAYLOAD_OPEN_SESSION_RESPONSE
                        && packet.payload.first() == Some(&tag))
                    .then_some(packet.payload)
                },
            )
            .await?;
        let status = response.get(1).copied().unwrap_or(0xFF);
        if status != 0 {
            let error = session_error(format!(
                "Open Session refused: {}",
                rmcp::rmcp_status(status)
            ));
            return Err(
                if matches!(status, 0x04 | 0x05 | 0x06 | 0x07 | 0x10 | 0x11) {
                    HandshakeError::SuiteRefused(error)
                } else {
                    HandshakeError::Other(error)
                },
            );
        }
        if response.len() < 12 || read_u32(&response, 4) != console_session_id {
            return Err(session_error("malformed Open Session response".to_owned()).into());
        }
        // The algorithms the BMC took (one 8-byte payload each, the number at offset 4): a BMC
        // may answer a proposal it does not support with another suite's.
        let accepted = [16, 24, 32].map(|at| response.get(at).map(|number| number & 0x3F));
        let proposed = [
            suite.authentication_algorithm(),
            suite.integrity_algorithm(),
            rmcp::CONFIDENTIALITY_AES_CBC_128,
        ]
        .map(Some);
        if accepted.iter().all(Option::is_some) && accepted != proposed {
            let [authentication, integrity, confidentiality] =
                accepted.map(Option::unwrap_or_default);
            return Err(HandshakeError::SuiteRefused(session_error(format!(
                "the BMC answered with other algorithms (authentication {authentication}, \
                 integrity {integrity}, confidentiality {confidentiality})"
            ))));
        }
        let bmc_session_id = read_u32(&response, 8);

        let console_random: [u8; 16] = rand::random();
        let role = NAME_ONLY_LOOKUP | info.privilege as u8;
        let username = info.username.as_bytes();
        let mut rakp1 = vec![tag, 0, 0, 0];
        rakp1.extend_from_slice(&bmc_session_id.to_le_bytes());
        rakp1.extend_from_slice(&console_random);
        rakp1.extend_from_slice(&[role, 0, 0, username.len() as u8]);
        rakp1.extend_from_slice(username);
        let rakp2 = self
            .exchange(
                "RAKP 1",
                &rmcp::unauthenticated_packet(PAYLOAD_RAKP_1, &rakp1),
                |bytes| {
                    let packet = rmcp::parse_packet(bytes, None).ok()?;
                    (packet.payload_type == PAYLOAD_RAKP_2 && packet.payload.first() == Some(&tag))
                        .then_some(packet.payload)
                },
            )
            .await?;
        let status = rakp2.get(1).copied().unwrap_or(0xFF);
        if status != 0 {
            let reason = format!("RAKP 2: {}", rmcp::rmcp_status(status));
            return Err(if matches!(status, 0x0D | 0x0A | 0x09) {
                IpmiError::Auth { endpoint, reason }.into()
            } else {
                session_error(reason).into()
            });
        }
        if rakp2.len() < 40 + suite.auth_code_len() {
            return Err(session_error("RAKP 2 is too short".to_owned()).into());
        }
        let mut bmc_random = [0u8; 16];
        bmc_random.copy_from_slice(&rakp2[8..24]);
        let mut bmc_guid = [0u8; 16];
        bmc_guid.copy_from_slice(&rakp2[24..40]);
        let rakp = Rakp {
            suite,
            console_session_id,
            bmc_session_id,
            console_random,
            bmc_random,
            bmc_guid,
            role,
            username,
            password: &info.password,
        };
        if rakp2[40..40 + suite.auth_code_len()] != rakp.rakp2_code()[..] {
            // The BMC signed with a different password than ours.
            return Err(IpmiError::Auth {
                endpoint,
                reason: "the BMC's RAKP 2 code does not match the password".to_owned(),
            }
            .into());
        }

        let mut rakp3 = vec![tag, 0, 0, 0];
        rakp3.extend_from_slice(&bmc_session_id.to_le_bytes());
        rakp3.extend_from_slice(&rakp.rakp3_code());
        let rakp4 = self
            .exchange(
                "RAKP 3",
                &rmcp::unauthenticated_packet(PAYLOAD_RAKP_3, &rakp3),
                |bytes| {
                    let packet = rmcp::parse_packet(bytes, None).ok()?;
                    (packet.payload_type == PAYLOAD_RAKP_4 && packet.payload.first() == Some(&tag))
                        .then_some(packet.payload)
                },
            )
            .await?;
        let status = rakp4.get(1).copied().unwrap_or(0xFF);
        if status != 0 {
            let reason = format!("RAKP 4: {}", rmcp::rmcp_status(status));
            return Err(if status == 0x0F {
                IpmiError::Auth { endpoint, reason }.into()
            } else {
                session_error(reason).into()
            });
        }
        let sik = rakp.sik();
        let check = rakp.rakp4_check(&sik);
        if rakp4.len() < 8 + check.len() || read_u32(&rakp4, 4) != console_session_id {
            return Err(session_error("malformed RAKP 4".to_owned()).into());
        }
        if rakp4[8..8 + check.len()] != check[..] {
            return Err(session_error("RAKP 4 integrity check value mismatch".to_owned()).into());
        }
        Ok((SessionKeys::derive(suite, &sik), bmc_session_id))
    }
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// Completion codes (IPMI 2.0 Table 5-2) in words.
fn completion_meaning(code: u8) -> &'static str {
    match code {
        0xC0 => "node busy",
        0xC1 => "invalid command",
        0xC2 => "command invalid for this LUN",
        0xC3 => "timeout while processing",
        0xC4 => "out of space",
        0xC5 => "reservation cancelled or invalid",
        0xC6 => "request data truncated",
        0xC7 => "request data length invalid",
        0xC8 => "request data field length limit exceeded",
        0xC9 => "parameter out of range",
        0xCA => "cannot return the number of requested data bytes",
        0xCB => "requested sensor, data or record not present",
        0xCC => "invalid data field in request (not supported by this BMC)",
        0xCD => "command illegal for this sensor or record type",
        0xCE => "command response could not be provided",
        0xCF => "cannot execute a duplicated request",
        0xD0 => "SDR repository in update mode",
        0xD1 => "device in firmware update mode",
        0xD2 => "BMC initialization in progress",
        0xD3 => "destination unavailable",
        0xD4 => "insufficient privilege level (check ipmi_priv_level)",
        0xD5 => "command not supported in the present state",
        0xD6 => "command sub-function disabled or unavailable",
        0xFF => "unspecified error",
        _ => "unknown completion code",
    }
}
