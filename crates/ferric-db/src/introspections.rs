//! The inspection service's state (`ferric-inspector`'s service): its node cache — one
//! introspection per node with the MACs and BMC addresses incoming data is matched against —,
//! the data it stored, and its introspection rules. Kept here so that a restart of the service
//! continues running introspections and keeps its rules.
//!
//! Introspection states are the service's words (`waiting`, `processing`, …): this module
//! stores them as text and moves them only with compare-and-set updates
//! (`introspection_transition`, `introspection_finish`), so two callbacks or a callback and an
//! abort racing on one node cannot both win.

use chrono::{DateTime, Utc};
use ferric_model::resources::JsonObject;
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::sql::{Arg, DbRow, SqlBuilder, json_column};
use crate::store::Store;

/// One node's introspection, as the inspection service's node cache keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Introspection {
    pub node: Uuid,
    /// The service's state name (`starting`, `waiting`, `processing`, `finished`, `error`, …).
    pub state: String,
    /// Whether the service booted the node (and so powers it off at the end).
    pub manage_boot: bool,
    /// Lookup attributes: the node's MACs and BMC addresses when the introspection started.
    pub macs: Vec<String>,
    pub bmc_addresses: Vec<String>,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// An introspection rule (ironic-inspector's format); conditions and actions are kept as the
/// JSON objects the caller sent, checked by the service before they get here.
#[derive(Debug, Clone, PartialEq)]
pub struct IntrospectionRule {
    pub uuid: Uuid,
    pub description: Option<String>,
    pub scope: Option<String>,
    pub conditions: Vec<JsonObject>,
    pub actions: Vec<JsonObject>,
    pub created_at: DateTime<Utc>,
}

const INTROSPECTION_COLUMNS: &str =
    "node_uuid, state, manage_boot, macs, bmc_addresses, error, started_at, finished_at";

fn introspection_from_row(row: &dyn DbRow) -> Result<Introspection, sqlx::Error> {
    Ok(Introspection {
        node: row.uuid("node_uuid")?,
        state: row.text("state")?,
        manage_boot: row.bool("manage_boot")?,
        macs: row.json_list("macs")?,
        bmc_addresses: row.json_list("bmc_addresses")?,
        error: row.opt_text("error")?,
        started_at: row.time("started_at")?,
        finished_at: row.opt_time("finished_at")?,
    })
}

const RULE_COLUMNS: &str = "uuid, description, scope, conditions, actions, created_at";

fn rule_from_row(row: &dyn DbRow) -> Result<IntrospectionRule, sqlx::Error> {
    Ok(IntrospectionRule {
        uuid: row.uuid("uuid")?,
        description: row.opt_text("description")?,
        scope: row.opt_text("scope")?,
        conditions: json_column(row, "conditions")?,
        actions: json_column(row, "actions")?,
        created_at: row.time("created_at")?,
    })
}

fn node_not_found(node: Uuid) -> Error {
    Error::NotFound {
        kind: Kind::Node,
        ident: node.to_string(),
    }
}

/// `AND state IN ($n, …)`; an empty `from` matches every state.
fn push_states<'a>(query: &mut SqlBuilder<'a>, from: &[&'a str]) {
    if from.is_empty() {
        return;
    }
    query.push(" AND state IN (");
    for (n, state) in from.iter().enumerate() {
        if n > 0 {
            query.push(", ");
        }
        query.arg(*state);
    }
    query.push(")");
}

impl Store {
    /// Records `introspection` as the node's current one, replacing an earlier one;
    /// [`Error::NotFound`] (a node) if the node does not exist.
    pub async fn introspection_upsert(
        &self,
        introspection: &Introspection,
    ) -> Result<Introspection, Error> {
        let sql = format!(
            "INSERT INTO introspections ({INTROSPECTION_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (node_uuid) DO UPDATE SET state = $2, manage_boot = $3, macs = $4, \
             bmc_addresses = $5, error = $6, started_at = $7, finished_at = $8 \
             RETURNING {INTROSPECTION_COLUMNS}"
        );
        let args = [
            Arg::Uuid(introspection.node),
            Arg::Text(&introspection.state),
            Arg::Bool(introspection.manage_boot),
            (&introspection.macs).into(),
            (&introspection.bmc_addresses).into(),
            (&introspection.error).into(),
            Arg::Time(introspection.started_at),
            Arg::OptTime(introspection.finished_at),
        ];
        self.fetch_optional(&sql, &args, introspection_from_row)
            .await
            .map_err(|error| {
                if is_foreign_key_violation(&error) {
                    node_not_found(introspection.node)
                } else {
                    Error::Backend {
                        operation: "introspection_upsert",
                        source: error,
                    }
                }
            })?
            .ok_or_else(|| node_not_found(introspection.node))
    }

