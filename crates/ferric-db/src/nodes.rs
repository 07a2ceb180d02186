//! Nodes: create, get by UUID or name, filtered and paged listing, revision-guarded update,
//! delete (which takes the node's ports, portgroups, lease and history with it).

pub(crate) mod history;

use chrono::{DateTime, Utc};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node, PowerState};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, like_contains, opt_parsed, parsed};
use crate::store::Store;
use history::{NodeWrite, WriteGuard};

/// Which nodes `node_list` returns. Every field narrows the listing; `None` (the default) does
/// not filter. New filters are new optional fields, so `..Default::default()` callers keep
/// compiling.
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    pub provision_state: Option<ProvisionState>,
    /// Only nodes whose `provision_updated_at` is older than this (the conductor's timeout
    /// scans combine it with `provision_state`).
    pub provision_updated_before: Option<DateTime<Utc>>,
    pub maintenance: Option<bool>,
    pub driver: Option<String>,
    /// `true`: nodes with an `instance_uuid`; `false`: nodes without.
    pub associated: Option<bool>,
    pub instance_uuid: Option<Uuid>,
    pub instance_name: Option<String>,
    pub chassis_uuid: Option<Uuid>,
    pub owner: Option<String>,
    pub lessee: Option<String>,
    /// Nodes owned by or leased to this project.
    pub project: Option<String>,
    pub conductor_group: Option<String>,
    pub resource_class: Option<String>,
    pub fault: Option<String>,
    pub retired: Option<bool>,
    /// Case-insensitive substring of `description`.
    pub description_contains: Option<String>,
    /// Nodes in any of these shards.
    pub shard: Option<Vec<String>>,
    /// `true`: nodes with a shard; `false`: nodes without.
    pub sharded: Option<bool>,
    pub parent_node: Option<Uuid>,
    /// `true`: child nodes (those with a `parent_node`); `false`: nodes with none.
    pub has_parent: Option<bool>,
    /// `true`: nodes reserved by an allocation; `false`: nodes free for one.
    pub allocated: Option<bool>,
    /// `true`: nodes with a power action under way (`target_power_state` set).
    pub power_action_pending: Option<bool>,
    /// Nodes whose serial console is (`true`) or is not (`false`) enabled.
    pub console_enabled: Option<bool>,
}

