//! A node's relayed console as the rest of the conductor sees it (`console.rs` starts and
//! feeds the hubs, `console_relay.rs` serves them over TCP): the settings, the hub with its
//! retained tail and live output, and the set of hubs this conductor runs.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::mutex::lock;

/// Where and how much of each console Ferric keeps and relays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// Bytes of each console's latest output kept for viewers who attach later.
    pub tail_size: usize,
    /// The address each console's TCP relay listens on (and the host its URL names).
    pub bind_address: IpAddr,
    /// The ports the TCP relays may use, inclusive (Ironic's `[console]port_range`).
    pub port_range: (u16, u16),
}

impl Default for ConsoleSettings {
    fn default() -> Self {
        Self {
            tail_size: 64 * 1024,
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port_range: (10000, 20000),
        }
    }
}

/// Where a node's console can be reached: Ironic's `console_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleInfo {
    /// `socat`: a raw TCP stream, as Ironic's `ipmitool-socat` console offers.
    pub kind: &'static str,
    pub url: String,
}

/// One node's relayed console.
pub struct ConsoleHub {
    pub(crate) node: Uuid,
    pub(crate) tail: Mutex<VecDeque<u8>>,
    pub(crate) capacity: usize,
    pub(crate) live: broadcast::Sender<Vec<u8>>,
    pub(crate) input: mpsc::Sender<Vec<u8>>,
    pub(crate) stop: CancellationToken,
    pub(crate) address: SocketAddr,
}

impl std::fmt::Debug for ConsoleHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleHub")
            .field("node", &self.node)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl ConsoleHub {
    /// The retained output, and the live output from right after it (no gap, no overlap).
    pub fn subscribe(&self) -> (Vec<u8>, broadcast::Receiver<Vec<u8>>) {
        let tail = lock(&self.tail);
        (tail.iter().copied().collect(), self.live.subscribe())
    }

    /// Types `bytes` on the console; `false` once the console is disabled. While the link
    /// to the machine is down, typing beyond the input queue is dropped (a BMC's SOL does the
    /// same when its buffer is full).
    pub fn type_in(&self, bytes: Vec<u8>) -> bool {
        if self.stop.is_cancelled() {
            return false;
        }
        !matches!(
            self.input.try_send(bytes),
            Err(mpsc::error::TrySendError::Closed(_))
        )
    }

    /// Cancelled when the console is disabled (or the conductor stops serving it).
    pub fn stopped(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Where the TCP relay listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn info(&self) -> ConsoleInfo {
        ConsoleInfo {
            kind: "socat",
            url: format!("tcp://{}", self.address),
        }
    }

    pub(crate) fn push(&self, bytes: &[u8]) {
        let mut tail = lock(&self.tail);
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(self.capacity);
        tail.drain(..excess);
        // Sent under the lock, so a subscriber sees each byte either in its tail or live.
        let _ = self.live.send(bytes.to_vec());
    }

    /// A line in the output saying what Ferric did (the link broke, re-attached).
    pub(crate) fn note(&self, message: &str) {
        self.push(format!("\r\n[Ferric: {message}]\r\n").as_bytes());
    }
}

/// The hubs this conductor runs.
#[derive(Debug, Default)]
pub(crate) struct Consoles {
    pub(crate) hubs: Mutex<HashMap<Uuid, Arc<ConsoleHub>>>,
}

impl Consoles {
    pub(crate) fn get(&self, node: Uuid) -> Option<Arc<ConsoleHub>> {
        lock(&self.hubs).get(&node).cloned()
    }

    pub(crate) fn stop(&self, node: Uuid) {
        if let Some(hub) = lock(&self.hubs).remove(&node) {
            hub.stop.cancel();
        }
    }

    /// Stops every console (the conductor is shutting down).
    pub(crate) fn stop_all(&self) {
        for (_, hub) in lock(&self.hubs).drain() {
            hub.stop.cancel();
        }
    }

    pub(crate) fn nodes(&self) -> Vec<Uuid> {
        lock(&self.hubs).keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(capacity: usize) -> ConsoleHub {
        ConsoleHub {
            node: Uuid::nil(),
            tail: Mutex::new(VecDeque::new()),
            capacity,
            live: broadcast::channel(8).0,
            input: mpsc::channel(1).0,
            stop: CancellationToken::new(),
            address: SocketAddr::from((Ipv4Addr::LOCALHOST, 1)),
        }
    }

    #[test]
    fn the_tail_keeps_the_latest_bytes() {
        let hub = hub(8);
        hub.push(b"0123456789");
        hub.push(b"ab");
        let (tail, _) = hub.subscribe();
        assert_eq!(tail, b"456789ab");
    }

    #[tokio::test]
    async fn a_subscriber_gets_the_tail_then_live_output_without_gaps() {
        let hub = hub(1024);
        hub.push(b"early ");
        let (tail, mut live) = hub.subscribe();
        hub.push(b"late");
        assert_eq!(tail, b"early ");
        assert_eq!(live.recv().await.unwrap(), b"late");
    }

    #[test]
    fn info_names_the_relay_as_ironic_socat_does() {
        let info = hub(1).info();
        assert_eq!(info.kind, "socat");
        assert_eq!(info.url, "tcp://127.0.0.1:1");
    }
}
