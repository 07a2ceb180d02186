//! SQLite's write connection, driven on the caller's own thread (rusqlite) rather than through
//! sqlx's per-connection worker thread.
//!
//! Why: sqlx runs each SQLite connection on a thread of its own, so every statement is a
//! message to that thread and a wake-up back — about 100 µs per statement on this kind of
//! virtual machine (137 µs against 24 µs inline for a one-row `UPDATE … RETURNING`), several
//! times the statement itself. SQLite's writes are serialised anyway
//! (one writer, [`crate::store`]'s write turn), so that latency is paid in series by every
//! writer of the process: it bounded the fleet cycle (issue 26, `docs/benchmarks.md`). Here a
//! write is a plain function call made while the caller holds the write turn; a statement of
//! a provisioning flow takes tens of microseconds, within what an async task may run between
//! two awaits.
//!
//! Theory of operation: [`LocalConnection::run`] takes the same SQL text and [`Arg`]s as the
//! sqlx helpers — `$n` placeholders (SQLite's named parameters `$1`, `$2`, … bound by number),
//! several statements separated by `;` run one after the other — and returns every row as a
//! [`LocalRow`], which implements [`DbRow`] with sqlx's SQLite encodings and decodings, so a
//! value written here reads back the same through the sqlx pool and the other way round.
//! Errors become `sqlx::Error::Database` with SQLite's extended code and message, so the
//! callers' classification (unique and foreign-key violations) is unchanged. `SELECT`s run
//! the same way on read connections of their own (`store.rs`, `Local`), beside the writer.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, SecondsFormat, TimeZone, Utc};
use ferric_model::resources::JsonObject;
use rusqlite::types::Value;
use rusqlite::{OpenFlags, ffi};
use uuid::Uuid;

use crate::sql::{Arg, DbRow, db_time};

/// SQLite's `synchronous` setting under its write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqliteSync {
    /// `NORMAL`: a commit is written to the log before it returns but the log is synced to
    /// the disk only at checkpoints. Nothing committed is lost when the process dies (the
    /// write is in the kernel's hands); an operating-system crash or power loss may roll
    /// back the last commits, never corrupt the database.
    #[default]
    Normal,
    /// `FULL`: every commit also waits for the log to be synced (one `fsync` per commit).
    Full,
}

/// How many prepared statements the connection keeps (the texts of node saves vary with the
/// columns they write: a few dozen in all).
const STATEMENT_CACHE: usize = 128;

/// What running one SQL text produced.
pub(crate) struct Outcome {
    /// The rows of every statement, in order.
    pub(crate) rows: Vec<LocalRow>,
    /// Rows changed by the statements (SQLite's `changes()` after each, summed).
    pub(crate) changed: u64,
}

/// A SQLite connection used from the thread that calls it.
pub(crate) struct LocalConnection {
    connection: rusqlite::Connection,
}

impl std::fmt::Debug for LocalConnection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("LocalConnection")
    }
}

impl LocalConnection {
    /// Opens the database file at `path` (which the pool has created and migrated) with the
    /// pool's settings: WAL, foreign keys, the busy timeout, a 1 MiB page cache.
    pub(crate) fn open(
        path: &Path,
        sync: SqliteSync,
        busy_timeout: Duration,
    ) -> Result<Self, sqlx::Error> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let connection = rusqlite::Connection::open_with_flags(path, flags).map_err(failure)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        connection.busy_timeout(busy_timeout).map_err(failure)?;
        let synchronous = match sync {
            SqliteSync::Normal => "NORMAL",
            SqliteSync::Full => "FULL",
        };
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; \
                 PRAGMA synchronous = {synchronous}; PRAGMA cache_size = -1024;"
            ))
            .map_err(failure)?;
        Ok(Self { connection })
    }

    /// Runs every statement of `sql` with `args`, to its end.
    pub(crate) fn run(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Outcome, sqlx::Error> {
        let mut outcome = Outcome {
            rows: Vec::new(),
            changed: 0,
        };
        for statement in statements(sql) {
            self.run_one(statement, args, &mut outcome)?;
        }
        Ok(outcome)
    }

    fn run_one(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        outcome: &mut Outcome,
    ) -> Result<(), sqlx::Error> {
        let mut statement = self.connection.prepare_cached(sql).map_err(failure)?;
        for index in 1..=statement.parameter_count() {
            let number = match statement.parameter_name(index) {
                Some(name) => name
                    .trim_start_matches(['$', '?', ':', '@'])
                    .parse::<usize>()
                    .map_err(|_| protocol(format!("unsupported placeholder {name} in: {sql}")))?,
                None => index,
            };
            let arg = number
                .checked_sub(1)
                .and_then(|at| args.get(at))
                .ok_or_else(|| protocol(format!("no value for placeholder ${number} in: {sql}")))?;
            bind(&mut statement, index, arg)?;
        }
        let columns: Arc<HashMap<String, usize>> = Arc::new(
            statement
                .column_names()
                .into_iter()
                .enumerate()
                .map(|(at, name)| (name.to_owned(), at))
                .collect(),
        );
        let width = columns.len();
        let mut rows = statement.raw_query();
        while let Some(row) = rows.next().map_err(failure)? {
            let mut values = Vec::with_capacity(width);
            for at in 0..width {
                values.push(Value::from(row.get_ref(at).map_err(failure)?));
            }
            outcome.rows.push(LocalRow {
                columns: columns.clone(),
                values,
            });
        }
        drop(rows);
        outcome.changed += self.connection.changes();
        Ok(())
    }

    /// Runs `sql` (no values, no rows): `BEGIN`, `COMMIT`, `ROLLBACK`.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        self.connection.execute_batch(sql).map_err(failure)
    }

    /// Whether a transaction is open (one that a failed statement left behind).
    pub(crate) fn in_transaction(&self) -> bool {
        !self.connection.is_autocommit()
    }
}

