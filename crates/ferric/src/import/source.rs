//! Reading Ironic's database: its SQLAlchemy URL turned into one sqlx understands, a
//! connection to MariaDB/MySQL, PostgreSQL or SQLite (read-only), and rows read as
//! [`Record`]s of the columns the caller names with their kinds.
//!
//! Every query is `SELECT * FROM <table>` and only the named columns are decoded, so the
//! columns a release added or dropped elsewhere in a table (and SQL keywords used as column
//! names, like `runbook_steps.order`) never matter. A column the database lacks reads as
//! `NULL`; `ironic_schema.rs` checks the revision first, so that only happens to columns
//! older releases did not have.

use std::collections::HashMap;
use std::str::FromStr;

use anyhow::{Context, bail};
use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{Column as _, Decode, Row, Type};

/// How a column is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Int,
    Bool,
    Time,
}

/// One value as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Text(String),
    Int(i64),
    Bool(bool),
    Time(DateTime<Utc>),
}

/// One row: the named columns that exist in the table, by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    cells: HashMap<&'static str, Cell>,
}

impl Record {
    fn get(&self, column: &str) -> &Cell {
        self.cells.get(column).unwrap_or(&Cell::Null)
    }

    pub(crate) fn text(&self, column: &str) -> Option<String> {
        match self.get(column) {
            Cell::Text(text) => Some(text.clone()),
            Cell::Int(value) => Some(value.to_string()),
            _ => None,
        }
    }

    pub(crate) fn int(&self, column: &str) -> Option<i64> {
        match self.get(column) {
            Cell::Int(value) => Some(*value),
            Cell::Bool(value) => Some(i64::from(*value)),
            _ => None,
        }
    }

    pub(crate) fn bool(&self, column: &str) -> Option<bool> {
        match self.get(column) {
            Cell::Bool(value) => Some(*value),
            Cell::Int(value) => Some(*value != 0),
            _ => None,
        }
    }

    pub(crate) fn time(&self, column: &str) -> Option<DateTime<Utc>> {
        match self.get(column) {
            Cell::Time(time) => Some(*time),
            _ => None,
        }
    }
}

/// A connection to Ironic's database.
#[derive(Debug)]
pub(crate) enum Source {
    MySql(MySqlPool),
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// `url` (SQLAlchemy's form, as in Ironic's `[database]connection`) as sqlx's.
pub(crate) fn translate_url(url: &str) -> anyhow::Result<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!(
            "--from must be Ironic's database URL as in its [database]connection \
             (mysql+pymysql://…, postgresql://…, sqlite:///…)"
        );
    };
    let dialect = scheme.split('+').next().unwrap_or_default();
    match dialect {
        "mysql" | "mariadb" => {
            // pymysql's parameters are not sqlx's; keep the ones that mean the same.
            let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
            let kept: Vec<String> = query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .filter_map(|(key, value)| match key {
                    "unix_socket" => Some(format!("socket={value}")),
                    "ssl-mode" | "ssl-ca" | "socket" => Some(format!("{key}={value}")),
                    _ => None,
                })
                .collect();
            let mut translated = format!("mysql://{base}");
            if !kept.is_empty() {
                translated.push('?');
                translated.push_str(&kept.join("&"));
            }
            Ok(translated)
        }
        "postgresql" | "postgres" => Ok(format!("postgres://{rest}")),
        // sqlite:///relative/file, sqlite:////absolute/file
        "sqlite" => {
            let path = rest.strip_prefix('/').unwrap_or(rest);
            anyhow::ensure!(
                !path.is_empty() && path != ":memory:",
                "{url} names no SQLite file"
            );
            Ok(format!("sqlite:{path}"))
        }
        other => bail!(
            "unsupported database type '{other}' in --from: Ironic runs on MySQL/MariaDB, \
             PostgreSQL or SQLite"
        ),
    }
}

