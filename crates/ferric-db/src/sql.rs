//! The few pieces that let one SQL text serve both backends: bind values ([`Arg`]), row access
//! ([`DbRow`]) and a small builder for queries with optional clauses ([`SqlBuilder`]).
//!
//! Why not sqlx's `Any` driver or `QueryBuilder`? `Any` erases types down to a lowest common
//! denominator (no UUID, no JSONB, no TIMESTAMPTZ), and `QueryBuilder<DB>` is tied to one
//! backend at compile time. Instead, resource modules write plain SQL with `$n` placeholders
//! (PostgreSQL's syntax, which sqlx's SQLite driver also accepts) and describe their bind values
//! as [`Arg`]s; [`crate::Store`]'s three fetch helpers are the only code that knows which pool
//! it is talking to, and they bind each `Arg` with the type that backend wants.

use chrono::{DateTime, SubsecRound, Utc};
use ferric_model::resources::{DeployStep, JsonObject, RunbookStep};
use serde::Serialize;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgRow, PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteRow, SqliteTypeInfo, SqliteValueRef};
use sqlx::types::Json;
use sqlx::types::uuid::fmt::Hyphenated;
use sqlx::{Database, Decode, Encode, Postgres, Row, Sqlite, Type};
use uuid::Uuid;

/// A UUID stored natively on PostgreSQL (`UUID`) and as readable text on SQLite, so an operator
/// can `SELECT * FROM nodes WHERE uuid = '…'` in the `sqlite3` shell. (sqlx's own `Uuid`
/// mapping on SQLite is a 16-byte BLOB.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DbUuid(pub(crate) Uuid);

