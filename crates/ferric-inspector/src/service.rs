//! The inspection service's state: the node cache (introspections and their lookup
//! attributes), the rules, the stored data and the PXE filter, and the operations the HTTP
//! layer (`api.rs`) calls.
//!
//! Theory of operation: `start` records an introspection with the node's MACs and BMC
//! addresses and (with `manage_boot`) boots the inspection ramdisk through the node's own
//! boot, management and power interfaces — as ironic-inspector does through Ironic's API.
//! `continue_` (the ramdisk's unauthenticated callback) is accepted only when the data's MACs
//! or BMC address match exactly one node under introspection; the data is processed by the
//! shared [`crate::process`] code, rules run, and the result is written to the node and its
//! ports through the [`Store`] with the node's revision guard (the service changes
//! properties, traits and ports, never provision or power state in the database).
//!
//! TODO-correctness: the node cache lives in memory, so a restart forgets running
//! introspections (the conductor then sees 404 and fails the node with that message);
//! ironic-inspector keeps it in its database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ferric_db::{Page, PortFilter, Store};
use ferric_drivers::{BootDevice, DriverError, Drivers, PowerAction};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node, Port};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::process::{Processed, ProcessingConfig, payload_bmc_addresses, payload_macs, process};
use crate::pxe_filter::{self, FilterState};
use crate::rules::{Rule, apply_rules};

/// The service's settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub processing: ProcessingConfig,
    /// dnsmasq's `--dhcp-hostsdir` for the PXE filter; `None`: no filter.
    pub dhcp_hostsdir: Option<PathBuf>,
    /// Unknown machines get the discovery boot (PXE filter).
    pub discovery: bool,
    /// An introspection waiting longer than this fails.
    pub timeout: Duration,
    /// Where a ramdisk booted by the service posts its data (`<url>/v1/continue`).
    pub callback_url: Option<String>,
    /// Power the machine off when its introspection ends (only when the service booted it).
    pub power_off: bool,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        Self {
            processing: ProcessingConfig::default(),
            dhcp_hostsdir: None,
            discovery: false,
            timeout: Duration::from_secs(3600),
            callback_url: None,
            power_off: true,
        }
    }
}

/// Introspection states (`reference/ironic.md` §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntrospectionState {
    Starting,
    Waiting,
    Processing,
    Finished,
    Error,
}

impl IntrospectionState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Waiting => "waiting",
            Self::Processing => "processing",
            Self::Finished => "finished",
            Self::Error => "error",
        }
    }

    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Finished | Self::Error)
    }
}

/// One node's introspection, as the node cache keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Introspection {
    pub uuid: Uuid,
    pub state: IntrospectionState,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub manage_boot: bool,
    pub macs: BTreeSet<String>,
    pub bmc_addresses: BTreeSet<String>,
}

impl Introspection {
    /// `GET /v1/introspection/{node}`.
    pub fn status_json(&self, base_url: &str) -> Value {
        let time = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H:%M:%S").to_string();
        json!({
            "uuid": self.uuid,
            "finished": self.state.is_finished(),
            "state": self.state.as_str(),
            "started_at": time(self.started_at),
            "finished_at": self.finished_at.map(time),
            "error": self.error,
            "links": [{
                "href": format!("{}/v1/introspection/{}", base_url.trim_end_matches('/'), self.uuid),
                "rel": "self",
            }],
        })
    }
}

/// A refusal with the HTTP status it maps to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Internal(String),
}

impl From<ferric_db::Error> for ServiceError {
    fn from(error: ferric_db::Error) -> Self {
        match error {
            ferric_db::Error::NotFound { .. } => Self::NotFound(error.to_string()),
            ferric_db::Error::StaleRevision { .. } => Self::Conflict(error.to_string()),
            other => {
                tracing::error!(error = %other, "inspection service: storage failed");
                Self::Internal("The inspection service could not reach its database.".to_owned())
            }
        }
    }
}

