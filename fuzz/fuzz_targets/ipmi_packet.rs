//! The IPMI client's packet layer (`ferric_drivers::ipmi::rmcp`) on datagrams from a BMC:
//! RMCP/RMCP+ framing outside and inside a session (both cipher suites), IPMI request and
//! response messages. Invariant: no panic, and a packet the layer seals reads back as itself.
#![no_main]

use ferric_drivers::ipmi::rmcp::{self, CipherSuite, SessionKeys};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rmcp::peek_session_id(data);
    let _ = rmcp::is_sealed(data);
    let _ = rmcp::parse_ipmi_request(data);
    let _ = rmcp::parse_ipmi_response(data);
    if let Ok(packet) = rmcp::parse_packet(data, None) {
        let _ = rmcp::parse_ipmi_response(&packet.payload);
        let _ = rmcp::parse_ipmi_request(&packet.payload);
    }
    for suite in [CipherSuite::Three, CipherSuite::Seventeen] {
        let keys = SessionKeys::derive(suite, data.get(..20).unwrap_or(data));
        if let Ok(packet) = rmcp::parse_packet(data, Some(&keys)) {
            let _ = rmcp::parse_ipmi_response(&packet.payload);
        }
        // Sealing then reading any payload gives it back.
        let sealed = rmcp::session_packet(&keys, 7, 1, data);
        let read = rmcp::parse_packet(&sealed, Some(&keys)).expect("a sealed packet reads back");
        assert_eq!(read.payload, data);
        assert_eq!(read.session_id, 7);
    }
});
