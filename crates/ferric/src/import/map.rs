//! Ironic's rows turned into Ferric's records: integer references resolved to UUIDs, JSON
//! text parsed, traits and steps gathered from their tables, and each node checked against
//! what this Ferric runs (its state, its hardware type and interfaces). A node that fails a
//! check is left out with the reason, and so is everything that hangs off it.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use ferric_db::ImportSet;
use ferric_model::ProvisionState;
use ferric_model::resources::{
    Allocation, AllocationState, BiosSetting, Chassis, DeployStep, DeployTemplate,
    FirmwareComponent, JsonObject, Node, NodeHistoryEntry, NodeInventory, Port, Portgroup,
    PowerState, Runbook, RunbookStep, VolumeConnector, VolumeTarget,
};
use serde_json::Value;
use uuid::Uuid;

use super::ironic_schema::IronicData;
use super::source::Record;

/// A record left out, with why. Never carries a node's `driver_info` or other secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    pub(crate) kind: &'static str,
    pub(crate) ident: String,
    pub(crate) reason: String,
}

/// What the mapping produced.
#[derive(Debug, Default)]
pub(crate) struct Mapped {
    pub(crate) set: ImportSet,
    pub(crate) skipped: Vec<Skipped>,
    /// Rows dropped because Ferric keeps nothing like them: `(what, count, why)`.
    pub(crate) dropped: Vec<(&'static str, usize, &'static str)>,
    /// Nodes imported in a transient state (taken over as a dead conductor's, docs/import.md).
    pub(crate) transient: usize,
}

/// A JSON text column: `NULL` or empty is `{}`/`[]` (what Ironic shows for it).
fn json(record: &Record, column: &str) -> Result<Value, String> {
    match record.text(column) {
        None => Ok(Value::Null),
        Some(text) if text.trim().is_empty() || text.trim() == "null" => Ok(Value::Null),
        Some(text) => serde_json::from_str(&text)
            .map_err(|error| format!("{column} is not valid JSON ({error})")),
    }
}

fn json_object(record: &Record, column: &str) -> Result<JsonObject, String> {
    match json(record, column)? {
        Value::Null => Ok(JsonObject::new()),
        Value::Object(object) => Ok(object),
        _ => Err(format!("{column} is not a JSON object")),
    }
}

fn json_strings(record: &Record, column: &str) -> Result<Vec<String>, String> {
    match json(record, column)? {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(format!("{column} holds a non-string")),
            })
            .collect(),
        _ => Err(format!("{column} is not a JSON list")),
    }
}

fn uuid(record: &Record, column: &str) -> Result<Uuid, String> {
    opt_uuid(record, column)?.ok_or_else(|| format!("{column} is empty"))
}

fn opt_uuid(record: &Record, column: &str) -> Result<Option<Uuid>, String> {
    record
        .text(column)
        .filter(|text| !text.is_empty())
        .map(|text| Uuid::parse_str(&text).map_err(|_| format!("{column} '{text}' is not a UUID")))
        .transpose()
}

/// `created_at` (Ironic always sets it; the epoch if a hand-made row lacks it).
fn created(record: &Record) -> DateTime<Utc> {
    record.time("created_at").unwrap_or_default()
}

/// Ironic's power state names; the transitional targets it records while a reboot or a soft
/// power action runs are the state being driven towards, as Ferric records them.
fn power_state(name: Option<String>) -> Result<Option<PowerState>, String> {
    let Some(name) = name else { return Ok(None) };
    match name.as_str() {
        "rebooting" | "soft rebooting" => Ok(Some(PowerState::On)),
        "soft power off" => Ok(Some(PowerState::Off)),
        other => other.parse().map(Some).map_err(|error| format!("{error}")),
    }
}

/// Checks a node against this Ferric: its hardware type enabled, each interface supported
/// and enabled (unset ones get this site's defaults).
pub(crate) type NodeCheck<'a> = &'a dyn Fn(&mut Node) -> Result<(), String>;

/// Ironic ids → UUIDs of one table.
fn ids(records: &[Record]) -> HashMap<i64, Uuid> {
    records
        .iter()
        .filter_map(|record| Some((record.int("id")?, uuid(record, "uuid").ok()?)))
        .collect()
}