/// The statements of `sql`, split at the `;`s outside quotes; empty ones dropped.
fn statements(sql: &str) -> impl Iterator<Item = &str> {
    let mut parts = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (at, ch) in sql.char_indices() {
        match (quote, ch) {
            (None, '\'' | '"') => quote = Some(ch),
            (Some(open), _) if ch == open => quote = None,
            (None, ';') => {
                parts.push(&sql[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&sql[start..]);
    parts.into_iter().filter(|part| !part.trim().is_empty())
}

/// Binds `arg` as sqlx's SQLite driver encodes it (`sql::BindArgs`): booleans as integers,
/// UUIDs as hyphenated text, times as RFC 3339 text in UTC to the microsecond, JSON as text.
fn bind(
    statement: &mut rusqlite::CachedStatement<'_>,
    index: usize,
    arg: &Arg<'_>,
) -> Result<(), sqlx::Error> {
    let time = |time: DateTime<Utc>| db_time(time).to_rfc3339_opts(SecondsFormat::AutoSi, false);
    let value: Value = match *arg {
        Arg::Int(value) => Value::Integer(value),
        Arg::Bool(value) | Arg::OptBool(Some(value)) => Value::Integer(i64::from(value)),
        Arg::Text(text) | Arg::OptText(Some(text)) => {
            return statement.raw_bind_parameter(index, text).map_err(failure);
        }
        Arg::Uuid(uuid) | Arg::OptUuid(Some(uuid)) => Value::Text(uuid.hyphenated().to_string()),
        Arg::Time(value) | Arg::OptTime(Some(value)) => Value::Text(time(value)),
        Arg::Json(json) => Value::Text(
            serde_json::to_string(&json).map_err(|error| sqlx::Error::Encode(Box::new(error)))?,
        ),
        Arg::OptBool(None) | Arg::OptText(None) | Arg::OptUuid(None) | Arg::OptTime(None) => {
            Value::Null
        }
    };
    statement.raw_bind_parameter(index, value).map_err(failure)
}

/// One row, its values copied out of the statement.
#[derive(Debug, Clone)]
pub(crate) struct LocalRow {
    columns: Arc<HashMap<String, usize>>,
    values: Vec<Value>,
}

impl LocalRow {
    fn value(&self, column: &str) -> Result<&Value, sqlx::Error> {
        self.columns
            .get(column)
            .and_then(|at| self.values.get(*at))
            .ok_or_else(|| sqlx::Error::ColumnNotFound(column.to_owned()))
    }

    /// The column's value, `None` for SQL `NULL`.
    fn present(&self, column: &str) -> Result<Option<&Value>, sqlx::Error> {
        Ok(Some(self.value(column)?).filter(|value| !matches!(value, Value::Null)))
    }

    fn required<'r, T>(
        &'r self,
        column: &str,
        decode: impl FnOnce(&'r Value) -> Result<T, String>,
    ) -> Result<T, sqlx::Error> {
        match self.present(column)? {
            Some(value) => decode(value).map_err(|message| decode_error(column, message)),
            None => Err(decode_error(column, "unexpected NULL".to_owned())),
        }
    }

    fn optional<'r, T>(
        &'r self,
        column: &str,
        decode: impl FnOnce(&'r Value) -> Result<T, String>,
    ) -> Result<Option<T>, sqlx::Error> {
        self.present(column)?
            .map(|value| decode(value).map_err(|message| decode_error(column, message)))
            .transpose()
    }
}

fn decode_error(column: &str, message: String) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: message.into(),
    }
}

fn int(value: &Value) -> Result<i64, String> {
    match value {
        Value::Integer(value) => Ok(*value),
        // SQLite's own conversion of a REAL to an integer: truncation.
        #[allow(clippy::cast_possible_truncation)]
        Value::Real(value) => Ok(*value as i64),
        Value::Text(text) => text
            .trim()
            .parse()
            .map_err(|_| format!("not an integer: {text}")),
        Value::Null | Value::Blob(_) => Err("not an integer".to_owned()),
    }
}

fn text(value: &Value) -> Result<String, String> {
    match value {
        Value::Text(text) => Ok(text.clone()),
        Value::Integer(value) => Ok(value.to_string()),
        Value::Real(value) => Ok(value.to_string()),
        Value::Blob(bytes) => String::from_utf8(bytes.clone()).map_err(|error| error.to_string()),
        Value::Null => Err("unexpected NULL".to_owned()),
    }
}

fn uuid(value: &Value) -> Result<Uuid, String> {
    Uuid::parse_str(&text(value)?).map_err(|error| error.to_string())
}

/// A time as sqlx reads one from SQLite: RFC 3339 text (what Ferric writes), SQLite's own
/// `YYYY-MM-DD HH:MM:SS[.fff]` in UTC, or Unix seconds.
fn time(value: &Value) -> Result<DateTime<Utc>, String> {
    if let Value::Integer(seconds) = value {
        return Utc
            .timestamp_opt(*seconds, 0)
            .single()
            .ok_or_else(|| format!("not a time: {seconds}"));
    }
    let text = text(value)?;
    if let Ok(time) = DateTime::parse_from_rfc3339(&text) {
        return Ok(time.with_timezone(&Utc));
    }
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(&text, format).ok())
    .map(|naive| Utc.from_utc_datetime(&naive))
    .ok_or_else(|| format!("not a time: {text}"))
}

fn json<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, String> {
    let parsed = match value {
        Value::Blob(bytes) => serde_json::from_slice(bytes),
        value => serde_json::from_str(&text(value)?),
    };
    parsed.map_err(|error| error.to_string())
}

impl DbRow for LocalRow {
    fn int(&self, column: &str) -> Result<i64, sqlx::Error> {
        self.required(column, int)
    }
    fn bool(&self, column: &str) -> Result<bool, sqlx::Error> {
        self.required(column, |value| int(value).map(|value| value != 0))
    }
    fn opt_bool(&self, column: &str) -> Result<Option<bool>, sqlx::Error> {
        self.optional(column, |value| int(value).map(|value| value != 0))
    }
    fn text(&self, column: &str) -> Result<String, sqlx::Error> {
        self.required(column, text)
    }
    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error> {
        self.optional(column, text)
    }
    fn uuid(&self, column: &str) -> Result<Uuid, sqlx::Error> {
        self.required(column, uuid)
    }
    fn opt_uuid(&self, column: &str) -> Result<Option<Uuid>, sqlx::Error> {
        self.optional(column, uuid)
    }
    fn time(&self, column: &str) -> Result<DateTime<Utc>, sqlx::Error> {
        self.required(column, time)
    }
    fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        self.optional(column, time)
    }
    fn json_object(&self, column: &str) -> Result<JsonObject, sqlx::Error> {
        self.required(column, json)
    }
    fn json_list(&self, column: &str) -> Result<Vec<String>, sqlx::Error> {
        self.required(column, json)
    }
    fn json_value(&self, column: &str) -> Result<serde_json::Value, sqlx::Error> {
        self.required(column, json)
    }
}

