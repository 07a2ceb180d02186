//! Raw SQL, generic over tables: a database migrated to exactly version N, its tables and
//! columns, every row rendered as SQL literals (for the fixture files and the row-by-row
//! comparison), on both backends.
//!
//! Values are rendered by the database itself (`quote()` on SQLite, `quote_nullable()` on
//! PostgreSQL, in UTC), so a fixture's `INSERT` reproduces exactly what was stored, and a
//! before/after comparison sees any change to any stored byte.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use sqlx::migrate::Migrator;
use sqlx::{Connection, Row};

/// The two backends, with what differs between their SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    fn quote(self) -> &'static str {
        match self {
            Self::Sqlite => "quote",
            Self::Postgres => "quote_nullable",
        }
    }
}

/// One table's rows as `column → SQL literal`, in primary-key order.
pub(crate) type Rows = Vec<BTreeMap<String, String>>;

/// A connection to either backend.
pub(crate) enum Conn {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Conn {
    pub(crate) async fn open(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Sqlite => Self::Sqlite(sqlx::SqliteConnection::connect(url).await.unwrap()),
            Backend::Postgres => {
                let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::raw_sql("SET TIME ZONE 'UTC'")
                    .execute(&mut connection)
                    .await
                    .unwrap();
                Self::Postgres(connection)
            }
        }
    }

    fn backend(&self) -> Backend {
        match self {
            Self::Sqlite(_) => Backend::Sqlite,
            Self::Postgres(_) => Backend::Postgres,
        }
    }

    pub(crate) async fn close(self) {
        match self {
            Self::Sqlite(connection) => connection.close().await.unwrap(),
            Self::Postgres(connection) => connection.close().await.unwrap(),
        }
    }

    /// Runs a script of statements.
    pub(crate) async fn execute_script(&mut self, sql: &str) {
        let done = match self {
            Self::Sqlite(connection) => sqlx::raw_sql(sql).execute(connection).await.map(drop),
            Self::Postgres(connection) => sqlx::raw_sql(sql).execute(connection).await.map(drop),
        };
        done.unwrap_or_else(|error| panic!("{error}\nin the script:\n{sql}"));
    }

    /// Every row's columns as text (the query must select text only).
    async fn text_rows(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        match self {
            Self::Sqlite(connection) => sqlx::query(sql)
                .fetch_all(connection)
                .await
                .unwrap()
                .iter()
                .map(|row| (0..row.len()).map(|at| row.get(at)).collect())
                .collect(),
            Self::Postgres(connection) => sqlx::query(sql)
                .fetch_all(connection)
                .await
                .unwrap()
                .iter()
                .map(|row| (0..row.len()).map(|at| row.get(at)).collect())
                .collect(),
        }
    }

    /// Applies the migrations in `dir` up to and including `version`, as a database that
    /// release left behind.
    pub(crate) async fn migrate_to(&mut self, dir: &Path, version: i64) {
        let mut migrator = Migrator::new(dir).await.unwrap();
        let kept: Vec<_> = migrator
            .iter()
            .filter(|migration| migration.version <= version)
            .cloned()
            .collect();
        migrator.migrations = Cow::Owned(kept);
        match self {
            Self::Sqlite(connection) => migrator.run(connection).await.unwrap(),
            Self::Postgres(connection) => migrator.run(connection).await.unwrap(),
        }
    }

    /// The tables (without sqlx's bookkeeping), in creation order, which is also an order
    /// that satisfies the foreign keys.
    pub(crate) async fn tables(&mut self) -> Vec<String> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
                 AND name <> '_sqlx_migrations' ORDER BY rowid"
            }
            Backend::Postgres => {
                "SELECT c.relname::text FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public' AND c.relkind = 'r' \
                 AND c.relname <> '_sqlx_migrations' ORDER BY c.oid"
            }
        };
        self.text_rows(sql)
            .await
            .into_iter()
            .map(|row| row[0].clone().unwrap())
            .collect()
    }

    /// A table's columns in declaration order, each with whether it is an identity column.
    pub(crate) async fn columns(&mut self, table: &str) -> Vec<(String, bool)> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                format!("SELECT name, 'NO' FROM pragma_table_info('{table}') ORDER BY cid")
            }
            Backend::Postgres => format!(
                "SELECT column_name::text, is_identity::text FROM information_schema.columns \
                 WHERE table_schema = 'public' AND table_name = '{table}' \
                 ORDER BY ordinal_position"
            ),
        };
        self.text_rows(&sql)
            .await
            .into_iter()
            .map(|row| (row[0].clone().unwrap(), row[1].as_deref() == Some("YES")))
            .collect()
    }

    /// The rows of `table`, limited to `columns`, rendered as SQL literals.
    pub(crate) async fn rows(&mut self, table: &str, columns: &[String]) -> Rows {
        let quote = self.backend().quote();
        let selected: Vec<String> = columns
            .iter()
            .map(|column| format!("{quote}(\"{column}\")"))
            .collect();
        // Ordered by the stored values, not the literals (ids sort as numbers); the first
        // two columns are the primary key (`id`, `node_uuid`, or `node_uuid` + a name).
        let order: Vec<String> = columns
            .iter()
            .take(2)
            .map(|column| format!("\"{column}\""))
            .collect();
        let sql = format!(
            "SELECT {} FROM \"{table}\" ORDER BY {}",
            selected.join(", "),
            order.join(", ")
        );
        self.text_rows(&sql)
            .await
            .into_iter()
            .map(|row| {
                columns
                    .iter()
                    .cloned()
                    .zip(row.into_iter().map(|value| value.unwrap_or_default()))
                    .collect()
            })
            .collect()
    }

    /// Every table's rows with every column.
    pub(crate) async fn snapshot(&mut self) -> BTreeMap<String, Rows> {
        let mut tables = BTreeMap::new();
        for table in self.tables().await {
            let columns: Vec<String> = self
                .columns(&table)
                .await
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            let rows = self.rows(&table, &columns).await;
            tables.insert(table, rows);
        }
        tables
    }
}

/// The `INSERT`s that put `source`'s rows into a database at the schema `target` has: only
/// the tables and columns `target` has, tables in `source`'s creation order.
pub(crate) async fn dump_for(source: &mut Conn, target: &mut Conn) -> String {
    let backend = source.backend();
    let target_tables = target.tables().await;
    let mut script = String::new();
    for table in source.tables().await {
        if !target_tables.contains(&table) {
            continue;
        }
        let columns = target.columns(&table).await;
        let names: Vec<String> = columns.iter().map(|(name, _)| name.clone()).collect();
        let identity = columns.iter().find(|(_, identity)| *identity);
        let overriding = if identity.is_some() {
            " OVERRIDING SYSTEM VALUE"
        } else {
            ""
        };
        let rows = source.rows(&table, &names).await;
        for row in &rows {
            let values: Vec<&str> = names.iter().map(|name| row[name].as_str()).collect();
            script.push_str(&format!(
                "INSERT INTO {table} ({}){overriding} VALUES ({});\n",
                names.join(", "),
                values.join(", ")
            ));
        }
        if let (Some((column, _)), false) = (identity, rows.is_empty()) {
            // Later inserts must not collide with the explicit ids.
            script.push_str(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), \
                 (SELECT max({column}) FROM {table}));\n"
            ));
        }
    }
    debug_assert!(backend == target.backend());
    script
}
