//! Node listings for readers that show only part of each node: the page's heads (what a
//! listing needs to find, order, page and route its nodes, without the documents), whole rows
//! by row id for the nodes a caller has no rendered copy of, and rows narrowed to the columns
//! a `?fields=` selection shows.
//!
//! Why: decoding a whole node row (≈70 columns, a dozen JSON documents) costs ~45 µs, so a
//! 1,000-node page decoded in full takes longer than its 15 ms budget. The API used to keep
//! every decoded node in an in-process cache to avoid that, which cost ~6 KiB per node for as
//! long as the process lived (`docs/benchmarks.md`). Now the detail listing reads heads and
//! fetches whole rows only for nodes whose serialized document it does not hold, and `fields=`
//! listings decode only the columns they show.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use ferric_model::resources::{JsonObject, Node};
use uuid::Uuid;

use crate::error::{Error, Kind, backend};
use crate::nodes::{NodeFilter, NodeSortKey, node_from_row, push_node_filter};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{DbRow, SqlBuilder, like_contains};
use crate::store::Store;

/// What a listing needs of a node to order, page, route and look up its rendered document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHead {
    pub id: i64,
    /// The node's revision: every write bumps it, so `(id, version)` names one exact record.
    pub version: i64,
    pub uuid: Uuid,
    pub driver: String,
    pub conductor_group: String,
}

/// Every column of `nodes`, in schema order. A narrowed listing selects these by name only,
/// so nothing a caller passes is ever put into SQL.
pub const NODE_COLUMNS: &[&str] = &[
    "id",
    "version",
    "uuid",
    "name",
    "description",
    "driver",
    "driver_info",
    "driver_internal_info",
    "properties",
    "instance_info",
    "extra",
    "instance_uuid",
    "instance_name",
    "chassis_uuid",
    "parent_node",
    "allocation_uuid",
    "provision_state",
    "target_provision_state",
    "provision_updated_at",
    "power_state",
    "target_power_state",
    "last_error",
    "console_enabled",
    "fault",
    "health",
    "maintenance",
    "maintenance_reason",
    "protected",
    "protected_reason",
    "retired",
    "retired_reason",
    "disable_power_off",
    "automated_clean",
    "inspection_started_at",
    "inspection_finished_at",
    "clean_step",
    "deploy_step",
    "service_step",
    "raid_config",
    "target_raid_config",
    "network_data",
    "boot_mode",
    "secure_boot",
    "bios_interface",
    "boot_interface",
    "console_interface",
    "deploy_interface",
    "firmware_interface",
    "inspect_interface",
    "management_interface",
    "network_interface",
    "power_interface",
    "raid_interface",
    "rescue_interface",
    "storage_interface",
    "vendor_interface",
    "resource_class",
    "conductor_group",
    "shard",
    "owner",
    "lessee",
    "traits",
    "created_at",
    "updated_at",
];

/// Columns a narrowed node always has: identity, revision, routing (driver and conductor
/// group pick the owning conductor) and the two that have no neutral default.
const ALWAYS: &[&str] = &[
    "id",
    "version",
    "uuid",
    "driver",
    "conductor_group",
    "provision_state",
    "created_at",
];

