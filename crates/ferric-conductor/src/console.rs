//! Serial consoles, conductor side (issue 24, `docs/console.md`): `PUT …/states/console`
//! lands in [`Conductor::set_console`], which checks the node's console interface under its
//! lease, starts or stops the node's [`ConsoleHub`] and records `console_enabled`.
//!
//! Theory of operation: a hub is one node's console while it is enabled and this conductor
//! owns the node. It keeps one link to the machine's serial port through the node's console
//! interface (re-attached with backoff when it breaks, with a note in the output saying why),
//! the last `console_tail_size` bytes of output for late viewers, a broadcast of live output
//! for every viewer (the API's WebSocket, the TCP relay of `console_relay.rs`), and one input
//! queue every typist shares. The hubs follow the database, not the other way round: a sync
//! loop (at start, then every heartbeat interval) starts a hub for every `console_enabled` node
//! this conductor owns by the hash ring and stops those it no longer should run — so consoles
//! come back after a restart (Ironic's `_start_consoles`) and move with their nodes when a
//! conductor dies or joins.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferric_db::{NodeFilter, Page};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::task::Task;
use crate::{Conductor, ConductorError, Inner, lock};

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

/// How long a broken console link waits before it is attached again, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Chunks of live output a slow viewer may lag behind before it skips ahead.
const LIVE_QUEUE: usize = 1024;

/// Where a node's console can be reached: Ironic's `console_info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleInfo {
    /// `socat`: a raw TCP stream, as Ironic's `ipmitool-socat` console offers.
    pub kind: &'static str,
    pub url: String,
}

/// One node's relayed console.
pub struct ConsoleHub {
    node: Uuid,
    tail: Mutex<VecDeque<u8>>,
    capacity: usize,
    live: broadcast::Sender<Vec<u8>>,
    input: mpsc::Sender<Vec<u8>>,
    stop: CancellationToken,
    address: SocketAddr,
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

    fn push(&self, bytes: &[u8]) {
        let mut tail = lock(&self.tail);
        tail.extend(bytes);
        let excess = tail.len().saturating_sub(self.capacity);
        tail.drain(..excess);
        // Sent under the lock, so a subscriber sees each byte either in its tail or live.
        let _ = self.live.send(bytes.to_vec());
    }

    /// A line in the output saying what Ferric did (the link broke, re-attached).
    fn note(&self, message: &str) {
        self.push(format!("\r\n[Ferric: {message}]\r\n").as_bytes());
    }
}

/// The hubs this conductor runs.
#[derive(Debug, Default)]
pub(crate) struct Consoles {
    hubs: Mutex<HashMap<Uuid, Arc<ConsoleHub>>>,
}

impl Consoles {
    fn get(&self, node: Uuid) -> Option<Arc<ConsoleHub>> {
        lock(&self.hubs).get(&node).cloned()
    }

