//! Ports: a node's NICs, unique by MAC address (kept lowercase), with guarded updates.

use ferric_model::resources::{Ident, Port};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, like_contains, update_returning};
use crate::store::Store;

/// Which ports `port_list` returns; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct PortFilter {
    pub node_uuid: Option<Uuid>,
    /// Only those of nodes this project owns or leases (a project-scoped caller's view).
    pub project: Option<String>,
    pub portgroup_uuid: Option<Uuid>,
    /// A MAC address, in any case.
    pub address: Option<String>,
    pub physical_network: Option<String>,
    /// Case-insensitive substring of `description`.
    pub description_contains: Option<String>,
    /// Only those of nodes in any of these shards.
    pub shard: Option<Vec<String>>,
    /// Only those of nodes in any of these conductor groups.
    pub conductor_groups: Option<Vec<String>>,
}

define_sort_key! {
    /// What a port listing may be sorted by.
    pub enum PortSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Address => "address",
        Name => "name" nullable,
        PhysicalNetwork => "physical_network" nullable,
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

/// MAC addresses compare case-insensitively; the store keeps them lowercase.
pub(crate) fn normalize_mac(address: &str) -> String {
    address.trim().to_ascii_lowercase()
}

pub(crate) fn port_values<'a>(port: &'a Port, address: &'a str) -> Vec<(&'static str, Arg<'a>)> {
    vec![
        ("address", address.into()),
        ("node_uuid", port.node_uuid.into()),
        ("portgroup_uuid", port.portgroup_uuid.into()),
        ("name", (&port.name).into()),
        ("description", (&port.description).into()),
        ("extra", (&port.extra).into()),
        ("internal_info", (&port.internal_info).into()),
        (
            "local_link_connection",
            (&port.local_link_connection).into(),
        ),
        ("pxe_enabled", port.pxe_enabled.into()),
        ("physical_network", (&port.physical_network).into()),
        ("is_smartnic", port.is_smartnic.into()),
        ("vendor", (&port.vendor).into()),
        ("category", (&port.category).into()),
        (
            "available_for_dynamic_portgroup",
            port.available_for_dynamic_portgroup.into(),
        ),
    ]
}

