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
//! Everything the service knows is in the database (`ferric_db`'s `introspection_*`
//! functions), as ironic-inspector keeps its node cache in its own: introspections with their
//! lookup attributes, the processed data and the rules. So a restart — or a second process on
//! the same database — continues a running introspection; the PXE filter is recomputed from
//! the same rows at start. States move only by compare-and-set, so a callback racing an abort
//! or another callback cannot both win. With discovery on, data no introspection matches goes
//! to the enroll hook (`discovery.rs`).
//!
//! Why the service writes through the `Store` rather than Ferric's HTTP API: it runs in the same
//! trust domain and on the same database, so it needs no credentials or client code, and the
//! revision guard gives it the same safety as an API write.

pub mod discovery;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ferric_db::{Page, PortFilter, Store};
use ferric_drivers::{DriverError, Drivers, PowerAction};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, JsonObject, Node, Port};
use serde_json::Value;
use uuid::Uuid;

pub use crate::node_cache::{Introspection, IntrospectionState};
use crate::process::{Processed, ProcessingConfig, payload_bmc_addresses, payload_macs, process};
use crate::pxe_filter::{self, FilterState};
use crate::rules::{Rule, apply_rules};

/// The service's settings.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub processing: ProcessingConfig,
    /// dnsmasq's `--dhcp-hostsdir` for the PXE filter; `None`: no filter.
    pub dhcp_hostsdir: Option<PathBuf>,
    /// Discovery: unknown machines get the discovery boot (PXE filter), and data from a
    /// machine no node matches enrolls a new node (Ironic inspector's `enroll` hook).
    pub discovery: bool,
    /// The hardware type of nodes discovery enrolls.
    pub discovery_driver: String,
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
            discovery_driver: discovery::DEFAULT_DRIVER.to_owned(),
            timeout: Duration::from_secs(3600),
            callback_url: None,
            power_off: true,
        }
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

