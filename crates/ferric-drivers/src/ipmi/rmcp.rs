//! IPMI 2.0 over LAN, the bytes: RMCP framing, the RMCP+ session header with integrity
//! (HMAC-SHA1-96 / HMAC-SHA256-128) and confidentiality (AES-CBC-128), IPMI request and
//! response messages, and the RAKP key derivation of cipher suites 3 and 17 (IPMI 2.0
//! §13.6–13.32). No IO: the client (`session.rs`) and the lab's virtual BMC
//! (`ferric_lab::ipmi`) send what this builds; both sides of a session use the same framing,
//! each addressing the other's session id.

use aes::Aes128;
use aes::cipher::block_padding::NoPadding;
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use hmac::{Hmac, Mac};

/// RMCP header: version 1.0, reserved, sequence 0xFF (no RMCP ACK), class IPMI.
const RMCP_HEADER: [u8; 4] = [0x06, 0x00, 0xFF, 0x07];
/// Authentication type "RMCP+" in the IPMI 2.0 session header.
const AUTH_TYPE_RMCP_PLUS: u8 = 0x06;
const FLAG_ENCRYPTED: u8 = 0x80;
const FLAG_AUTHENTICATED: u8 = 0x40;

/// Payload types (IPMI 2.0 Table 13-16).
pub const PAYLOAD_IPMI: u8 = 0x00;
/// Serial-over-LAN (IPMI 2.0 §15.9).
pub const PAYLOAD_SOL: u8 = 0x01;
pub const PAYLOAD_OPEN_SESSION_REQUEST: u8 = 0x10;
pub const PAYLOAD_OPEN_SESSION_RESPONSE: u8 = 0x11;
pub const PAYLOAD_RAKP_1: u8 = 0x12;
pub const PAYLOAD_RAKP_2: u8 = 0x13;
pub const PAYLOAD_RAKP_3: u8 = 0x14;
pub const PAYLOAD_RAKP_4: u8 = 0x15;

/// The BMC's address on the IPMB and ours as a remote console software id.
pub const BMC_ADDRESS: u8 = 0x20;
const CONSOLE_ADDRESS: u8 = 0x81;
/// The confidentiality algorithm both suites use: AES-CBC-128.
pub const CONFIDENTIALITY_AES_CBC_128: u8 = 0x01;

/// The two cipher suites with encryption that current BMCs offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherSuite {
    /// RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128.
    Three,
    /// RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128.
    Seventeen,
}

impl CipherSuite {
    pub const fn id(self) -> u8 {
        match self {
            Self::Three => 3,
            Self::Seventeen => 17,
        }
    }

    pub const fn authentication_algorithm(self) -> u8 {
        match self {
            Self::Three => 0x01,
            Self::Seventeen => 0x03,
        }
    }

    pub const fn integrity_algorithm(self) -> u8 {
        match self {
            Self::Three => 0x01,
            Self::Seventeen => 0x04,
        }
    }

    /// The suite whose algorithms an Open Session Request proposes, if it is 3 or 17.
    pub fn from_algorithms(authentication: u8, integrity: u8, confidentiality: u8) -> Option<Self> {
        [Self::Three, Self::Seventeen].into_iter().find(|suite| {
            suite.authentication_algorithm() == authentication
                && suite.integrity_algorithm() == integrity
                && confidentiality == CONFIDENTIALITY_AES_CBC_128
        })
    }

    /// Length of the RAKP 2/3 key exchange codes (the full HMAC).
    pub const fn auth_code_len(self) -> usize {
        match self {
            Self::Three => 20,
            Self::Seventeen => 32,
        }
    }

    /// Length of the RAKP 4 check value and of each packet's AuthCode (truncated HMAC).
    pub const fn integrity_len(self) -> usize {
        match self {
            Self::Three => 12,
            Self::Seventeen => 16,
        }
    }