    fn stop(&self, node: Uuid) {
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

    fn nodes(&self) -> Vec<Uuid> {
        lock(&self.hubs).keys().copied().collect()
    }
}

/// Starts `node`'s hub unless it runs: binds its TCP relay, then attaches in the background.
async fn start(inner: &Arc<Inner>, node: Uuid) -> Result<Arc<ConsoleHub>, ConductorError> {
    if let Some(hub) = inner.consoles.get(node) {
        return Ok(hub);
    }
    let settings = &inner.config.console;
    let listener = crate::console_relay::bind(settings, node).await?;
    let address = listener
        .local_addr()
        .map_err(|error| ConductorError::Invalid(format!("console relay: {error}")))?;
    let (input, input_rx) = mpsc::channel(ferric_drivers::console::LINK_QUEUE);
    let hub = Arc::new(ConsoleHub {
        node,
        tail: Mutex::new(VecDeque::with_capacity(settings.tail_size.min(1 << 20))),
        capacity: settings.tail_size,
        live: broadcast::channel(LIVE_QUEUE).0,
        input,
        stop: inner.shutdown.child_token(),
        address,
    });
    {
        let mut hubs = lock(&inner.consoles.hubs);
        if let Some(running) = hubs.get(&node) {
            // Started meanwhile by the sync loop: keep that one.
            return Ok(running.clone());
        }
        hubs.insert(node, hub.clone());
    }
    tokio::spawn(crate::console_relay::serve(listener, hub.clone()));
    tokio::spawn(run(inner.clone(), hub.clone(), input_rx));
    tracing::info!(%node, relay = %address, "console started");
    Ok(hub)
}

/// Keeps the hub's link to the machine up until the hub stops.
async fn run(inner: Arc<Inner>, hub: Arc<ConsoleHub>, mut input: mpsc::Receiver<Vec<u8>>) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let attached = async {
            let (record, ports) = crate::view::read(&inner, hub.node).await?;
            let interfaces = crate::view::interfaces(&inner, &record, &ports)?;
            Ok::<_, ConductorError>(interfaces.console.attach(&record).await?)
        };
        let attached = tokio::select! {
            () = hub.stop.cancelled() => return,
            attached = attached => attached,
        };
        match attached {
            Ok(mut link) => {
                backoff = Duration::from_secs(1);
                loop {
                    tokio::select! {
                        // Dropping the link detaches from the machine.
                        () = hub.stop.cancelled() => return,
                        output = link.output.recv() => match output {
                            Some(Ok(bytes)) => hub.push(&bytes),
                            Some(Err(error)) => {
                                tracing::warn!(node = %hub.node, %error, "console link lost");
                                hub.note(&format!("console link lost: {error}; re-attaching"));
                                break;
                            }
                            None => {
                                hub.note("console link closed; re-attaching");
                                break;
                            }
                        },
                        typed = input.recv() => match typed {
                            Some(bytes) => {
                                // A link that just broke says so on its output next.
                                let _ = link.input.send(bytes).await;
                            }
                            None => return,
                        },
                    }
                }
            }
            Err(error) => {
                tracing::warn!(node = %hub.node, %error, "cannot attach to the console");
                hub.note(&format!(
                    "cannot attach to the console: {error}; retrying in {} s",
                    backoff.as_secs()
                ));
            }
        }
        tokio::select! {
            () = hub.stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Starts the hubs of the `console_enabled` nodes this conductor owns and stops the others.
pub(crate) async fn sync_once(inner: &Arc<Inner>) -> Result<usize, ConductorError> {
    let filter = NodeFilter {
        console_enabled: Some(true),
        ..NodeFilter::default()
    };
    let enabled = inner.store.node_list(&filter, &Page::all()).await?;
    let mine: Vec<Uuid> = enabled
        .iter()
        .filter(|node| inner.owns(node))
        .map(|node| node.uuid)
        .collect();
    for node in inner.consoles.nodes() {
        if !mine.contains(&node) {
            tracing::info!(%node, "console stopped: disabled, or the node moved to another conductor");
            inner.consoles.stop(node);
        }
    }
    let mut started = 0;
    for node in mine {
        if inner.consoles.get(node).is_none() {
            match start(inner, node).await {
                Ok(_) => started += 1,
                Err(error) => tracing::warn!(%node, %error, "cannot restore the console"),
            }
        }
    }
    Ok(started)
}

/// Undeploy ends the instance's console with the instance: the relay stops (its viewers are
/// closed) and `console_enabled` is cleared with the rest of the tear-down, so a node that is
/// cleaned and `available` again accepts no console connection until someone enables it anew
/// (issue 41, item 5). Saved by the tear-down's own transition.
pub(crate) async fn end_with_instance(task: &mut Task) {
    let node = task.uuid();
    task.inner.consoles.stop(node);
    if task.node.console_enabled {
        task.node.console_enabled = false;
        task.history(
            "INFO",
            "console",
            "Console disabled: the instance was torn down".to_owned(),
        )
        .await;
    }
}

/// Runs [`sync_once`] every heartbeat interval until the conductor stops.
pub(crate) fn spawn_sync(inner: Arc<Inner>) {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(inner.config.heartbeat_interval);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = inner.shutdown.cancelled() => return,
                _ = interval.tick() => {
                    if let Err(error) = sync_once(&inner).await {
                        tracing::warn!(%error, "console sync failed");
                    }
                }
            }
        }
    });
}

impl Conductor {
    /// `PUT …/states/console`: enables or disables the node's console. The node's console
    /// interface is checked first (`no-console` and missing BMC settings answer 400); nothing
    /// changes when the console already is as asked.
    pub async fn set_console(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        let inner = &self.inner;
        let mut task = Task::acquire(inner, node).await?;
        let result = async {
            let interfaces = task.interfaces()?;
            interfaces.console.validate(&task.node).await?;
            if enabled {
                let hub = start(inner, node).await?;
                if !task.node.console_enabled {
                    task.node.console_enabled = true;
                    task.save().await?;
                    task.history(
                        "INFO",
                        "console",
                        format!("Console enabled; relayed at {}", hub.info().url),
                    )
                    .await;
                }
            } else {
                inner.consoles.stop(node);
                if task.node.console_enabled {
                    task.node.console_enabled = false;
                    task.save().await?;
                    task.history("INFO", "console", "Console disabled".to_owned())
                        .await;
                }
            }
            Ok(())
        }
        .await;
        if enabled && result.is_err() && !task.node.console_enabled {
            inner.consoles.stop(node);
        }
        task.release().await;
        result
    }

    /// Where the node's console is relayed: `None` while it is disabled. An enabled console
    /// this conductor does not run yet (just restarted, just took the node over) is started.
    pub async fn console_info(&self, node: Uuid) -> Result<Option<ConsoleInfo>, ConductorError> {
        let (record, _) = crate::view::read(&self.inner, node).await?;
        if !record.console_enabled {
            return Ok(None);
        }
        Ok(Some(start(&self.inner, node).await?.info()))
    }

    /// The node's console if this conductor relays it (the API's WebSocket attaches to it).
    pub fn console(&self, node: Uuid) -> Option<Arc<ConsoleHub>> {
        self.inner.consoles.get(node)
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