/// The inspection service: settings and handles; its state is in the store.
pub struct Service {
    store: Store,
    drivers: Drivers,
    config: ServiceConfig,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service").finish_non_exhaustive()
    }
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
    } else if rest.matches(':').count() > 1 {
        // A bare IPv6 address (a port needs brackets around one).
        rest
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
        }
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn drivers(&self) -> &Drivers {
        &self.drivers
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

    pub(crate) async fn ports(&self, node: Uuid) -> Result<Vec<Port>, ServiceError> {
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

    async fn introspection(&self, node: Uuid) -> Result<Option<Introspection>, ServiceError> {
        Ok(self
            .store
            .introspection_get(node)
            .await?
            .map(Introspection::from_record))
    }

    /// Moves the node's introspection from one of `from` to `to`; `false` if it was not in
    /// one of them.
    async fn transition(
        &self,
        node: Uuid,
        from: &[IntrospectionState],
        to: IntrospectionState,
    ) -> Result<bool, ServiceError> {
        let from: Vec<&str> = from.iter().map(|state| state.as_str()).collect();
        Ok(self
            .store
            .introspection_transition(node, &from, to.as_str())
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
        let busy = self.introspection(node.uuid).await?.is_some_and(|entry| {
            matches!(
                entry.state,
                IntrospectionState::Processing | IntrospectionState::Aborting
            )
        });
        if busy {
            return Err(ServiceError::Conflict(format!(
                "Node {} is being processed right now; try again.",
                node.uuid
            )));
        }
        let ports = self.ports(node.uuid).await?;
        let introspection = Introspection::new(
            node.uuid,
            IntrospectionState::Starting,
            manage_boot,
            ports
                .iter()
                .map(|port| port.address.to_ascii_lowercase())
                .collect(),
            node_bmc_addresses(&node),
        );
        self.store
            .introspection_upsert(&introspection.to_record())
            .await?;
        self.store.introspection_data_delete(node.uuid).await?;
        self.sync_filter().await;
        if manage_boot && let Err(error) = self.boot(&node, &ports).await {
            let message = format!(
                "Failed to boot node {} for introspection: {error}",
                node.uuid
            );
            self.finish(node.uuid, &[IntrospectionState::Starting], Some(message))
                .await?;
            return Ok(());
        }
        // An abort may have come first; then it stays aborted.
        self.transition(
            node.uuid,
            &[IntrospectionState::Starting],
            IntrospectionState::Waiting,
        )
        .await?;
        tracing::info!(node = %node.uuid, manage_boot, "introspection started");
        Ok(())
    }

    /// Boots the inspection ramdisk: network boot with the callback URL, PXE, reboot.
    async fn boot(&self, node: &Node, ports: &[Port]) -> Result<(), DriverError> {
        let interfaces = self.drivers.load_with_ports(node, ports)?;
        let callback = self.config.callback_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.inspector_callback_url",
                "The inspection service has no callback URL (inspector_callback_url) to give \
                 the ramdisk."
                    .to_owned(),
            )
        })?;
        let params = [format!(
            "ipa-inspection-callback-url={}/v1/continue",
            callback.trim_end_matches('/')
        )];
        let mut node = node.clone();
        interfaces
            .boot
            .prepare_ramdisk_with(&mut node, &params)
            .await?;
        let device = interfaces.boot.network_boot_device();
        match interfaces
            .management
            .set_boot_device(&mut node, device, false)
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

    /// Ends an introspection that is in one of the states `from` (with an error or not),
    /// undoing the boot the service did; `false` if it was in none of them.
    async fn finish(
        &self,
        node: Uuid,
        from: &[IntrospectionState],
        error: Option<String>,
    ) -> Result<bool, ServiceError> {
        let manage_boot = self
            .introspection(node)
            .await?
            .is_some_and(|entry| entry.manage_boot);
        let mut error = error;
        if manage_boot && let Err(problem) = self.unboot(node).await {
            tracing::warn!(node = %node, error = %problem, "could not power the node off");
            error = Some(match error {
                Some(error) => format!("{error}; then powering off failed: {problem}"),
                None => format!("Powering the node off failed: {problem}"),
            });
        }
        let state = if error.is_some() {
            IntrospectionState::Error
        } else {
            IntrospectionState::Finished
        };
        let from: Vec<&str> = from.iter().map(|state| state.as_str()).collect();
        let finished = self
            .store
            .introspection_finish(node, &from, state.as_str(), error.as_deref())
            .await?;
        self.sync_filter().await;
        Ok(finished)
    }

    /// `GET /v1/introspection/{node}`.
    pub async fn status(&self, ident: &str) -> Result<Introspection, ServiceError> {
        let uuid = match Uuid::parse_str(ident) {
            Ok(uuid) => uuid,
            Err(_) => self.node(ident).await?.uuid,
        };
        self.introspection(uuid).await?.ok_or_else(|| {
            ServiceError::NotFound(format!("Introspection for node {ident} was not found"))
        })
    }

    /// `GET /v1/introspection`: newest first, after `marker`, at most `limit`.
    pub async fn list(
        &self,
        marker: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Introspection>, ServiceError> {
        match self.store.introspection_list(marker, limit).await {
            Ok(records) => Ok(records
                .into_iter()
                .map(Introspection::from_record)
                .collect()),
            Err(ferric_db::Error::MarkerNotFound { marker, .. }) => Err(ServiceError::BadRequest(
                format!("Marker {marker} was not found"),
            )),
            Err(error) => Err(error.into()),
        }
    }

    /// `POST /v1/introspection/{node}/abort`.
    pub async fn abort(&self, ident: &str) -> Result<(), ServiceError> {
        let current = self.status(ident).await?;
        let busy = || {
            ServiceError::Conflict(format!(
                "Node {} is being processed right now; try again.",
                current.uuid
            ))
        };
        match current.state {
            IntrospectionState::Starting | IntrospectionState::Waiting => {}
            IntrospectionState::Processing | IntrospectionState::Aborting => return Err(busy()),
            IntrospectionState::Finished | IntrospectionState::Error => {
                return Err(ServiceError::BadRequest(format!(
                    "Introspection of node {} has already finished ({}); nothing to abort.",
                    current.uuid,
                    current.state.as_str()
                )));
            }
        }
        if !self
            .transition(
                current.uuid,
                &[IntrospectionState::Starting, IntrospectionState::Waiting],
                IntrospectionState::Aborting,
            )
            .await?
        {
            return Err(busy());
        }
        self.finish(
            current.uuid,
            &[IntrospectionState::Aborting],
            Some("Canceled by operator".to_owned()),
        )
        .await?;
        tracing::info!(node = %current.uuid, "introspection aborted");
        Ok(())
    }

    /// `GET /v1/introspection/{node}/data`.
    pub async fn data(&self, ident: &str) -> Result<Value, ServiceError> {
        let uuid = self.status(ident).await?.uuid;
        self.store
            .introspection_data_get(uuid)
            .await?
            .map(Value::Object)
            .ok_or_else(|| {
                ServiceError::NotFound(format!("Introspection data for node {ident} was not found"))
            })
    }

    /// The one node under introspection the data belongs to; `Ok(None)` when no running
    /// introspection shares a MAC or BMC address with it (the discovery case).
    async fn lookup(&self, payload: &Value) -> Result<Option<Uuid>, ServiceError> {
        let macs = payload_macs(payload);
        let bmcs = payload_bmc_addresses(payload);
        let running: Vec<Introspection> = self
            .store
            .introspection_list_unfinished()
            .await?
            .into_iter()
            .map(Introspection::from_record)
            .collect();
        let mut best: Vec<(usize, &Introspection)> = running
            .iter()
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
            [] => Ok(None),
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
            [(_, entry), ..] => Ok(Some(entry.uuid)),
        }
    }

    /// `POST /v1/continue`: the ramdisk's data.
    pub async fn continue_(&self, payload: &Value) -> Result<Uuid, ServiceError> {
        if !payload.is_object() {
            return Err(ServiceError::BadRequest(
                "Invalid data: expected a JSON object".into(),
            ));
        }
        let mut payload = payload.clone();
        let node = match self.lookup(&payload).await? {
            Some(node) => {
                // Of two callbacks for one node, one processes; the other is refused.
                if !self
                    .transition(
                        node,
                        &[IntrospectionState::Waiting],
                        IntrospectionState::Processing,
                    )
                    .await?
                {
                    return Err(ServiceError::NotFound(format!(
                        "Could not find a node for attributes: node {node} is not waiting for \
                         data any more"
                    )));
                }
                node
            }
            None if self.config.discovery => discovery::enroll(self, &mut payload).await?,
            None => {
                let why = "no node under introspection has these MACs or BMC address";
                tracing::warn!(
                    macs = ?payload_macs(&payload),
                    bmc = ?payload_bmc_addresses(&payload),
                    "continue refused: {why}"
                );
                return Err(ServiceError::NotFound(format!(
                    "Could not find a node for attributes: {why}"
                )));
            }
        };
        let processing = [IntrospectionState::Processing];
        match self.apply(node, &payload).await {
            Ok(processed) => {
                // What the data endpoint shows: the payload with the chosen root disk.
                let mut data = payload.as_object().cloned().unwrap_or_default();
                if let Some(disk) = processed.root_disk {
                    data.insert("root_disk".to_owned(), disk);
                }
                self.store.introspection_data_set(node, &data).await?;
                self.finish(node, &processing, None).await?;
                tracing::info!(node = %node, "introspection finished");
                Ok(node)
            }
            Err(ServiceError::Conflict(message)) => {
                // Someone wrote the node meanwhile every time; the ramdisk may post again.
                self.transition(node, &processing, IntrospectionState::Waiting)
                    .await?;
                Err(ServiceError::Conflict(message))
            }
            Err(error) => {
                let message = error.to_string();
                self.finish(node, &processing, Some(message.clone()))
                    .await?;
                Err(ServiceError::BadRequest(message))
            }
        }
    }

    /// Processes `payload`, runs the rules and writes the node and its new ports.
    async fn apply(&self, node_uuid: Uuid, payload: &Value) -> Result<Processed, ServiceError> {
        let rules = self.rule_list().await?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let node = self.store.node_get(&Ident::Uuid(node_uuid)).await?;
            let ports = self.ports(node_uuid).await?;
            let processed = process(&node, &ports, payload, &self.config.processing)
                .map_err(|error| ServiceError::BadRequest(error.to_string()))?;
            let mut updated = node.clone();
            updated.properties = processed.properties.clone();
            apply_rules(&rules, &mut updated, payload).map_err(ServiceError::BadRequest)?;
            match self.store.node_update(&updated, node.version).await {
                Ok(_) => {
                    create_ports(&self.store, node_uuid, &processed.new_ports).await;
                    fill_local_links(&self.store, node_uuid, &processed.local_links).await;
                    // Also served by the Bare Metal API (`GET /v1/nodes/{node}/inventory`).
                    // Not fenced: the inspection service holds no lease; the node's own write
                    // above was guarded by its revision.
                    if let Err(error) = self
                        .store
                        .node_inventory_set(
                            node_uuid,
                            &processed.inventory,
                            &processed.plugin_data,
                            None,
                        )
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

    /// Picks up what a previous run of the service left half done (it stopped or crashed in
    /// the middle): data being processed goes back to `waiting`, so the ramdisk's next post
    /// is processed again; an abort or timeout being carried out is ended in `error`. Runs
    /// at start, before the service answers. Returns how many it touched.
    pub async fn recover(&self) -> Result<usize, ServiceError> {
        let mut touched = 0;
        for entry in self.store.introspection_list_unfinished().await? {
            let entry = Introspection::from_record(entry);
            let recovered = match entry.state {
                IntrospectionState::Processing => {
                    self.transition(
                        entry.uuid,
                        &[IntrospectionState::Processing],
                        IntrospectionState::Waiting,
                    )
                    .await?
                }
                IntrospectionState::Aborting => {
                    self.finish(
                        entry.uuid,
                        &[IntrospectionState::Aborting],
                        Some(
                            "The inspection service stopped while ending this introspection; \
                             it was not completed."
                                .to_owned(),
                        ),
                    )
                    .await?
                }
                IntrospectionState::Starting
                | IntrospectionState::Waiting
                | IntrospectionState::Finished
                | IntrospectionState::Error => false,
            };
            if recovered {
                tracing::warn!(node = %entry.uuid, state = entry.state.as_str(), "introspection left half done by a previous run recovered");
                touched += 1;
            }
        }
        Ok(touched)
    }

    /// Fails introspections waiting longer than the timeout and re-syncs the PXE filter.
    /// Returns how many timed out.
    pub async fn periodic(&self, now: DateTime<Utc>) -> usize {
        let limit = TimeDelta::from_std(self.config.timeout).unwrap_or(TimeDelta::MAX);
        let running = match self.store.introspection_list_unfinished().await {
            Ok(running) => running,
            Err(error) => {
                tracing::warn!(error = %error, "inspection service: could not list introspections");
                return 0;
            }
        };
        let mut timed_out = 0;
        for entry in running.into_iter().map(Introspection::from_record) {
            let late = now.signed_duration_since(entry.started_at) > limit;
            let waiting = matches!(
                entry.state,
                IntrospectionState::Starting | IntrospectionState::Waiting
            );
            if !late || !waiting {
                continue;
            }
            let outcome = async {
                let claimed = self
                    .transition(
                        entry.uuid,
                        &[IntrospectionState::Starting, IntrospectionState::Waiting],
                        IntrospectionState::Aborting,
                    )
                    .await?;
                if claimed {
                    self.finish(
                        entry.uuid,
                        &[IntrospectionState::Aborting],
                        Some("Introspection timeout".to_owned()),
                    )
                    .await?;
                }
                Ok::<bool, ServiceError>(claimed)
            }
            .await;
            match outcome {
                Ok(true) => {
                    tracing::warn!(node = %entry.uuid, "introspection timed out");
                    timed_out += 1;
                }
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(node = %entry.uuid, error = %error, "could not time the introspection out")
                }
            }
        }
        self.sync_filter().await;
        timed_out
    }

    /// Brings the PXE filter in line with the running introspections (and, with discovery,
    /// the enrolled ports).
    pub async fn sync_filter(&self) {
        let Some(hostsdir) = &self.config.dhcp_hostsdir else {
            return;
        };
        let running = match self.store.introspection_list_unfinished().await {
            Ok(running) => running,
            Err(error) => {
                tracing::warn!(error = %error, "PXE filter: could not list introspections");
                return;
            }
        };
        let allowed: BTreeSet<String> = running.into_iter().flat_map(|entry| entry.macs).collect();
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

    /// Every rule, in the order they apply.
    pub async fn rule_list(&self) -> Result<Vec<Rule>, ServiceError> {
        Ok(self
            .store
            .introspection_rule_list()
            .await?
            .into_iter()
            .map(Rule::from)
            .collect())
    }

    pub async fn rule_create(&self, rule: Rule) -> Result<Rule, ServiceError> {
        match self
            .store
            .introspection_rule_create(&rule.to_record())
            .await
        {
            Ok(stored) => Ok(Rule::from(stored)),
            Err(ferric_db::Error::Duplicate { .. }) => Err(ServiceError::Conflict(format!(
                "Rule {} already exists",
                rule.uuid
            ))),
            Err(error) => Err(error.into()),
        }
    }

    pub async fn rule_get(&self, uuid: Uuid) -> Result<Rule, ServiceError> {
        match self.store.introspection_rule_get(uuid).await {
            Ok(rule) => Ok(Rule::from(rule)),
            Err(ferric_db::Error::NotFound { .. }) => {
                Err(ServiceError::NotFound(format!("Rule {uuid} was not found")))
            }
            Err(error) => Err(error.into()),
        }
    }

    pub async fn rule_delete(&self, uuid: Uuid) -> Result<(), ServiceError> {
        match self.store.introspection_rule_delete(uuid).await {
            Ok(()) => Ok(()),
            Err(ferric_db::Error::NotFound { .. }) => {
                Err(ServiceError::NotFound(format!("Rule {uuid} was not found")))
            }
            Err(error) => Err(error.into()),
        }
    }

    pub async fn rule_delete_all(&self) -> Result<(), ServiceError> {
        self.store.introspection_rule_delete_all().await?;
        Ok(())
    }
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

/// Ironic's `local-link-connection` hook, written: each port of `node` whose MAC heard LLDP
/// gets the `switch_id`, `port_id` and `switch_info` it does not have yet (an operator's
/// values are never replaced). A port that cannot be saved is logged and skipped.
pub async fn fill_local_links(store: &Store, node: Uuid, links: &[(String, JsonObject)]) {
    if links.is_empty() {
        return;
    }
    let filter = PortFilter {
        node_uuid: Some(node),
        ..PortFilter::default()
    };
    let ports = match store.port_list(&filter, &Page::all()).await {
        Ok(ports) => ports,
        Err(error) => {
            tracing::warn!(node = %node, error = %error, "inspection could not list the ports for their local_link_connection");
            return;
        }
    };
    for mut port in ports {
        let address = port.address.to_ascii_lowercase();
        let Some((_, link)) = links.iter().find(|(mac, _)| *mac == address) else {
            continue;
        };
        let mut changed = false;
        for (key, value) in link {
            if !port.local_link_connection.contains_key(key) {
                port.local_link_connection
                    .insert(key.clone(), value.clone());
                changed = true;
            }
        }
        if !changed {
            continue;
        }
        match store.port_update(&port, port.version).await {
            Ok(_) => {
                let link = Value::Object(port.local_link_connection.clone());
                tracing::info!(node = %node, mac = %address, local_link_connection = %link, "port's local_link_connection filled from LLDP")
            }
            Err(error) => {
                tracing::warn!(node = %node, mac = %address, error = %error, "inspection could not save a port's local_link_connection")
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
        assert_eq!(bmc_host("fd00::5").as_deref(), Some("fd00::5"));
        assert_eq!(bmc_host(""), None);
    }
}