    /// HMAC with this suite's hash.
    pub fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
            let mut mac = match <M as hmac::digest::KeyInit>::new_from_slice(key) {
                Ok(mac) => mac,
                Err(_) => return Vec::new(),
            };
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Self::Three => run::<Hmac<sha1::Sha1>>(key, parts),
            Self::Seventeen => run::<Hmac<sha2::Sha256>>(key, parts),
        }
    }
}

/// One cipher suite record of a Get Channel Cipher Suites answer (IPMI 2.0 §22.15, Table
/// 22-18): the suite id and the algorithm numbers it lists, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OfferedSuite {
    pub id: u8,
    pub authentication: Vec<u8>,
    pub integrity: Vec<u8>,
    pub confidentiality: Vec<u8>,
}

impl OfferedSuite {
    /// Whether this record is `suite`: its id, with that suite's algorithms among those listed.
    pub fn is(&self, suite: CipherSuite) -> bool {
        self.id == suite.id()
            && self
                .authentication
                .contains(&suite.authentication_algorithm())
            && self.integrity.contains(&suite.integrity_algorithm())
            && self.confidentiality.contains(&CONFIDENTIALITY_AES_CBC_128)
    }
}

/// Start of a standard cipher suite record (then the suite id).
const RECORD_STANDARD: u8 = 0xC0;
/// Start of an OEM cipher suite record (then the suite id and a 3-byte IANA number).
const RECORD_OEM: u8 = 0xC1;

/// The records of the cipher suite data a BMC lists (the pages of Get Channel Cipher Suites
/// joined, channel bytes removed). Each algorithm byte carries its kind in bits 7:6 (00
/// authentication, 01 integrity, 10 confidentiality) and its number in bits 5:0; bytes
/// before the first record, and a record cut short, are ignored.
pub fn parse_cipher_suite_records(data: &[u8]) -> Vec<OfferedSuite> {
    let mut records: Vec<OfferedSuite> = Vec::new();
    let mut bytes = data.iter().copied();
    while let Some(byte) = bytes.next() {
        match byte {
            RECORD_STANDARD | RECORD_OEM => {
                let Some(id) = bytes.next() else { break };
                if byte == RECORD_OEM && bytes.by_ref().take(3).count() < 3 {
                    break;
                }
                records.push(OfferedSuite {
                    id,
                    ..OfferedSuite::default()
                });
            }
            _ => {
                let Some(record) = records.last_mut() else {
                    continue;
                };
                let number = byte & 0x3F;
                match byte >> 6 {
                    0b00 => record.authentication.push(number),
                    0b01 => record.integrity.push(number),
                    0b10 => record.confidentiality.push(number),
                    _ => {}
                }
            }
        }
    }
    records
}

/// The suite to open sessions with among those a BMC offers: 17 (SHA-256), else 3 (SHA-1),
/// as ipmitool picks.
pub fn preferred_suite(offered: &[OfferedSuite]) -> Option<CipherSuite> {
    [CipherSuite::Seventeen, CipherSuite::Three]
        .into_iter()
        .find(|suite| offered.iter().any(|record| record.is(*suite)))
}

/// Why a datagram could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("malformed RMCP packet ({0})")]
    Malformed(&'static str),
    #[error("the packet failed the integrity check")]
    Integrity,
}

/// The keys of an active session.
#[derive(Clone)]
pub struct SessionKeys {
    pub suite: CipherSuite,
    /// K1, the integrity key.
    k1: Vec<u8>,
    /// The first 16 bytes of K2, the AES key.
    aes_key: [u8; 16],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// K1 and K2 from the session integrity key (IPMI 2.0 §13.32): HMACs of 20 bytes of
    /// 0x01 and 0x02.
    pub fn derive(suite: CipherSuite, sik: &[u8]) -> Self {
        let k1 = suite.hmac(sik, &[&[0x01; 20]]);
        let k2 = suite.hmac(sik, &[&[0x02; 20]]);
        let mut aes_key = [0u8; 16];
        aes_key.copy_from_slice(&k2[..16]);
        Self { suite, k1, aes_key }
    }
}

