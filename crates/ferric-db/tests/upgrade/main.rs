//! Upgrades lose nothing: for every migration in `migrations/<backend>/`, a database left at
//! that schema version and populated (`tests/fixtures/<backend>/NNNN.sql`) is upgraded by
//! this code, then checked twice:
//!
//! 1. row by row in SQL: every row of every table the fixture filled is still there with
//!    every column's value unchanged (`rows.rs` renders values as the database's own
//!    literals, so any change to a stored value shows);
//! 2. through the Store API: everything it reads (`dataset::read_all`) equals, field by
//!    field, what it read when the fixture was made (`NNNN.expected.json`); fields added since
//!    are listed but allowed.
//!
//! Fixtures are generated once per migration and then never touched: a fixture stands for a
//! database written by the release that introduced its migration. When a migration is added,
//! extend `dataset.rs` to fill what it adds and run
//! `FERRIC_UPDATE_FIXTURES=1 cargo test -p ferric-db --test upgrade`: it writes the fixtures
//! that are missing (from the canonical dataset, restricted to the tables and columns that
//! version has) and their expected reads, and leaves existing ones alone. The fixtures of
//! 0001–0005 were made this way from the 0006 code, when this test was written.
//!
//! `versions.rs` checks the refusals around the version and the SQLite backup.

#![allow(clippy::unwrap_used)] // reason: a failed unwrap is the test's failure report

mod dataset;
mod rows;
mod versions;

use std::path::{Path, PathBuf};

use ferric_db::Store;
use ferric_db::testing::{PgDatabase, SqliteFile};
use serde_json::Value;

use crate::rows::{Backend, Conn};

fn migrations_dir(backend: Backend) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend.name())
}

fn fixture_path(backend: Backend, version: i64, extension: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(backend.name())
        .join(format!("{version:04}.{extension}"))
}

/// The versions of the migrations in the directory: `0006_volume.sql` → 6.
fn versions(backend: Backend) -> Vec<i64> {
    let mut versions: Vec<i64> = std::fs::read_dir(migrations_dir(backend))
        .unwrap()
        .filter_map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let (number, _) = name.split_once('_')?;
            number.parse().ok()
        })
        .collect();
    versions.sort_unstable();
    assert!(!versions.is_empty(), "no migrations found");
    versions
}

/// A fresh, empty database of the backend, removed when dropped.
enum Scratch {
    Sqlite(SqliteFile),
    Postgres(PgDatabase),
}

impl Scratch {
    async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => Self::Sqlite(SqliteFile::new()),
            Backend::Postgres => Self::Postgres(PgDatabase::create().await),
        }
    }

    fn url(&self) -> String {
        match self {
            Self::Sqlite(file) => file.url(),
            Self::Postgres(database) => database.url.clone(),
        }
    }
}

/// A database at schema `version` holding the fixture, upgraded by the current code: its rows
/// before and after, and what the Store API reads from it.
struct Upgraded {
    before: std::collections::BTreeMap<String, rows::Rows>,
    after: std::collections::BTreeMap<String, rows::Rows>,
    read: Value,
    _database: Scratch,
}

async fn upgrade_fixture(backend: Backend, version: i64, fixture: &str) -> Upgraded {
    let database = Scratch::new(backend).await;
    let url = database.url();
    let mut conn = Conn::open(backend, &url).await;
    conn.migrate_to(&migrations_dir(backend), version).await;
    conn.execute_script(fixture).await;
    let before = conn.snapshot().await;
    conn.close().await;

    let store = Store::open(&url).await.unwrap();
    let status = store.schema_status().await.unwrap();
    assert!(
        status.is_current(),
        "after the upgrade from {version}: {status:?}"
    );
    let read = dataset::read_all(&store).await;
    store.close().await;

    let mut conn = Conn::open(backend, &url).await;
    let after = conn.snapshot().await;
    conn.close().await;
    Upgraded {
        before,
        after,
        read,
        _database: database,
    }
}

/// Writes the fixture and expected reads of every version that has none.
async fn generate_missing(backend: Backend) {
    let canonical = Scratch::new(backend).await;
    let store = Store::open(&canonical.url()).await.unwrap();
    dataset::populate(&store).await;
    let canonical_read = dataset::read_all(&store).await;
    store.close().await;
    let latest = *versions(backend).last().unwrap();
    for version in versions(backend) {
        let sql_path = fixture_path(backend, version, "sql");
        if sql_path.exists() {
            continue;
        }
        let target = Scratch::new(backend).await;
        let mut target_conn = Conn::open(backend, &target.url()).await;
        target_conn
            .migrate_to(&migrations_dir(backend), version)
            .await;
        let mut source_conn = Conn::open(backend, &canonical.url()).await;
        let inserts = rows::dump_for(&mut source_conn, &mut target_conn).await;
        source_conn.close().await;
        target_conn.close().await;
        let script = format!(
            "-- A {} database at schema version {version}, populated: the canonical dataset of\n\
             -- crates/ferric-db/tests/upgrade/dataset.rs as that version's tables hold it.\n\
             -- Generated by FERRIC_UPDATE_FIXTURES=1 cargo test -p ferric-db --test upgrade;\n\
             -- never edit or regenerate it: it stands for what that release wrote.\n{inserts}",
            backend.name()
        );
        std::fs::create_dir_all(sql_path.parent().unwrap()).unwrap();
        std::fs::write(&sql_path, &script).unwrap();

        let upgraded = upgrade_fixture(backend, version, &script).await;
        if version == latest {
            // The dump and load lose nothing themselves: at the latest version the fixture
            // reads back exactly as the dataset written through the Store API.
            assert_eq!(
                upgraded.read, canonical_read,
                "the fixture does not reproduce the dataset"
            );
        }
        let expected = serde_json::to_string_pretty(&upgraded.read).unwrap() + "\n";
        std::fs::write(fixture_path(backend, version, "expected.json"), expected).unwrap();
        eprintln!("wrote {}", sql_path.display());
    }
}