fn port_from_row(row: &dyn DbRow) -> Result<Port, sqlx::Error> {
    Ok(Port {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        address: row.text("address")?,
        node_uuid: row.uuid("node_uuid")?,
        portgroup_uuid: row.opt_uuid("portgroup_uuid")?,
        name: row.opt_text("name")?,
        description: row.opt_text("description")?,
        extra: row.json_object("extra")?,
        internal_info: row.json_object("internal_info")?,
        local_link_connection: row.json_object("local_link_connection")?,
        pxe_enabled: row.bool("pxe_enabled")?,
        physical_network: row.opt_text("physical_network")?,
        is_smartnic: row.bool("is_smartnic")?,
        vendor: row.opt_text("vendor")?,
        category: row.opt_text("category")?,
        available_for_dynamic_portgroup: row.bool("available_for_dynamic_portgroup")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

impl Store {
    /// Saves a new port (its address lowercased) and returns it as stored. Fails with
    /// [`Error::Duplicate`] naming `address`, `name` or `uuid` if one is taken, and with
    /// [`Error::NotFound`] if its node or portgroup does not exist.
    pub async fn port_create(&self, port: &Port) -> Result<Port, Error> {
        let address = normalize_mac(&port.address);
        let query = insert_returning("ports", port.uuid, self.now(), &port_values(port, &address));
        match self
            .fetch_optional(query.sql(), query.args(), port_from_row)
            .await
        {
            Ok(Some(port)) => Ok(port),
            Ok(None) => Err(Error::NotFound {
                kind: Kind::Port,
                ident: port.uuid.to_string(),
            }),
            Err(error) => Err(self
                .port_write_error(error, port, &address, "port_create")
                .await),
        }
    }

    /// The port with this UUID or name.
    pub async fn port_get(&self, ident: &Ident) -> Result<Port, Error> {
        let found = match ident {
            Ident::Uuid(uuid) => {
                let sql = "SELECT * FROM ports WHERE uuid = $1";
                self.fetch_optional(sql, &[Arg::Uuid(*uuid)], port_from_row)
                    .await
            }
            Ident::Name(name) => {
                let sql = "SELECT * FROM ports WHERE name = $1";
                self.fetch_optional(sql, &[Arg::Text(name)], port_from_row)
                    .await
            }
        };
        found
            .map_err(backend("port_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Port,
                ident: ident.to_string(),
            })
    }

    /// One page of the ports `filter` selects.
    pub async fn port_list(
        &self,
        filter: &PortFilter,
        page: &Page<PortSortKey>,
    ) -> Result<Vec<Port>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(self.marker_id("ports", Kind::Port, marker).await?),
            None => None,
        };
        let address = filter.address.as_deref().map(normalize_mac);
        let description_pattern = filter.description_contains.as_deref().map(like_contains);
        let mut query = SqlBuilder::new("SELECT * FROM ports");
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
        if let Some(portgroup_uuid) = filter.portgroup_uuid {
            query.and_eq("portgroup_uuid", portgroup_uuid);
        }
        if let Some(shards) = &filter.shard {
            query.and_node_in("shard", shards);
        }
        if let Some(groups) = &filter.conductor_groups {
            query.and_node_in("conductor_group", groups);
        }
        if let Some(address) = &address {
            query.and_eq("address", address);
        }
        if let Some(physical_network) = &filter.physical_network {
            query.and_eq("physical_network", physical_network);
        }
        if let Some(pattern) = &description_pattern {
            query
                .and()
                .push("LOWER(description) LIKE ")
                .arg(pattern)
                .push(" ESCAPE '\\'");
        }
        if let Some(marker_id) = marker_id {
            push_after_marker(&mut query, "ports", page.sort_key, page.sort_dir, marker_id);
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), port_from_row)
            .await
            .map_err(backend("port_list"))
    }

    /// Writes every field of `port` if its stored revision is still `expected_version`;
    /// otherwise [`Error::StaleRevision`].
    pub async fn port_update(&self, port: &Port, expected_version: i64) -> Result<Port, Error> {
        let address = normalize_mac(&port.address);
        let values = port_values(port, &address);
        let query = update_returning("ports", port.uuid, self.now(), expected_version, &values);
        match self
            .fetch_optional(query.sql(), query.args(), port_from_row)
            .await
        {
            Ok(Some(port)) => Ok(port),
            Ok(None) => Err(self
                .stale_or_missing("ports", Kind::Port, port.uuid, expected_version)
                .await),
            Err(error) => Err(self
                .port_write_error(error, port, &address, "port_update")
                .await),
        }
    }

    pub async fn port_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute("DELETE FROM ports WHERE uuid = $1", &[Arg::Uuid(uuid)])
            .await
            .map_err(backend("port_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::Port,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }

    async fn port_write_error(
        &self,
        error: sqlx::Error,
        port: &Port,
        address: &str,
        operation: &'static str,
    ) -> Error {
        let unique_fields = [
            ("address", address.to_owned()),
            ("uuid", port.uuid.to_string()),
            ("name", port.name.clone().unwrap_or_default()),
        ];
        if let Some((field, value)) = unique_violation(&error, "ports", &unique_fields) {
            return Error::Duplicate {
                kind: Kind::Port,
                field,
                value,
            };
        }
        if is_foreign_key_violation(&error) {
            // SQLite does not say which reference failed: look.
            return match port.portgroup_uuid {
                Some(portgroup) if self.node_exists(port.node_uuid).await => Error::NotFound {
                    kind: Kind::Portgroup,
                    ident: portgroup.to_string(),
                },
                _ => Error::NotFound {
                    kind: Kind::Node,
                    ident: port.node_uuid.to_string(),
                },
            };
        }
        Error::Backend {
            operation,
            source: error,
        }
    }

    /// Whether a node with this UUID exists (for explaining a failed reference; errors count as
    /// "no").
    pub(crate) async fn node_exists(&self, uuid: Uuid) -> bool {
        let sql = "SELECT id FROM nodes WHERE uuid = $1";
        matches!(
            self.fetch_optional(sql, &[Arg::Uuid(uuid)], |row| row.int("id"))
                .await,
            Ok(Some(_))
        )
    }
}