/// A failed SQLite call, as sqlx's SQLite driver reports one (its extended result code as the
/// error's code), so that `error.rs` classifies it the same.
#[derive(Debug)]
struct SqliteFailure {
    code: i32,
    message: String,
}

impl std::fmt::Display for SqliteFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for SqliteFailure {}

impl sqlx::error::DatabaseError for SqliteFailure {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(self.code.to_string().into())
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> sqlx::error::ErrorKind {
        use sqlx::error::ErrorKind;
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// Whether `error` is SQLite refusing a row (a constraint), which leaves the connection as it
/// was; anything else drops the connection, to be opened afresh by the next write.
pub(crate) fn is_constraint(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == ffi::SQLITE_CONSTRAINT)
}

fn failure(error: rusqlite::Error) -> sqlx::Error {
    match error {
        rusqlite::Error::SqliteFailure(failure, message) => {
            sqlx::Error::Database(Box::new(SqliteFailure {
                code: failure.extended_code,
                message: message.unwrap_or_else(|| failure.to_string()),
            }))
        }
        other => protocol(other.to_string()),
    }
}

fn protocol(message: String) -> sqlx::Error {
    sqlx::Error::Protocol(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_at_semicolons_outside_quotes() {
        let parts: Vec<&str> = statements("BEGIN; INSERT INTO t VALUES ('a;b', \"c;\"); COMMIT;")
            .map(str::trim)
            .collect();
        assert_eq!(
            parts,
            ["BEGIN", "INSERT INTO t VALUES ('a;b', \"c;\")", "COMMIT"]
        );
    }

    #[test]
    fn times_read_back_in_every_form_sqlite_keeps() {
        let expected = Utc.with_ymd_and_hms(2026, 11, 28, 12, 30, 5).unwrap();
        for stored in [
            Value::Text("2026-11-28T12:30:05+00:00".into()),
            Value::Text("2026-11-28 12:30:05".into()),
            Value::Text("2026-11-28 12:30:05.000".into()),
            Value::Integer(expected.timestamp()),
        ] {
            assert_eq!(time(&stored), Ok(expected), "{stored:?}");
        }
        assert!(time(&Value::Text("yesterday".into())).is_err());
    }
}