/// Differences between what was read when the fixture was made and what is read now: every
/// expected record and field must be there, equal; a record may have gained fields.
fn compare(path: &str, expected: &Value, actual: &Value, depth: usize, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => {
            for (key, value) in expected {
                match actual.get(key) {
                    Some(found) => compare(&format!("{path}.{key}"), value, found, depth + 1, out),
                    None => out.push(format!("{path}.{key}: lost (was {value})")),
                }
            }
            // Records sit at depth 2 (kind → list → record): they may gain fields, and the
            // document may gain kinds (depth 0); so may a node's lease, a record of its own
            // (its `generation` came with 0010); nothing else may appear.
            if depth != 0 && depth != 2 && !path.ends_with(".lease") {
                for key in actual.keys().filter(|key| !expected.contains_key(*key)) {
                    out.push(format!("{path}.{key}: appeared"));
                }
            }
        }
        (Value::Array(expected), Value::Array(actual)) if expected.len() == actual.len() => {
            for (at, (value, found)) in expected.iter().zip(actual).enumerate() {
                compare(&format!("{path}[{at}]"), value, found, depth + 1, out);
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!("{path}: expected {expected}, found {actual}")),
    }
}

async fn every_schema_upgrades_losing_nothing(backend: Backend) {
    if std::env::var_os("FERRIC_UPDATE_FIXTURES").is_some() {
        generate_missing(backend).await;
    }
    for version in versions(backend) {
        let sql_path = fixture_path(backend, version, "sql");
        let fixture = std::fs::read_to_string(&sql_path).unwrap_or_else(|_| {
            panic!(
                "no fixture for migration {version:04} on {}: extend tests/upgrade/dataset.rs \
                 to fill what it adds, then run FERRIC_UPDATE_FIXTURES=1 cargo test -p \
                 ferric-db --test upgrade and commit tests/fixtures/",
                backend.name()
            )
        });
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture_path(backend, version, "expected.json")).unwrap(),
        )
        .unwrap();
        let upgraded = upgrade_fixture(backend, version, &fixture).await;

        // 1. Row by row: every value the fixture stored is still stored.
        let filled: usize = upgraded.before.values().map(Vec::len).sum();
        assert!(filled > 0, "fixture {version:04} holds no rows");
        for (table, rows) in &upgraded.before {
            let after = upgraded
                .after
                .get(table)
                .unwrap_or_else(|| panic!("upgrading from {version:04} dropped the table {table}"));
            assert_eq!(
                after.len(),
                rows.len(),
                "upgrading from {version:04} changed the number of rows in {table}"
            );
            for (row, row_after) in rows.iter().zip(after) {
                for (column, value) in row {
                    assert_eq!(
                        row_after.get(column),
                        Some(value),
                        "upgrading from {version:04} changed {table}.{column} of row {row:?}"
                    );
                }
            }
        }

        // 2. Through the Store API, field by field.
        let nodes = expected["nodes"].as_array().map_or(0, Vec::len);
        assert!(
            nodes >= 30,
            "fixture {version:04}: a node per provision state"
        );
        let mut differences = Vec::new();
        compare("", &expected, &upgraded.read, 0, &mut differences);
        assert!(
            differences.is_empty(),
            "upgrading the {} fixture {version:04} lost or changed:\n  {}",
            backend.name(),
            differences.join("\n  ")
        );
    }
}

mod sqlite {
    use super::Backend::Sqlite as BACKEND;

    #[tokio::test]
    async fn every_schema_upgrades_losing_nothing() {
        super::every_schema_upgrades_losing_nothing(BACKEND).await;
    }

    #[tokio::test]
    async fn older_schema_is_upgraded_or_refused() {
        super::versions::older_schema_is_upgraded_or_refused(BACKEND).await;
    }

    #[tokio::test]
    async fn newer_schema_is_refused() {
        super::versions::newer_schema_is_refused(BACKEND).await;
    }

    #[tokio::test]
    async fn backup_copies_a_populated_database_while_open() {
        super::versions::backup_copies_a_populated_database_while_open(BACKEND).await;
    }
}

mod postgres {
    use super::Backend::Postgres as BACKEND;

    #[tokio::test]
    async fn every_schema_upgrades_losing_nothing() {
        super::every_schema_upgrades_losing_nothing(BACKEND).await;
    }

    #[tokio::test]
    async fn older_schema_is_upgraded_or_refused() {
        super::versions::older_schema_is_upgraded_or_refused(BACKEND).await;
    }

    #[tokio::test]
    async fn newer_schema_is_refused() {
        super::versions::newer_schema_is_refused(BACKEND).await;
    }

    #[tokio::test]
    async fn backup_copies_a_populated_database_while_open() {
        super::versions::backup_copies_a_populated_database_while_open(BACKEND).await;
    }
}