/// What the handshake computes (IPMI 2.0 §13.31), with `m` the remote console (us) and `c`
/// the managed system (the BMC), integers little-endian as sent.
pub struct Rakp<'a> {
    pub suite: CipherSuite,
    pub console_session_id: u32,
    pub bmc_session_id: u32,
    pub console_random: [u8; 16],
    pub bmc_random: [u8; 16],
    pub bmc_guid: [u8; 16],
    /// The requested role byte of RAKP 1 (privilege | name-only lookup bit).
    pub role: u8,
    pub username: &'a [u8],
    pub password: &'a [u8],
}

impl Rakp<'_> {
    /// The key exchange code the BMC must send in RAKP 2.
    pub fn rakp2_code(&self) -> Vec<u8> {
        self.suite.hmac(
            self.password,
            &[
                &self.console_session_id.to_le_bytes(),
                &self.bmc_session_id.to_le_bytes(),
                &self.console_random,
                &self.bmc_random,
                &self.bmc_guid,
                &[self.role, self.username.len() as u8],
                self.username,
            ],
        )
    }

    /// Our key exchange code for RAKP 3.
    pub fn rakp3_code(&self) -> Vec<u8> {
        self.suite.hmac(
            self.password,
            &[
                &self.bmc_random,
                &self.console_session_id.to_le_bytes(),
                &[self.role, self.username.len() as u8],
                self.username,
            ],
        )
    }

    /// The session integrity key (no BMC key "K_G" configured: the password stands in).
    pub fn sik(&self) -> Vec<u8> {
        self.suite.hmac(
            self.password,
            &[
                &self.console_random,
                &self.bmc_random,
                &[self.role, self.username.len() as u8],
                self.username,
            ],
        )
    }

    /// The integrity check value the BMC must send in RAKP 4.
    pub fn rakp4_check(&self, sik: &[u8]) -> Vec<u8> {
        let mut code = self.suite.hmac(
            sik,
            &[
                &self.console_random,
                &self.bmc_session_id.to_le_bytes(),
                &self.bmc_guid,
            ],
        );
        code.truncate(self.suite.integrity_len());
        code
    }
}

/// The Open Session Request payload proposing `suite`.
pub fn open_session_request(tag: u8, console_session_id: u32, suite: CipherSuite) -> Vec<u8> {
    let mut payload = vec![tag, 0x00, 0x00, 0x00];
    payload.extend_from_slice(&console_session_id.to_le_bytes());
    for (kind, algorithm) in [
        (0x00, suite.authentication_algorithm()),
        (0x01, suite.integrity_algorithm()),
        (0x02, 0x01),
    ] {
        payload.extend_from_slice(&[kind, 0x00, 0x00, 0x08, algorithm, 0x00, 0x00, 0x00]);
    }
    payload
}

/// A packet outside a session (session id and sequence 0, neither signed nor encrypted).
pub fn unauthenticated_packet(payload_type: u8, payload: &[u8]) -> Vec<u8> {
    let mut packet = RMCP_HEADER.to_vec();
    packet.push(AUTH_TYPE_RMCP_PLUS);
    packet.push(payload_type);
    packet.extend_from_slice(&[0; 8]);
    packet.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    packet.extend_from_slice(payload);
    packet
}

/// An IPMI 1.5 packet with no authentication (Get Channel Authentication Capabilities is
/// sent this way before any session exists).
pub fn ipmi15_packet(message: &[u8]) -> Vec<u8> {
    let mut packet = RMCP_HEADER.to_vec();
    packet.push(0x00);
    packet.extend_from_slice(&[0; 8]);
    packet.push(message.len() as u8);
    packet.extend_from_slice(message);
    packet
}

/// An encrypted, signed IPMI message inside the session.
pub fn session_packet(
    keys: &SessionKeys,
    bmc_session_id: u32,
    sequence: u32,
    message: &[u8],
) -> Vec<u8> {
    session_payload_packet(keys, bmc_session_id, sequence, PAYLOAD_IPMI, message)
}

