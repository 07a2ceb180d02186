//! Portgroups: bonds of a node's ports. A portgroup with member ports cannot be deleted.

use ferric_model::resources::{Ident, Portgroup};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::ports::normalize_mac;
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, update_returning};
use crate::store::Store;

/// Which portgroups `portgroup_list` returns; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct PortgroupFilter {
    pub node_uuid: Option<Uuid>,
    /// Only those of nodes this project owns or leases (a project-scoped caller's view).
    pub project: Option<String>,
    /// A MAC address, in any case.
    pub address: Option<String>,
    /// Only those of nodes in any of these shards.
    pub shard: Option<Vec<String>>,
    /// Only those of nodes in any of these conductor groups.
    pub conductor_groups: Option<Vec<String>>,
}

define_sort_key! {
    /// What a portgroup listing may be sorted by.
    pub enum PortgroupSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Name => "name" nullable,
        Address => "address" nullable,
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

pub(crate) fn portgroup_values<'a>(
    portgroup: &'a Portgroup,
    address: Option<&'a str>,
) -> Vec<(&'static str, Arg<'a>)> {
    vec![
        ("name", (&portgroup.name).into()),
        ("address", Arg::OptText(address)),
        ("node_uuid", portgroup.node_uuid.into()),
        ("extra", (&portgroup.extra).into()),
        ("internal_info", (&portgroup.internal_info).into()),
        (
            "standalone_ports_supported",
            portgroup.standalone_ports_supported.into(),
        ),
        ("mode", (&portgroup.mode).into()),
        ("properties", (&portgroup.properties).into()),
        ("physical_network", (&portgroup.physical_network).into()),
        ("category", (&portgroup.category).into()),
        ("dynamic_portgroup", portgroup.dynamic_portgroup.into()),
    ]
}

fn portgroup_from_row(row: &dyn DbRow) -> Result<Portgroup, sqlx::Error> {
    Ok(Portgroup {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        name: row.opt_text("name")?,
        address: row.opt_text("address")?,
        node_uuid: row.uuid("node_uuid")?,
        extra: row.json_object("extra")?,
        internal_info: row.json_object("internal_info")?,
        standalone_ports_supported: row.bool("standalone_ports_supported")?,
        mode: row.opt_text("mode")?,
        properties: row.json_object("properties")?,
        physical_network: row.opt_text("physical_network")?,
        category: row.opt_text("category")?,
        dynamic_portgroup: row.bool("dynamic_portgroup")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

impl Store {
    /// Saves a new portgroup and returns it as stored.
    pub async fn portgroup_create(&self, portgroup: &Portgroup) -> Result<Portgroup, Error> {
        let address = portgroup.address.as_deref().map(normalize_mac);
        let values = portgroup_values(portgroup, address.as_deref());
        let query = insert_returning("portgroups", portgroup.uuid, self.now(), &values);
        self.fetch_optional(query.sql(), query.args(), portgroup_from_row)
            .await
            .map_err(|error| portgroup_write_error(error, portgroup, address, "portgroup_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Portgroup,
                ident: portgroup.uuid.to_string(),
            })
    }

    /// The portgroup with this UUID or name.
    pub async fn portgroup_get(&self, ident: &Ident) -> Result<Portgroup, Error> {
        let found = match ident {
            Ident::Uuid(uuid) => {
                let sql = "SELECT * FROM portgroups WHERE uuid = $1";
                self.fetch_optional(sql, &[Arg::Uuid(*uuid)], portgroup_from_row)
                    .await
            }
            Ident::Name(name) => {
                let sql = "SELECT * FROM portgroups WHERE name = $1";
                self.fetch_optional(sql, &[Arg::Text(name)], portgroup_from_row)
                    .await
            }
        };
        found
            .map_err(backend("portgroup_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Portgroup,
                ident: ident.to_string(),
            })
    }

    /// One page of the portgroups `filter` selects.
    pub async fn portgroup_list(
        &self,
        filter: &PortgroupFilter,
        page: &Page<PortgroupSortKey>,
    ) -> Result<Vec<Portgroup>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(
                self.marker_id("portgroups", Kind::Portgroup, marker)
                    .await?,
            ),
            None => None,
        };
        let address = filter.address.as_deref().map(normalize_mac);
        let mut query = SqlBuilder::new("SELECT * FROM portgroups");
        if let Some(node_uuid) = filter.node_uuid {
            query.and_eq("node_uuid", node_uuid);
        }
        if let Some(project) = &filter.project {
            query
                .and()
                .push("node_uuid IN (SELECT uuid FROM nodes WHERE owner = ")
                .arg(project)
                .push(" OR lessee = ")
                .arg(project)
                .push(")");
        }
        if let Some(address) = &address {
            query.and_eq("address", address);
        }
        if let Some(shards) = &filter.shard {
            query.and_node_in("shard", shards);
        }
        if let Some(groups) = &filter.conductor_groups {
            query.and_node_in("conductor_group", groups);
        }
        if let Some(marker_id) = marker_id {
            push_after_marker(
                &mut query,
                "portgroups",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), portgroup_from_row)
            .await
            .map_err(backend("portgroup_list"))
    }

    /// Writes every field of `portgroup` if its stored revision is still `expected_version`;
    /// otherwise [`Error::StaleRevision`].
    pub async fn portgroup_update(
        &self,
        portgroup: &Portgroup,
        expected_version: i64,
    ) -> Result<Portgroup, Error> {
        let address = portgroup.address.as_deref().map(normalize_mac);
        let values = portgroup_values(portgroup, address.as_deref());
        let query = update_returning(
            "portgroups",
            portgroup.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), portgroup_from_row)
            .await
            .map_err(|error| {
                portgroup_write_error(error, portgroup, address, "portgroup_update")
            })?;
        match updated {
            Some(portgroup) => Ok(portgroup),
            None => Err(self
                .stale_or_missing(
                    "portgroups",
                    Kind::Portgroup,
                    portgroup.uuid,
                    expected_version,
                )
                .await),
        }
    }

    /// Deletes the portgroup; [`Error::InUse`] while ports still belong to it.
    pub async fn portgroup_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute("DELETE FROM portgroups WHERE uuid = $1", &[Arg::Uuid(uuid)])
            .await
            .map_err(|error| {
                if is_foreign_key_violation(&error) {
                    Error::InUse {
                        kind: Kind::Portgroup,
                        ident: uuid.to_string(),
                        dependents: "ports",
                    }
                } else {
                    Error::Backend {
                        operation: "portgroup_delete",
                        source: error,
                    }
                }
            })?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::Portgroup,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }
}

fn portgroup_write_error(
    error: sqlx::Error,
    portgroup: &Portgroup,
    address: Option<String>,
    operation: &'static str,
) -> Error {
    let unique_fields = [
        ("address", address.unwrap_or_default()),
        ("uuid", portgroup.uuid.to_string()),
        ("name", portgroup.name.clone().unwrap_or_default()),
    ];
    if let Some((field, value)) = unique_violation(&error, "portgroups", &unique_fields) {
        return Error::Duplicate {
            kind: Kind::Portgroup,
            field,
            value,
        };
    }
    if is_foreign_key_violation(&error) {
        return Error::NotFound {
            kind: Kind::Node,
            ident: portgroup.node_uuid.to_string(),
        };
    }
    Error::Backend {
        operation,
        source: error,
    }
}
