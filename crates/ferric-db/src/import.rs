//! Bulk import ([`Store::import`]): records that another service created (`ferric import
//! ironic`), written with their own UUIDs and times, all in one transaction.
//!
//! The one exception to the store's one-statement-per-call rule (lib.rs): an import is all or
//! nothing, so every row is written inside a single transaction, SQL only, nothing else
//! awaited in it. Rows are written parents first (chassis, nodes, portgroups, ports, then what
//! hangs off a node), so foreign keys hold at every statement.
//!
//! A record whose UUID (or, for per-node rows without one, whose key) is already stored is
//! left as it is, or with [`ImportMode::Update`] overwritten in place with its revision bumped;
//! either way a re-run is safe. Any other conflict (a name or MAC address taken by a different
//! record) fails the whole import, naming the table and the constraint.

use chrono::{DateTime, Utc};
use ferric_model::resources::{
    Allocation, BiosSetting, Chassis, DeployTemplate, FirmwareComponent, Node, NodeHistoryEntry,
    NodeInventory, Port, Portgroup, Runbook, VolumeConnector, VolumeTarget,
};
use uuid::Uuid;

use crate::error::Error;
use crate::sql::{Arg, SqlBuilder};
use crate::store::Store;

/// Everything one import writes. Each list is written in order.
#[derive(Debug, Clone, Default)]
pub struct ImportSet {
    pub chassis: Vec<Chassis>,
    pub nodes: Vec<Node>,
    pub portgroups: Vec<Portgroup>,
    pub ports: Vec<Port>,
    pub allocations: Vec<Allocation>,
    pub deploy_templates: Vec<DeployTemplate>,
    pub runbooks: Vec<Runbook>,
    pub volume_connectors: Vec<VolumeConnector>,
    pub volume_targets: Vec<VolumeTarget>,
    pub history: Vec<NodeHistoryEntry>,
    /// `(node, setting)`.
    pub bios_settings: Vec<(Uuid, BiosSetting)>,
    /// `(node, component)`.
    pub firmware_components: Vec<(Uuid, FirmwareComponent)>,
    pub inventories: Vec<NodeInventory>,
}

/// What an import does with a record that is already stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// Leave it as it is.
    KeepExisting,
    /// Overwrite it with the imported values (its revision goes up by one).
    Update,
}

/// One row to write: the table, its conflict key, and its columns with their values.
struct Row<'a> {
    table: &'static str,
    /// The columns of the unique key a stored row is recognised by.
    key: &'static str,
    columns: Vec<(&'static str, Arg<'a>)>,
    /// Whether the table has a `version` column (bumped on update).
    versioned: bool,
}

impl<'a> Row<'a> {
    /// A versioned record: `uuid`, `version` 1, its own times, then `values`.
    fn record(
        table: &'static str,
        uuid: Uuid,
        created_at: DateTime<Utc>,
        updated_at: Option<DateTime<Utc>>,
        values: Vec<(&'static str, Arg<'a>)>,
    ) -> Self {
        let mut columns = vec![
            ("uuid", Arg::Uuid(uuid)),
            ("version", Arg::Int(1)),
            ("created_at", Arg::Time(created_at)),
            ("updated_at", Arg::OptTime(updated_at)),
        ];
        columns.extend(values);
        Self {
            table,
            key: "uuid",
            columns,
            versioned: true,
        }
    }

    /// `INSERT … ON CONFLICT (key) DO NOTHING | DO UPDATE SET …`.
    fn statement(self, mode: ImportMode) -> SqlBuilder<'a> {
        let mut query = SqlBuilder::new("INSERT INTO ");
        query.push(self.table).push(" (");
        for (n, (column, _)) in self.columns.iter().enumerate() {
            query.push(if n == 0 { "" } else { ", " }).push(column);
        }
        query.push(") VALUES (");
        let key: Vec<&str> = self.key.split(", ").collect();
        let mut updates = Vec::new();
        for (n, (column, value)) in self.columns.into_iter().enumerate() {
            query.push(if n == 0 { "" } else { ", " }).arg(value);
            if !key.contains(&column) && column != "version" && column != "created_at" {
                updates.push(column);
            }
        }
        query.push(") ON CONFLICT (").push(self.key).push(") DO ");
        match mode {
            ImportMode::KeepExisting => {
                query.push("NOTHING");
            }
            ImportMode::Update => {
                query.push("UPDATE SET ");
                if self.versioned {
                    query
                        .push("version = ")
                        .push(self.table)
                        .push(".version + 1, ");
                }
                for (n, column) in updates.iter().enumerate() {
                    query
                        .push(if n == 0 { "" } else { ", " })
                        .push(column)
                        .push(" = excluded.")
                        .push(column);
                }
            }
        }
        query
    }
}

