//! Inspection (`reference/ironic.md` §5.2, seeds 002 and 000): the inspect interface either
//! reports at once (out of band: the BMC's data is processed here like a ramdisk's) or boots
//! the ramdisk and the node waits in `inspect wait` without a lease. The data then comes back
//! through `/v1/continue_inspection` (`inspection.rs` hands it over and resumes the node) and is
//! processed here with the shared [`ferric_inspector::process()`] code: properties and ports
//! written, the inspection rules (`/v1/inspection_rules`) run, the inventory stored, the
//! machine powered off → `manageable`, or → `inspect failed` with the reason. The `abort` verb
//! in `inspect wait` stops the inspection at once.

use ferric_db::Page;
use ferric_drivers::{Inspection, OutOfBand};
use ferric_inspector::{AddPorts, ProcessingConfig};
use ferric_model::Event;
use serde_json::Value;

use crate::task::{Cause, Task};
use crate::{ConductorError, lock};

/// The start of `inspect`: the interfaces inspection needs are valid.
pub(super) async fn start(task: &mut Task) -> Result<(), ConductorError> {
    super::check(task, &task.interfaces()?, Event::Inspect).await?;
    task.node.last_error = None;
    Ok(())
}

/// `inspecting`: start the inspection, or process what came back after `inspect wait`.
pub(super) async fn drive(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    if resume {
        return self::resume(task).await;
    }
    let result = async {
        let interfaces = task.interfaces()?;
        crate::networking::enter_inspection(&interfaces, &mut task.node).await?;
        Ok::<_, ConductorError>(interfaces.inspect.inspect(&mut task.node).await?)
    }
    .await;
    if !matches!(result, Ok(Inspection::Wait)) {
        // Nothing booted waits on the inspection network.
        if let Err(error) = leave_network(task).await {
            let message = match &result {
                Err(first) => format!(
                    "Failed to inspect node {}: {first} Then {error}",
                    task.uuid()
                ),
                Ok(_) => format!("Failed to inspect node {}: {error}", task.uuid()),
            };
            return task.fail(message).await;
        }
    }
    match result {
        Ok(Inspection::Done) => task.fire(Event::Done, Cause::Conductor).await,
        Ok(Inspection::Wait) => task.fire(Event::Wait, Cause::Conductor).await,
        Ok(Inspection::Data(data)) => out_of_band(task, data).await,
        Err(error) => {
            task.fail(format!("Failed to inspect node {}: {error}", task.uuid()))
                .await
        }
    }
}

/// The switch ports off the inspection network; the error is `last_error`'s words.
async fn leave_network(task: &mut Task) -> Result<(), String> {
    let interfaces = task.interfaces().map_err(|error| error.to_string())?;
    crate::networking::leave_inspection(&interfaces, &mut task.node)
        .await
        .map_err(|error| {
            format!("moving the switch ports off the inspection network failed: {error}")
        })
}

/// `abort` in `inspect wait`: the inspect interface stops the inspection; nothing follows.
pub(super) async fn abort_waiting(task: &mut Task) -> Result<Option<super::Job>, ConductorError> {
    let interfaces = task.interfaces()?;
    interfaces
        .inspect
        .abort(&mut task.node)
        .await
        .map_err(super::invalid)?;
    super::forget_agent(task);
    let mut message = "Inspection was aborted by request.".to_owned();
    if let Err(error) = leave_network(task).await {
        message = format!("{message} Then {error}.");
    }
    task.node.last_error = Some(message);
    task.fire(Event::Abort, Cause::Requested).await?;
    Ok(None)
}

/// `inspecting` after `inspect wait`: process the data the agent sent (if it sent any),
/// power the machine off, and rest in `manageable` or `inspect failed`.
async fn resume(task: &mut Task) -> Result<(), ConductorError> {
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
    let mut finished = interfaces.inspect.finish(&mut task.node).await;
    if let Err(error) = leave_network(task).await {
        let message = match finished {
            Ok(()) => error,
            Err(first) => format!("{first} Then {error}"),
        };
        finished = Err(ferric_drivers::DriverError::failed(
            ferric_drivers::Component::Switch,
            message,
        ));
    }
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
async fn out_of_band(task: &mut Task, data: OutOfBand) -> Result<(), ConductorError> {
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
