//! The agent's shared state (token, node, command history), shared by the API, the heartbeat
//! loop and the command handlers (each gets it in an [`Invocation`]); the start-up that wires
//! them is `running.rs`, running a command is `registry.rs`.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::Notify;

use crate::commands::{CommandResult, Params, Progress, Record};
use crate::config::AgentConfig;

/// The version the agent reports in heartbeats and `/v1/status`.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the agent learnt from the lookup.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// The node document (`uuid`, `properties`, `instance_info`, `driver_internal_info`).
    pub node: Value,
    /// The `config` document (`heartbeat_timeout`, `agent_token`, …).
    pub config: Value,
}

/// The agent: settings, token, node and command history, shared by the API, the heartbeat
/// loop and the command handlers.
#[derive(Debug)]
pub struct Agent {
    pub config: AgentConfig,
    started_at: f64,
    token: RwLock<Option<String>>,
    node: RwLock<Option<NodeInfo>>,
    commands: Mutex<Vec<Arc<Record>>>,
    /// Signalled when an asynchronous command finishes: the heartbeat loop sends one early.
    pub heartbeat_now: Notify,
    /// Signalled when the agent must stop serving (after `rescue.finalize_rescue`).
    pub stop: Notify,
    /// The PEM of the certificate the API is served with (auto-TLS), once made.
    certificate: RwLock<Option<String>>,
    /// What the last partition-image deployment made (`standby.get_partition_uuids`).
    partition_uuids: RwLock<Option<Value>>,
    /// The image swarm this agent serves pieces of (peer-assisted delivery).
    peer_swarm: RwLock<Option<Arc<crate::image::held::Held>>>,
}

/// What a handler gets: the agent, the parameters and a progress handle.
#[derive(Debug)]
pub struct Invocation {
    pub agent: Arc<Agent>,
    pub params: Params,
    pub progress: Progress,
}

impl Agent {
    pub fn new(config: AgentConfig) -> Arc<Agent> {
        let started_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs_f64())
            .unwrap_or_default();
        let token = config.agent_token.clone();
        Arc::new(Agent {
            config,
            started_at,
            token: RwLock::new(token),
            node: RwLock::new(None),
            commands: Mutex::new(Vec::new()),
            heartbeat_now: Notify::new(),
            stop: Notify::new(),
            certificate: RwLock::new(None),
            partition_uuids: RwLock::new(None),
            peer_swarm: RwLock::new(None),
        })
    }

    /// The image swarm whose pieces this agent serves, if any.
    pub fn peer_swarm(&self) -> Option<Arc<crate::image::held::Held>> {
        self.peer_swarm
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Serves `held` from now on; the swarm served before stops announcing.
    pub fn set_peer_swarm(&self, held: Option<Arc<crate::image::held::Held>>) {
        let old = std::mem::replace(
            &mut *self
                .peer_swarm
                .write()
                .unwrap_or_else(PoisonError::into_inner),
            held,
        );
        if let Some(old) = old {
            old.retire();
        }
    }

    /// The partitions of the last partition-image deployment, if there was one.
    pub fn partition_uuids(&self) -> Option<Value> {
        self.partition_uuids
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remembers the partitions a partition-image deployment made.
    pub fn set_partition_uuids(&self, uuids: Value) {
        *self
            .partition_uuids
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(uuids);
    }

    /// The certificate the agent's API is served with and sends in heartbeats, if any.
    pub fn certificate(&self) -> Option<String> {
        self.certificate
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_certificate(&self, pem: Option<String>) {
        *self
            .certificate
            .write()
            .unwrap_or_else(PoisonError::into_inner) = pem;
    }

    /// Seconds since the epoch when the agent started (`/v1/status`).
    pub fn started_at(&self) -> f64 {
        self.started_at
    }

    /// The token commands must carry, once known.
    pub fn token(&self) -> Option<String> {
        self.token
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_token(&self, token: String) {
        *self.token.write().unwrap_or_else(PoisonError::into_inner) = Some(token);
    }

    /// The node found by the lookup, if any.
    pub fn node_info(&self) -> Option<NodeInfo> {
        self.node
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_node_info(&self, info: NodeInfo) {
        *self.node.write().unwrap_or_else(PoisonError::into_inner) = Some(info);
    }

    /// Whether md5 image checksums are accepted (flag, or Ironic's lookup config).
    pub fn md5_allowed(&self) -> bool {
        self.config.allow_md5
            || self
                .node_info()
                .is_some_and(|info| info.config["agent_md5_checksum_enable"] == true)
    }

    /// Whether the lookup allowed installing a BIOS bootloader from the deployed image
    /// (`enable_bios_bootloader_install`, off unless the conductor sends true).
    pub fn bios_bootloader_install_allowed(&self) -> bool {
        self.node_info()
            .is_some_and(|info| info.config["enable_bios_bootloader_install"] == true)
    }

    /// Every command so far, oldest first.
    pub fn command_results(&self) -> Vec<CommandResult> {
        self.commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|record| record.snapshot())
            .collect()
    }

    /// One command by id.
    pub fn command(&self, id: &str) -> Option<Arc<Record>> {
        self.commands
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|record| record.id() == id)
            .cloned()
    }

    /// Records a new command named `short_name` in the history, unless one is still running
    /// (`None`: the agent is busy).
    pub(crate) fn begin_command(&self, short_name: &str) -> Option<Arc<Record>> {
        let mut history = self.commands.lock().unwrap_or_else(PoisonError::into_inner);
        if history.last().is_some_and(|last| last.is_running()) {
            return None;
        }
        let record = Record::new(short_name);
        history.push(record.clone());
        Some(record)
    }
}

/// Serves the API over plain HTTP until the agent is told to stop.
pub(crate) async fn serve_plain(
    agent: &Agent,
    listener: tokio::net::TcpListener,
    router: axum::Router,
) {
    tokio::select! {
        served = axum::serve(listener, router) => {
            if let Err(error) = served {
                tracing::error!("agent API stopped: {error}");
            }
        }
        () = agent.stop.notified() => {}
    }
}