fn node_from(
    record: &Record,
    chassis: &HashMap<i64, Uuid>,
    allocations: &HashMap<i64, Uuid>,
    traits: Vec<String>,
) -> Result<Node, String> {
    let state_name = record
        .text("provision_state")
        .ok_or("it has no provision state (Ironic's NOSTATE)")?;
    let provision_state: ProvisionState = state_name
        .parse()
        .map_err(|_| format!("Ferric has no provision state '{state_name}'"))?;
    let target_provision_state = record
        .text("target_provision_state")
        .map(|name| {
            name.parse::<ProvisionState>()
                .map_err(|_| format!("Ferric has no target provision state '{name}'"))
        })
        .transpose()?;
    let driver = record.text("driver").ok_or("it has no driver")?;
    let mut node = Node::new(uuid(record, "uuid")?, driver, provision_state);
    node.name = record.text("name");
    node.description = record.text("description");
    node.driver_info = json_object(record, "driver_info")?;
    node.driver_internal_info = json_object(record, "driver_internal_info")?;
    node.properties = json_object(record, "properties")?;
    node.instance_info = json_object(record, "instance_info")?;
    node.extra = json_object(record, "extra")?;
    node.instance_uuid = opt_uuid(record, "instance_uuid")?;
    node.instance_name = record.text("instance_name");
    node.chassis_uuid = match record.int("chassis_id") {
        None => None,
        Some(id) => Some(*chassis.get(&id).ok_or("its chassis does not exist")?),
    };
    node.parent_node = opt_uuid(record, "parent_node")?;
    node.allocation_uuid = record
        .int("allocation_id")
        .and_then(|id| allocations.get(&id).copied());
    node.target_provision_state = target_provision_state;
    node.provision_updated_at = record.time("provision_updated_at");
    node.power_state = power_state(record.text("power_state"))?;
    node.target_power_state = power_state(record.text("target_power_state"))?;
    node.last_error = record.text("last_error");
    node.console_enabled = record.bool("console_enabled").unwrap_or(false);
    node.fault = record.text("fault");
    node.health = record.text("health");
    node.maintenance = record.bool("maintenance").unwrap_or(false);
    node.maintenance_reason = record.text("maintenance_reason");
    node.protected = record.bool("protected").unwrap_or(false);
    node.protected_reason = record.text("protected_reason");
    node.retired = record.bool("retired").unwrap_or(false);
    node.retired_reason = record.text("retired_reason");
    node.disable_power_off = record.bool("disable_power_off").unwrap_or(false);
    node.automated_clean = record.bool("automated_clean");
    node.inspection_started_at = record.time("inspection_started_at");
    node.inspection_finished_at = record.time("inspection_finished_at");
    node.clean_step = json_object(record, "clean_step")?;
    node.deploy_step = json_object(record, "deploy_step")?;
    node.service_step = json_object(record, "service_step")?;
    node.raid_config = json_object(record, "raid_config")?;
    node.target_raid_config = json_object(record, "target_raid_config")?;
    node.network_data = json_object(record, "network_data")?;
    node.boot_mode = record.text("boot_mode");
    node.secure_boot = record.bool("secure_boot");
    node.bios_interface = record.text("bios_interface");
    node.boot_interface = record.text("boot_interface");
    node.console_interface = record.text("console_interface");
    node.deploy_interface = record.text("deploy_interface");
    node.firmware_interface = record.text("firmware_interface");
    node.inspect_interface = record.text("inspect_interface");
    node.management_interface = record.text("management_interface");
    node.network_interface = record.text("network_interface");
    node.power_interface = record.text("power_interface");
    node.raid_interface = record.text("raid_interface");
    node.rescue_interface = record.text("rescue_interface");
    node.storage_interface = record.text("storage_interface");
    node.vendor_interface = record.text("vendor_interface");
    node.resource_class = record.text("resource_class");
    node.conductor_group = record.text("conductor_group").unwrap_or_default();
    node.shard = record.text("shard");
    node.owner = record.text("owner");
    node.lessee = record.text("lessee");
    node.traits = traits;
    node.created_at = created(record);
    node.updated_at = record.time("updated_at");
    Ok(node)
}

