//! Inspection rules (API 1.96): conditions and actions stored as one JSON list each per rule,
//! listed in pages for the API and whole, by phase, for the conductor that applies them.

use ferric_model::resources::InspectionRule;
use uuid::Uuid;

use crate::error::{Error, Kind, backend, unique_violation};
use crate::paging::{Page, push_after_marker, push_order_and_limit};
use crate::sql::{Arg, DbRow, SqlBuilder, insert_returning, json_column, update_returning};
use crate::store::Store;

define_sort_key! {
    /// What an inspection rule listing may be sorted by.
    pub enum InspectionRuleSortKey {
        #[default]
        Id => "id",
        Uuid => "uuid",
        Description => "description" nullable,
        Priority => "priority",
        Sensitive => "sensitive",
        Phase => "phase",
        CreatedAt => "created_at",
        UpdatedAt => "updated_at" nullable,
    }
}

/// Which inspection rules `inspection_rule_list` returns.
#[derive(Debug, Clone, Default)]
pub struct InspectionRuleFilter {
    /// Only the rules of this phase.
    pub phase: Option<String>,
}

fn rule_values(rule: &InspectionRule) -> Vec<(&'static str, Arg<'_>)> {
    vec![
        ("description", (&rule.description).into()),
        ("priority", rule.priority.into()),
        ("sensitive", rule.sensitive.into()),
        ("phase", (&rule.phase).into()),
        ("conditions", (&rule.conditions).into()),
        ("actions", (&rule.actions).into()),
    ]
}

fn rule_from_row(row: &dyn DbRow) -> Result<InspectionRule, sqlx::Error> {
    Ok(InspectionRule {
        id: row.int("id")?,
        version: row.int("version")?,
        uuid: row.uuid("uuid")?,
        description: row.opt_text("description")?,
        priority: row.int("priority")?,
        sensitive: row.bool("sensitive")?,
        phase: row.text("phase")?,
        conditions: json_column(row, "conditions")?,
        actions: json_column(row, "actions")?,
        created_at: row.time("created_at")?,
        updated_at: row.opt_time("updated_at")?,
    })
}

fn write_error(error: sqlx::Error, uuid: Uuid, operation: &'static str) -> Error {
    let fields = [("uuid", uuid.to_string())];
    match unique_violation(&error, "inspection_rules", &fields) {
        Some((field, value)) => Error::Duplicate {
            kind: Kind::InspectionRule,
            field,
            value,
        },
        None => Error::Backend {
            operation,
            source: error,
        },
    }
}

impl Store {
    /// Saves a new inspection rule; [`Error::Duplicate`] if its UUID is taken.
    pub async fn inspection_rule_create(
        &self,
        rule: &InspectionRule,
    ) -> Result<InspectionRule, Error> {
        let query = insert_returning(
            "inspection_rules",
            rule.uuid,
            self.now(),
            &rule_values(rule),
        );
        self.fetch_optional(query.sql(), query.args(), rule_from_row)
            .await
            .map_err(|error| write_error(error, rule.uuid, "inspection_rule_create"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::InspectionRule,
                ident: rule.uuid.to_string(),
            })
    }

    /// The inspection rule with this UUID.
    pub async fn inspection_rule_get(&self, uuid: Uuid) -> Result<InspectionRule, Error> {
        self.fetch_optional(
            "SELECT * FROM inspection_rules WHERE uuid = $1",
            &[Arg::Uuid(uuid)],
            rule_from_row,
        )
        .await
        .map_err(backend("inspection_rule_get"))?
        .ok_or_else(|| Error::NotFound {
            kind: Kind::InspectionRule,
            ident: uuid.to_string(),
        })
    }

    /// One page of the inspection rules `filter` selects.
    pub async fn inspection_rule_list(
        &self,
        filter: &InspectionRuleFilter,
        page: &Page<InspectionRuleSortKey>,
    ) -> Result<Vec<InspectionRule>, Error> {
        let mut query = SqlBuilder::new("SELECT * FROM inspection_rules");
        if let Some(phase) = &filter.phase {
            query.and().push("phase = ").arg(phase);
        }
        if let Some(marker) = page.marker {
            let marker_id = self
                .marker_id("inspection_rules", Kind::InspectionRule, marker)
                .await?;
            push_after_marker(
                &mut query,
                "inspection_rules",
                page.sort_key,
                page.sort_dir,
                marker_id,
            );
        }
        push_order_and_limit(&mut query, page.sort_key, page.sort_dir, page.limit);
        self.fetch_all(query.sql(), query.args(), rule_from_row)
            .await
            .map_err(backend("inspection_rule_list"))
    }

    /// Every rule of `phase`, highest priority first (then oldest first): the order the
    /// conductor applies them in.
    pub async fn inspection_rule_list_for_phase(
        &self,
        phase: &str,
    ) -> Result<Vec<InspectionRule>, Error> {
        self.fetch_all(
            "SELECT * FROM inspection_rules WHERE phase = $1 ORDER BY priority DESC, id ASC",
            &[Arg::Text(phase)],
            rule_from_row,
        )
        .await
        .map_err(backend("inspection_rule_list_for_phase"))
    }

    /// Writes `rule` if its stored revision is still `expected_version`.
    pub async fn inspection_rule_update(
        &self,
        rule: &InspectionRule,
        expected_version: i64,
    ) -> Result<InspectionRule, Error> {
        let values = rule_values(rule);
        let query = update_returning(
            "inspection_rules",
            rule.uuid,
            self.now(),
            expected_version,
            &values,
        );
        let updated = self
            .fetch_optional(query.sql(), query.args(), rule_from_row)
            .await
            .map_err(|error| write_error(error, rule.uuid, "inspection_rule_update"))?;
        match updated {
            Some(rule) => Ok(rule),
            None => Err(self
                .stale_or_missing(
                    "inspection_rules",
                    Kind::InspectionRule,
                    rule.uuid,
                    expected_version,
                )
                .await),
        }
    }

    pub async fn inspection_rule_delete(&self, uuid: Uuid) -> Result<(), Error> {
        self.delete_by_uuid("inspection_rules", Kind::InspectionRule, uuid)
            .await
    }
}