/// A signed, encrypted session packet carrying `payload` of `payload_type` (an IPMI message,
/// or a Serial-over-LAN packet).
pub fn session_payload_packet(
    keys: &SessionKeys,
    bmc_session_id: u32,
    sequence: u32,
    payload_type: u8,
    payload: &[u8],
) -> Vec<u8> {
    let payload = encrypt(&keys.aes_key, payload, rand::random());
    let mut covered = vec![
        AUTH_TYPE_RMCP_PLUS,
        payload_type | FLAG_ENCRYPTED | FLAG_AUTHENTICATED,
    ];
    covered.extend_from_slice(&bmc_session_id.to_le_bytes());
    covered.extend_from_slice(&sequence.to_le_bytes());
    covered.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    covered.extend_from_slice(&payload);
    // Integrity pad: the signed range (through pad length and next header) is whole DWORDs.
    let pad = (4 - (covered.len() + 2) % 4) % 4;
    covered.extend(std::iter::repeat_n(0xFF, pad));
    covered.push(pad as u8);
    covered.push(0x07);
    let mut code = keys.suite.hmac(&keys.k1, &[&covered]);
    code.truncate(keys.suite.integrity_len());
    let mut packet = RMCP_HEADER.to_vec();
    packet.extend_from_slice(&covered);
    packet.extend_from_slice(&code);
    packet
}

/// A received RMCP+ packet.
#[derive(Debug, PartialEq, Eq)]
pub struct Received {
    pub payload_type: u8,
    pub session_id: u32,
    pub payload: Vec<u8>,
}