impl Store {
    /// The heads of one page of the nodes `filter` selects, in `page`'s order: one narrow
    /// statement, no documents decoded.
    pub async fn node_list_heads(
        &self,
        filter: &NodeFilter,
        page: &Page<NodeSortKey>,
    ) -> Result<Vec<NodeHead>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(self.marker_id("nodes", Kind::Node, marker).await?),
            None => None,
        };
        let description_pattern = filter.description_contains.as_deref().map(like_contains);
        let mut query =
            SqlBuilder::new("SELECT id, version, uuid, driver, conductor_group FROM nodes");
        push_node_filter(&mut query, filter, description_pattern.as_deref());
        if let Some(marker_id) = marker_id {
            push_after_marker(&mut query, "nodes", page.sort_key, page.sort_dir, marker_id);
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), |row| {
            Ok(NodeHead {
                id: row.int("id")?,
                version: row.int("version")?,
                uuid: row.uuid("uuid")?,
                driver: row.text("driver")?,
                conductor_group: row.text("conductor_group")?,
            })
        })
        .await
        .map_err(backend("node_list_heads"))
    }

    /// Whole node records by row id, keyed by it. Ids of nodes deleted meanwhile are left
    /// out; a node written meanwhile comes at its newer revision.
    pub async fn node_list_by_id(&self, ids: &[i64]) -> Result<HashMap<i64, Node>, Error> {
        let mut found = HashMap::with_capacity(ids.len());
        // Bounded statements: SQLite allows 32,766 parameters, but smaller ones plan faster.
        for ids in ids.chunks(500) {
            let mut query = SqlBuilder::new("SELECT * FROM nodes WHERE id IN (");
            for (n, id) in ids.iter().enumerate() {
                query.push(if n == 0 { "" } else { ", " }).arg(*id);
            }
            query.push(")");
            let nodes = self
                .fetch_all(query.sql(), query.args(), node_from_row)
                .await
                .map_err(backend("node_list_by_id"))?;
            found.extend(nodes.into_iter().map(|node| (node.id, node)));
        }
        Ok(found)
    }

    /// [`Store::node_list`] reading only `columns` (names from [`NODE_COLUMNS`]; others are
    /// ignored) besides the few every node needs: the fields not read hold their empty
    /// value (`None`, `false`, `{}`, `[]`) and must not be shown.
    pub async fn node_list_columns(
        &self,
        filter: &NodeFilter,
        page: &Page<NodeSortKey>,
        columns: &[&str],
    ) -> Result<Vec<Node>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(self.marker_id("nodes", Kind::Node, marker).await?),
            None => None,
        };
        let selected: Vec<&'static str> = NODE_COLUMNS
            .iter()
            .copied()
            .filter(|column| ALWAYS.contains(column) || columns.contains(column))
            .collect();
        let select = format!("SELECT {} FROM nodes", selected.join(", "));
        let description_pattern = filter.description_contains.as_deref().map(like_contains);
        let mut query = SqlBuilder::new(&select);
        push_node_filter(&mut query, filter, description_pattern.as_deref());
        if let Some(marker_id) = marker_id {
            push_after_marker(&mut query, "nodes", page.sort_key, page.sort_dir, marker_id);
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all_with(query.sql(), query.args(), |row| {
            node_from_row(&Narrowed {
                row,
                columns: &selected,
            })
        })
        .await
        .map_err(backend("node_list_columns"))
    }
}

/// A row of some of the node columns: a column it lacks reads as its empty value.
struct Narrowed<'a> {
    row: &'a dyn DbRow,
    columns: &'a [&'static str],
}

impl Narrowed<'_> {
    fn has(&self, column: &str) -> bool {
        self.columns.contains(&column)
    }
}

impl DbRow for Narrowed<'_> {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        if self.has(column) {
            self.row.int(column)
        } else {
            Ok(0)
        }
    }
    fn bool(&self, column: &str) -> Result<bool, sqlx::Error> {
        if self.has(column) {
            self.row.bool(column)
        } else {
            Ok(false)
        }
    }
    fn opt_bool(&self, column: &str) -> Result<Option<bool>, sqlx::Error> {
        if self.has(column) {
            self.row.opt_bool(column)
        } else {
            Ok(None)
        }
    }
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        if self.has(column) {
            self.row.text(column)
        } else {
            Ok(String::new())
        }
    }
    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        if self.has(column) {
            self.row.opt_text(column)
        } else {
            Ok(None)
        }
    }
    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
        if self.has(column) {
            self.row.uuid(column)
        } else {
            Ok(Uuid::nil())
        }
    }
    fn opt_uuid(&self, column: &str) -> Result<Option<Uuid>, sqlx::Error> {
        if self.has(column) {
            self.row.opt_uuid(column)
        } else {
            Ok(None)
        }
    }
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        if self.has(column) {
            self.row.time(column)
        } else {
            Ok(DateTime::UNIX_EPOCH)
        }
    }
    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        if self.has(column) {
            self.row.opt_time(column)
        } else {
            Ok(None)
        }
    }
    fn json_object(&self, column: &str) -> Result<JsonObject, sqlx::Error> {
        if self.has(column) {
            self.row.json_object(column)
        } else {
            Ok(JsonObject::new())
        }
    }
    fn json_list(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
        if self.has(column) {
            self.row.json_list(column)
        } else {
            Ok(Vec::new())
        }
    }
    fn json_value(&self, column: &str) -> Result<serde_json::Value, sqlx::Error> {
        if self.has(column) {
            self.row.json_value(column)
        } else {
            Ok(serde_json::Value::Null)
        }
    }
}
