//! The TCP relay of each enabled console: what Ironic's `ipmitool-socat` console offers
//! (`console_info` `{"type": "socat", "url": "tcp://HOST:PORT"}`), a raw byte stream both
//! ways on a port of its own, so `socat - TCP:HOST:PORT`, `nc` or `telnet` attach as they do
//! to Ironic's. Each connection first gets the retained tail, then live output; what it sends
//! is typed on the console.
//!
//! Like Ironic's socat port it asks for no credentials: it listens on `console_bind_address`
//! (loopback unless the operator chooses otherwise) and anyone who reaches it may type. The
//! API's WebSocket (`GET /v1/nodes/{node}/console/stream`) is the authorized way in.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use crate::ConductorError;
use crate::console_hub::{ConsoleHub, ConsoleSettings};

/// Binds the relay of `node` on a free port of the range, trying from a port picked by the
/// node's UUID so a node tends to keep its port across restarts.
pub(crate) async fn bind(
    settings: &ConsoleSettings,
    node: Uuid,
) -> Result<TcpListener, ConductorError> {
    let (low, high) = settings.port_range;
    let span = u32::from(high.saturating_sub(low)) + 1;
    let start = (node.as_u128() % u128::from(span)) as u32;
    let mut last_error = None;
    for step in 0..span {
        let port = low + ((start + step) % span) as u16;
        match TcpListener::bind(SocketAddr::new(settings.bind_address, port)).await {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(error) => {
                last_error = Some(error);
                break;
            }
        }
    }
    Err(ConductorError::Driver(ferric_drivers::DriverError::failed(
        ferric_drivers::Component::Conductor,
        match last_error {
            Some(error) => format!(
                "Cannot listen for the console relay on {}: {error}; check \
                 console_bind_address.",
                settings.bind_address
            ),
            None => format!(
                "Every port of console_port_range {low}:{high} on {} is in use; widen the \
                 range or disable other consoles.",
                settings.bind_address
            ),
        },
    )))
}

/// Accepts relay connections until the console stops.
pub(crate) async fn serve(listener: TcpListener, hub: Arc<ConsoleHub>) {
    let stop = hub.stopped();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                tracing::info!(%peer, relay = %hub.address(), "console relay client attached");
                tokio::spawn(relay(stream, hub.clone()));
            }
            Err(error) => {
                tracing::warn!(%error, "console relay: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn relay(stream: TcpStream, hub: Arc<ConsoleHub>) {
    let stop = hub.stopped();
    let (mut reader, mut writer) = stream.into_split();
    let (tail, mut live) = hub.subscribe();
    if writer.write_all(&tail).await.is_err() {
        return;
    }
    let mut buffer = vec![0u8; 4096];
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            output = live.recv() => match output {
                Ok(bytes) => {
                    if writer.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                // A client too slow to keep up skips what it missed.
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            read = reader.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(length) => {
                    if !hub.type_in(buffer[..length].to_vec()) {
                        return;
                    }
                }
            },
        }
    }
}
