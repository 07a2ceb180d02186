//! Allocations (a request for one matching available node), and the node data drivers and
//! inspection fill in: BIOS settings and the hardware inventory.
//!
//! Claiming a node for an allocation is two guarded writes, node first: the node's revision
//! guard makes sure two allocations never take the same node, and an allocation whose second
//! write failed is still `allocating` and frees its node when deleted.

use ferric_model::resources::{
    Allocation, AllocationState, BiosSetting, FirmwareComponent, Ident, JsonObject, NodeInventory,
};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::leases::Fence;
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, parsed, update_returning};
use crate::store::Store;

/// Which allocations `allocation_list` returns; `None` does not filter.
#[derive(Debug, Clone, Default)]
pub struct AllocationFilter {
    pub node: Option<Uuid>,
    pub state: Option<AllocationState>,
    pub resource_class: Option<String>,
    pub owner: Option<String>,
}

define_sort_key! {
    /// What an allocation listing may be sorted by.
    pub enum AllocationSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Name => "name" nullable,
        NodeUuid => "node_uuid" nullable,
        State => "state",
        ResourceClass => "resource_class" nullable,
        Owner => "owner" nullable,
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

pub(crate) fn allocation_values(allocation: &Allocation) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("name", (&allocation.name).into()),
        ("node_uuid", allocation.node_uuid.into()),
        ("state", allocation.state.as_str().into()),
        ("last_error", (&allocation.last_error).into()),
        ("resource_class", (&allocation.resource_class).into()),
        ("traits", (&allocation.traits).into()),
        ("candidate_nodes", (&allocation.candidate_nodes).into()),
        ("extra", (&allocation.extra).into()),
        ("owner", (&allocation.owner).into()),
    ]
}