/// The session id in an RMCP+ session header, without checking anything else (a BMC needs it
/// to find the keys [`parse_packet`] checks the packet with). `None` for IPMI 1.5 packets.
pub fn peek_session_id(bytes: &[u8]) -> Option<u32> {
    match bytes.get(4..10)? {
        [AUTH_TYPE_RMCP_PLUS, _, a, b, c, d] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Whether an RMCP+ packet is both signed and encrypted (what suites 3 and 17 require in a
/// session).
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.get(5).is_some_and(|flags| {
        flags & (FLAG_ENCRYPTED | FLAG_AUTHENTICATED) == (FLAG_ENCRYPTED | FLAG_AUTHENTICATED)
    })
}

/// Reads a datagram: checks the RMCP and session headers, and with `keys` the AuthCode and
/// the encryption of session packets. IPMI 1.5 packets come back with payload type
/// [`PAYLOAD_IPMI`] and session id 0.
pub fn parse_packet(bytes: &[u8], keys: Option<&SessionKeys>) -> Result<Received, PacketError> {
    if bytes.len() < 5 || bytes[0] != 0x06 || bytes[3] & 0x1F != 0x07 {
        return Err(PacketError::Malformed("not an RMCP IPMI packet"));
    }
    if bytes[4] != AUTH_TYPE_RMCP_PLUS {
        // IPMI 1.5 header: auth type, sequence (4), session id (4), [auth code (16)], length.
        let auth_code = if bytes[4] == 0 { 0 } else { 16 };
        let length_at = 4 + 1 + 8 + auth_code;
        let length = *bytes
            .get(length_at)
            .ok_or(PacketError::Malformed("short IPMI 1.5 header"))? as usize;
        let message = bytes
            .get(length_at + 1..length_at + 1 + length)
            .ok_or(PacketError::Malformed("short IPMI 1.5 message"))?;
        return Ok(Received {
            payload_type: PAYLOAD_IPMI,
            session_id: 0,
            payload: message.to_vec(),
        });
    }
    if bytes.len() < 16 {
        return Err(PacketError::Malformed("short RMCP+ session header"));
    }
    let flags = bytes[5];
    let payload_type = flags & 0x3F;
    let session_id = u32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let length = u16::from_le_bytes([bytes[14], bytes[15]]) as usize;
    let payload = bytes
        .get(16..16 + length)
        .ok_or(PacketError::Malformed("payload shorter than its length"))?;
    if flags & FLAG_AUTHENTICATED != 0 {
        let keys = keys.ok_or(PacketError::Malformed("a signed packet outside a session"))?;
        let code_len = keys.suite.integrity_len();
        if bytes.len() < 16 + length + 2 + code_len {
            return Err(PacketError::Malformed("short integrity trailer"));
        }
        let (covered, code) = bytes[4..].split_at(bytes.len() - 4 - code_len);
        let expected = keys.suite.hmac(&keys.k1, &[covered]);
        if expected.get(..code_len) != Some(code) {
            return Err(PacketError::Integrity);
        }
    } else if keys.is_some() && payload_type == PAYLOAD_IPMI {
        return Err(PacketError::Malformed(
            "an unsigned packet inside a signed session",
        ));
    }
    let payload = if flags & FLAG_ENCRYPTED != 0 {
        let keys = keys.ok_or(PacketError::Malformed(
            "an encrypted packet outside a session",
        ))?;
        decrypt(&keys.aes_key, payload)?
    } else {
        payload.to_vec()
    };
    Ok(Received {
        payload_type,
        session_id,
        payload,
    })
}

/// AES-CBC-128 with IPMI's padding: pad bytes 1, 2, …, n, then n, to a whole block; the IV
/// goes first.
fn encrypt(key: &[u8; 16], data: &[u8], iv: [u8; 16]) -> Vec<u8> {
    let pad = (16 - (data.len() + 1) % 16) % 16;
    let mut plain = data.to_vec();
    plain.extend((1..=pad).map(|byte| byte as u8));
    plain.push(pad as u8);
    let cipher = cbc::Encryptor::<Aes128>::new(key.into(), &iv.into())
        .encrypt_padded_vec_mut::<NoPadding>(&plain);
    let mut out = iv.to_vec();
    out.extend_from_slice(&cipher);
    out
}

fn decrypt(key: &[u8; 16], data: &[u8]) -> Result<Vec<u8>, PacketError> {
    if data.len() < 32 || !data.len().is_multiple_of(16) {
        return Err(PacketError::Malformed(
            "encrypted payload is not whole AES blocks",
        ));
    }
    let (iv, cipher) = data.split_at(16);
    let mut iv_block = [0u8; 16];
    iv_block.copy_from_slice(iv);
    let mut plain = cbc::Decryptor::<Aes128>::new(key.into(), &iv_block.into())
        .decrypt_padded_vec_mut::<NoPadding>(cipher)
        .map_err(|_| PacketError::Malformed("AES decryption failed"))?;
    let pad = *plain
        .last()
        .ok_or(PacketError::Malformed("empty plaintext"))? as usize;
    if pad + 1 > plain.len() {
        return Err(PacketError::Malformed(
            "confidentiality pad longer than the payload",
        ));
    }
    plain.truncate(plain.len() - pad - 1);
    Ok(plain)
}

/// Two's-complement checksum of IPMI messages.
fn checksum(bytes: &[u8]) -> u8 {
    0u8.wrapping_sub(bytes.iter().fold(0u8, |sum, byte| sum.wrapping_add(*byte)))
}

/// An IPMI request message to the BMC.
pub fn ipmi_request(netfn: u8, command: u8, sequence: u8, data: &[u8]) -> Vec<u8> {
    let mut message = vec![BMC_ADDRESS, netfn << 2];
    message.push(checksum(&message));
    let body_start = message.len();
    message.extend_from_slice(&[CONSOLE_ADDRESS, (sequence & 0x3F) << 2, command]);
    message.extend_from_slice(data);
    message.push(checksum(&message[body_start..]));
    message
}

/// An IPMI request as a BMC receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpmiRequest {
    pub netfn: u8,
    /// The requester's address and LUN, echoed in the response.
    pub requester: u8,
    pub requester_lun: u8,
    pub responder_lun: u8,
    pub sequence: u8,
    pub command: u8,
    pub data: Vec<u8>,
}

/// Reads an IPMI request message (IPMI 2.0 §13.8): checks both checksums.
pub fn parse_ipmi_request(message: &[u8]) -> Result<IpmiRequest, PacketError> {
    if message.len() < 7 {
        return Err(PacketError::Malformed("IPMI request too short"));
    }
    if checksum(&message[..2]) != message[2] || checksum(&message[3..]) != 0 {
        return Err(PacketError::Malformed("IPMI checksum mismatch"));
    }
    Ok(IpmiRequest {
        netfn: message[1] >> 2,
        responder_lun: message[1] & 0x03,
        requester: message[3],
        requester_lun: message[4] & 0x03,
        sequence: message[4] >> 2,
        command: message[5],
        data: message[6..message.len() - 1].to_vec(),
    })
}

/// The response message to `request` with a completion code and data.
pub fn ipmi_response(request: &IpmiRequest, completion: u8, data: &[u8]) -> Vec<u8> {
    let mut message = vec![
        request.requester,
        ((request.netfn | 1) << 2) | request.requester_lun,
    ];
    message.push(checksum(&message));
    let body_start = message.len();
    message.extend_from_slice(&[
        BMC_ADDRESS,
        (request.sequence << 2) | request.responder_lun,
        request.command,
        completion,
    ]);
    message.extend_from_slice(data);
    message.push(checksum(&message[body_start..]));
    message
}

/// An IPMI response: which request it answers, the completion code and the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpmiResponse {
    pub netfn: u8,
    pub sequence: u8,
    pub command: u8,
    pub completion: u8,
    pub data: Vec<u8>,
}

