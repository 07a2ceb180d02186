//! Volume connectors and targets (API 1.32). A connector's `(type, connector_id)` is unique
//! across all nodes; a target's `boot_index` is unique per node. Both go with their node.

use ferric_model::resources::{VolumeConnector, VolumeTarget};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::paging::{Page, SortKey, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, update_returning};
use crate::store::Store;

/// Which connectors or targets a listing returns; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct VolumeFilter {
    pub node_uuid: Option<Uuid>,
    /// Only those of nodes this project owns or leases (a project-scoped caller's view).
    pub project: Option<String>,
}

define_sort_key! {
    /// What a volume connector listing may be sorted by.
    pub enum VolumeConnectorSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        NodeUuid => "node_uuid",
        Type => "type",
        ConnectorId => "connector_id",
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

define_sort_key! {
    /// What a volume target listing may be sorted by.
    pub enum VolumeTargetSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        NodeUuid => "node_uuid",
        VolumeType => "volume_type",
        BootIndex => "boot_index",
        VolumeId => "volume_id",
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

pub(crate) fn connector_values(connector: &VolumeConnector) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("node_uuid", connector.node_uuid.into()),
        ("type", (&connector.connector_type).into()),
        ("connector_id", (&connector.connector_id).into()),
        ("extra", (&connector.extra).into()),
    ]
}

fn connector_from_row(row: &dyn DbRow) -> Result<VolumeConnector, sqlx::Error> {
    Ok(VolumeConnector {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        node_uuid: row.uuid("node_uuid")?,
        connector_type: row.text("type")?,
        connector_id: row.text("connector_id")?,
        extra: row.json_object("extra")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

pub(crate) fn target_values(target: &VolumeTarget) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("node_uuid", target.node_uuid.into()),
        ("volume_type", (&target.volume_type).into()),
        ("properties", (&target.properties).into()),
        ("boot_index", target.boot_index.into()),
        ("volume_id", (&target.volume_id).into()),
        ("extra", (&target.extra).into()),
    ]
}

fn target_from_row(row: &dyn DbRow) -> Result<VolumeTarget, sqlx::Error> {
    Ok(VolumeTarget {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        node_uuid: row.uuid("node_uuid")?,
        volume_type: row.text("volume_type")?,
        properties: row.json_object("properties")?,
        boot_index: row.int("boot_index")?,
        volume_id: row.text("volume_id")?,
        extra: row.json_object("extra")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

/// Whether a unique violation is about the record's UUID (otherwise it is the table's
/// composite key).
fn is_uuid_violation(error: &sqlx::Error, table: &str, uuid: Uuid) -> bool {
    unique_violation(error, table, &[("uuid", uuid.to_string())]).is_some()
}

fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|db_error| db_error.is_unique_violation())
}

fn connector_write_error(
    error: sqlx::Error,
    connector: &VolumeConnector,
    operation: &'static str,
) -> Error {
    if is_unique_violation(&error) {
        return if is_uuid_violation(&error, "volume_connectors", connector.uuid) {
            Error::Duplicate {
                kind: Kind::VolumeConnector,
                field: "uuid",
                value: connector.uuid.to_string(),
            }
        } else {
            // Ironic's VolumeConnectorTypeAndIdAlreadyExists wording, through `Duplicate`.
            Error::Duplicate {
                kind: Kind::VolumeConnector,
                field: "type",
                value: format!(
                    "{} and connector ID {}",
                    connector.connector_type, connector.connector_id
                ),
            }
        };
    }
    if is_foreign_key_violation(&error) {
        return Error::NotFound {
            kind: Kind::Node,
            ident: connector.node_uuid.to_string(),
        };
    }
    Error::Backend {
        operation,
        source: error,
    }
}

fn target_write_error(error: sqlx::Error, target: &VolumeTarget, operation: &'static str) -> Error {
    if is_unique_violation(&error) {
        return if is_uuid_violation(&error, "volume_targets", target.uuid) {
            Error::Duplicate {
                kind: Kind::VolumeTarget,
                field: "uuid",
                value: target.uuid.to_string(),
            }
        } else {
            Error::Duplicate {
                kind: Kind::VolumeTarget,
                field: "boot_index",
                value: target.boot_index.to_string(),
            }
        };
    }
    if is_foreign_key_violation(&error) {
        return Error::NotFound {
            kind: Kind::Node,
            ident: target.node_uuid.to_string(),
        };
    }
    Error::Backend {
        operation,
        source: error,
    }
}

/// `SELECT * FROM <table>` with the filter, marker, order and limit of one page.
fn list_query<'a, K: SortKey>(
    table: &'a str,
    filter: &'a VolumeFilter,
    page: &Page<K>,
    marker_id: Option<i64>,
) -> SqlBuilder<'a> {
    let mut query = SqlBuilder::new(&format!("SELECT * FROM {table}"));
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
    if let Some(marker_id) = marker_id {
        push_after_marker(&mut query, table, page.sort_key, page.sort_dir, marker_id);
    }
    push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
    query
}