define_sort_key! {
    /// What a node listing may be sorted by (the API's `sort_key`). JSON fields are not
    /// sortable.
    pub enum NodeSortKey {
        /// Enrollment order; the API's default.
        #[default]
        Id => "id",
        Uuid => "uuid",
        Name => "name" nullable,
        Driver => "driver",
        ProvisionState => "provision_state",
        ProvisionUpdatedAt => "provision_updated_at" nullable,
        PowerState => "power_state" nullable,
        Maintenance => "maintenance",
        InstanceUuid => "instance_uuid" nullable,
        ResourceClass => "resource_class" nullable,
        ConductorGroup => "conductor_group",
        Owner => "owner" nullable,
        Lessee => "lessee" nullable,
        Shard => "shard" nullable,
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

/// Every column the caller writes, in one list so that INSERT and UPDATE cannot drift apart.
pub(crate) fn node_values(node: &Node) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("name", (&node.name).into()),
        ("description", (&node.description).into()),
        ("driver", (&node.driver).into()),
        ("driver_info", (&node.driver_info).into()),
        ("driver_internal_info", (&node.driver_internal_info).into()),
        ("properties", (&node.properties).into()),
        ("instance_info", (&node.instance_info).into()),
        ("extra", (&node.extra).into()),
        ("instance_uuid", node.instance_uuid.into()),
        ("instance_name", (&node.instance_name).into()),
        ("chassis_uuid", node.chassis_uuid.into()),
        ("parent_node", node.parent_node.into()),
        ("allocation_uuid", node.allocation_uuid.into()),
        ("provision_state", node.provision_state.as_str().into()),
        (
            "target_provision_state",
            Arg::OptText(node.target_provision_state.map(ProvisionState::as_str)),
        ),
        ("provision_updated_at", node.provision_updated_at.into()),
        (
            "power_state",
            Arg::OptText(node.power_state.map(PowerState::as_str)),
        ),
        (
            "target_power_state",
            Arg::OptText(node.target_power_state.map(PowerState::as_str)),
        ),
        ("last_error", (&node.last_error).into()),
        ("console_enabled", node.console_enabled.into()),
        ("fault", (&node.fault).into()),
        ("health", (&node.health).into()),
        ("maintenance", node.maintenance.into()),
        ("maintenance_reason", (&node.maintenance_reason).into()),
        ("protected", node.protected.into()),
        ("protected_reason", (&node.protected_reason).into()),
        ("retired", node.retired.into()),
        ("retired_reason", (&node.retired_reason).into()),
        ("disable_power_off", node.disable_power_off.into()),
        ("automated_clean", node.automated_clean.into()),
        ("inspection_started_at", node.inspection_started_at.into()),
        ("inspection_finished_at", node.inspection_finished_at.into()),
        ("clean_step", (&node.clean_step).into()),
        ("deploy_step", (&node.deploy_step).into()),
        ("service_step", (&node.service_step).into()),
        ("raid_config", (&node.raid_config).into()),
        ("target_raid_config", (&node.target_raid_config).into()),
        ("network_data", (&node.network_data).into()),
        ("boot_mode", (&node.boot_mode).into()),
        ("secure_boot", node.secure_boot.into()),
        ("bios_interface", (&node.bios_interface).into()),
        ("boot_interface", (&node.boot_interface).into()),
        ("console_interface", (&node.console_interface).into()),
        ("deploy_interface", (&node.deploy_interface).into()),
        ("firmware_interface", (&node.firmware_interface).into()),
        ("inspect_interface", (&node.inspect_interface).into()),
        ("management_interface", (&node.management_interface).into()),
        ("network_interface", (&node.network_interface).into()),
        ("power_interface", (&node.power_interface).into()),
        ("raid_interface", (&node.raid_interface).into()),
        ("rescue_interface", (&node.rescue_interface).into()),
        ("storage_interface", (&node.storage_interface).into()),
        ("vendor_interface", (&node.vendor_interface).into()),
        ("resource_class", (&node.resource_class).into()),
        ("conductor_group", (&node.conductor_group).into()),
        ("shard", (&node.shard).into()),
        ("owner", (&node.owner).into()),
        ("lessee", (&node.lessee).into()),
        ("traits", (&node.traits).into()),
    ]
}

/// The columns of `node` whose values differ from `base`'s ([`Store::node_save`]).
pub(crate) fn node_changes<'a>(node: &'a Node, base: &'a Node) -> Vec<(&'static str, Arg<'a>)> {
    node_values(node)
        .into_iter()
        .zip(node_values(base))
        .filter(|(ours, theirs)| ours.1 != theirs.1)
        .map(|(ours, _)| ours)
        .collect()
}