fn allocation_from_row(row: &dyn DbRow) -> Result<Allocation, sqlx::Error> {
    Ok(Allocation {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        name: row.opt_text("name")?,
        node_uuid: row.opt_uuid("node_uuid")?,
        state: parsed(row, "state")?,
        last_error: row.opt_text("last_error")?,
        resource_class: row.opt_text("resource_class")?,
        traits: row.json_list("traits")?,
        candidate_nodes: row.json_list("candidate_nodes")?,
        extra: row.json_object("extra")?,
        owner: row.opt_text("owner")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

fn allocation_write_error(
    error: sqlx::Error,
    allocation: &Allocation,
    operation: &'static str,
) -> Error {
    let fields = [
        ("uuid", allocation.uuid.to_string()),
        ("name", allocation.name.clone().unwrap_or_default()),
        (
            "node_uuid",
            allocation
                .node_uuid
                .map(|uuid| uuid.to_string())
                .unwrap_or_default(),
        ),
    ];
    if let Some((field, value)) = unique_violation(&error, "allocations", &fields) {
        return Error::Duplicate {
            kind: Kind::Allocation,
            field,
            value,
        };
    }
    if is_foreign_key_violation(&error) {
        return Error::NotFound {
            kind: Kind::Node,
            ident: fields[2].1.clone(),
        };
    }
    Error::Backend {
        operation,
        source: error,
    }
}

const BIOS_COLUMNS: &str = "name, value, registry, created_at, updated_at";

fn bios_from_row(row: &dyn DbRow) -> Result<BiosSetting, sqlx::Error> {
    Ok(BiosSetting {
        name: row.text("name")?,
        value: row.opt_text("value")?,
        registry: row.json_object("registry")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

const FIRMWARE_COLUMNS: &str =
    "component, initial_version, current_version, last_version_flashed, created_at, updated_at";

fn firmware_from_row(row: &dyn DbRow) -> Result<FirmwareComponent, sqlx::Error> {
    Ok(FirmwareComponent {
        component: row.text("component")?,
        initial_version: row.text("initial_version")?,
        current_version: row.text("current_version")?,
        last_version_flashed: row.opt_text("last_version_flashed")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

fn inventory_from_row(row: &dyn DbRow) -> Result<NodeInventory, sqlx::Error> {
    Ok(NodeInventory {
        node: row.uuid("node_uuid")?,
        inventory: row.json_object("inventory")?,
        plugin_data: row.json_object("plugin_data")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

/// `INSERT INTO {into} SELECT {args} WHERE {fence} {tail}`: a record of the node's hardware,
/// written by the holder of its lease only while `fence`'s grant stands (unfenced with `None`:
/// tests and imports). The `WHERE` also keeps SQLite's upsert after a `SELECT` unambiguous.
fn insert_fenced<'a>(
    lock: bool,
    into: &str,
    args: Vec<Arg<'a>>,
    node: Uuid,
    fence: Option<Fence<'a>>,
    tail: &str,
) -> SqlBuilder<'a> {
    let mut query = SqlBuilder::new(&format!("INSERT INTO {into} SELECT "));
    for (at, arg) in args.into_iter().enumerate() {
        query.push(if at == 0 { "" } else { ", " }).arg(arg);
    }
    query.push(" WHERE ");
    match fence {
        Some(fence) => fence.push_condition(&mut query, Some(node), lock),
        None => {
            query.push("1 = 1");
        }
    }
    query.push(" ").push(tail);
    query
}

fn lease_lost(node: Uuid, fence: Fence<'_>) -> Error {
    Error::LeaseLost {
        node,
        holder: fence.holder.to_owned(),
        generation: fence.generation,
    }
}

/// A fenced upsert that wrote nothing: the grant no longer stands.
fn fenced_off(written: u64, node: Uuid, fence: Option<Fence<'_>>) -> Result<(), Error> {
    match fence {
        Some(fence) if written == 0 => Err(lease_lost(node, fence)),
        _ => Ok(()),
    }
}

fn node_missing(node: Uuid) -> impl FnOnce(sqlx::Error) -> Error {
    move |error| {
        if is_foreign_key_violation(&error) {
            Error::NotFound {
                kind: Kind::Node,
                ident: node.to_string(),
            }
        } else {
            Error::Backend {
                operation: "node data write",
                source: error,
            }
        }
    }
}

impl Store {
    /// Saves a new allocation; [`Error::Duplicate`] if its UUID or name is taken.
    pub async fn allocation_create(&self, allocation: &Allocation) -> Result<Allocation, Error> {
        let query = insert_returning(
            "allocations",
            allocation.uuid,
            self.now(),
            &allocation_values(allocation),
        );
        self.fetch_optional(query.sql(), query.args(), allocation_from_row)
            .await
            .map_err(|error| allocation_write_error(error, allocation, "allocation_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Allocation,
                ident: allocation.uuid.to_string(),
            })
    }

    /// The allocation with this UUID or name.
    pub async fn allocation_get(&self, ident: &Ident) -> Result<Allocation, Error> {
        let found = match ident {
            Ident::Uuid(uuid) => {
                self.fetch_optional(
                    "SELECT * FROM allocations WHERE uuid = $1",
                    &[Arg::Uuid(*uuid)],
                    allocation_from_row,
                )
                .await
            }
            Ident::Name(name) => {
                self.fetch_optional(
                    "SELECT * FROM allocations WHERE name = $1",
                    &[Arg::Text(name)],
                    allocation_from_row,
                )
                .await
            }
        };
        found
            .map_err(backend("allocation_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Allocation,
                ident: ident.to_string(),
            })
    }

    /// One page of the allocations `filter` selects.
    pub async fn allocation_list(
        &self,
        filter: &AllocationFilter,
        page: &Page<AllocationSortKey>,
    ) -> Result<Vec<Allocation>, Error> {
        let mut query = SqlBuilder::new("SELECT * FROM allocations");
        if let Some(node) = filter.node {
            query.and_eq("node_uuid", node);
        }
        if let Some(state) = filter.state {
            query.and_eq("state", state.as_str());
        }
        if let Some(resource_class) = &filter.resource_class {
            query.and_eq("resource_class", resource_class);
        }
        if let Some(owner) = &filter.owner {
            query.and_eq("owner", owner);
        }
        if let Some(marker) = page.marker {
            let marker_id = self
                .marker_id("allocations", Kind::Allocation, marker)
                .await?;
            push_after_marker(
                &mut query,
                "allocations",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), allocation_from_row)
            .await
            .map_err(backend("allocation_list"))
    }

    /// Writes `allocation` if its stored revision is still `expected_version`.
    pub async fn allocation_update(
        &self,
        allocation: &Allocation,
        expected_version: i64,
    ) -> Result<Allocation, Error> {
        let values = allocation_values(allocation);
        let query = update_returning(
            "allocations",
            allocation.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), allocation_from_row)
            .await
            .map_err(|error| allocation_write_error(error, allocation, "allocation_update"))?;
        match updated {
            Some(allocation) => Ok(allocation),
            None => Err(self
                .stale_or_missing(
                    "allocations",
                    Kind::Allocation,
                    allocation.uuid,
                    expected_version,
                )
                .await),
        }
    }

    /// Deletes the allocation. The caller frees its node first.
    pub async fn allocation_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute(
                "DELETE FROM allocations WHERE uuid = $1",
                &[Arg::Uuid(uuid)],
            )
            .await
            .map_err(backend("allocation_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::Allocation,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }

    /// Replaces the node's BIOS settings with `settings` (what the BIOS interface just read).
    /// With `fence` (a conductor's task) every statement lands only while that grant of the
    /// node's lease stands, and [`Error::LeaseLost`] otherwise.
    pub async fn node_bios_set(
        &self,
        node: Uuid,
        settings: &[BiosSetting],
        fence: Option<Fence<'_>>,
    ) -> Result<(), Error> {
        // One statement per setting, no transaction: a reader may briefly see a mix of the
        // old and new settings, which the next read corrects; the alternative would hold a
        // transaction across many statements.
        let names: Vec<String> = settings
            .iter()
            .map(|setting| setting.name.clone())
            .collect();
        let now = self.now();
        for setting in settings {
            let query = insert_fenced(
                self.is_postgres(),
                "node_bios_settings (node_uuid, name, value, registry, created_at)",
                vec![
                    Arg::Uuid(node),
                    Arg::Text(&setting.name),
                    (&setting.value).into(),
                    (&setting.registry).into(),
                    Arg::Time(now),
                ],
                node,
                fence,
                "ON CONFLICT (node_uuid, name) DO UPDATE SET value = excluded.value, \
                 registry = excluded.registry, updated_at = excluded.created_at",
            );
            let written = self
                .execute(query.sql(), query.args())
                .await
                .map_err(node_missing(node))?;
            fenced_off(written, node, fence)?;
        }
        // Settings the BIOS no longer reports go.
        let stored = self.node_bios_list(node).await?;
        for gone in stored
            .iter()
            .filter(|setting| !names.contains(&setting.name))
        {
            let mut query = SqlBuilder::new("DELETE FROM node_bios_settings WHERE node_uuid = ");
            query.arg(node).push(" AND name = ").arg(gone.name.as_str());
            if let Some(fence) = &fence {
                query.push(" AND ");
                fence.push_condition(&mut query, Some(node), self.is_postgres());
            }
            let deleted = self
                .execute(query.sql(), query.args())
                .await
                .map_err(backend("node_bios_set"))?;
            if deleted == 0
                && let Some(fence) = fence
                && !self.node_lease_fence_stands(node, fence).await?
            {
                return Err(lease_lost(node, fence));
            }
        }
        Ok(())
    }

    /// The node's BIOS settings, by name.
    pub async fn node_bios_list(&self, node: Uuid) -> Result<Vec<BiosSetting>, Error> {
        let sql = format!(
            "SELECT {BIOS_COLUMNS} FROM node_bios_settings WHERE node_uuid = $1 ORDER BY name"
        );
        self.fetch_all(&sql, &[Arg::Uuid(node)], bios_from_row)
            .await
            .map_err(backend("node_bios_list"))
    }

    /// Records the firmware versions the firmware interface just read, as `(component,
    /// version)` pairs. A component seen for the first time keeps its version as
    /// `initial_version`; the components named in `flashed` were just updated, so their
    /// version is also the `last_version_flashed`. Components not read keep their rows (a BMC
    /// that cannot report one at the moment does not erase its history).
    pub async fn node_firmware_set(
        &self,
        node: Uuid,
        versions: &[(String, String)],
        flashed: &[String],
        fence: Option<Fence<'_>>,
    ) -> Result<(), Error> {
        let now = self.now();
        for (component, version) in versions {
            let last_flashed = flashed.contains(component).then_some(version.as_str());
            let query = insert_fenced(
                self.is_postgres(),
                "node_firmware_components (node_uuid, component, initial_version, \
                 current_version, last_version_flashed, created_at)",
                vec![
                    Arg::Uuid(node),
                    Arg::Text(component),
                    Arg::Text(version),
                    Arg::Text(version),
                    Arg::OptText(last_flashed),
                    Arg::Time(now),
                ],
                node,
                fence,
                "ON CONFLICT (node_uuid, component) DO UPDATE SET \
                 current_version = excluded.current_version, \
                 last_version_flashed = COALESCE(excluded.last_version_flashed, \
                 node_firmware_components.last_version_flashed), \
                 updated_at = excluded.created_at",
            );
            let written = self
                .execute(query.sql(), query.args())
                .await
                .map_err(node_missing(node))?;
            fenced_off(written, node, fence)?;
        }
        Ok(())
    }

    /// The node's firmware components, by name.
    pub async fn node_firmware_list(&self, node: Uuid) -> Result<Vec<FirmwareComponent>, Error> {
        let sql = format!(
            "SELECT {FIRMWARE_COLUMNS} FROM node_firmware_components WHERE node_uuid = $1 \
             ORDER BY component"
        );
        self.fetch_all(&sql, &[Arg::Uuid(node)], firmware_from_row)
            .await
            .map_err(backend("node_firmware_list"))
    }

    /// Stores what inspection learned about the node, replacing what an earlier run stored;
    /// fenced as [`Store::node_bios_set`].
    pub async fn node_inventory_set(
        &self,
        node: Uuid,
        inventory: &JsonObject,
        plugin_data: &JsonObject,
        fence: Option<Fence<'_>>,
    ) -> Result<NodeInventory, Error> {
        let mut query = insert_fenced(
            self.is_postgres(),
            "node_inventories (node_uuid, inventory, plugin_data, created_at)",
            vec![
                Arg::Uuid(node),
                inventory.into(),
                plugin_data.into(),
                Arg::Time(self.now()),
            ],
            node,
            fence,
            "ON CONFLICT (node_uuid) DO UPDATE SET inventory = excluded.inventory, \
             plugin_data = excluded.plugin_data, updated_at = excluded.created_at",
        );
        query.push(" RETURNING *");
        let stored = self
            .fetch_optional(query.sql(), query.args(), inventory_from_row)
            .await
            .map_err(node_missing(node))?;
        match (stored, fence) {
            (Some(stored), _) => Ok(stored),
            (None, Some(fence)) => Err(lease_lost(node, fence)),
            (None, None) => Err(Error::NotFound {
                kind: Kind::Node,
                ident: node.to_string(),
            }),
        }
    }

    /// The node's stored inventory, if inspection stored one.
    pub async fn node_inventory_get(&self, node: Uuid) -> Result<Option<NodeInventory>, Error> {
        self.fetch_optional(
            "SELECT * FROM node_inventories WHERE node_uuid = $1",
            &[Arg::Uuid(node)],
            inventory_from_row,
        )
        .await
        .map_err(backend("node_inventory_get"))
    }
}