impl Source {
    /// Connects to the database `url` (SQLAlchemy's form) names; a SQLite file is opened
    /// read-only and must exist.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let translated = translate_url(url)?;
        let shown = ferric_db::redact(url);
        let cannot = || format!("cannot connect to Ironic's database at {shown}");
        if let Some(path) = translated.strip_prefix("sqlite:") {
            anyhow::ensure!(
                std::path::Path::new(path).is_file(),
                "Ironic's SQLite database {path} does not exist"
            );
            let options = SqliteConnectOptions::new().filename(path).read_only(true);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .with_context(cannot)?;
            return Ok(Self::Sqlite(pool));
        }
        if translated.starts_with("postgres://") {
            let options = PgConnectOptions::from_str(&translated).with_context(cannot)?;
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .with_context(cannot)?;
            return Ok(Self::Postgres(pool));
        }
        let options = MySqlConnectOptions::from_str(&translated).with_context(cannot)?;
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .with_context(cannot)?;
        Ok(Self::MySql(pool))
    }

    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Self::MySql(_) => "MySQL/MariaDB",
            Self::Postgres(_) => "PostgreSQL",
            Self::Sqlite(_) => "SQLite",
        }
    }

    /// Whether `table` exists.
    pub(crate) async fn has_table(&self, table: &str) -> anyhow::Result<bool> {
        let sql = match self {
            Self::MySql(_) => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = ?"
            }
            Self::Postgres(_) => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = $1"
            }
            Self::Sqlite(_) => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
            }
        };
        let count: i64 = match self {
            Self::MySql(pool) => sqlx::query_scalar(sql).bind(table).fetch_one(pool).await?,
            Self::Postgres(pool) => sqlx::query_scalar(sql).bind(table).fetch_one(pool).await?,
            Self::Sqlite(pool) => sqlx::query_scalar(sql).bind(table).fetch_one(pool).await?,
        };
        Ok(count > 0)
    }

    /// Every row of `table` (ordered by `order_by`), with the `columns` it has.
    pub(crate) async fn rows(
        &self,
        table: &str,
        order_by: &str,
        columns: &[(&'static str, Kind)],
    ) -> anyhow::Result<Vec<Record>> {
        let sql = format!("SELECT * FROM {table} ORDER BY {order_by}");
        let failed = || format!("cannot read Ironic's {table} table");
        let records: anyhow::Result<Vec<Record>> = match self {
            Self::MySql(pool) => {
                let rows = sqlx::query(&sql)
                    .fetch_all(pool)
                    .await
                    .with_context(failed)?;
                rows.iter().map(|row| decode(row, columns)).collect()
            }
            Self::Postgres(pool) => {
                let rows = sqlx::query(&sql)
                    .fetch_all(pool)
                    .await
                    .with_context(failed)?;
                rows.iter().map(|row| decode(row, columns)).collect()
            }
            Self::Sqlite(pool) => {
                let rows = sqlx::query(&sql)
                    .fetch_all(pool)
                    .await
                    .with_context(failed)?;
                rows.iter().map(|row| decode(row, columns)).collect()
            }
        };
        records.with_context(failed)
    }

    pub(crate) async fn close(&self) {
        match self {
            Self::MySql(pool) => pool.close().await,
            Self::Postgres(pool) => pool.close().await,
            Self::Sqlite(pool) => pool.close().await,
        }
    }
}

/// The named columns of `row` that it has, decoded by kind. Integers are tried as 64 then 32
/// bits (PostgreSQL's `integer` is not an `i64`); times are the naive UTC times SQLAlchemy
/// writes.
fn decode<R>(row: &R, columns: &[(&'static str, Kind)]) -> anyhow::Result<Record>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<i32>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<bool>: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Option<NaiveDateTime>: Decode<'r, R::Database> + Type<R::Database>,
{
    let mut record = Record::default();
    for (index, column) in row.columns().iter().enumerate() {
        let Some(&(name, kind)) = columns
            .iter()
            .find(|(name, _)| column.name().eq_ignore_ascii_case(name))
        else {
            continue;
        };
        let cell = match kind {
            Kind::Text => row.try_get::<Option<String>, _>(index)?.map(Cell::Text),
            Kind::Int => match row.try_get::<Option<i64>, _>(index) {
                Ok(value) => value.map(Cell::Int),
                Err(_) => row
                    .try_get::<Option<i32>, _>(index)?
                    .map(|value| Cell::Int(value.into())),
            },
            Kind::Bool => match row.try_get::<Option<bool>, _>(index) {
                Ok(value) => value.map(Cell::Bool),
                Err(_) => row
                    .try_get::<Option<i32>, _>(index)?
                    .map(|value| Cell::Bool(value != 0)),
            },
            Kind::Time => row
                .try_get::<Option<NaiveDateTime>, _>(index)
                .with_context(|| format!("column {name}"))?
                .map(|time| Cell::Time(time.and_utc())),
        };
        record.cells.insert(name, cell.unwrap_or(Cell::Null));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::translate_url;

    #[test]
    fn sqlalchemy_urls_become_sqlx_urls() {
        let cases = [
            (
                "mysql+pymysql://ironic:pw@db:3306/ironic?charset=utf8",
                "mysql://ironic:pw@db:3306/ironic",
            ),
            (
                "mysql://root@127.0.0.1/ironic?unix_socket=/run/mysqld.sock",
                "mysql://root@127.0.0.1/ironic?socket=/run/mysqld.sock",
            ),
            ("postgresql://u@h/ironic", "postgres://u@h/ironic"),
            ("postgresql+psycopg2://u@h:5433/i", "postgres://u@h:5433/i"),
            (
                "sqlite:////var/lib/ironic/ironic.sqlite",
                "sqlite:/var/lib/ironic/ironic.sqlite",
            ),
            ("sqlite:///ironic.sqlite", "sqlite:ironic.sqlite"),
        ];
        for (from, to) in cases {
            assert_eq!(translate_url(from).unwrap(), to, "{from}");
        }
        for bad in ["oracle://x/y", "/var/lib/ironic.sqlite", "sqlite:///"] {
            assert!(translate_url(bad).is_err(), "{bad}");
        }
    }
}