impl Type<Sqlite> for DbUuid {
    fn type_info() -> SqliteTypeInfo {
        <Hyphenated as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <Hyphenated as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for DbUuid {
    fn encode_by_ref(
        &self,
        buf: &mut <Sqlite as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        Encode::<Sqlite>::encode(self.0.hyphenated(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for DbUuid {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self(
            <Hyphenated as Decode<Sqlite>>::decode(value)?.into_uuid(),
        ))
    }
}

impl Type<Postgres> for DbUuid {
    fn type_info() -> PgTypeInfo {
        <Uuid as Type<Postgres>>::type_info()
    }
}

impl<'q> Encode<'q, Postgres> for DbUuid {
    fn encode_by_ref(
        &self,
        buf: &mut <Postgres as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        Encode::<Postgres>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for DbUuid {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self(<Uuid as Decode<Postgres>>::decode(value)?))
    }
}

/// A JSON value to bind: JSONB on PostgreSQL, TEXT on SQLite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum JsonArg<'a> {
    Object(&'a JsonObject),
    List(&'a [String]),
    Objects(&'a [JsonObject]),
    DeploySteps(&'a [DeployStep]),
    RunbookSteps(&'a [RunbookStep]),
}

/// One bind value, typed so that each backend can encode it natively.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arg<'a> {
    Int(i64),
    Bool(bool),
    OptBool(Option<bool>),
    Text(&'a str),
    OptText(Option<&'a str>),
    Uuid(Uuid),
    OptUuid(Option<Uuid>),
    Time(DateTime<Utc>),
    OptTime(Option<DateTime<Utc>>),
    Json(JsonArg<'a>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(text: &'a str) -> Self {
        Self::Text(text)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(text: &'a String) -> Self {
        Self::Text(text)
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(text: &'a Option<String>) -> Self {
        Self::OptText(text.as_deref())
    }
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<Option<bool>> for Arg<'_> {
    fn from(value: Option<bool>) -> Self {
        Self::OptBool(value)
    }
}

impl From<Uuid> for Arg<'_> {
    fn from(uuid: Uuid) -> Self {
        Self::Uuid(uuid)
    }
}

impl From<Option<Uuid>> for Arg<'_> {
    fn from(uuid: Option<Uuid>) -> Self {
        Self::OptUuid(uuid)
    }
}

impl From<DateTime<Utc>> for Arg<'_> {
    fn from(time: DateTime<Utc>) -> Self {
        Self::Time(time)
    }
}

impl From<Option<DateTime<Utc>>> for Arg<'_> {
    fn from(time: Option<DateTime<Utc>>) -> Self {
        Self::OptTime(time)
    }
}

impl<'a> From<&'a JsonObject> for Arg<'a> {
    fn from(object: &'a JsonObject) -> Self {
        Self::Json(JsonArg::Object(object))
    }
}

impl<'a> From<&'a Vec<JsonObject>> for Arg<'a> {
    fn from(objects: &'a Vec<JsonObject>) -> Self {
        Self::Json(JsonArg::Objects(objects))
    }
}

impl<'a> From<&'a Vec<DeployStep>> for Arg<'a> {
    fn from(steps: &'a Vec<DeployStep>) -> Self {
        Self::Json(JsonArg::DeploySteps(steps))
    }
}

impl<'a> From<&'a Vec<RunbookStep>> for Arg<'a> {
    fn from(steps: &'a Vec<RunbookStep>) -> Self {
        Self::Json(JsonArg::RunbookSteps(steps))
    }
}

impl<'a> From<&'a Vec<String>> for Arg<'a> {
    fn from(list: &'a Vec<String>) -> Self {
        Self::Json(JsonArg::List(list))
    }
}

/// Timestamps are kept to microseconds, PostgreSQL's precision, so a value reads back equal on
/// both backends. On SQLite they are RFC 3339 text in UTC, which sorts and compares correctly as
/// text because every stored value has the same offset (`+00:00`).
pub(crate) fn db_time(time: DateTime<Utc>) -> DateTime<Utc> {
    time.trunc_subsecs(6)
}

/// Binds [`Arg`]s onto a query of either backend.
pub(crate) trait BindArgs<'q>: Sized {
    fn bind_arg(self, arg: Arg<'q>) -> Self;

    fn bind_args(self, args: &[Arg<'q>]) -> Self {
        args.iter().fold(self, |query, arg| query.bind_arg(*arg))
    }
}

macro_rules! impl_bind_args {
    ($db:ty) => {
        impl<'q> BindArgs<'q> for sqlx::query::Query<'q, $db, <$db as Database>::Arguments<'q>> {
            fn bind_arg(self, arg: Arg<'q>) -> Self {
                match arg {
                    Arg::Int(value) => self.bind(value),
                    Arg::Bool(value) => self.bind(value),
                    Arg::OptBool(value) => self.bind(value),
                    Arg::Text(value) => self.bind(value),
                    Arg::OptText(value) => self.bind(value),
                    Arg::Uuid(value) => self.bind(DbUuid(value)),
                    Arg::OptUuid(value) => self.bind(value.map(DbUuid)),
                    Arg::Time(value) => self.bind(db_time(value)),
                    Arg::OptTime(value) => self.bind(value.map(db_time)),
                    Arg::Json(value) => self.bind(Json(value)),
                }
            }
        }
    };
}

impl_bind_args!(Sqlite);
impl_bind_args!(Postgres);

/// Typed column access on a row of either backend.
///
/// It is a trait object (`&dyn DbRow`) so that each resource's row mapper is written once, as a
/// plain function, rather than generically over sqlx's database traits.
pub(crate) trait DbRow {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn bool(&self, column: &str) -> Result<bool, sqlx::Error>;
    fn opt_bool(&self, column: &str) -> Result<Option<bool>, sqlx::Error>;
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error>;
    fn opt_uuid(&self, column: &str) -> Result<Option<Uuid>, sqlx::Error>;
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error>;
    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error>;
    fn json_object(&self, column: &str) -> Result<JsonObject, sqlx::Error>;
    fn json_list(&self, column: &str) -> Result<Vec<String>, sqlx::Error>;
    fn json_value(&self, column: &str) -> Result<serde_json::Value, sqlx::Error>;
}

/// A JSON column holding a serialized `T` (a template's or runbook's steps).
pub(crate) fn json_column<T: serde::de::DeserializeOwned>(
    row: &dyn DbRow,
    column: &str,
) -> Result<T, sqlx::Error> {
    serde_json::from_value(row.json_value(column)?).map_err(|error| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(error),
    })
}

/// A text column holding something with a `FromStr` (a provision state, a power state).
pub(crate) fn parsed<T>(row: &dyn DbRow, column: &str) -> Result<T, sqlx::Error>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    parse_column(column, row.text(column)?)
}

/// Like [`parsed`], for a nullable column.
pub(crate) fn opt_parsed<T>(row: &dyn DbRow, column: &str) -> Result<Option<T>, sqlx::Error>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    row.opt_text(column)?
        .map(|text| parse_column(column, text))
        .transpose()
}

fn parse_column<T>(column: &str, text: String) -> Result<T, sqlx::Error>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.parse()
        .map_err(|error: T::Err| sqlx::Error::ColumnDecode {
            index: column.to_owned(),
            source: Box::new(error),
        })
}

macro_rules! impl_db_row {
    ($row:ty) => {
        impl DbRow for $row {
            fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
                self.try_get(column)
            }
            fn bool(&self, column: &str) -> Result<bool, sqlx::Error> {
                self.try_get(column)
            }
            fn opt_bool(&self, column: &str) -> Result<Option<bool>, sqlx::Error> {
                self.try_get(column)
            }
            fn text(&self, column: &str) -> Result<String, sqlx::Error> {
                self.try_get(column)
            }
            fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(column)
            }
            fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
                Ok(self.try_get::<DbUuid, _>(column)?.0)
            }
            fn opt_uuid(&self, column: &str) -> Result<Option<Uuid>, sqlx::Error> {
                Ok(self
                    .try_get::<Option<DbUuid>, _>(column)?
                    .map(|uuid| uuid.0))
            }
            fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
                self.try_get(column)
            }
            fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
                self.try_get(column)
            }
            fn json_object(&self, column: &str) -> Result<JsonObject, sqlx::Error> {
                Ok(self.try_get::<Json<JsonObject>, _>(column)?.0)
            }
            fn json_list(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
                Ok(self.try_get::<Json<Vec<String>>, _>(column)?.0)
            }
            fn json_value(&self, column: &str) -> Result<serde_json::Value, sqlx::Error> {
                Ok(self.try_get::<Json<serde_json::Value>, _>(column)?.0)
            }
        }
    };
}

