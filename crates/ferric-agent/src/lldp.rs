//! LLDP: what the switch port each NIC is plugged into says about itself, for the inventory's
//! `interfaces[].lldp` (IPA's format: a list of `[tlv_type, hex of the TLV's value]`).
//!
//! As IPA does (`ipa-collect-lldp=1`), the agent opens a raw socket on every NIC in promiscuous
//! mode (LLDP goes to a link-local multicast address a NIC filters out otherwise) and keeps the
//! first LLDP frame each one receives, for at most `ipa-lldp-timeout` seconds (30 by default);
//! all NICs listen at the same time, and the wait ends as soon as each has its frame. A NIC
//! that hears nothing reports an empty list. The socket's promiscuous membership ends with it,
//! so nothing is left changed on the NIC.
//!
//! The sockets are `pnet_datalink`'s, since the workspace forbids `unsafe`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The LLDP EtherType.
pub const ETHERTYPE: u16 = 0x88cc;
/// How long each read waits before the deadline is checked again.
const POLL: Duration = Duration::from_millis(200);

/// One TLV as IPA reports it: the type and its value in lower-case hex.
pub type Tlv = (u8, String);

/// The TLVs of an LLDP frame (with its 14-byte Ethernet header), up to and including the End
/// of LLDPDU TLV; `None` for a frame that is not LLDP. A truncated TLV ends the list.
pub fn parse_frame(frame: &[u8]) -> Option<Vec<Tlv>> {
    if frame.len() < 14 || frame[12..14] != ETHERTYPE.to_be_bytes() {
        return None;
    }
    let mut rest = &frame[14..];
    let mut tlvs = Vec::new();
    while rest.len() >= 2 {
        let header = u16::from_be_bytes([rest[0], rest[1]]);
        let kind = (header >> 9) as u8;
        let length = usize::from(header & 0x01ff);
        let Some(value) = rest.get(2..2 + length) else {
            break;
        };
        tlvs.push((kind, hex(value)));
        rest = &rest[2 + length..];
        // End of LLDPDU: what follows is Ethernet padding.
        if kind == 0 {
            break;
        }
    }
    Some(tlvs)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Listens on each of `interfaces` for at most `timeout`; returns each one's TLVs (empty when
/// it heard nothing or cannot be listened on).
pub fn collect(interfaces: &[String], timeout: Duration) -> BTreeMap<String, Vec<Tlv>> {
    let all = pnet_datalink::interfaces();
    let deadline = Instant::now() + timeout;
    std::thread::scope(|scope| {
        let listeners: Vec<_> = interfaces
            .iter()
            .map(|name| {
                let interface = all.iter().find(|interface| interface.name == *name);
                let listener = scope.spawn(move || match interface {
                    Some(interface) => listen(interface, deadline),
                    None => Vec::new(),
                });
                (name.clone(), listener)
            })
            .collect();
        listeners
            .into_iter()
            .map(|(name, listener)| (name, listener.join().unwrap_or_default()))
            .collect()
    })
}

/// The first LLDP frame `interface` receives before `deadline`, parsed.
fn listen(interface: &pnet_datalink::NetworkInterface, deadline: Instant) -> Vec<Tlv> {
    let config = pnet_datalink::Config {
        read_timeout: Some(POLL),
        promiscuous: true,
        ..Default::default()
    };
    let mut receiver = match pnet_datalink::channel(interface, config) {
        Ok(pnet_datalink::Channel::Ethernet(_, receiver)) => receiver,
        Ok(_) => return Vec::new(),
        Err(error) => {
            tracing::warn!(interface = %interface.name, %error, "cannot listen for LLDP");
            return Vec::new();
        }
    };
    while Instant::now() < deadline {
        match receiver.next() {
            Ok(frame) => {
                if let Some(tlvs) = parse_frame(frame) {
                    tracing::info!(interface = %interface.name, tlvs = tlvs.len(), "LLDP frame received");
                    return tlvs;
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {}
            Err(error) => {
                tracing::warn!(interface = %interface.name, %error, "LLDP listen failed");
                return Vec::new();
            }
        }
    }
    tracing::info!(interface = %interface.name, "no LLDP frame before the timeout");
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a switch sends it: chassis id (MAC), port id (interface name), TTL, system
    /// name, End, then padding.
    fn frame() -> Vec<u8> {
        let mut frame = vec![
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc,
        ];
        let mut tlv = |kind: u16, value: &[u8]| {
            frame.extend_from_slice(&((kind << 9) | value.len() as u16).to_be_bytes());
            frame.extend_from_slice(value);
        };
        tlv(1, &[4, 2, 0, 0, 0, 0, 1]);
        tlv(2, b"\x05swp1");
        tlv(3, &[0, 120]);
        tlv(5, b"leaf-1");
        tlv(0, &[]);
        frame.extend_from_slice(&[0; 8]);
        frame
    }

    #[test]
    fn tlvs_are_type_and_hex_up_to_the_end_tlv() {
        let tlvs = parse_frame(&frame()).expect("an LLDP frame");
        assert_eq!(
            tlvs,
            [
                (1, "04020000000001".to_owned()),
                (2, "0573777031".to_owned()),
                (3, "0078".to_owned()),
                (5, "6c6561662d31".to_owned()),
                (0, String::new()),
            ]
        );
    }

    #[test]
    fn other_frames_and_truncated_tlvs() {
        let mut ip = frame();
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse_frame(&ip), None);
        assert_eq!(parse_frame(&[0; 10]), None);
        let whole = frame();
        // Cut inside the system name TLV: the TLVs before it remain.
        let cut = &whole[..14 + 9 + 7 + 4 + 4];
        let tlvs = parse_frame(cut).expect("LLDP");
        assert_eq!(tlvs.len(), 3);
    }

    #[test]
    fn unknown_interfaces_hear_nothing() {
        let heard = collect(
            &["ferric-no-such-nic".to_owned()],
            Duration::from_millis(10),
        );
        assert_eq!(heard["ferric-no-such-nic"], Vec::<Tlv>::new());
    }
}
