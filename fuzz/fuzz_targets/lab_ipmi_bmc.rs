//! The lab's IPMI BMC (`ferric_lab::ipmi::IpmiBmc::handle`) on a sequence of datagrams from
//! anyone on the lab network: either raw datagrams (pre-session commands, Open Session, RAKP
//! with any bytes) or, after a real RAKP handshake with cipher suite 3 or 17, IPMI requests
//! sealed with the session's keys, so the fuzzer reaches the commands behind the
//! integrity check. Invariant: no panic, and an answer is always a well-formed packet.
#![no_main]

use std::sync::{Arc, LazyLock};

use ferric_drivers::ipmi::rmcp::{self, CipherSuite, Rakp, SessionKeys};
use ferric_lab::ipmi::IpmiBmc;
use ferric_lab::machine::MachineInfo;
use ferric_lab::machine::fake::FakeMachine;
use libfuzzer_sys::fuzz_target;

const USERNAME: &[u8] = b"admin";
const PASSWORD: &[u8] = b"0123456789abcdef0123";

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime")
});

fn bmc() -> IpmiBmc<FakeMachine> {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "f3e7a1b0-1ab0-4000-8000-000000000000".into(),
        serial: "FERRIC-LAB-0000".into(),
        mac: "52:54:00:fe:1a:00".into(),
        memory_mib: 512,
        cpus: 1,
    }));
    IpmiBmc::new(machine, "admin", "0123456789abcdef0123").expect("valid credentials")
}

/// Reads an answer as the client would and checks it is a packet.
fn check_answer(answer: Option<Vec<u8>>, keys: Option<&SessionKeys>) -> Option<Vec<u8>> {
    let answer = answer?;
    let packet = rmcp::parse_packet(&answer, keys).expect("the BMC answers with a valid packet");
    Some(packet.payload)
}

/// Open Session and RAKP 1–4, as a console does; the session's keys and id.
async fn handshake(bmc: &IpmiBmc<FakeMachine>, suite: CipherSuite) -> (SessionKeys, u32) {
    let console_id = 0x1234_5678;
    let tag = 9;
    let request = rmcp::open_session_request(tag, console_id, suite);
    let opened = bmc
        .handle(&rmcp::unauthenticated_packet(
            rmcp::PAYLOAD_OPEN_SESSION_REQUEST,
            &request,
        ))
        .await;
    let opened = check_answer(opened, None).expect("Open Session is answered");
    let bmc_id = u32::from_le_bytes(opened[8..12].try_into().expect("4 bytes"));
    let console_random = [7u8; 16];
    let role = 0x10 | 4;
    let mut rakp1 = vec![tag, 0, 0, 0];
    rakp1.extend_from_slice(&bmc_id.to_le_bytes());
    rakp1.extend_from_slice(&console_random);
    rakp1.extend_from_slice(&[role, 0, 0, USERNAME.len() as u8]);
    rakp1.extend_from_slice(USERNAME);
    let rakp2 = bmc
        .handle(&rmcp::unauthenticated_packet(rmcp::PAYLOAD_RAKP_1, &rakp1))
        .await;
    let rakp2 = check_answer(rakp2, None).expect("RAKP 1 is answered");
    let rakp = Rakp {
        suite,
        console_session_id: console_id,
        bmc_session_id: bmc_id,
        console_random,
        bmc_random: rakp2[8..24].try_into().expect("16 bytes"),
        bmc_guid: rakp2[24..40].try_into().expect("16 bytes"),
        role,
        username: USERNAME,
        password: PASSWORD,
    };
    let mut rakp3 = vec![tag, 0, 0, 0];
    rakp3.extend_from_slice(&bmc_id.to_le_bytes());
    rakp3.extend_from_slice(&rakp.rakp3_code());
    let rakp4 = bmc
        .handle(&rmcp::unauthenticated_packet(rmcp::PAYLOAD_RAKP_3, &rakp3))
        .await;
    let rakp4 = check_answer(rakp4, None).expect("RAKP 3 is answered");
    assert_eq!(rakp4[1], 0, "the handshake succeeds");
    (SessionKeys::derive(suite, &rakp.sik()), bmc_id)
}

/// Length-prefixed chunks: one byte of length, then that many bytes.
fn chunks(mut data: &[u8]) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    while let Some((&length, rest)) = data.split_first() {
        let length = usize::from(length).min(rest.len());
        chunks.push(&rest[..length]);
        data = &rest[length..];
    }
    chunks
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    RUNTIME.block_on(async {
        let bmc = bmc();
        match mode % 3 {
            0 => {
                for datagram in chunks(rest) {
                    let _ = bmc.handle(datagram).await;
                }
            }
            suite_choice => {
                let suite = if suite_choice == 1 {
                    CipherSuite::Three
                } else {
                    CipherSuite::Seventeen
                };
                let (keys, bmc_id) = handshake(&bmc, suite).await;
                for (sequence, request) in (1u32..).zip(chunks(rest)) {
                    // netfn, command, then the request data; the framing is right so the
                    // commands' own decoding is what gets fuzzed.
                    let (netfn, command, body) = match request {
                        [netfn, command, body @ ..] => (*netfn, *command, body),
                        _ => continue,
                    };
                    let message = rmcp::ipmi_request(netfn & 0x3F, command, sequence as u8, body);
                    let sealed = rmcp::session_packet(&keys, bmc_id, sequence, &message);
                    let answer = bmc.handle(&sealed).await;
                    if let Some(payload) = check_answer(answer, Some(&keys)) {
                        rmcp::parse_ipmi_response(&payload)
                            .expect("the BMC answers with a valid IPMI response");
                    }
                }
            }
        }
    });
});
