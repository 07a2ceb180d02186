//! The lab bridge as an LLDP-speaking switch: the BMC process sends an LLDP frame out of every
//! machine's tap every few seconds, as a switch does out of each port, so a ramdisk that
//! collects LLDP learns which "switch port" its NIC is plugged into (`parsed_lldp`,
//! `local_link_connection` in Ironic's terms).
//!
//! Each frame carries the bridge's MAC as chassis ID, the tap's name as port ID (so every
//! machine sees its own port), a TTL, a port description, the namespace as system name, a
//! system description, the bridge's capability and its IPv4 address as management address.

use std::net::Ipv4Addr;
use std::time::Duration;

/// How often each port announces itself (real switches: 30 s; short here so an inspection's
/// listen ends quickly).
pub const INTERVAL: Duration = Duration::from_secs(5);
/// The LLDP multicast address ("nearest bridge"): never forwarded by bridges.
const NEAREST_BRIDGE: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
const ETHERTYPE: u16 = 0x88cc;

/// What one port says about itself.
#[derive(Debug, Clone)]
pub struct Announcement {
    pub chassis_mac: [u8; 6],
    pub port: String,
    pub port_description: String,
    pub system_name: String,
    pub system_description: String,
    pub management_address: Ipv4Addr,
}

fn tlv(frame: &mut Vec<u8>, kind: u16, value: &[u8]) {
    // Values are at most 511 bytes; ours are short, but never write a corrupt length.
    let value = &value[..value.len().min(511)];
    frame.extend_from_slice(&((kind << 9) | value.len() as u16).to_be_bytes());
    frame.extend_from_slice(value);
}

impl Announcement {
    /// The Ethernet frame (without FCS), padded to the 60-byte minimum.
    pub fn frame(&self) -> Vec<u8> {
        let mut frame = Vec::with_capacity(128);
        frame.extend_from_slice(&NEAREST_BRIDGE);
        frame.extend_from_slice(&self.chassis_mac);
        frame.extend_from_slice(&ETHERTYPE.to_be_bytes());
        // Chassis ID, subtype 4: a MAC address.
        tlv(&mut frame, 1, &[&[4][..], &self.chassis_mac].concat());
        // Port ID, subtype 5: an interface name.
        tlv(&mut frame, 2, &[&[5][..], self.port.as_bytes()].concat());
        // Time to live: 120 s.
        tlv(&mut frame, 3, &120u16.to_be_bytes());
        tlv(&mut frame, 4, self.port_description.as_bytes());
        tlv(&mut frame, 5, self.system_name.as_bytes());
        tlv(&mut frame, 6, self.system_description.as_bytes());
        // Capabilities: bridge (bit 2), supported and enabled.
        tlv(&mut frame, 7, &[0x00, 0x04, 0x00, 0x04]);
        // Management address: length 5 (subtype + IPv4), IPv4, interface numbering unknown
        // (1) with number 0, no OID.
        let address = self.management_address.octets();
        tlv(
            &mut frame,
            8,
            &[&[5, 1][..], &address, &[1, 0, 0, 0, 0, 0]].concat(),
        );
        tlv(&mut frame, 0, &[]);
        if frame.len() < 60 {
            frame.resize(60, 0);
        }
        frame
    }
}

/// Sends each port's announcement out of its tap every [`INTERVAL`] until `stop` resolves.
/// A tap no QEMU has open drops the frame; that is not an error.
pub async fn announce(
    bridge: String,
    ports: Vec<(String, String)>,
    system_name: String,
    management_address: Ipv4Addr,
    stop: impl std::future::Future<Output = ()>,
) {
    let interfaces = pnet_datalink::interfaces();
    let Some(chassis_mac) = interfaces
        .iter()
        .find(|interface| interface.name == bridge)
        .and_then(|interface| interface.mac)
    else {
        tracing::warn!(%bridge, "no bridge MAC: the lab sends no LLDP");
        return;
    };
    let mut senders = Vec::new();
    for (tap, machine) in ports {
        let Some(interface) = interfaces.iter().find(|interface| interface.name == tap) else {
            tracing::warn!(%tap, "no such tap: no LLDP for it");
            continue;
        };
        match pnet_datalink::channel(interface, pnet_datalink::Config::default()) {
            Ok(pnet_datalink::Channel::Ethernet(sender, _)) => {
                let announcement = Announcement {
                    chassis_mac: chassis_mac.octets(),
                    port: tap.clone(),
                    port_description: format!("lab port of {machine}"),
                    system_name: system_name.clone(),
                    system_description: format!("Ferric virtual lab bridge {bridge}"),
                    management_address,
                };
                senders.push((tap, sender, announcement.frame()));
            }
            Ok(_) => tracing::warn!(%tap, "not an Ethernet channel: no LLDP for it"),
            Err(error) => tracing::warn!(%tap, %error, "cannot send LLDP"),
        }
    }
    tracing::info!(ports = senders.len(), every = ?INTERVAL, "sending LLDP on the lab bridge's ports");
    tokio::pin!(stop);
    let mut ticks = tokio::time::interval(INTERVAL);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = ticks.tick() => {}
        }
        for (tap, sender, frame) in &mut senders {
            if let Some(Err(error)) = sender.send_to(frame, None) {
                tracing::debug!(%tap, %error, "LLDP frame not sent (machine off?)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_is_lldp_with_the_ports_identity() {
        let frame = Announcement {
            chassis_mac: [0x02, 0, 0, 0, 0, 1],
            port: "ferric-tap3".into(),
            port_description: "lab port of node-3".into(),
            system_name: "ferric-e2e".into(),
            system_description: "Ferric virtual lab bridge ferric-br0".into(),
            management_address: Ipv4Addr::new(10, 231, 0, 1),
        }
        .frame();
        assert_eq!(&frame[..6], &NEAREST_BRIDGE);
        assert_eq!(&frame[12..14], &[0x88, 0xcc]);
        // Walk the TLVs: chassis, port, TTL, …, End.
        let mut rest = &frame[14..];
        let mut kinds = Vec::new();
        let mut port = Vec::new();
        loop {
            let header = u16::from_be_bytes([rest[0], rest[1]]);
            let (kind, length) = (header >> 9, usize::from(header & 0x1ff));
            if kind == 2 {
                port = rest[2..2 + length].to_vec();
            }
            kinds.push(kind);
            rest = &rest[2 + length..];
            if kind == 0 {
                break;
            }
        }
        assert_eq!(kinds, [1, 2, 3, 4, 5, 6, 7, 8, 0]);
        assert_eq!(port, b"\x05ferric-tap3");
        assert!(frame.len() >= 60);
    }
}