pub(crate) fn node_from_row(row: &dyn DbRow) -> Result<Node, sqlx::Error> {
    Ok(Node {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        name: row.opt_text("name")?,
        description: row.opt_text("description")?,
        driver: row.text("driver")?,
        driver_info: row.json_object("driver_info")?,
        driver_internal_info: row.json_object("driver_internal_info")?,
        properties: row.json_object("properties")?,
        instance_info: row.json_object("instance_info")?,
        extra: row.json_object("extra")?,
        instance_uuid: row.opt_uuid("instance_uuid")?,
        instance_name: row.opt_text("instance_name")?,
        chassis_uuid: row.opt_uuid("chassis_uuid")?,
        parent_node: row.opt_uuid("parent_node")?,
        allocation_uuid: row.opt_uuid("allocation_uuid")?,
        provision_state: parsed(row, "provision_state")?,
        target_provision_state: opt_parsed(row, "target_provision_state")?,
        provision_updated_at: row.opt_time("provision_updated_at")?,
        power_state: opt_parsed(row, "power_state")?,
        target_power_state: opt_parsed(row, "target_power_state")?,
        last_error: row.opt_text("last_error")?,
        console_enabled: row.bool("console_enabled")?,
        fault: row.opt_text("fault")?,
        health: row.opt_text("health")?,
        maintenance: row.bool("maintenance")?,
        maintenance_reason: row.opt_text("maintenance_reason")?,
        protected: row.bool("protected")?,
        protected_reason: row.opt_text("protected_reason")?,
        retired: row.bool("retired")?,
        retired_reason: row.opt_text("retired_reason")?,
        disable_power_off: row.bool("disable_power_off")?,
        automated_clean: row.opt_bool("automated_clean")?,
        inspection_started_at: row.opt_time("inspection_started_at")?,
        inspection_finished_at: row.opt_time("inspection_finished_at")?,
        clean_step: row.json_object("clean_step")?,
        deploy_step: row.json_object("deploy_step")?,
        service_step: row.json_object("service_step")?,
        raid_config: row.json_object("raid_config")?,
        target_raid_config: row.json_object("target_raid_config")?,
        network_data: row.json_object("network_data")?,
        boot_mode: row.opt_text("boot_mode")?,
        secure_boot: row.opt_bool("secure_boot")?,
        bios_interface: row.opt_text("bios_interface")?,
        boot_interface: row.opt_text("boot_interface")?,
        console_interface: row.opt_text("console_interface")?,
        deploy_interface: row.opt_text("deploy_interface")?,
        firmware_interface: row.opt_text("firmware_interface")?,
        inspect_interface: row.opt_text("inspect_interface")?,
        management_interface: row.opt_text("management_interface")?,
        network_interface: row.opt_text("network_interface")?,
        power_interface: row.opt_text("power_interface")?,
        raid_interface: row.opt_text("raid_interface")?,
        rescue_interface: row.opt_text("rescue_interface")?,
        storage_interface: row.opt_text("storage_interface")?,
        vendor_interface: row.opt_text("vendor_interface")?,
        resource_class: row.opt_text("resource_class")?,
        conductor_group: row.text("conductor_group")?,
        shard: row.opt_text("shard")?,
        owner: row.opt_text("owner")?,
        lessee: row.opt_text("lessee")?,
        traits: row.json_list("traits")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

impl Store {
    /// Saves a new node and returns it as stored: `id` assigned, `version` 1, `created_at` now.
    /// Fails with [`Error::Duplicate`] if the UUID, name or instance UUID is taken, and
    /// [`Error::NotFound`] if `chassis_uuid` names no chassis.
    pub async fn node_create(&self, node: &Node) -> Result<Node, Error> {
        let query = insert_returning("nodes", node.uuid, self.now(), &node_values(node));
        self.fetch_optional(query.sql(), query.args(), node_from_row)
            .await
            .map_err(|error| write_error(error, node, "node_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Node,
                ident: node.uuid.to_string(),
            })
    }

    /// The node with this UUID or name.
    pub async fn node_get(&self, ident: &Ident) -> Result<Node, Error> {
        let found = match ident {
            Ident::Uuid(uuid) => {
                let sql = "SELECT * FROM nodes WHERE uuid = $1";
                self.fetch_optional(sql, &[Arg::Uuid(*uuid)], node_from_row)
                    .await
            }
            Ident::Name(name) => {
                let sql = "SELECT * FROM nodes WHERE name = $1";
                self.fetch_optional(sql, &[Arg::Text(name)], node_from_row)
                    .await
            }
        };
        found
            .map_err(backend("node_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Node,
                ident: ident.to_string(),
            })
    }

    /// The node with this UUID or name and the holder of its unexpired lease (the API's
    /// `reservation`), read in one statement: the API's show path, the hottest read there is.
    pub async fn node_get_with_reservation(
        &self,
        ident: &Ident,
    ) -> Result<(Node, Option<String>), Error> {
        const RESERVATION: &str = "SELECT nodes.*, (SELECT holder FROM node_leases \
             WHERE node_leases.node_uuid = nodes.uuid AND node_leases.expires_at > $2) \
             AS reservation FROM nodes";
        fn map(row: &dyn DbRow) -> Result<(Node, Option<String>), sqlx::Error> {
            Ok((node_from_row(row)?, row.opt_text("reservation")?))
        }
        let now = Arg::Time(self.now());
        let found = match ident {
            Ident::Uuid(uuid) => {
                let sql = format!("{RESERVATION} WHERE uuid = $1");
                self.fetch_optional(&sql, &[Arg::Uuid(*uuid), now], map)
                    .await
            }
            Ident::Name(name) => {
                let sql = format!("{RESERVATION} WHERE name = $1");
                self.fetch_optional(&sql, &[Arg::Text(name), now], map)
                    .await
            }
        };
        found
            .map_err(backend("node_get_with_reservation"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Node,
                ident: ident.to_string(),
            })
    }

    /// One page of the nodes `filter` selects, in `page`'s order.
    pub async fn node_list(
        &self,
        filter: &NodeFilter,
        page: &Page<NodeSortKey>,
    ) -> Result<Vec<Node>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(self.marker_id("nodes", Kind::Node, marker).await?),
            None => None,
        };
        let description_pattern = filter.description_contains.as_deref().map(like_contains);
        let mut query = SqlBuilder::new("SELECT * FROM nodes");
        push_node_filter(&mut query, filter, description_pattern.as_deref());
        if let Some(marker_id) = marker_id {
            push_after_marker(&mut query, "nodes", page.sort_key, page.sort_dir, marker_id);
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), node_from_row)
            .await
            .map_err(backend("node_list"))
    }

    /// Every shard with how many nodes are in it, the nodes in no shard as `None`, largest
    /// first (ties by name, no shard first), as Ironic's `GET /v1/shards` lists them.
    pub async fn node_shard_counts(&self) -> Result<Vec<(Option<String>, i64)>, Error> {
        let sql = "SELECT shard, COUNT(*) AS nodes FROM nodes GROUP BY shard";
        let mut counts = self
            .fetch_all(sql, &[], |row| {
                Ok((row.opt_text("shard")?, row.int("nodes")?))
            })
            .await
            .map_err(backend("node_shard_counts"))?;
        // Sorted here: the backends order NULL differently.
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(counts)
    }

    /// How many nodes are in each (provision state, power state) pair, in no order: one
    /// grouped query whatever the number of nodes (`GET /metrics` runs it at every scrape).
    pub async fn node_state_counts(
        &self,
    ) -> Result<Vec<(ProvisionState, Option<PowerState>, i64)>, Error> {
        let sql = "SELECT provision_state, power_state, COUNT(*) AS nodes FROM nodes \
                   GROUP BY provision_state, power_state";
        self.fetch_all(sql, &[], |row| {
            Ok((
                parsed(row, "provision_state")?,
                opt_parsed(row, "power_state")?,
                row.int("nodes")?,
            ))
        })
        .await
        .map_err(backend("node_state_counts"))
    }

    /// Writes every field of `node` if the stored revision is still `expected_version`, and
    /// returns the node as stored (revision bumped, `updated_at` now). If someone else wrote
    /// first, nothing is written and the error is [`Error::StaleRevision`].
    pub async fn node_update(&self, node: &Node, expected_version: i64) -> Result<Node, Error> {
        let values = node_values(node);
        self.node_write(
            node,
            &values,
            expected_version,
            NodeWrite::unfenced(WriteGuard::Revision),
        )
        .await?
        .ok_or_else(|| Error::NotFound {
            kind: Kind::Node,
            ident: node.uuid.to_string(),
        })
    }

    /// Deletes the node and, with it, its ports, portgroups, lease and history.
    pub async fn node_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute("DELETE FROM nodes WHERE uuid = $1", &[Arg::Uuid(uuid)])
            .await
            .map_err(backend("node_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::Node,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }

    /// The `id` of the record a listing marker names.
    pub(crate) async fn marker_id(
        &self,
        table: &str,
        kind: Kind,
        marker: Uuid,
    ) -> Result<i64, Error> {
        let sql = format!("SELECT id FROM {table} WHERE uuid = $1");
        self.fetch_optional(&sql, &[Arg::Uuid(marker)], |row| row.int("id"))
            .await
            .map_err(backend("listing marker lookup"))?
            .ok_or(Error::MarkerNotFound { kind, marker })
    }

    /// Why a revision-guarded write matched no row: the record is gone, or it moved on.
    pub(crate) async fn stale_or_missing(
        &self,
        table: &str,
        kind: Kind,
        uuid: Uuid,
        expected: i64,
    ) -> Error {
        let sql = format!("SELECT version FROM {table} WHERE uuid = $1");
        match self
            .fetch_optional(&sql, &[Arg::Uuid(uuid)], |row| row.int("version"))
            .await
        {
            Ok(Some(actual)) => Error::StaleRevision {
                kind,
                ident: uuid.to_string(),
                expected,
                actual,
            },
            Ok(None) => Error::NotFound {
                kind,
                ident: uuid.to_string(),
            },
            Err(source) => Error::Backend {
                operation: "revision check",
                source,
            },
        }
    }
}

pub(crate) fn push_node_filter<'a>(
    query: &mut SqlBuilder<'a>,
    filter: &'a NodeFilter,
    description_pattern: Option<&'a str>,
) {
    if let Some(state) = filter.provision_state {
        query.and_eq("provision_state", state.as_str());
    }
    if let Some(before) = filter.provision_updated_before {
        query.and().push("provision_updated_at < ").arg(before);
    }
    if let Some(console_enabled) = filter.console_enabled {
        query.and_eq("console_enabled", console_enabled);
    }
    if let Some(maintenance) = filter.maintenance {
        query.and_eq("maintenance", maintenance);
    }
    if let Some(driver) = &filter.driver {
        query.and_eq("driver", driver);
    }
    if let Some(associated) = filter.associated {
        query.and().push(if associated {
            "instance_uuid IS NOT NULL"
        } else {
            "instance_uuid IS NULL"
        });
    }
    if let Some(instance_uuid) = filter.instance_uuid {
        query.and_eq("instance_uuid", instance_uuid);
    }
    if let Some(instance_name) = &filter.instance_name {
        query.and_eq("instance_name", instance_name);
    }
    if let Some(chassis_uuid) = filter.chassis_uuid {
        query.and_eq("chassis_uuid", chassis_uuid);
    }
    if let Some(owner) = &filter.owner {
        query.and_eq("owner", owner);
    }
    if let Some(lessee) = &filter.lessee {
        query.and_eq("lessee", lessee);
    }
    if let Some(project) = &filter.project {
        query
            .and()
            .push("(owner = ")
            .arg(project)
            .push(" OR lessee = ")
            .arg(project)
            .push(")");
    }
    if let Some(group) = &filter.conductor_group {
        query.and_eq("conductor_group", group);
    }
    if let Some(resource_class) = &filter.resource_class {
        query.and_eq("resource_class", resource_class);
    }
    if let Some(fault) = &filter.fault {
        query.and_eq("fault", fault);
    }
    if let Some(retired) = filter.retired {
        query.and_eq("retired", retired);
    }
    if let Some(pattern) = description_pattern {
        query
            .and()
            .push("LOWER(description) LIKE ")
            .arg(pattern)
            .push(" ESCAPE '\\'");
    }
    if let Some(shards) = &filter.shard {
        query.and().push("shard IN (");
        if shards.is_empty() {
            query.push("NULL");
        }
        for (n, shard) in shards.iter().enumerate() {
            query.push(if n == 0 { "" } else { ", " }).arg(shard);
        }
        query.push(")");
    }
    if let Some(sharded) = filter.sharded {
        query.and().push(if sharded {
            "shard IS NOT NULL"
        } else {
            "shard IS NULL"
        });
    }
    if let Some(parent) = filter.parent_node {
        query.and_eq("parent_node", parent);
    }
    if let Some(has_parent) = filter.has_parent {
        query.and().push(if has_parent {
            "parent_node IS NOT NULL"
        } else {
            "parent_node IS NULL"
        });
    }
    if let Some(allocated) = filter.allocated {
        query.and().push(if allocated {
            "allocation_uuid IS NOT NULL"
        } else {
            "allocation_uuid IS NULL"
        });
    }
    if let Some(pending) = filter.power_action_pending {
        query.and().push(if pending {
            "target_power_state IS NOT NULL"
        } else {
            "target_power_state IS NULL"
        });
    }
}

/// Turns a failed node write into the error a caller can act on.
pub(crate) fn write_error(error: sqlx::Error, node: &Node, operation: &'static str) -> Error {
    let unique_fields = [
        ("uuid", node.uuid.to_string()),
        ("name", node.name.clone().unwrap_or_default()),
        (
            "instance_uuid",
            node.instance_uuid
                .map(|uuid| uuid.to_string())
                .unwrap_or_default(),
        ),
    ];
    if let Some((field, value)) = unique_violation(&error, "nodes", &unique_fields) {
        return Error::Duplicate {
            kind: Kind::Node,
            field,
            value,
        };
    }
    if is_foreign_key_violation(&error) {
        // The only reference a node holds is its chassis.
        let chassis = node
            .chassis_uuid
            .map(|uuid| uuid.to_string())
            .unwrap_or_default();
        return Error::NotFound {
            kind: Kind::Chassis,
            ident: chassis,
        };
    }
    Error::Backend {
        operation,
        source: error,
    }
}