/// The inspection service.
pub struct Service {
    store: Store,
    drivers: Drivers,
    config: ServiceConfig,
    cache: Mutex<BTreeMap<Uuid, Introspection>>,
    rules: Mutex<Vec<Rule>>,
    /// Processed data per node (`GET /v1/introspection/{node}/data`).
    data: Mutex<BTreeMap<Uuid, Value>>,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// States a node may be introspected in.
const STARTABLE: [ProvisionState; 5] = [
    ProvisionState::Enroll,
    ProvisionState::Manageable,
    ProvisionState::Inspecting,
    ProvisionState::InspectWait,
    ProvisionState::InspectFailed,
];

/// The host of a `driver_info` `*_address` value (an IP, a host name or a URL).
fn bmc_host(value: &str) -> Option<String> {
    let rest = value
        .split_once("://")
        .map_or(value, |(_, rest)| rest)
        .split(['/', '?'])
        .next()?;
    let host = if let Some(bracketed) = rest.strip_prefix('[') {
        bracketed.split(']').next()?
    } else {
        rest.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(rest, |(host, _)| host)
    };
    (!host.is_empty()).then(|| host.to_owned())
}

/// The node's BMC addresses from `driver_info.*_address`.
pub fn node_bmc_addresses(node: &Node) -> BTreeSet<String> {
    node.driver_info
        .iter()
        .filter(|(key, _)| key.ends_with("_address"))
        .filter_map(|(_, value)| value.as_str().and_then(bmc_host))
        .collect()
}

impl Service {
    pub fn new(store: Store, drivers: Drivers, config: ServiceConfig) -> Self {
        Self {
            store,
            drivers,
            config,
            cache: Mutex::new(BTreeMap::new()),
            rules: Mutex::new(Vec::new()),
            data: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    async fn node(&self, ident: &str) -> Result<Node, ServiceError> {
        self.store
            .node_get(&Ident::parse(ident))
            .await
            .map_err(|error| match error {
                ferric_db::Error::NotFound { .. } => {
                    ServiceError::NotFound(format!("Node {ident} was not found"))
                }
                other => other.into(),
            })
    }

    async fn ports(&self, node: Uuid) -> Result<Vec<Port>, ServiceError> {
        Ok(self
            .store
            .port_list(
                &PortFilter {
                    node_uuid: Some(node),
                    ..PortFilter::default()
                },
                &Page::all(),
            )
            .await?)
    }

    /// `POST /v1/introspection/{node}`.
    pub async fn start(&self, ident: &str, manage_boot: bool) -> Result<(), ServiceError> {
        let node = self.node(ident).await?;
        if !STARTABLE.contains(&node.provision_state) {
            return Err(ServiceError::BadRequest(format!(
                "Invalid provision state for introspection: \"{}\", valid states are \"{}\"",
                node.provision_state,
                STARTABLE.map(ProvisionState::as_str).join(", ")
            )));
        }
        if manage_boot && node.maintenance {
            return Err(ServiceError::BadRequest(format!(
                "Node {} is in maintenance mode; the service cannot boot it.",
                node.uuid
            )));
        }
        let processing = lock(&self.cache)
            .get(&node.uuid)
            .is_some_and(|entry| entry.state == IntrospectionState::Processing);
        if processing {
            return Err(ServiceError::Conflict(format!(
                "Node {} is being processed right now; try again.",
                node.uuid
            )));
        }
        let ports = self.ports(node.uuid).await?;
        let introspection = Introspection {
            uuid: node.uuid,
            state: IntrospectionState::Starting,
            started_at: Utc::now(),
            finished_at: None,
            error: None,
            manage_boot,
            macs: ports
                .iter()
                .map(|port| port.address.to_ascii_lowercase())
                .collect(),
            bmc_addresses: node_bmc_addresses(&node),
        };
        lock(&self.cache).insert(node.uuid, introspection);
        data_forget(&self.data, node.uuid);
        self.sync_filter().await;
        if manage_boot && let Err(error) = self.boot(&node, &ports).await {
            let message = format!(
                "Failed to boot node {} for introspection: {error}",
                node.uuid
            );
            self.finish(node.uuid, Some(message)).await;
            return Ok(());
        }
        self.set_state(node.uuid, IntrospectionState::Waiting);
        tracing::info!(node = %node.uuid, manage_boot, "introspection started");
        Ok(())
    }

    /// Boots the inspection ramdisk: network boot with the callback URL, PXE, reboot.
    async fn boot(&self, node: &Node, ports: &[Port]) -> Result<(), DriverError> {
        let interfaces = self.drivers.load_with_ports(node, ports)?;
        let callback = self.config.callback_url.as_deref().ok_or_else(|| {
            DriverError::MissingParameter(
                "The inspection service has no callback URL (inspector_callback_url) to give \
                 the ramdisk."
                    .to_owned(),
            )
        })?;
        let params = [format!(
            "ipa-inspection-callback-url={}/v1/continue",
            callback.trim_end_matches('/')
        )];
        interfaces.boot.prepare_ramdisk_with(node, &params).await?;
        let mut node = node.clone();
        match interfaces
            .management
            .set_boot_device(&mut node, BootDevice::Pxe, false)
            .await
        {
            Ok(()) | Err(DriverError::Unsupported { .. }) => {}
            Err(error) => return Err(error),
        }
        interfaces
            .power
            .set_power(&node, PowerAction::Reboot, None)
            .await
    }

    /// Powers a node the service booted off again and removes its network boot.
    async fn unboot(&self, node_uuid: Uuid) -> Result<(), String> {
        let node = self
            .store
            .node_get(&Ident::Uuid(node_uuid))
            .await
            .map_err(|error| error.to_string())?;
        let ports = self
            .ports(node_uuid)
            .await
            .map_err(|error| error.to_string())?;
        let interfaces = self
            .drivers
            .load_with_ports(&node, &ports)
            .map_err(|error| error.to_string())?;
        interfaces
            .boot
            .clean_up_ramdisk(&node)
            .await
            .map_err(|error| error.to_string())?;
        if self.config.power_off && !node.disable_power_off {
            interfaces
                .power
                .set_power(&node, PowerAction::Off, None)
                .await
                .map_err(|error| error.to_string())?;
        }
        Ok(())
    }

    fn set_state(&self, node: Uuid, state: IntrospectionState) {
        if let Some(entry) = lock(&self.cache).get_mut(&node) {
            entry.state = state;
        }
    }

    /// Ends an introspection (with an error or not), undoing the boot the service did.
    async fn finish(&self, node: Uuid, error: Option<String>) {
        let manage_boot = lock(&self.cache)
            .get(&node)
            .is_some_and(|entry| entry.manage_boot);
        let mut error = error;
        if manage_boot && let Err(problem) = self.unboot(node).await {
            tracing::warn!(node = %node, error = %problem, "could not power the node off");
            error = Some(match error {
                Some(error) => format!("{error}; then powering off failed: {problem}"),
                None => format!("Powering the node off failed: {problem}"),
            });
        }
        if let Some(entry) = lock(&self.cache).get_mut(&node) {
            entry.state = if error.is_some() {
                IntrospectionState::Error
            } else {
                IntrospectionState::Finished
            };
            entry.error = error;
            entry.finished_at = Some(Utc::now());
        }
        self.sync_filter().await;
    }

    /// `GET /v1/introspection/{node}`.
    pub async fn status(&self, ident: &str) -> Result<Introspection, ServiceError> {
        let uuid = match Uuid::parse_str(ident) {
            Ok(uuid) => uuid,
            Err(_) => self.node(ident).await?.uuid,
        };
        lock(&self.cache).get(&uuid).cloned().ok_or_else(|| {
            ServiceError::NotFound(format!("Introspection for node {ident} was not found"))
        })
    }

    /// `GET /v1/introspection`: newest first, after `marker`, at most `limit`.
    pub fn list(
        &self,
        marker: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Introspection>, ServiceError> {
        let mut all: Vec<Introspection> = lock(&self.cache).values().cloned().collect();
        all.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(a.uuid.cmp(&b.uuid)));
        let start = match marker {
            Some(marker) => {
                all.iter()
                    .position(|entry| entry.uuid == marker)
                    .ok_or_else(|| {
                        ServiceError::BadRequest(format!("Marker {marker} was not found"))
                    })?
                    + 1
            }
            None => 0,
        };
        Ok(all.into_iter().skip(start).take(limit).collect())
    }

    /// `POST /v1/introspection/{node}/abort`.
    pub async fn abort(&self, ident: &str) -> Result<(), ServiceError> {
        let current = self.status(ident).await?;
        match current.state {
            IntrospectionState::Starting | IntrospectionState::Waiting => {}
            IntrospectionState::Processing => {
                return Err(ServiceError::Conflict(format!(
                    "Node {} is being processed right now; try again.",
                    current.uuid
                )));
            }
            IntrospectionState::Finished | IntrospectionState::Error => {
                return Err(ServiceError::BadRequest(format!(
                    "Introspection of node {} has already finished ({}); nothing to abort.",
                    current.uuid,
                    current.state.as_str()
                )));
            }
        }
        self.finish(current.uuid, Some("Canceled by operator".to_owned()))
            .await;
        tracing::info!(node = %current.uuid, "introspection aborted");
        Ok(())
    }

    /// `GET /v1/introspection/{node}/data`.
    pub async fn data(&self, ident: &str) -> Result<Value, ServiceError> {
        let uuid = self.status(ident).await?.uuid;
        lock(&self.data).get(&uuid).cloned().ok_or_else(|| {
            ServiceError::NotFound(format!("Introspection data for node {ident} was not found"))
        })
    }

    /// The one node under introspection the data belongs to.
    fn lookup(&self, payload: &Value) -> Result<Uuid, ServiceError> {
        let macs = payload_macs(payload);
        let bmcs = payload_bmc_addresses(payload);
        let cache = lock(&self.cache);
        let mut best: Vec<(usize, &Introspection)> = cache
            .values()
            .map(|entry| {
                let score = entry.macs.intersection(&macs).count()
                    + entry.bmc_addresses.intersection(&bmcs).count();
                (score, entry)
            })
            .filter(|(score, _)| *score > 0)
            .collect();
        best.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        let refused = |why: String| {
            tracing::warn!(macs = ?macs, bmc = ?bmcs, "continue refused: {why}");
            ServiceError::NotFound(format!("Could not find a node for attributes: {why}"))
        };
        match best.as_slice() {
            [] => Err(refused(
                "no node under introspection has these MACs or BMC address".into(),
            )),
            [(first, _), (second, _), ..] if first == second => {
                Err(refused("several nodes under introspection match".into()))
            }
            [(_, entry), ..] if entry.state != IntrospectionState::Waiting => {
                Err(refused(format!(
                    "node {} is not waiting for data ({})",
                    entry.uuid,
                    entry.state.as_str()
                )))
            }
            [(_, entry), ..] => Ok(entry.uuid),
        }
    }

    /// `POST /v1/continue`: the ramdisk's data.
    pub async fn continue_(&self, payload: &Value) -> Result<Uuid, ServiceError> {
        if !payload.is_object() {
            return Err(ServiceError::BadRequest(
                "Invalid data: expected a JSON object".into(),
            ));
        }
        let node = self.lookup(payload)?;
        self.set_state(node, IntrospectionState::Processing);
        match self.apply(node, payload).await {
            Ok(processed) => {
                // What the data endpoint shows: the payload with the chosen root disk.
                let mut data = payload.clone();
                if let (Some(object), Some(disk)) = (data.as_object_mut(), processed.root_disk) {
                    object.insert("root_disk".to_owned(), disk);
                }
                lock(&self.data).insert(node, data);
                self.finish(node, None).await;
                tracing::info!(node = %node, "introspection finished");
                Ok(node)
            }
            Err(ServiceError::Conflict(message)) => {
                // Someone wrote the node meanwhile every time; the ramdisk may post again.
                self.set_state(node, IntrospectionState::Waiting);
                Err(ServiceError::Conflict(message))
            }
            Err(error) => {
                let message = error.to_string();
                self.finish(node, Some(message.clone())).await;
                Err(ServiceError::BadRequest(message))
            }
        }
    }

    /// Processes `payload`, runs the rules and writes the node and its new ports.
    async fn apply(&self, node_uuid: Uuid, payload: &Value) -> Result<Processed, ServiceError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let node = self.store.node_get(&Ident::Uuid(node_uuid)).await?;
            let ports = self.ports(node_uuid).await?;
            let processed = process(&node, &ports, payload, &self.config.processing)
                .map_err(|error| ServiceError::BadRequest(error.to_string()))?;
            let mut updated = node.clone();
            updated.properties = processed.properties.clone();
            let rules = lock(&self.rules).clone();
            apply_rules(&rules, &mut updated, payload).map_err(ServiceError::BadRequest)?;
            match self.store.node_update(&updated, node.version).await {
                Ok(_) => {
                    create_ports(&self.store, node_uuid, &processed.new_ports).await;
                    // The data outlives this process in the store (Ironic's
                    // `GET /v1/nodes/{node}/inventory`); the cache below serves `/data`.
                    if let Err(error) = self
                        .store
                        .node_inventory_set(node_uuid, &processed.inventory, &processed.plugin_data)
                        .await
                    {
                        tracing::warn!(node = %node_uuid, error = %error, "inspection could not store the inventory");
                    }
                    tracing::info!(node = %node_uuid, updated = ?processed.updated, "node updated from inspection");
                    return Ok(processed);
                }
                Err(ferric_db::Error::StaleRevision { .. }) if attempts < 3 => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Fails introspections waiting longer than the timeout and re-syncs the PXE filter.
    /// Returns how many timed out.
    pub async fn periodic(&self, now: DateTime<Utc>) -> usize {
        let limit = TimeDelta::from_std(self.config.timeout).unwrap_or(TimeDelta::MAX);
        let late: Vec<Uuid> = lock(&self.cache)
            .values()
            .filter(|entry| {
                !entry.state.is_finished()
                    && entry.state != IntrospectionState::Processing
                    && now.signed_duration_since(entry.started_at) > limit
            })
            .map(|entry| entry.uuid)
            .collect();
        for node in &late {
            tracing::warn!(node = %node, "introspection timed out");
            self.finish(*node, Some("Introspection timeout".to_owned()))
                .await;
        }
        self.sync_filter().await;
        late.len()
    }

    /// Brings the PXE filter in line with the node cache.
    pub async fn sync_filter(&self) {
        let Some(hostsdir) = &self.config.dhcp_hostsdir else {
            return;
        };
        let allowed: BTreeSet<String> = lock(&self.cache)
            .values()
            .filter(|entry| !entry.state.is_finished())
            .flat_map(|entry| entry.macs.iter().cloned())
            .collect();
        let known = if self.config.discovery {
            match self
                .store
                .port_list(&PortFilter::default(), &Page::all())
                .await
            {
                Ok(ports) => ports
                    .into_iter()
                    .map(|port| port.address.to_ascii_lowercase())
                    .collect(),
                Err(error) => {
                    tracing::warn!(error = %error, "PXE filter: could not list ports");
                    return;
                }
            }
        } else {
            BTreeSet::new()
        };
        let state = FilterState {
            allowed,
            known,
            discovery: self.config.discovery,
        };
        match pxe_filter::sync(&state, hostsdir) {
            Ok(report) if report.written + report.removed > 0 => {
                tracing::info!(
                    written = report.written,
                    removed = report.removed,
                    "PXE filter synced"
                );
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(error = %error, dir = %hostsdir.display(), "PXE filter sync failed")
            }
        }
    }

    pub fn rule_list(&self) -> Vec<Rule> {
        lock(&self.rules).clone()
    }

    pub fn rule_create(&self, rule: Rule) -> Result<Rule, ServiceError> {
        let mut rules = lock(&self.rules);
        if rules.iter().any(|existing| existing.uuid == rule.uuid) {
            return Err(ServiceError::Conflict(format!(
                "Rule {} already exists",
                rule.uuid
            )));
        }
        rules.push(rule.clone());
        Ok(rule)
    }

    pub fn rule_get(&self, uuid: Uuid) -> Result<Rule, ServiceError> {
        lock(&self.rules)
            .iter()
            .find(|rule| rule.uuid == uuid)
            .cloned()
            .ok_or_else(|| ServiceError::NotFound(format!("Rule {uuid} was not found")))
    }

    pub fn rule_delete(&self, uuid: Uuid) -> Result<(), ServiceError> {
        let mut rules = lock(&self.rules);
        let before = rules.len();
        rules.retain(|rule| rule.uuid != uuid);
        if rules.len() == before {
            return Err(ServiceError::NotFound(format!("Rule {uuid} was not found")));
        }
        Ok(())
    }

    pub fn rule_delete_all(&self) {
        lock(&self.rules).clear();
    }
}

fn data_forget(data: &Mutex<BTreeMap<Uuid, Value>>, node: Uuid) {
    lock(data).remove(&node);
}

/// Creates the ports processing asked for; a MAC that already has a port (on any node) is
/// left alone with a log line.
pub async fn create_ports(store: &Store, node: Uuid, new_ports: &[(String, bool)]) {
    for (mac, pxe_enabled) in new_ports {
        let mut port = Port::new(Uuid::new_v4(), node, mac.clone());
        port.pxe_enabled = *pxe_enabled;
        match store.port_create(&port).await {
            Ok(_) => tracing::info!(node = %node, mac = %mac, "port created from inspection"),
            Err(error) => {
                tracing::warn!(node = %node, mac = %mac, error = %error, "inspection could not create a port")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmc_hosts_come_from_urls_and_addresses() {
        assert_eq!(bmc_host("10.0.0.5").as_deref(), Some("10.0.0.5"));
        assert_eq!(
            bmc_host("redfish+http://10.0.0.5:8000/redfish/v1").as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(
            bmc_host("https://[fd00::5]:443").as_deref(),
            Some("fd00::5")
        );
        assert_eq!(
            bmc_host("bmc.example.com").as_deref(),
            Some("bmc.example.com")
        );
        assert_eq!(bmc_host(""), None);
    }
}
