//! Deploy templates (API 1.55) and runbooks (API 1.92): named step lists, unique by UUID and
//! by name. Steps are stored as one JSON list per record: they are always read and written
//! whole, and the conductor looks templates up by name only.

use ferric_model::resources::{DeployTemplate, Ident, Runbook};
use uuid::Uuid;

use crate::error::{Error, Kind, backend, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, json_column, update_returning};
use crate::store::Store;

define_sort_key! {
    /// What a deploy template listing may be sorted by.
    pub enum DeployTemplateSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Name => "name",
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

define_sort_key! {
    /// What a runbook listing may be sorted by.
    pub enum RunbookSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Name => "name",
        Public => "public",
        Owner => "owner" nullable,
        DisableRamdisk => "disable_ramdisk",
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

/// Which runbooks `runbook_list` returns.
#[derive(Debug, Clone, Default)]
pub struct RunbookFilter {
    /// Only the runbooks this project owns, and the public ones (a project-scoped caller's
    /// view, as Ironic filters them).
    pub project: Option<String>,
}

pub(crate) fn template_values(template: &DeployTemplate) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("name", (&template.name).into()),
        ("steps", (&template.steps).into()),
        ("extra", (&template.extra).into()),
    ]
}

fn template_from_row(row: &dyn DbRow) -> Result<DeployTemplate, sqlx::Error> {
    Ok(DeployTemplate {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        name: row.text("name")?,
        steps: json_column(row, "steps")?,
        extra: row.json_object("extra")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

pub(crate) fn runbook_values(runbook: &Runbook) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("name", (&runbook.name).into()),
        ("traits", (&runbook.traits).into()),
        ("description", (&runbook.description).into()),
        ("steps", (&runbook.steps).into()),
        ("public", runbook.public.into()),
        ("owner", (&runbook.owner).into()),
        ("disable_ramdisk", runbook.disable_ramdisk.into()),
        ("extra", (&runbook.extra).into()),
    ]
}

fn runbook_from_row(row: &dyn DbRow) -> Result<Runbook, sqlx::Error> {
    Ok(Runbook {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        name: row.text("name")?,
        traits: row.json_list("traits")?,
        description: row.opt_text("description")?,
        steps: json_column(row, "steps")?,
        public: row.bool("public")?,
        owner: row.opt_text("owner")?,
        disable_ramdisk: row.bool("disable_ramdisk")?,
        extra: row.json_object("extra")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

/// A write's error: a taken UUID or name is [`Error::Duplicate`].
fn write_error(
    error: sqlx::Error,
    table: &str,
    kind: Kind,
    uuid: Uuid,
    name: &str,
    operation: &'static str,
) -> Error {
    let fields = [("uuid", uuid.to_string()), ("name", name.to_owned())];
    match unique_violation(&error, table, &fields) {
        Some((field, value)) => Error::Duplicate { kind, field, value },
        None => Error::Backend {
            operation,
            source: error,
        },
    }
}

impl Store {
    /// Saves a new deploy template; [`Error::Duplicate`] if its UUID or name is taken.
    pub async fn deploy_template_create(
        &self,
        template: &DeployTemplate,
    ) -> Result<DeployTemplate, Error> {
        let query = insert_returning(
            "deploy_templates",
            template.uuid,
            self.now(),
            &template_values(template),
        );
        self.fetch_optional(query.sql(), query.args(), template_from_row)
            .await
            .map_err(|error| {
                write_error(
                    error,
                    "deploy_templates",
                    Kind::DeployTemplate,
                    template.uuid,
                    &template.name,
                    "deploy_template_create",
                )
            })?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::DeployTemplate,
                ident: template.uuid.to_string(),
            })
    }

    /// The deploy template with this UUID or name.
    pub async fn deploy_template_get(&self, ident: &Ident) -> Result<DeployTemplate, Error> {
        let (sql, arg) = match ident {
            Ident::Uuid(uuid) => (
                "SELECT * FROM deploy_templates WHERE uuid = $1",
                Arg::Uuid(*uuid),
            ),
            Ident::Name(name) => (
                "SELECT * FROM deploy_templates WHERE name = $1",
                Arg::Text(name),
            ),
        };
        self.fetch_optional(sql, &[arg], template_from_row)
            .await
            .map_err(backend("deploy_template_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::DeployTemplate,
                ident: ident.to_string(),
            })
    }

    /// One page of deploy templates.
    pub async fn deploy_template_list(
        &self,
        page: &Page<DeployTemplateSortKey>,
    ) -> Result<Vec<DeployTemplate>, Error> {
        let mut query = SqlBuilder::new("SELECT * FROM deploy_templates");
        if let Some(marker) = page.marker {
            let marker_id = self
                .marker_id("deploy_templates", Kind::DeployTemplate, marker)
                .await?;
            push_after_marker(
                &mut query,
                "deploy_templates",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), template_from_row)
            .await
            .map_err(backend("deploy_template_list"))
    }

    /// The deploy templates named by any of `names` (a node's instance traits), by name.
    pub async fn deploy_template_list_by_names(
        &self,
        names: &[String],
    ) -> Result<Vec<DeployTemplate>, Error> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = SqlBuilder::new("SELECT * FROM deploy_templates WHERE name IN (");
        for (index, name) in names.iter().enumerate() {
            if index > 0 {
                query.push(", ");
            }
            query.arg(name);
        }
        query.push(") ORDER BY name");
        self.fetch_all(query.sql(), query.args(), template_from_row)
            .await
            .map_err(backend("deploy_template_list_by_names"))
    }

    /// Writes `template` if its stored revision is still `expected_version`.
    pub async fn deploy_template_update(
        &self,
        template: &DeployTemplate,
        expected_version: i64,
    ) -> Result<DeployTemplate, Error> {
        let values = template_values(template);
        let query = update_returning(
            "deploy_templates",
            template.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), template_from_row)
            .await
            .map_err(|error| {
                write_error(
                    error,
                    "deploy_templates",
                    Kind::DeployTemplate,
                    template.uuid,
                    &template.name,
                    "deploy_template_update",
                )
            })?;
        match updated {
            Some(template) => Ok(template),
            None => Err(self
                .stale_or_missing(
                    "deploy_templates",
                    Kind::DeployTemplate,
                    template.uuid,
                    expected_version,
                )
                .await),
        }
    }

    pub async fn deploy_template_delete(&self, uuid: Uuid) -> Result<(), Error> {
        self.delete_by_uuid("deploy_templates", Kind::DeployTemplate, uuid)
            .await
    }

    /// Saves a new runbook; [`Error::Duplicate`] if its UUID or name is taken.
    pub async fn runbook_create(&self, runbook: &Runbook) -> Result<Runbook, Error> {
        let query = insert_returning(
            "runbooks",
            runbook.uuid,
            self.now(),
            &runbook_values(runbook),
        );
        self.fetch_optional(query.sql(), query.args(), runbook_from_row)
            .await
            .map_err(|error| {
                write_error(
                    error,
                    "runbooks",
                    Kind::Runbook,
                    runbook.uuid,
                    &runbook.name,
                    "runbook_create",
                )
            })?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Runbook,
                ident: runbook.uuid.to_string(),
            })
    }

    /// The runbook with this UUID or name.
    pub async fn runbook_get(&self, ident: &Ident) -> Result<Runbook, Error> {
        let (sql, arg) = match ident {
            Ident::Uuid(uuid) => ("SELECT * FROM runbooks WHERE uuid = $1", Arg::Uuid(*uuid)),
            Ident::Name(name) => ("SELECT * FROM runbooks WHERE name = $1", Arg::Text(name)),
        };
        self.fetch_optional(sql, &[arg], runbook_from_row)
            .await
            .map_err(backend("runbook_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Runbook,
                ident: ident.to_string(),
            })
    }

    /// One page of the runbooks `filter` selects.
    pub async fn runbook_list(
        &self,
        filter: &RunbookFilter,
        page: &Page<RunbookSortKey>,
    ) -> Result<Vec<Runbook>, Error> {
        let mut query = SqlBuilder::new("SELECT * FROM runbooks");
        if let Some(project) = &filter.project {
            query
                .and()
                .push("(owner = ")
                .arg(project)
                .push(" OR public = ")
                .arg(true)
                .push(")");
        }
        if let Some(marker) = page.marker {
            let marker_id = self.marker_id("runbooks", Kind::Runbook, marker).await?;
            push_after_marker(
                &mut query,
                "runbooks",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), runbook_from_row)
            .await
            .map_err(backend("runbook_list"))
    }

    /// Writes `runbook` if its stored revision is still `expected_version`.
    pub async fn runbook_update(
        &self,
        runbook: &Runbook,
        expected_version: i64,
    ) -> Result<Runbook, Error> {
        let values = runbook_values(runbook);
        let query = update_returning(
            "runbooks",
            runbook.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), runbook_from_row)
            .await
            .map_err(|error| {
                write_error(
                    error,
                    "runbooks",
                    Kind::Runbook,
                    runbook.uuid,
                    &runbook.name,
                    "runbook_update",
                )
            })?;
        match updated {
            Some(runbook) => Ok(runbook),
            None => Err(self
                .stale_or_missing("runbooks", Kind::Runbook, runbook.uuid, expected_version)
                .await),
        }
    }

    pub async fn runbook_delete(&self, uuid: Uuid) -> Result<(), Error> {
        self.delete_by_uuid("runbooks", Kind::Runbook, uuid).await
    }

    pub(crate) async fn delete_by_uuid(
        &self,
        table: &str,
        kind: Kind,
        uuid: Uuid,
    ) -> Result<(), Error> {
        let sql = format!("DELETE FROM {table} WHERE uuid = $1");
        let deleted = self
            .execute(&sql, &[Arg::Uuid(uuid)])
            .await
            .map_err(backend("delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }
}