pub fn parse_ipmi_response(message: &[u8]) -> Result<IpmiResponse, PacketError> {
    if message.len() < 8 {
        return Err(PacketError::Malformed("IPMI response too short"));
    }
    if checksum(&message[..2]) != message[2] || checksum(&message[3..]) != 0 {
        return Err(PacketError::Malformed("IPMI checksum mismatch"));
    }
    Ok(IpmiResponse {
        netfn: message[1] >> 2,
        sequence: message[4] >> 2,
        command: message[5],
        completion: message[6],
        data: message[7..message.len() - 1].to_vec(),
    })
}

/// RMCP+ status codes (IPMI 2.0 Table 13-15) in words.
pub fn rmcp_status(code: u8) -> &'static str {
    match code {
        0x01 => "insufficient resources to create a session",
        0x02 => "invalid session id",
        0x03 => "invalid payload type",
        0x04 => "invalid authentication algorithm",
        0x05 => "invalid integrity algorithm",
        0x06 => "no matching authentication payload",
        0x07 => "no matching integrity payload",
        0x08 => "inactive session id",
        0x09 => "invalid role",
        0x0A => "unauthorized role or privilege level requested",
        0x0B => "insufficient resources for the requested role",
        0x0C => "invalid name length",
        0x0D => "unauthorized name",
        0x0E => "unauthorized GUID",
        0x0F => "invalid integrity check value",
        0x10 => "invalid confidentiality algorithm",
        0x11 => "no cipher suite match with the proposed security algorithms",
        0x12 => "illegal or unrecognized parameter",
        _ => "unknown RMCP+ status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(suite: CipherSuite) -> SessionKeys {
        SessionKeys::derive(suite, b"a session integrity key")
    }

    #[test]
    fn session_packets_round_trip_and_reject_tampering() {
        for suite in [CipherSuite::Three, CipherSuite::Seventeen] {
            let keys = keys(suite);
            let message = ipmi_request(0x00, 0x01, 5, &[]);
            let packet = session_packet(&keys, 0xA1B2_C3D4, 7, &message);
            // Signed range (auth type .. next header) is whole DWORDs.
            assert_eq!((packet.len() - 4 - suite.integrity_len()) % 4, 0);
            let received = parse_packet(&packet, Some(&keys)).unwrap();
            assert_eq!(received.payload_type, PAYLOAD_IPMI);
            assert_eq!(received.session_id, 0xA1B2_C3D4);
            assert_eq!(received.payload, message);

            let mut tampered = packet.clone();
            tampered[20] ^= 1;
            assert_eq!(
                parse_packet(&tampered, Some(&keys)),
                Err(PacketError::Integrity)
            );
            let other = SessionKeys::derive(suite, b"another key");
            assert_eq!(
                parse_packet(&packet, Some(&other)),
                Err(PacketError::Integrity)
            );
        }
    }

    #[test]
    fn aes_padding_covers_every_length() {
        let key = [7u8; 16];
        for length in 0..40 {
            let data: Vec<u8> = (0..length).map(|byte| byte as u8).collect();
            let sealed = encrypt(&key, &data, [9; 16]);
            assert_eq!(sealed.len() % 16, 0);
            assert_eq!(decrypt(&key, &sealed).unwrap(), data, "length {length}");
        }
        assert!(decrypt(&key, &[0; 17]).is_err());
    }

    #[test]
    fn ipmi_messages_carry_valid_checksums() {
        // Get Chassis Status as ipmitool sends it: 20 00 e0 81 04 01 7a.
        let request = ipmi_request(0x00, 0x01, 1, &[]);
        assert_eq!(request, [0x20, 0x00, 0xE0, 0x81, 0x04, 0x01, 0x7A]);
        let response = [0x81, 0x04, 0x7B, 0x20, 0x04, 0x01, 0x00, 0x01, 0x00, 0x00];
        let mut response = response.to_vec();
        response.push(checksum(&response[3..]));
        let parsed = parse_ipmi_response(&response).unwrap();
        assert_eq!(parsed.netfn, 0x01);
        assert_eq!(parsed.sequence, 1);
        assert_eq!(parsed.completion, 0);
        assert_eq!(parsed.data, [0x01, 0x00, 0x00]);
        response[7] ^= 0xFF;
        assert!(parse_ipmi_response(&response).is_err());
    }

    #[test]
    fn requests_and_responses_round_trip_between_both_sides() {
        let request = ipmi_request(0x00, 0x08, 9, &[0x05, 0xA0, 0x04, 0, 0, 0]);
        let parsed = parse_ipmi_request(&request).unwrap();
        assert_eq!(parsed.netfn, 0x00);
        assert_eq!(parsed.sequence, 9);
        assert_eq!(parsed.command, 0x08);
        assert_eq!(parsed.data, [0x05, 0xA0, 0x04, 0, 0, 0]);
        let response = parse_ipmi_response(&ipmi_response(&parsed, 0xCC, &[1, 2])).unwrap();
        assert_eq!(
            (response.netfn, response.sequence, response.command),
            (0x01, 9, 0x08)
        );
        assert_eq!((response.completion, response.data), (0xCC, vec![1, 2]));
        let mut broken = request.clone();
        broken[6] ^= 1;
        assert!(parse_ipmi_request(&broken).is_err());
        assert!(parse_ipmi_request(&request[..5]).is_err());
    }

    #[test]
    fn suites_are_found_by_their_algorithms() {
        for suite in [CipherSuite::Three, CipherSuite::Seventeen] {
            let found = CipherSuite::from_algorithms(
                suite.authentication_algorithm(),
                suite.integrity_algorithm(),
                CONFIDENTIALITY_AES_CBC_128,
            );
            assert_eq!(found, Some(suite));
        }
        assert_eq!(CipherSuite::from_algorithms(0x01, 0x01, 0x00), None);
        assert_eq!(CipherSuite::from_algorithms(0x00, 0x00, 0x00), None);
        let packet = session_packet(&keys(CipherSuite::Three), 0x0102_0304, 1, &[1]);
        assert_eq!(peek_session_id(&packet), Some(0x0102_0304));
        assert!(is_sealed(&packet));
        assert_eq!(peek_session_id(&ipmi15_packet(&[1])), None);
        assert!(!is_sealed(&unauthenticated_packet(PAYLOAD_RAKP_1, &[0])));
    }

    #[test]
    fn cipher_suite_records_are_read_across_pages() {
        // pyghmi's fakebmc: suite 3 only.
        let fakebmc = parse_cipher_suite_records(&[0xC0, 0x03, 0x01, 0x41, 0x81]);
        assert_eq!(fakebmc.len(), 1);
        assert!(fakebmc[0].is(CipherSuite::Three));
        assert_eq!(preferred_suite(&fakebmc), Some(CipherSuite::Three));

        // OpenIPMI's ipmi_sim lists 0-14, a record split between two 16-byte pages.
        let ipmi_sim = [
            "c000004080c001014080c002014180c0",
            "03014181c004014182c005014183c006",
            "024080c007024280c008024281c00902",
            "4282c00a024283c00b024380c00c0243",
            "81c00d024382c00e024383",
        ]
        .concat();
        let bytes: Vec<u8> = (0..ipmi_sim.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&ipmi_sim[at..at + 2], 16).unwrap())
            .collect();
        let records = parse_cipher_suite_records(&bytes);
        assert_eq!(
            records.iter().map(|record| record.id).collect::<Vec<_>>(),
            (0..=14).collect::<Vec<u8>>()
        );
        assert_eq!(
            (&records[6].authentication, &records[6].integrity),
            (&vec![2], &vec![0])
        );
        assert_eq!(preferred_suite(&records), Some(CipherSuite::Three));

        // 17 is preferred; an OEM record's IANA number is skipped; a record listing several
        // integrity algorithms still counts.
        let both = parse_cipher_suite_records(&[
            0xC1, 0x80, 0x57, 0x01, 0x00, 0x01, 0x41, 0x81, // OEM suite 0x80
            0xC0, 0x03, 0x01, 0x40, 0x41, 0x81, // suite 3: integrity none or SHA1-96
            0xC0, 0x11, 0x03, 0x44, 0x81, // suite 17
        ]);
        assert_eq!(both.len(), 3);
        assert_eq!(both[0].id, 0x80);
        assert_eq!(both[0].authentication, [1]);
        assert_eq!(preferred_suite(&both), Some(CipherSuite::Seventeen));

        // A suite id whose algorithms are not the standard ones is not taken for it.
        let odd = parse_cipher_suite_records(&[0xC0, 0x11, 0x01, 0x41, 0x81, 0xC0, 0x01]);
        assert_eq!(preferred_suite(&odd), None);
        assert_eq!(parse_cipher_suite_records(&[0x01, 0xC0]), []);
    }

    #[test]
    fn rakp_codes_follow_the_spec_layout() {
        // The RAKP 2 code is an HMAC over SIDm, SIDc, Rm, Rc, GUIDc, role, name length,
        // name; recompute it by hand for one case.
        let rakp = Rakp {
            suite: CipherSuite::Three,
            console_session_id: 0x0102_0304,
            bmc_session_id: 0x0506_0708,
            console_random: [1; 16],
            bmc_random: [2; 16],
            bmc_guid: [3; 16],
            role: 0x14,
            username: b"admin",
            password: b"secret",
        };
        let mut input = vec![0x04, 0x03, 0x02, 0x01, 0x08, 0x07, 0x06, 0x05];
        input.extend_from_slice(&[1; 16]);
        input.extend_from_slice(&[2; 16]);
        input.extend_from_slice(&[3; 16]);
        input.extend_from_slice(&[0x14, 5]);
        input.extend_from_slice(b"admin");
        assert_eq!(
            rakp.rakp2_code(),
            CipherSuite::Three.hmac(b"secret", &[&input])
        );
        assert_eq!(rakp.rakp2_code().len(), 20);
        let sik = rakp.sik();
        assert_eq!(rakp.rakp4_check(&sik).len(), 12);
        let rakp17 = Rakp {
            suite: CipherSuite::Seventeen,
            ..rakp
        };
        assert_eq!(rakp17.rakp2_code().len(), 32);
        assert_eq!(rakp17.rakp4_check(&rakp17.sik()).len(), 16);
    }
}
