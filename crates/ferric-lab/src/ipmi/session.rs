//! RMCP+ sessions on the BMC side: Open Session, RAKP 1–4 (IPMI 2.0 §13.17–13.31), and the
//! signed, encrypted requests of an active session.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferric_drivers::ipmi::rmcp::{
    self, CipherSuite, IpmiRequest, PAYLOAD_OPEN_SESSION_RESPONSE, PAYLOAD_RAKP_2, PAYLOAD_RAKP_4,
    Rakp, SessionKeys,
};

use super::{IpmiBmc, Outcome, PRIVILEGE_ADMINISTRATOR, PRIVILEGE_USER};
use crate::machine::MachineControl;

/// Sessions (including half-open ones) one BMC keeps; real BMCs allow a handful.
const MAX_SESSIONS: usize = 16;
/// A session unused this long is dropped (IPMI's default session inactivity timeout).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How far a request's session sequence number may stray from the highest seen (§6.12.13).
const SEQUENCE_WINDOW: u32 = 16;

/// RMCP+ status codes (IPMI 2.0 Table 13-15) this BMC sends.
const STATUS_NO_RESOURCES: u8 = 0x01;
const STATUS_INVALID_SESSION_ID: u8 = 0x02;
const STATUS_INVALID_ROLE: u8 = 0x09;
const STATUS_INVALID_NAME_LENGTH: u8 = 0x0C;
const STATUS_UNAUTHORIZED_NAME: u8 = 0x0D;
const STATUS_INVALID_INTEGRITY_CHECK: u8 = 0x0F;
const STATUS_NO_CIPHER_SUITE_MATCH: u8 = 0x11;
const STATUS_ILLEGAL_PARAMETER: u8 = 0x12;

/// The name-only lookup bit of the RAKP 1 role byte.
const NAME_ONLY_LOOKUP: u8 = 0x10;

#[derive(Default)]
pub(super) struct Sessions {
    by_id: HashMap<u32, Session>,
}

struct Session {
    console_id: u32,
    suite: CipherSuite,
    last_used: Instant,
    stage: Stage,
    /// Where the session's last authentic packet came from (where SOL output goes).
    peer: Option<SocketAddr>,
}

enum Stage {
    /// Open Session answered; RAKP 1 expected.
    Opened,
    /// RAKP 2 sent; RAKP 3 expected.
    Challenged {
        console_random: [u8; 16],
        bmc_random: [u8; 16],
        role: u8,
    },
    Active(Active),
}

struct Active {
    keys: SessionKeys,
    /// The highest privilege the session may raise itself to.
    max_privilege: u8,
    privilege: u8,
    /// The highest session sequence number received.
    inbound: u32,
    /// The next sequence number the BMC sends.
    outbound: u32,
}

impl Sessions {
    /// Room for one more session: expired ones go first.
    fn make_room(&mut self) -> bool {
        let now = Instant::now();
        self.by_id
            .retain(|_, session| now.duration_since(session.last_used) < IDLE_TIMEOUT);
        self.by_id.len() < MAX_SESSIONS
    }

    fn new_id(&self) -> u32 {
        loop {
            let id: u32 = rand::random();
            if id != 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }
}

/// The header of Open Session and RAKP replies: the console's tag, the status, two reserved
/// bytes, the console's session id.
fn reply_head(tag: u8, status: u8, console_id: u32) -> Vec<u8> {
    let mut payload = vec![tag, status, 0, 0];
    payload.extend_from_slice(&console_id.to_le_bytes());
    payload
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let word = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
}

impl<M: MachineControl> IpmiBmc<M> {
    /// Open Session Request (§13.17): picks the proposed suite if it is 3 or 17.
    pub(super) fn open_session(&self, request: &[u8]) -> Option<Vec<u8>> {
        let tag = *request.first()?;
        let console_id = read_u32(request, 4)?;
        let reply = |status: u8| {
            Some(rmcp::unauthenticated_packet(
                PAYLOAD_OPEN_SESSION_RESPONSE,
                &reply_head(tag, status, console_id),
            ))
        };
        if request.len() < 32 {
            return reply(STATUS_ILLEGAL_PARAMETER);
        }
        let requested_privilege = request[1] & 0x0F;
        if requested_privilege > PRIVILEGE_ADMINISTRATOR {
            return reply(STATUS_INVALID_ROLE);
        }
        // Three 8-byte algorithm payloads: type, reserved, reserved, length, algorithm, ….
        let algorithm = |index: usize| {
            let record = &request[8 + 8 * index..16 + 8 * index];
            (usize::from(record[0]) == index).then_some(record[4] & 0x3F)
        };
        let suite = match (algorithm(0), algorithm(1), algorithm(2)) {
            (Some(auth), Some(integrity), Some(confidentiality)) => {
                CipherSuite::from_algorithms(auth, integrity, confidentiality)
            }
            _ => None,
        };
        let Some(suite) = suite else {
            return reply(STATUS_NO_CIPHER_SUITE_MATCH);
        };
        let mut sessions = self.sessions();
        if !sessions.make_room() {
            return reply(STATUS_NO_RESOURCES);
        }
        let bmc_id = sessions.new_id();
        sessions.by_id.insert(
            bmc_id,
            Session {
                console_id,
                suite,
                last_used: Instant::now(),
                stage: Stage::Opened,
                peer: None,
            },
        );
        let mut payload = reply_head(tag, 0, console_id);
        // Byte 2 is the maximum privilege granted.
        payload[2] = PRIVILEGE_ADMINISTRATOR;
        payload.extend_from_slice(&bmc_id.to_le_bytes());
        for (kind, value) in [
            (0x00, suite.authentication_algorithm()),
            (0x01, suite.integrity_algorithm()),
            (0x02, rmcp::CONFIDENTIALITY_AES_CBC_128),
        ] {
            payload.extend_from_slice(&[kind, 0, 0, 0x08, value, 0, 0, 0]);
        }
        Some(rmcp::unauthenticated_packet(
            PAYLOAD_OPEN_SESSION_RESPONSE,
            &payload,
        ))
    }