/// Maps everything in `data`; `check` decides whether this Ferric can run each node.
pub(crate) fn map(data: &IronicData, check: NodeCheck<'_>) -> Mapped {
    let mut mapped = Mapped::default();
    let chassis_ids = ids(&data.chassis);
    let allocation_ids = ids(&data.allocations);
    let mut traits: HashMap<i64, Vec<String>> = HashMap::new();
    for row in &data.node_traits {
        if let (Some(node), Some(name)) = (row.int("node_id"), row.text("trait")) {
            traits.entry(node).or_default().push(name);
        }
    }

    for record in &data.chassis {
        let chassis = (|| -> Result<Chassis, String> {
            Ok(Chassis {
                id: 0,
                version: 0,
                uuid: uuid(record, "uuid")?,
                description: record.text("description"),
                extra: json_object(record, "extra")?,
                created_at: created(record),
                updated_at: record.time("updated_at"),
            })
        })();
        match chassis {
            Ok(chassis) => mapped.set.chassis.push(chassis),
            Err(reason) => mapped.skip("chassis", record, reason),
        }
    }

    // Nodes: the ones this Ferric can run, by Ironic id.
    let mut nodes: HashMap<i64, Uuid> = HashMap::new();
    for record in &data.nodes {
        let id = record.int("id").unwrap_or_default();
        let node_traits = traits.remove(&id).unwrap_or_default();
        let node =
            node_from(record, &chassis_ids, &allocation_ids, node_traits).and_then(|mut node| {
                check(&mut node)?;
                Ok(node)
            });
        match node {
            Ok(node) => {
                if super::is_transient(node.provision_state) {
                    mapped.transient += 1;
                }
                nodes.insert(id, node.uuid);
                mapped.set.nodes.push(node);
            }
            Err(reason) => mapped.skip("node", record, reason),
        }
    }
    // Other records of a node left out go with it.
    let node_of = |record: &Record| -> Result<Uuid, String> {
        let id = record.int("node_id").ok_or("it belongs to no node")?;
        nodes
            .get(&id)
            .copied()
            .ok_or_else(|| "its node is not imported".to_owned())
    };

    let mut portgroups: HashMap<i64, Uuid> = HashMap::new();
    for record in &data.portgroups {
        let portgroup = (|| -> Result<Portgroup, String> {
            Ok(Portgroup {
                id: 0,
                version: 0,
                uuid: uuid(record, "uuid")?,
                name: record.text("name"),
                address: record.text("address").map(|mac| mac.to_ascii_lowercase()),
                node_uuid: node_of(record)?,
                extra: json_object(record, "extra")?,
                internal_info: json_object(record, "internal_info")?,
                standalone_ports_supported: record
                    .bool("standalone_ports_supported")
                    .unwrap_or(true),
                mode: record.text("mode"),
                properties: json_object(record, "properties")?,
                physical_network: record.text("physical_network"),
                category: record.text("category"),
                dynamic_portgroup: record.bool("dynamic_portgroup").unwrap_or(false),
                created_at: created(record),
                updated_at: record.time("updated_at"),
            })
        })();
        match portgroup {
            Ok(portgroup) => {
                if let Some(id) = record.int("id") {
                    portgroups.insert(id, portgroup.uuid);
                }
                mapped.set.portgroups.push(portgroup);
            }
            Err(reason) => mapped.skip("portgroup", record, reason),
        }
    }

    for record in &data.ports {
        let port = (|| -> Result<Port, String> {
            Ok(Port {
                id: 0,
                version: 0,
                uuid: uuid(record, "uuid")?,
                address: record
                    .text("address")
                    .ok_or("it has no MAC address")?
                    .to_ascii_lowercase(),
                node_uuid: node_of(record)?,
                portgroup_uuid: match record.int("portgroup_id") {
                    None => None,
                    Some(id) => Some(*portgroups.get(&id).ok_or("its portgroup is not imported")?),
                },
                name: record.text("name"),
                description: record.text("description"),
                extra: json_object(record, "extra")?,
                internal_info: json_object(record, "internal_info")?,
                local_link_connection: json_object(record, "local_link_connection")?,
                pxe_enabled: record.bool("pxe_enabled").unwrap_or(true),
                physical_network: record.text("physical_network"),
                is_smartnic: record.bool("is_smartnic").unwrap_or(false),
                vendor: record.text("vendor"),
                category: record.text("category"),
                available_for_dynamic_portgroup: record
                    .bool("available_for_dynamic_portgroup")
                    .unwrap_or(false),
                created_at: created(record),
                updated_at: record.time("updated_at"),
            })
        })();
        match port {
            Ok(port) => mapped.set.ports.push(port),
            Err(reason) => mapped.skip("port", record, reason),
        }
    }

    for record in &data.allocations {
        let allocation = (|| -> Result<Allocation, String> {
            let state_name = record.text("state").unwrap_or_default();
            let state: AllocationState = state_name
                .parse()
                .map_err(|_| format!("unknown allocation state '{state_name}'"))?;
            Ok(Allocation {
                id: 0,
                version: 0,
                uuid: uuid(record, "uuid")?,
                name: record.text("name"),
                node_uuid: match record.int("node_id") {
                    None => None,
                    Some(_) => Some(node_of(record)?),
                },
                state,
                last_error: record.text("last_error"),
                resource_class: record.text("resource_class"),
                traits: json_strings(record, "traits")?,
                candidate_nodes: json_strings(record, "candidate_nodes")?,
                extra: json_object(record, "extra")?,
                owner: record.text("owner"),
                created_at: created(record),
                updated_at: record.time("updated_at"),
            })
        })();
        match allocation {
            Ok(allocation) => mapped.set.allocations.push(allocation),
            Err(reason) => mapped.skip("allocation", record, reason),
        }
    }

    mapped.map_templates(data);
    mapped.map_node_data(data, &node_of);

    let tags = data.node_tags.len();
    if tags > 0 {
        mapped.dropped.push((
            "node tags",
            tags,
            "Ferric keeps no node tags (Ironic's API does not show them either)",
        ));
    }
    for (table, count) in &data.not_imported {
        if *count > 0 {
            mapped
                .dropped
                .push((table, *count, "Ferric has no counterpart for this table"));
        }
    }
    mapped
}