    /// The node's introspection, if it ever had one (and was not deleted since).
    pub async fn introspection_get(&self, node: Uuid) -> Result<Option<Introspection>, Error> {
        let sql =
            format!("SELECT {INTROSPECTION_COLUMNS} FROM introspections WHERE node_uuid = $1");
        self.fetch_optional(&sql, &[Arg::Uuid(node)], introspection_from_row)
            .await
            .map_err(backend("introspection_get"))
    }

    /// Introspections newest first (by start, then node), after `marker`, at most `limit`;
    /// [`Error::MarkerNotFound`] if the marker node has no introspection.
    pub async fn introspection_list(
        &self,
        marker: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Introspection>, Error> {
        let mut query = SqlBuilder::new(&format!(
            "SELECT {INTROSPECTION_COLUMNS} FROM introspections"
        ));
        if let Some(marker) = marker {
            let started_at = self
                .introspection_get(marker)
                .await?
                .ok_or(Error::MarkerNotFound {
                    kind: Kind::Introspection,
                    marker,
                })?
                .started_at;
            query
                .and()
                .push("(started_at < ")
                .arg(started_at)
                .push(" OR (started_at = ")
                .arg(started_at)
                .push(" AND node_uuid > ")
                .arg(marker)
                .push("))");
        }
        query
            .push(" ORDER BY started_at DESC, node_uuid ASC LIMIT ")
            .arg(i64::from(limit));
        self.fetch_all(query.sql(), query.args(), introspection_from_row)
            .await
            .map_err(backend("introspection_list"))
    }

    /// Introspections that have not finished (the ones `/v1/continue` may match, the PXE
    /// filter allows and the timeout watches), oldest first.
    pub async fn introspection_list_unfinished(&self) -> Result<Vec<Introspection>, Error> {
        let sql = format!(
            "SELECT {INTROSPECTION_COLUMNS} FROM introspections WHERE finished_at IS NULL \
             ORDER BY started_at, node_uuid"
        );
        self.fetch_all(&sql, &[], introspection_from_row)
            .await
            .map_err(backend("introspection_list_unfinished"))
    }

    /// Moves the node's unfinished introspection from one of the states `from` to `to`;
    /// `false` if it is in none of them (someone else moved it first) or has none.
    pub async fn introspection_transition(
        &self,
        node: Uuid,
        from: &[&str],
        to: &str,
    ) -> Result<bool, Error> {
        let mut query = SqlBuilder::new("UPDATE introspections SET state = ");
        query
            .arg(to)
            .push(" WHERE node_uuid = ")
            .arg(node)
            .push(" AND finished_at IS NULL");
        push_states(&mut query, from);
        let changed = self
            .execute(query.sql(), query.args())
            .await
            .map_err(backend("introspection_transition"))?;
        Ok(changed > 0)
    }

    /// Ends the node's unfinished introspection in state `state` (with `error`, if any) if it
    /// is in one of the states `from`; `false` if it is not.
    pub async fn introspection_finish(
        &self,
        node: Uuid,
        from: &[&str],
        state: &str,
        error: Option<&str>,
    ) -> Result<bool, Error> {
        let mut query = SqlBuilder::new("UPDATE introspections SET state = ");
        query
            .arg(state)
            .push(", error = ")
            .arg(Arg::OptText(error))
            .push(", finished_at = ")
            .arg(self.now())
            .push(" WHERE node_uuid = ")
            .arg(node)
            .push(" AND finished_at IS NULL");
        push_states(&mut query, from);
        let changed = self
            .execute(query.sql(), query.args())
            .await
            .map_err(backend("introspection_finish"))?;
        Ok(changed > 0)
    }

    /// Stores the data the node's introspection processed, replacing earlier data;
    /// [`Error::NotFound`] (an introspection) if the node has no introspection.
    pub async fn introspection_data_set(&self, node: Uuid, data: &JsonObject) -> Result<(), Error> {
        let sql = "INSERT INTO introspection_data (node_uuid, data, created_at) \
                   VALUES ($1, $2, $3) \
                   ON CONFLICT (node_uuid) DO UPDATE SET data = $2, created_at = $3";
        self.execute(sql, &[Arg::Uuid(node), data.into(), Arg::Time(self.now())])
            .await
            .map_err(|error| {
                if is_foreign_key_violation(&error) {
                    Error::NotFound {
                        kind: Kind::Introspection,
                        ident: node.to_string(),
                    }
                } else {
                    Error::Backend {
                        operation: "introspection_data_set",
                        source: error,
                    }
                }
            })
            .map(drop)
    }

    /// The data stored for the node's introspection, if any.
    pub async fn introspection_data_get(&self, node: Uuid) -> Result<Option<JsonObject>, Error> {
        self.fetch_optional(
            "SELECT data FROM introspection_data WHERE node_uuid = $1",
            &[Arg::Uuid(node)],
            |row| row.json_object("data"),
        )
        .await
        .map_err(backend("introspection_data_get"))
    }

    /// Forgets the data stored for the node (a new introspection starts); `true` if there was.
    pub async fn introspection_data_delete(&self, node: Uuid) -> Result<bool, Error> {
        let deleted = self
            .execute(
                "DELETE FROM introspection_data WHERE node_uuid = $1",
                &[Arg::Uuid(node)],
            )
            .await
            .map_err(backend("introspection_data_delete"))?;
        Ok(deleted > 0)
    }

    /// Saves a new rule; [`Error::Duplicate`] if its UUID is taken.
    pub async fn introspection_rule_create(
        &self,
        rule: &IntrospectionRule,
    ) -> Result<IntrospectionRule, Error> {
        let sql = format!(
            "INSERT INTO introspection_rules ({RULE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
             RETURNING {RULE_COLUMNS}"
        );
        let args = [
            Arg::Uuid(rule.uuid),
            (&rule.description).into(),
            (&rule.scope).into(),
            (&rule.conditions).into(),
            (&rule.actions).into(),
            Arg::Time(rule.created_at),
        ];
        self.fetch_optional(&sql, &args, rule_from_row)
            .await
            .map_err(|error| {
                let fields = [("uuid", rule.uuid.to_string())];
                match unique_violation(&error, "introspection_rules", &fields) {
                    Some((field, value)) => Error::Duplicate {
                        kind: Kind::IntrospectionRule,
                        field,
                        value,
                    },
                    None => Error::Backend {
                        operation: "introspection_rule_create",
                        source: error,
                    },
                }
            })?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::IntrospectionRule,
                ident: rule.uuid.to_string(),
            })
    }

    /// Every rule, in the order they were created (the order they apply in).
    pub async fn introspection_rule_list(&self) -> Result<Vec<IntrospectionRule>, Error> {
        let sql = format!("SELECT {RULE_COLUMNS} FROM introspection_rules ORDER BY id");
        self.fetch_all(&sql, &[], rule_from_row)
            .await
            .map_err(backend("introspection_rule_list"))
    }

    /// The rule with this UUID.
    pub async fn introspection_rule_get(&self, uuid: Uuid) -> Result<IntrospectionRule, Error> {
        let sql = format!("SELECT {RULE_COLUMNS} FROM introspection_rules WHERE uuid = $1");
        self.fetch_optional(&sql, &[Arg::Uuid(uuid)], rule_from_row)
            .await
            .map_err(backend("introspection_rule_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::IntrospectionRule,
                ident: uuid.to_string(),
            })
    }

    /// Deletes the rule; [`Error::NotFound`] if there is none with this UUID.
    pub async fn introspection_rule_delete(&self, uuid: Uuid) -> Result<(), Error> {
        let deleted = self
            .execute(
                "DELETE FROM introspection_rules WHERE uuid = $1",
                &[Arg::Uuid(uuid)],
            )
            .await
            .map_err(backend("introspection_rule_delete"))?;
        if deleted == 0 {
            return Err(Error::NotFound {
                kind: Kind::IntrospectionRule,
                ident: uuid.to_string(),
            });
        }
        Ok(())
    }

    /// Deletes every rule; returns how many there were.
    pub async fn introspection_rule_delete_all(&self) -> Result<u64, Error> {
        self.execute("DELETE FROM introspection_rules", &[])
            .await
            .map_err(backend("introspection_rule_delete_all"))
    }
}