    /// RAKP 1 (§13.20) → RAKP 2: checks the user name and proves the BMC knows the password.
    /// A wrong password shows at the console, which finds RAKP 2's code wrong.
    pub(super) fn rakp1(&self, request: &[u8]) -> Option<Vec<u8>> {
        let tag = *request.first()?;
        let bmc_id = read_u32(request, 4)?;
        let mut sessions = self.sessions();
        let Some(session) = sessions.by_id.get_mut(&bmc_id) else {
            return Some(rmcp::unauthenticated_packet(
                PAYLOAD_RAKP_2,
                &reply_head(tag, STATUS_INVALID_SESSION_ID, 0),
            ));
        };
        let console_id = session.console_id;
        let fail = |status: u8| {
            Some(rmcp::unauthenticated_packet(
                PAYLOAD_RAKP_2,
                &reply_head(tag, status, console_id),
            ))
        };
        if !matches!(session.stage, Stage::Opened) {
            return fail(STATUS_INVALID_SESSION_ID);
        }
        if request.len() < 28 {
            return fail(STATUS_ILLEGAL_PARAMETER);
        }
        let mut console_random = [0u8; 16];
        console_random.copy_from_slice(&request[8..24]);
        let role = request[24];
        let name_length = usize::from(request[27]);
        let Some(username) = request.get(28..28 + name_length) else {
            return fail(STATUS_INVALID_NAME_LENGTH);
        };
        if name_length > 16 {
            return fail(STATUS_INVALID_NAME_LENGTH);
        }
        if role & !(NAME_ONLY_LOOKUP | 0x0F) != 0 || role & 0x0F > PRIVILEGE_ADMINISTRATOR {
            return fail(STATUS_INVALID_ROLE);
        }
        if username != self.username.as_slice() {
            sessions.by_id.remove(&bmc_id);
            return fail(STATUS_UNAUTHORIZED_NAME);
        }
        let bmc_random: [u8; 16] = rand::random();
        let suite = session.suite;
        let code = Rakp {
            suite,
            console_session_id: console_id,
            bmc_session_id: bmc_id,
            console_random,
            bmc_random,
            bmc_guid: self.guid,
            role,
            username,
            password: &self.password,
        }
        .rakp2_code();
        session.stage = Stage::Challenged {
            console_random,
            bmc_random,
            role,
        };
        session.last_used = Instant::now();
        let mut payload = reply_head(tag, 0, console_id);
        payload.extend_from_slice(&bmc_random);
        payload.extend_from_slice(&self.guid);
        payload.extend_from_slice(&code);
        Some(rmcp::unauthenticated_packet(PAYLOAD_RAKP_2, &payload))
    }

