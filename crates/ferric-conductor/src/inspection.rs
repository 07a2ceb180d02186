//! In-band inspection, conductor side (`reference/ironic.md` §5.2, seeds 002 and 000).
//!
//! Theory of operation: the inspect interface boots the ramdisk and the node waits in
//! `inspect wait` without a lease. The data comes back one of two ways:
//! - `agent` interface: the ramdisk posts to `/v1/continue_inspection`; the API calls
//!   [`Conductor::continue_inspection`], which hands the payload to a worker in this process
//!   and resumes the node (`inspecting`); the worker processes it with the shared
//!   [`ferric_inspector::process`] code, writes properties and ports, runs the inspection
//!   rules (`/v1/inspection_rules`), stores the inventory, and finishes (machine off) → `manageable`, or → `inspect failed` with the reason.
//! - `inspector` interface: the inspection service processes the data and writes the node
//!   itself; the `inspector_status` reconciler polls the service and resumes the node when it
//!   finished (the worker then only powers the machine off), or fails it with the service's
//!   error.

use std::sync::Arc;

use ferric_db::{NodeFilter, Page};
use ferric_drivers::{InspectionStatus, OutOfBand};
use ferric_inspector::{AddPorts, ProcessingConfig};
use ferric_model::{Event, ProvisionState};
use serde_json::Value;
use uuid::Uuid;

use crate::task::{Cause, Task};
use crate::worker::{Job, spawn};
use crate::{Conductor, ConductorError, Inner, lock};

impl Conductor {
    /// Takes the inspection data of `node` (waiting in `inspect wait` with the `agent`
    /// interface) and resumes it. With `mint_token`, also mints the agent token the ramdisk
    /// gets in the answer (API ≥ 1.84), if none was issued.
    pub async fn continue_inspection(
        &self,
        node: Uuid,
        payload: Value,
        mint_token: bool,
    ) -> Result<Option<String>, ConductorError> {
        let inner = &self.inner;
        let permit = inner.take_worker()?;
        let mut task = Task::acquire(inner, node).await?;
        let result = async {
            if task.node.provision_state != ProvisionState::InspectWait {
                return Err(ConductorError::Conflict(format!(
                    "Node {node} is in state \"{}\", not waiting for inspection data.",
                    task.node.provision_state
                )));
            }
            if !task.interfaces()?.inspect.takes_data() {
                return Err(ConductorError::Conflict(format!(
                    "Node {node} is inspected through its {} inspect interface, which does \
                     not take data at /v1/continue_inspection.",
                    task.node.inspect_interface.as_deref().unwrap_or("default")
                )));
            }
            let token = if mint_token && crate::agent::agent_token(&task.node).is_none() {
                let token = crate::agent::new_token()?;
                task.node.driver_internal_info.insert(
                    crate::agent::AGENT_TOKEN_KEY.to_owned(),
                    token.clone().into(),
                );
                Some(token)
            } else {
                None
            };
            lock(&inner.inspection_data).insert(node, payload);
            task.fire(Event::Resume, Cause::Conductor).await?;
            Ok(token)
        }
        .await;
        match result {
            Ok(token) => {
                spawn(task, Job::Drive { resume: true }, permit);
                Ok(token)
            }
            Err(error) => {
                lock(&inner.inspection_data).remove(&node);
                task.release().await;
                Err(error)
            }
        }
    }
}

/// `inspecting` after `inspect wait`: process the data the agent sent (if it sent any),
/// power the machine off, and rest in `manageable` or `inspect failed`.
pub(crate) async fn resume(task: &mut Task) -> Result<(), ConductorError> {
    let node = task.uuid();
    let payload = lock(&task.inner.inspection_data).remove(&node);
    let config = task.inner.config.inspection.clone();
    let processed = match payload {
        Some(payload) => apply(task, &payload, &config, None).await,
        None => Ok(()),
    };
    if let Err(message) = &processed {
        // Recorded before the clean-up: a failed inspection is never fast-tracked (the
        // machine goes off).
        task.node.last_error = Some(message.clone());
    }
    let interfaces = task.interfaces()?;
    let finished = interfaces.inspect.finish(&mut task.node).await;
    match (processed, finished) {
        (Ok(()), Ok(())) => task.fire(Event::Done, Cause::Conductor).await,
        (Ok(()), Err(error)) => {
            task.fail(format!(
                "Inspection of node {node} succeeded, but powering it off afterwards failed: \
                 {error}"
            ))
            .await
        }
        (Err(message), finished) => {
            let mut message = format!("Failed to inspect node {node}: {message}");
            if let Err(error) = finished {
                message = format!("{message} Then powering it off failed: {error}");
            }
            task.fail(message).await
        }
    }
}

