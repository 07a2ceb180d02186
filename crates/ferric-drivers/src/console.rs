//! Serial consoles (Ironic's console interface, `docs/console.md`): attaching to a node's
//! serial console gives a [`ConsoleLink`], a stream of what the machine writes and a sink for
//! keystrokes. The conductor keeps one link per node whose console is enabled, and relays it
//! (`ferric_conductor::console`); the interfaces only know how to reach the port.
//!
//! Implementations: `ipmitool-socat` (IPMI Serial-over-LAN spoken natively over an RMCP+
//! session, [`crate::ipmi::sol`]; named as Ironic's role is, though no `ipmitool` or `socat`
//! process runs), `fake` (a banner, then an echo of what is typed) and `no-console`.

use async_trait::async_trait;
use ferric_model::resources::Node;
use tokio::sync::mpsc;

use crate::DriverError;
use crate::interfaces::Validate;

/// How many chunks of output or input may wait in a link's channels.
pub const LINK_QUEUE: usize = 256;

/// One attachment to a node's serial console.
#[derive(Debug)]
pub struct ConsoleLink {
    /// What the machine writes, in chunks as they arrive. The last item is `Err` when the
    /// link broke (BMC unreachable, session ended by the BMC); the channel then closes.
    pub output: mpsc::Receiver<Result<Vec<u8>, DriverError>>,
    /// What to type on the console. Dropping it detaches (SOL is deactivated, the session
    /// closed).
    pub input: mpsc::Sender<Vec<u8>>,
}

/// The console interface of a node.
#[async_trait]
pub trait ConsoleInterface: Validate {
    /// Attaches to the node's serial console.
    async fn attach(&self, node: &Node) -> Result<ConsoleLink, DriverError>;
}

/// The `fake` console: prints a banner naming the node, then echoes what is typed, so the
/// relay, the API and clients can be tried without a BMC.
#[derive(Debug, Clone, Copy)]
pub struct FakeConsole;

#[async_trait]
impl Validate for FakeConsole {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl ConsoleInterface for FakeConsole {
    async fn attach(&self, node: &Node) -> Result<ConsoleLink, DriverError> {
        let (output_tx, output) = mpsc::channel(LINK_QUEUE);
        let (input, mut input_rx) = mpsc::channel::<Vec<u8>>(LINK_QUEUE);
        let banner = format!(
            "Ferric fake console of node {} ({}): what you type is echoed.\r\n",
            node.uuid,
            node.name.as_deref().unwrap_or("unnamed")
        );
        tokio::spawn(async move {
            if output_tx.send(Ok(banner.into_bytes())).await.is_err() {
                return;
            }
            while let Some(bytes) = input_rx.recv().await {
                if output_tx.send(Ok(bytes)).await.is_err() {
                    return;
                }
            }
        });
        Ok(ConsoleLink { output, input })
    }
}

/// `no-console`: the node has no console Ferric can reach (Ironic's UnsupportedDriverExtension,
/// HTTP 400, on enable).
#[derive(Debug, Clone, Copy)]
pub struct NoConsole;

#[async_trait]
impl Validate for NoConsole {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Err(unsupported(node))
    }
}

#[async_trait]
impl ConsoleInterface for NoConsole {
    async fn attach(&self, node: &Node) -> Result<ConsoleLink, DriverError> {
        Err(unsupported(node))
    }
}

fn unsupported(node: &Node) -> DriverError {
    DriverError::Unsupported {
        driver: node.driver.clone(),
        kind: ferric_model::resources::InterfaceKind::Console,
    }
}

#[cfg(test)]
mod tests {
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    use super::*;

    #[tokio::test]
    async fn the_fake_console_greets_and_echoes() {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
        node.name = Some("n1".into());
        let mut link = FakeConsole.attach(&node).await.unwrap();
        let banner = link.output.recv().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&banner).contains("(n1)"));
        link.input.send(b"hello".to_vec()).await.unwrap();
        assert_eq!(link.output.recv().await.unwrap().unwrap(), b"hello");
        drop(link.input);
        assert!(link.output.recv().await.is_none());
    }

    #[tokio::test]
    async fn no_console_refuses_as_unsupported() {
        let node = Node::new(Uuid::nil(), "ipmi", ProvisionState::Enroll);
        let error = NoConsole.attach(&node).await.unwrap_err();
        assert!(error.is_caller_error());
        assert!(error.to_string().contains("does not support console"));
    }
}