    /// RAKP 3 (§13.22) → RAKP 4: checks the console's proof of the password and activates the
    /// session, or answers "invalid integrity check value" and forgets it.
    pub(super) fn rakp3(&self, request: &[u8]) -> Option<Vec<u8>> {
        let tag = *request.first()?;
        let console_status = *request.get(1)?;
        let bmc_id = read_u32(request, 4)?;
        let mut sessions = self.sessions();
        let Some(session) = sessions.by_id.get_mut(&bmc_id) else {
            return Some(rmcp::unauthenticated_packet(
                PAYLOAD_RAKP_4,
                &reply_head(tag, STATUS_INVALID_SESSION_ID, 0),
            ));
        };
        let console_id = session.console_id;
        let Stage::Challenged {
            console_random,
            bmc_random,
            role,
        } = session.stage
        else {
            return Some(rmcp::unauthenticated_packet(
                PAYLOAD_RAKP_4,
                &reply_head(tag, STATUS_INVALID_SESSION_ID, console_id),
            ));
        };
        let suite = session.suite;
        let rakp = Rakp {
            suite,
            console_session_id: console_id,
            bmc_session_id: bmc_id,
            console_random,
            bmc_random,
            bmc_guid: self.guid,
            role,
            username: &self.username,
            password: &self.password,
        };
        let code = request.get(8..8 + suite.auth_code_len());
        if console_status != 0 || code != Some(rakp.rakp3_code().as_slice()) {
            // The console gave up (it found RAKP 2 wrong) or does not know the password.
            sessions.by_id.remove(&bmc_id);
            let status = if console_status != 0 {
                console_status
            } else {
                STATUS_INVALID_INTEGRITY_CHECK
            };
            return Some(rmcp::unauthenticated_packet(
                PAYLOAD_RAKP_4,
                &reply_head(tag, status, console_id),
            ));
        }
        let sik = rakp.sik();
        let check = rakp.rakp4_check(&sik);
        let max_privilege = match role & 0x0F {
            0 => PRIVILEGE_ADMINISTRATOR,
            level => level,
        };
        session.stage = Stage::Active(Active {
            keys: SessionKeys::derive(suite, &sik),
            max_privilege,
            // Sessions start at USER (or lower) until Set Session Privilege Level (§22.18).
            privilege: max_privilege.min(PRIVILEGE_USER),
            inbound: 0,
            outbound: 1,
        });
        session.last_used = Instant::now();
        let mut payload = reply_head(tag, 0, console_id);
        payload.extend_from_slice(&check);
        Some(rmcp::unauthenticated_packet(PAYLOAD_RAKP_4, &payload))
    }

    /// The payload of a signed, encrypted packet in the active session `bmc_id` (checked,
    /// decrypted, inside the sequence window), with the session's privilege; the session
    /// remembers `peer`.
    pub(super) fn open_sealed(
        &self,
        bmc_id: u32,
        datagram: &[u8],
        peer: Option<SocketAddr>,
    ) -> Option<(Vec<u8>, u8)> {
        let mut sessions = self.sessions();
        let session = sessions.by_id.get_mut(&bmc_id)?;
        let Stage::Active(active) = &mut session.stage else {
            return None;
        };
        let packet = rmcp::parse_packet(datagram, Some(&active.keys)).ok()?;
        let sequence = read_u32(datagram, 10)?;
        // Replays far outside the window are dropped; retransmissions inside it are
        // answered again, as the console expects after a lost reply.
        if sequence == 0
            || sequence.wrapping_add(SEQUENCE_WINDOW) < active.inbound
            || sequence > active.inbound.saturating_add(SEQUENCE_WINDOW)
        {
            return None;
        }
        active.inbound = active.inbound.max(sequence);
        let privilege = active.privilege;
        session.last_used = Instant::now();
        if peer.is_some() {
            session.peer = peer;
        }
        Some((packet.payload, privilege))
    }

    /// `payload` sealed for the console of the active session `bmc_id`, and where it goes.
    pub(super) fn seal(
        &self,
        bmc_id: u32,
        payload_type: u8,
        payload: &[u8],
    ) -> Option<(Vec<u8>, Option<SocketAddr>)> {
        let mut sessions = self.sessions();
        let session = sessions.by_id.get_mut(&bmc_id)?;
        let console_id = session.console_id;
        let peer = session.peer;
        let Stage::Active(active) = &mut session.stage else {
            return None;
        };
        let packet = rmcp::session_payload_packet(
            &active.keys,
            console_id,
            active.outbound,
            payload_type,
            payload,
        );
        active.outbound = active.outbound.wrapping_add(1).max(1);
        Some((packet, peer))
    }

    /// The sealed answer to `request` in session `bmc_id`, carrying out the session changes
    /// the command asked for (a new privilege level, a session to close).
    pub(super) fn seal_reply(
        &self,
        bmc_id: u32,
        request: &IpmiRequest,
        outcome: Outcome,
    ) -> Option<Vec<u8>> {
        let response = rmcp::ipmi_response(request, outcome.completion, &outcome.data);
        let mut sessions = self.sessions();
        let session = sessions.by_id.get_mut(&bmc_id)?;
        let console_id = session.console_id;
        let Stage::Active(active) = &mut session.stage else {
            return None;
        };
        if let Some(level) = outcome.new_privilege {
            active.privilege = level;
        }
        let packet = rmcp::session_packet(&active.keys, console_id, active.outbound, &response);
        active.outbound = active.outbound.wrapping_add(1).max(1);
        if let Some(closed) = outcome.close {
            sessions.by_id.remove(&closed);
            drop(sessions);
            self.sol_session_closed(closed);
        }
        Some(packet)
    }

    /// The highest privilege session `bmc_id` may take, if it is active.
    pub(super) fn max_privilege(&self, bmc_id: u32) -> Option<u8> {
        match &self.sessions().by_id.get(&bmc_id)?.stage {
            Stage::Active(active) => Some(active.max_privilege),
            _ => None,
        }
    }

    /// Whether `bmc_id` names a session (for Close Session).
    pub(super) fn has_session(&self, bmc_id: u32) -> bool {
        self.sessions().by_id.contains_key(&bmc_id)
    }
}