impl Mapped {
    fn skip(&mut self, kind: &'static str, record: &Record, reason: String) {
        let ident = record
            .text("uuid")
            .or_else(|| record.text("name"))
            .or_else(|| record.int("id").map(|id| format!("id {id}")))
            .unwrap_or_default();
        self.skipped.push(Skipped {
            kind,
            ident,
            reason,
        });
    }

    fn map_templates(&mut self, data: &IronicData) {
        for record in &data.deploy_templates {
            let template = (|| -> Result<DeployTemplate, String> {
                let id = record.int("id");
                let steps = data
                    .deploy_template_steps
                    .iter()
                    .filter(|step| step.int("deploy_template_id") == id)
                    .map(|step| {
                        Ok(DeployStep {
                            interface: step.text("interface").unwrap_or_default(),
                            step: step.text("step").unwrap_or_default(),
                            args: json_object(step, "args")?,
                            priority: u32::try_from(step.int("priority").unwrap_or_default())
                                .map_err(|_| "a step has a negative priority".to_owned())?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Ok(DeployTemplate {
                    id: 0,
                    version: 0,
                    uuid: uuid(record, "uuid")?,
                    name: record.text("name").ok_or("it has no name")?,
                    steps,
                    extra: json_object(record, "extra")?,
                    created_at: created(record),
                    updated_at: record.time("updated_at"),
                })
            })();
            match template {
                Ok(template) => self.set.deploy_templates.push(template),
                Err(reason) => self.skip("deploy template", record, reason),
            }
        }
        for record in &data.runbooks {
            let runbook = (|| -> Result<Runbook, String> {
                let id = record.int("id");
                let steps = data
                    .runbook_steps
                    .iter()
                    .filter(|step| step.int("runbook_id") == id)
                    .map(|step| {
                        Ok(RunbookStep {
                            interface: step.text("interface").unwrap_or_default(),
                            step: step.text("step").unwrap_or_default(),
                            args: json_object(step, "args")?,
                            order: u32::try_from(step.int("order").unwrap_or_default())
                                .map_err(|_| "a step has a negative order".to_owned())?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let traits = data
                    .runbook_traits
                    .iter()
                    .filter(|row| row.int("runbook_id") == id)
                    .filter_map(|row| row.text("trait"))
                    .collect();
                Ok(Runbook {
                    id: 0,
                    version: 0,
                    uuid: uuid(record, "uuid")?,
                    name: record.text("name").ok_or("it has no name")?,
                    traits,
                    description: record.text("description"),
                    steps,
                    public: record.bool("public").unwrap_or(false),
                    owner: record.text("owner"),
                    disable_ramdisk: record.bool("disable_ramdisk").unwrap_or(false),
                    extra: json_object(record, "extra")?,
                    created_at: created(record),
                    updated_at: record.time("updated_at"),
                })
            })();
            match runbook {
                Ok(runbook) => self.set.runbooks.push(runbook),
                Err(reason) => self.skip("runbook", record, reason),
            }
        }
    }

    /// Volume connectors and targets, history, BIOS settings, inventories and firmware.
    fn map_node_data(
        &mut self,
        data: &IronicData,
        node_of: &dyn Fn(&Record) -> Result<Uuid, String>,
    ) {
        for record in &data.volume_connectors {
            let connector = (|| -> Result<VolumeConnector, String> {
                Ok(VolumeConnector {
                    id: 0,
                    version: 0,
                    uuid: uuid(record, "uuid")?,
                    node_uuid: node_of(record)?,
                    connector_type: record.text("type").unwrap_or_default(),
                    connector_id: record.text("connector_id").unwrap_or_default(),
                    extra: json_object(record, "extra")?,
                    created_at: created(record),
                    updated_at: record.time("updated_at"),
                })
            })();
            match connector {
                Ok(connector) => self.set.volume_connectors.push(connector),
                Err(reason) => self.skip("volume connector", record, reason),
            }
        }
        for record in &data.volume_targets {
            let target = (|| -> Result<VolumeTarget, String> {
                Ok(VolumeTarget {
                    id: 0,
                    version: 0,
                    uuid: uuid(record, "uuid")?,
                    node_uuid: node_of(record)?,
                    volume_type: record.text("volume_type").unwrap_or_default(),
                    properties: json_object(record, "properties")?,
                    boot_index: record.int("boot_index").unwrap_or_default(),
                    volume_id: record.text("volume_id").unwrap_or_default(),
                    extra: json_object(record, "extra")?,
                    created_at: created(record),
                    updated_at: record.time("updated_at"),
                })
            })();
            match target {
                Ok(target) => self.set.volume_targets.push(target),
                Err(reason) => self.skip("volume target", record, reason),
            }
        }
        let mut seen = HashSet::new();
        for record in &data.node_history {
            let entry = (|| -> Result<NodeHistoryEntry, String> {
                Ok(NodeHistoryEntry {
                    uuid: uuid(record, "uuid")?,
                    node: node_of(record)?,
                    created_at: created(record),
                    severity: record.text("severity").unwrap_or_default(),
                    event_type: record.text("event_type").unwrap_or_default(),
                    event: record.text("event").unwrap_or_default(),
                    conductor: record.text("conductor"),
                    user: record.text("user"),
                })
            })();
            match entry {
                Ok(entry) if seen.insert(entry.uuid) => self.set.history.push(entry),
                Ok(_) => {}
                Err(reason) => self.skip("node history entry", record, reason),
            }
        }
        for record in &data.bios_settings {
            let setting = (|| -> Result<(Uuid, BiosSetting), String> {
                let mut registry = JsonObject::new();
                registry.insert(
                    "attribute_type".into(),
                    text_value(record, "attribute_type"),
                );
                // A list column: `NULL` reads as `[]` in Ironic.
                registry.insert(
                    "allowable_values".into(),
                    match json(record, "allowable_values")? {
                        Value::Null => Value::Array(Vec::new()),
                        list => list,
                    },
                );
                for column in ["lower_bound", "max_length", "min_length", "upper_bound"] {
                    registry.insert(
                        column.into(),
                        record.int(column).map_or(Value::Null, Value::from),
                    );
                }
                for column in ["read_only", "reset_required", "unique"] {
                    registry.insert(
                        column.into(),
                        record.bool(column).map_or(Value::Null, Value::from),
                    );
                }
                Ok((
                    node_of(record)?,
                    BiosSetting {
                        name: record.text("name").ok_or("it has no name")?,
                        value: record.text("value"),
                        registry,
                        created_at: created(record),
                        updated_at: record.time("updated_at"),
                    },
                ))
            })();
            match setting {
                Ok(setting) => self.set.bios_settings.push(setting),
                Err(reason) => self.skip("BIOS setting", record, reason),
            }
        }
        for record in &data.node_inventory {
            let inventory = (|| -> Result<NodeInventory, String> {
                Ok(NodeInventory {
                    node: node_of(record)?,
                    inventory: json_object(record, "inventory_data")?,
                    plugin_data: json_object(record, "plugin_data")?,
                    created_at: created(record),
                    updated_at: record.time("updated_at"),
                })
            })();
            match inventory {
                Ok(inventory) => self.set.inventories.push(inventory),
                Err(reason) => self.skip("node inventory", record, reason),
            }
        }
        for record in &data.firmware {
            let component = (|| -> Result<(Uuid, FirmwareComponent), String> {
                let initial = record.text("initial_version").unwrap_or_default();
                Ok((
                    node_of(record)?,
                    FirmwareComponent {
                        component: record.text("component").ok_or("it has no name")?,
                        current_version: record
                            .text("current_version")
                            .unwrap_or_else(|| initial.clone()),
                        initial_version: initial,
                        last_version_flashed: record.text("last_version_flashed"),
                        created_at: created(record),
                        updated_at: record.time("updated_at"),
                    },
                ))
            })();
            match component {
                Ok(component) => self.set.firmware_components.push(component),
                Err(reason) => self.skip("firmware component", record, reason),
            }
        }
    }
}

fn text_value(record: &Record, column: &str) -> Value {
    record.text(column).map_or(Value::Null, Value::from)
}