impl Store {
    /// Saves a new volume connector. [`Error::Duplicate`] when its UUID or its
    /// `(type, connector_id)` is taken; [`Error::NotFound`] (of the node) when its node does
    /// not exist.
    pub async fn volume_connector_create(
        &self,
        connector: &VolumeConnector,
    ) -> Result<VolumeConnector, Error> {
        let values = connector_values(connector);
        let query = insert_returning("volume_connectors", connector.uuid, self.now(), &values);
        self.fetch_optional(query.sql(), query.args(), connector_from_row)
            .await
            .map_err(|error| connector_write_error(error, connector, "volume_connector_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::VolumeConnector,
                ident: connector.uuid.to_string(),
            })
    }

    pub async fn volume_connector_get(&self, uuid: Uuid) -> Result<VolumeConnector, Error> {
        let sql = "SELECT * FROM volume_connectors WHERE uuid = $1";
        self.fetch_optional(sql, &[Arg::Uuid(uuid)], connector_from_row)
            .await
            .map_err(backend("volume_connector_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::VolumeConnector,
                ident: uuid.to_string(),
            })
    }

    /// One page of the connectors `filter` selects.
    pub async fn volume_connector_list(
        &self,
        filter: &VolumeFilter,
        page: &Page<VolumeConnectorSortKey>,
    ) -> Result<Vec<VolumeConnector>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(
                self.marker_id("volume_connectors", Kind::VolumeConnector, marker)
                    .await?,
            ),
            None => None,
        };
        let query = list_query("volume_connectors", filter, page, marker_id);
        self.fetch_all(query.sql(), query.args(), connector_from_row)
            .await
            .map_err(backend("volume_connector_list"))
    }

    /// Writes `connector` if its stored revision is still `expected_version`; otherwise
    /// [`Error::StaleRevision`].
    pub async fn volume_connector_update(
        &self,
        connector: &VolumeConnector,
        expected_version: i64,
    ) -> Result<VolumeConnector, Error> {
        let values = connector_values(connector);
        let query = update_returning(
            "volume_connectors",
            connector.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), connector_from_row)
            .await
            .map_err(|error| connector_write_error(error, connector, "volume_connector_update"))?;
        match updated {
            Some(connector) => Ok(connector),
            None => Err(self
                .stale_or_missing(
                    "volume_connectors",
                    Kind::VolumeConnector,
                    connector.uuid,
                    expected_version,
                )
                .await),
        }
    }

    pub async fn volume_connector_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let sql = "DELETE FROM volume_connectors WHERE uuid = $1";
        let deleted = self
            .execute(sql, &[Arg::Uuid(uuid)])
            .await
            .map_err(backend("volume_connector_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::VolumeConnector,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }

    /// Saves a new volume target. [`Error::Duplicate`] when its UUID, or its `boot_index` on
    /// its node, is taken; [`Error::NotFound`] (of the node) when its node does not exist.
    pub async fn volume_target_create(&self, target: &VolumeTarget) -> Result<VolumeTarget, Error> {
        let values = target_values(target);
        let query = insert_returning("volume_targets", target.uuid, self.now(), &values);
        self.fetch_optional(query.sql(), query.args(), target_from_row)
            .await
            .map_err(|error| target_write_error(error, target, "volume_target_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::VolumeTarget,
                ident: target.uuid.to_string(),
            })
    }

    pub async fn volume_target_get(&self, uuid: Uuid) -> Result<VolumeTarget, Error> {
        let sql = "SELECT * FROM volume_targets WHERE uuid = $1";
        self.fetch_optional(sql, &[Arg::Uuid(uuid)], target_from_row)
            .await
            .map_err(backend("volume_target_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::VolumeTarget,
                ident: uuid.to_string(),
            })
    }

    /// One page of the targets `filter` selects.
    pub async fn volume_target_list(
        &self,
        filter: &VolumeFilter,
        page: &Page<VolumeTargetSortKey>,
    ) -> Result<Vec<VolumeTarget>, Error> {
        let marker_id = match page.marker {
            Some(marker) => Some(
                self.marker_id("volume_targets", Kind::VolumeTarget, marker)
                    .await?,
            ),
            None => None,
        };
        let query = list_query("volume_targets", filter, page, marker_id);
        self.fetch_all(query.sql(), query.args(), target_from_row)
            .await
            .map_err(backend("volume_target_list"))
    }

    /// Writes `target` if its stored revision is still `expected_version`; otherwise
    /// [`Error::StaleRevision`].
    pub async fn volume_target_update(
        &self,
        target: &VolumeTarget,
        expected_version: i64,
    ) -> Result<VolumeTarget, Error> {
        let values = target_values(target);
        let query = update_returning(
            "volume_targets",
            target.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), target_from_row)
            .await
            .map_err(|error| target_write_error(error, target, "volume_target_update"))?;
        match updated {
            Some(target) => Ok(target),
            None => Err(self
                .stale_or_missing(
                    "volume_targets",
                    Kind::VolumeTarget,
                    target.uuid,
                    expected_version,
                )
                .await),
        }
    }

    pub async fn volume_target_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let sql = "DELETE FROM volume_targets WHERE uuid = $1";
        let deleted = self
            .execute(sql, &[Arg::Uuid(uuid)])
            .await
            .map_err(backend("volume_target_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::VolumeTarget,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }
}