impl_db_row!(SqliteRow);
impl_db_row!(PgRow);

/// A query assembled from optional pieces, numbering its placeholders as values are added.
#[derive(Debug, Default)]
pub(crate) struct SqlBuilder<'a> {
    sql: String,
    args: Vec<Arg<'a>>,
    has_where: bool,
}

impl<'a> SqlBuilder<'a> {
    pub(crate) fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            ..Self::default()
        }
    }

    /// Appends literal SQL.
    pub(crate) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a placeholder for `arg`.
    pub(crate) fn arg(&mut self, arg: impl Into<Arg<'a>>) -> &mut Self {
        self.args.push(arg.into());
        self.sql.push('$');
        self.sql.push_str(&self.args.len().to_string());
        self
    }

    /// Starts the next condition: ` WHERE ` the first time, ` AND ` after.
    pub(crate) fn and(&mut self) -> &mut Self {
        self.sql
            .push_str(if self.has_where { " AND " } else { " WHERE " });
        self.has_where = true;
        self
    }

    /// `AND <column> = $n`.
    pub(crate) fn and_eq(&mut self, column: &str, arg: impl Into<Arg<'a>>) -> &mut Self {
        self.and().push(column).push(" = ").arg(arg)
    }

    /// `AND node_uuid IN (SELECT uuid FROM nodes WHERE {column} IN (values…))`: records of
    /// the nodes whose `column` is one of `values` (none when `values` is empty).
    pub(crate) fn and_node_in(&mut self, column: &str, values: &'a [String]) -> &mut Self {
        self.and()
            .push("node_uuid IN (SELECT uuid FROM nodes WHERE ")
            .push(column)
            .push(" IN (");
        if values.is_empty() {
            self.push("NULL");
        }
        for (n, value) in values.iter().enumerate() {
            self.push(if n == 0 { "" } else { ", " }).arg(value);
        }
        self.push("))")
    }

    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    pub(crate) fn args(&self) -> &[Arg<'a>] {
        &self.args
    }
}

/// `INSERT INTO <table> (uuid, version, created_at, <columns>) … RETURNING *`: a new record at
/// revision 1.
pub(crate) fn insert_returning<'a>(
    table: &str,
    uuid: Uuid,
    now: DateTime<Utc>,
    values: &[(&str, Arg<'a>)],
) -> SqlBuilder<'a> {
    let mut query = SqlBuilder::new("INSERT INTO ");
    query.push(table).push(" (uuid, version, created_at");
    for (column, _) in values {
        query.push(", ").push(column);
    }
    query.push(") VALUES (").arg(uuid).push(", 1, ").arg(now);
    for (_, value) in values {
        query.push(", ").arg(*value);
    }
    query.push(") RETURNING *");
    query
}

/// `UPDATE <table> SET <columns>, version = version + 1 … WHERE uuid = … AND version = …
/// RETURNING *`: writes only over the revision the caller read, so of two writers that read the
/// same revision exactly one wins and the other matches no row.
pub(crate) fn update_returning<'a>(
    table: &str,
    uuid: Uuid,
    now: DateTime<Utc>,
    expected_version: i64,
    values: &[(&str, Arg<'a>)],
) -> SqlBuilder<'a> {
    update_returning_if(table, uuid, now, expected_version, values, |_| {})
}

/// [`update_returning`] with `condition` (which pushes `" AND …"`, with any values it binds)
/// added to its guard.
pub(crate) fn update_returning_if<'a>(
    table: &str,
    uuid: Uuid,
    now: DateTime<Utc>,
    expected_version: i64,
    values: &[(&str, Arg<'a>)],
    condition: impl FnOnce(&mut SqlBuilder<'a>),
) -> SqlBuilder<'a> {
    let mut query = SqlBuilder::new("UPDATE ");
    query
        .push(table)
        .push(" SET version = version + 1, updated_at = ")
        .arg(now);
    for (column, value) in values {
        query.push(", ").push(column).push(" = ").arg(*value);
    }
    query.push(" WHERE uuid = ").arg(uuid);
    query.push(" AND version = ").arg(expected_version);
    condition(&mut query);
    query.push(" RETURNING *");
    query
}

/// Escapes `%`, `_` and `\` so that `text` matches literally inside a `LIKE … ESCAPE '\'`.
pub(crate) fn like_contains(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for ch in text.to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(ch);
    }
    pattern.push('%');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_numbers_placeholders_in_order() {
        let mut query = SqlBuilder::new("SELECT * FROM nodes");
        query.and_eq("driver", "ipmi").and_eq("maintenance", true);
        assert_eq!(
            query.sql(),
            "SELECT * FROM nodes WHERE driver = $1 AND maintenance = $2"
        );
        assert_eq!(query.args().len(), 2);
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_contains("50%_A"), "%50\\%\\_a%");
    }
}