/// `inspecting` with an out-of-band interface (`redfish`): process what the BMC reported
/// like a ramdisk's data, and rest in `manageable` or `inspect failed` at once.
pub(crate) async fn out_of_band(task: &mut Task, data: OutOfBand) -> Result<(), ConductorError> {
    let node = task.uuid();
    let config = out_of_band_config(&task.inner.config.inspection);
    match apply(task, &data.payload, &config, Some(&data.port_macs)).await {
        Ok(()) => task.fire(Event::Done, Cause::Conductor).await,
        Err(message) => {
            task.fail(format!(
                "Failed to inspect node {node} through {}: {message}",
                data.bmc
            ))
            .await
        }
    }
}

/// Out-of-band processing follows Ironic's `redfish` inspection: every NIC the BMC reports
/// enabled gets a port (a BMC knows no boot interface and rarely an address; only
/// `add_ports = disabled` is honoured), and a BMC that lists no NIC is no error.
fn out_of_band_config(site: &ProcessingConfig) -> ProcessingConfig {
    ProcessingConfig {
        add_ports: match site.add_ports {
            AddPorts::Disabled => AddPorts::Disabled,
            _ => AddPorts::All,
        },
        require_interfaces: false,
        ..site.clone()
    }
}

/// Processes `payload` and writes the result: properties on the node (saved with the next
/// transition), new ports (only for `port_macs`, when given), the stored inventory.
async fn apply(
    task: &mut Task,
    payload: &Value,
    config: &ProcessingConfig,
    port_macs: Option<&[String]>,
) -> Result<(), String> {
    let inner = task.inner.clone();
    let mut processed = ferric_inspector::process(&task.node, &task.ports, payload, config)
        .map_err(|error| error.to_string())?;
    if let Some(allowed) = port_macs {
        processed
            .new_ports
            .retain(|(mac, _)| allowed.iter().any(|allowed| allowed == mac));
    }
    tracing::info!(node = %task.uuid(), updated = ?processed.updated, new_ports = processed.new_ports.len(), "inspection data processed");
    task.node.properties = processed.properties;
    ferric_inspector::service::create_ports(&inner.store, task.uuid(), &processed.new_ports).await;
    ferric_inspector::service::fill_local_links(&inner.store, task.uuid(), &processed.local_links)
        .await;
    let plugin_data = run_rules(task, &processed.inventory, processed.plugin_data).await?;
    // Stored for `GET /v1/nodes/{node}/inventory`; a store that refuses it fails the
    // inspection (the data would otherwise be lost without a word).
    inner
        .store
        .node_inventory_set(
            task.uuid(),
            &processed.inventory,
            &plugin_data,
            Some(task.fence()),
        )
        .await
        .map_err(|error| format!("the inventory could not be stored: {error}"))?;
    Ok(())
}

