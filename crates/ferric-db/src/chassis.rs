//! Chassis: a grouping of nodes kept for API compatibility. A chassis with nodes cannot be
//! deleted.

use ferric_model::resources::Chassis;
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, update_returning};
use crate::store::Store;

define_sort_key! {
    /// What a chassis listing may be sorted by.
    pub enum ChassisSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Description => "description" nullable,
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

pub(crate) fn chassis_values(chassis: &Chassis) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("description", (&chassis.description).into()),
        ("extra", (&chassis.extra).into()),
    ]
}

fn chassis_from_row(row: &dyn DbRow) -> Result<Chassis, sqlx::Error> {
    Ok(Chassis {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        description: row.opt_text("description")?,
        extra: row.json_object("extra")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

impl Store {
    /// Saves a new chassis and returns it as stored.
    pub async fn chassis_create(&self, chassis: &Chassis) -> Result<Chassis, Error> {
        let query = insert_returning(
            "chassis",
            chassis.uuid,
            self.now(),
            &chassis_values(chassis),
        );
        self.fetch_optional(query.sql(), query.args(), chassis_from_row)
            .await
            .map_err(|error| {
                let fields = [("uuid", chassis.uuid.to_string())];
                match unique_violation(&error, "chassis", &fields) {
                    Some((field, value)) => Error::Duplicate {
                        kind: Kind::Chassis,
                        field,
                        value,
                    },
                    None => Error::Backend {
                        operation: "chassis_create",
                        source: error,
                    },
                }
            })?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Chassis,
                ident: chassis.uuid.to_string(),
            })
    }

    pub async fn chassis_get(&self, uuid: Uuid) -> Result<Chassis, Error> {
        let sql = "SELECT * FROM chassis WHERE uuid = $1";
        self.fetch_optional(sql, &[Arg::Uuid(uuid)], chassis_from_row)
            .await
            .map_err(backend("chassis_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Chassis,
                ident: uuid.to_string(),
            })
    }

    pub async fn chassis_list(&self, page: &Page<ChassisSortKey>) -> Result<Vec<Chassis>, Error> {
        let mut query = SqlBuilder::new("SELECT * FROM chassis");
        if let Some(marker) = page.marker {
            let marker_id = self.marker_id("chassis", Kind::Chassis, marker).await?;
            push_after_marker(
                &mut query,
                "chassis",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), chassis_from_row)
            .await
            .map_err(backend("chassis_list"))
    }

    /// Writes `chassis` if its stored revision is still `expected_version`; otherwise
    /// [`Error::StaleRevision`].
    pub async fn chassis_update(
        &self,
        chassis: &Chassis,
        expected_version: i64,
    ) -> Result<Chassis, Error> {
        let values = chassis_values(chassis);
        let query = update_returning(
            "chassis",
            chassis.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), chassis_from_row)
            .await
            .map_err(backend("chassis_update"))?;
        match updated {
            Some(chassis) => Ok(chassis),
            None => Err(self
                .stale_or_missing("chassis", Kind::Chassis, chassis.uuid, expected_version)
                .await),
        }
    }

    /// Deletes the chassis; [`Error::InUse`] while nodes still belong to it.
    pub async fn chassis_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute("DELETE FROM chassis WHERE uuid = $1", &[Arg::Uuid(uuid)])
            .await
            .map_err(|error| {
                if is_foreign_key_violation(&error) {
                    Error::InUse {
                        kind: Kind::Chassis,
                        ident: uuid.to_string(),
                        dependents: "nodes",
                    }
                } else {
                    Error::Backend {
                        operation: "chassis_delete",
                        source: error,
                    }
                }
            })?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::Chassis,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }
}
