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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferric_db::{NodeFilter, Page};
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use crate::console_hub::{ConsoleHub, ConsoleInfo};
use crate::task::Task;
use crate::{Conductor, ConductorError, Inner, lock};

/// How long a broken console link waits before it is attached again, at most.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Chunks of live output a slow viewer may lag behind before it skips ahead.
const LIVE_QUEUE: usize = 1024;

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