/// Ironic's inspection rules of phase `main` (`/v1/inspection_rules`), after the data was
/// processed and the ports created: the node's changes are saved with its next transition,
/// changed ports at once; `api-call` actions are made here. Returns the plugin data as the
/// rules left it.
async fn run_rules(
    task: &mut Task,
    inventory: &serde_json::Map<String, Value>,
    plugin_data: serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>, String> {
    let store = task.inner.store.clone();
    let rules = store
        .inspection_rule_list_for_phase(ferric_model::resources::INSPECTION_PHASE_MAIN)
        .await
        .map_err(|error| format!("the inspection rules could not be read: {error}"))?;
    if rules.is_empty() {
        return Ok(plugin_data);
    }
    let filter = ferric_db::PortFilter {
        node_uuid: Some(task.uuid()),
        ..ferric_db::PortFilter::default()
    };
    let mut ports = store
        .port_list(&filter, &Page::all())
        .await
        .map_err(|error| format!("the node's ports could not be read: {error}"))?;
    let inventory = Value::Object(inventory.clone());
    let mut plugin_data = Value::Object(plugin_data);
    let applied = ferric_inspector::inspection_rules::apply(
        &rules,
        &mut ferric_inspector::inspection_rules::RuleTarget {
            node: &mut task.node,
            ports: &mut ports,
            inventory: &inventory,
            plugin_data: &mut plugin_data,
        },
    )?;
    for port in ports
        .iter()
        .filter(|port| applied.changed_ports.contains(&port.uuid))
    {
        store
            .port_update(port, port.version)
            .await
            .map_err(|error| format!("port {} could not be saved: {error}", port.uuid))?;
    }
    for call in &applied.api_calls {
        api_call(call).await?;
    }
    tracing::info!(node = %task.uuid(), rules = applied.matched.len(), "inspection rules applied");
    Ok(match plugin_data {
        Value::Object(data) => data,
        _ => serde_json::Map::new(),
    })
}

/// An `api-call` action: `GET url` with its headers, retried, each try bounded by its
/// timeout; anything but a success fails the inspection.
async fn api_call(call: &ferric_inspector::inspection_rules::ApiCall) -> Result<(), String> {
    let timeout = std::time::Duration::from_secs_f64(call.timeout_seconds.clamp(0.1, 300.0));
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|error| format!("api-call {}: {error}", call.url))?;
    let mut last = String::new();
    for _ in 0..=call.retries.min(10) {
        let mut request = client.get(&call.url);
        for (name, value) in &call.headers {
            if let Some(value) = value.as_str() {
                request = request.header(name.as_str(), value);
            }
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => last = format!("answered {}", response.status()),
            Err(error) => last = error.to_string(),
        }
    }
    Err(format!("api-call {} failed: {last}", call.url))
}

/// The `inspector_status` reconciler: asks the inspection service about every node waiting
/// in `inspect wait` with an interface that answers [`InspectInterface::status`], and moves
/// finished ones on. Returns how many nodes it moved.
///
/// [`InspectInterface::status`]: ferric_drivers::interfaces::InspectInterface::status
pub(crate) async fn poll_service(inner: &Arc<Inner>) -> Result<usize, ConductorError> {
    let filter = NodeFilter {
        provision_state: Some(ProvisionState::InspectWait),
        ..NodeFilter::default()
    };
    let mut acted = 0;
    for node in inner.store.node_list(&filter, &Page::all()).await? {
        if node.inspect_interface.as_deref() != Some("inspector") || !inner.owns(&node) {
            continue;
        }
        let status = match inner.drivers.load(&node) {
            Ok(interfaces) => interfaces.inspect.status(&node).await,
            Err(error) => Err(error),
        };
        let status = match status {
            Ok(InspectionStatus::Running) => continue,
            Ok(status) => status,
            Err(error) => {
                tracing::warn!(node = %node.uuid, error = %error, "could not ask the inspection service");
                continue;
            }
        };
        let permit = match inner.take_worker() {
            Ok(permit) => permit,
            Err(_) => break,
        };
        let mut task = match Task::acquire(inner, node.uuid).await {
            Ok(task) => task,
            Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => continue,
            Err(error) => return Err(error),
        };
        if task.node.provision_state != ProvisionState::InspectWait {
            task.release().await;
            continue;
        }
        acted += 1;
        match status {
            InspectionStatus::Finished => {
                if let Err(error) = task.fire(Event::Resume, Cause::Conductor).await {
                    task.release().await;
                    return Err(error);
                }
                spawn(task, Job::Drive { resume: true }, permit);
            }
            InspectionStatus::Failed(message) => {
                let mut message = format!("Inspection of node {} failed: {message}", node.uuid);
                match task.interfaces() {
                    Ok(interfaces) => {
                        if let Err(error) = interfaces.inspect.finish(&mut task.node).await {
                            message = format!("{message} Then powering it off failed: {error}");
                        }
                    }
                    Err(error) => {
                        message = format!("{message} Then powering it off failed: {error}")
                    }
                }
                let result = task.fail(message).await;
                task.release().await;
                result?;
            }
            InspectionStatus::Running => task.release().await,
        }
    }
    Ok(acted)
}