impl ImportSet {
    /// Every row, parents first.
    fn rows(&self) -> Vec<Row<'_>> {
        let mut rows = Vec::new();
        for chassis in &self.chassis {
            rows.push(Row::record(
                "chassis",
                chassis.uuid,
                chassis.created_at,
                chassis.updated_at,
                crate::chassis::chassis_values(chassis),
            ));
        }
        for node in &self.nodes {
            rows.push(Row::record(
                "nodes",
                node.uuid,
                node.created_at,
                node.updated_at,
                crate::nodes::node_values(node),
            ));
        }
        for portgroup in &self.portgroups {
            rows.push(Row::record(
                "portgroups",
                portgroup.uuid,
                portgroup.created_at,
                portgroup.updated_at,
                crate::portgroups::portgroup_values(portgroup, portgroup.address.as_deref()),
            ));
        }
        for port in &self.ports {
            rows.push(Row::record(
                "ports",
                port.uuid,
                port.created_at,
                port.updated_at,
                crate::ports::port_values(port, &port.address),
            ));
        }
        for allocation in &self.allocations {
            rows.push(Row::record(
                "allocations",
                allocation.uuid,
                allocation.created_at,
                allocation.updated_at,
                crate::allocations::allocation_values(allocation),
            ));
        }
        for template in &self.deploy_templates {
            rows.push(Row::record(
                "deploy_templates",
                template.uuid,
                template.created_at,
                template.updated_at,
                crate::templates::template_values(template),
            ));
        }
        for runbook in &self.runbooks {
            rows.push(Row::record(
                "runbooks",
                runbook.uuid,
                runbook.created_at,
                runbook.updated_at,
                crate::templates::runbook_values(runbook),
            ));
        }
        for connector in &self.volume_connectors {
            rows.push(Row::record(
                "volume_connectors",
                connector.uuid,
                connector.created_at,
                connector.updated_at,
                crate::volumes::connector_values(connector),
            ));
        }
        for target in &self.volume_targets {
            rows.push(Row::record(
                "volume_targets",
                target.uuid,
                target.created_at,
                target.updated_at,
                crate::volumes::target_values(target),
            ));
        }
        for entry in &self.history {
            rows.push(Row {
                table: "node_history",
                key: "uuid",
                columns: vec![
                    ("uuid", Arg::Uuid(entry.uuid)),
                    ("node_uuid", Arg::Uuid(entry.node)),
                    ("created_at", Arg::Time(entry.created_at)),
                    ("severity", Arg::Text(&entry.severity)),
                    ("event_type", Arg::Text(&entry.event_type)),
                    ("event", Arg::Text(&entry.event)),
                    ("conductor", (&entry.conductor).into()),
                    ("user_name", (&entry.user).into()),
                ],
                versioned: false,
            });
        }
        for (node, setting) in &self.bios_settings {
            rows.push(Row {
                table: "node_bios_settings",
                key: "node_uuid, name",
                columns: vec![
                    ("node_uuid", Arg::Uuid(*node)),
                    ("name", Arg::Text(&setting.name)),
                    ("value", (&setting.value).into()),
                    ("registry", (&setting.registry).into()),
                    ("created_at", Arg::Time(setting.created_at)),
                    ("updated_at", Arg::OptTime(setting.updated_at)),
                ],
                versioned: false,
            });
        }
        for (node, component) in &self.firmware_components {
            rows.push(Row {
                table: "node_firmware_components",
                key: "node_uuid, component",
                columns: vec![
                    ("node_uuid", Arg::Uuid(*node)),
                    ("component", Arg::Text(&component.component)),
                    ("initial_version", Arg::Text(&component.initial_version)),
                    ("current_version", Arg::Text(&component.current_version)),
                    (
                        "last_version_flashed",
                        (&component.last_version_flashed).into(),
                    ),
                    ("created_at", Arg::Time(component.created_at)),
                    ("updated_at", Arg::OptTime(component.updated_at)),
                ],
                versioned: false,
            });
        }
        for inventory in &self.inventories {
            rows.push(Row {
                table: "node_inventories",
                key: "node_uuid",
                columns: vec![
                    ("node_uuid", Arg::Uuid(inventory.node)),
                    ("inventory", (&inventory.inventory).into()),
                    ("plugin_data", (&inventory.plugin_data).into()),
                    ("created_at", Arg::Time(inventory.created_at)),
                    ("updated_at", Arg::OptTime(inventory.updated_at)),
                ],
                versioned: false,
            });
        }
        rows
    }
}

impl Store {
    /// Writes `set` in one transaction: every row or none. Returns how many rows were
    /// inserted or (with [`ImportMode::Update`]) overwritten; rows already stored and kept
    /// count as none. A failure names the statement's table; nothing is written then.
    pub async fn import(&self, set: &ImportSet, mode: ImportMode) -> Result<u64, Error> {
        self.import_reporting(set, mode, &|_, _| {}).await
    }

    /// [`Store::import`], calling `progress(rows written, rows in all)` after each row (the
    /// transaction commits only after the last).
    pub async fn import_reporting(
        &self,
        set: &ImportSet,
        mode: ImportMode,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<u64, Error> {
        let statements: Vec<(&'static str, SqlBuilder<'_>)> = set
            .rows()
            .into_iter()
            .map(|row| (row.table, row.statement(mode)))
            .collect();
        let batch: Vec<(&str, &[Arg<'_>])> = statements
            .iter()
            .map(|(_, query)| (query.sql(), query.args()))
            .collect();
        let total = batch.len();
        self.execute_all(&batch, &|done| progress(done, total))
            .await
            .map_err(|(index, source)| Error::Import {
                table: statements.get(index).map_or("?", |(table, _)| table),
                source,
            })
    }
}
