//! Fresh databases for tests of Ferric's crates (storage, API, conductor): a SQLite file in a temporary directory, or a PostgreSQL database
//! with a unique name created through the admin URL in `FERRIC_TEST_POSTGRES_URL` and dropped
//! again when the test ends, whether it passed or not.
//!
//! PostgreSQL being unreachable fails the PostgreSQL tests loudly: a suite that quietly skips
//! half its backends would pass while PostgreSQL support rots.

use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::Store;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A store on a database of its own, removed when dropped.
pub struct TestDb {
    pub store: Store,
    // Dropped after `store`: the file or database outlives the pool that uses it.
    _sqlite: Option<SqliteFile>,
    _postgres: Option<PgDatabase>,
}

impl TestDb {
    pub async fn sqlite() -> Self {
        let file = SqliteFile::new();
        let store = Store::open(&file.url())
            .await
            .expect("open the SQLite test database");
        Self {
            store,
            _sqlite: Some(file),
            _postgres: None,
        }
    }

    pub async fn postgres() -> Self {
        let database = PgDatabase::create().await;
        let store = Store::open(&database.url)
            .await
            .expect("open the PostgreSQL test database");
        Self {
            store,
            _sqlite: None,
            _postgres: Some(database),
        }
    }
}

/// A SQLite file in a temporary directory. Kept (and its path printed) when the test fails, so
/// the reader can open it with `sqlite3`.
pub struct SqliteFile {
    dir: Option<tempfile::TempDir>,
}

impl Default for SqliteFile {
    fn default() -> Self {
        Self::new()
    }
}

impl SqliteFile {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ferric-db-test-")
            .tempdir()
            .expect("tempdir");
        Self { dir: Some(dir) }
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir
            .as_ref()
            .expect("tempdir present until drop")
            .path()
            .join("ferric.db")
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}?mode=rwc", self.path().display())
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            let kept = dir.keep();
            eprintln!(
                "test failed; its SQLite database is kept at {}",
                kept.join("ferric.db").display()
            );
        }
    }
}

/// A PostgreSQL database with a unique name, dropped (connections and all) on drop.
pub struct PgDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl PgDatabase {
    pub async fn create() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let admin_url = std::env::var("FERRIC_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
        let name = format!(
            "ferric_test_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let mut admin = admin_connect(&admin_url).await;
        sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|error| panic!("cannot create test database {name}: {error}"));
        // An odd time zone for the session default, so a timestamp that only round-trips in
        // UTC shows up as a failure.
        sqlx::raw_sql(&format!(
            "ALTER DATABASE {name} SET timezone TO 'Asia/Kathmandu'"
        ))
        .execute(&mut admin)
        .await
        .expect("set the test database's time zone");
        let _ = admin.close().await;
        let url = database_url(&admin_url, &name);
        Self {
            admin_url,
            name,
            url,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Drop cannot await; do it on a runtime of its own, on a thread of its own, so this
        // works from inside the test's runtime and while a failed test unwinds.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await?;
                sqlx::raw_sql(&sql).execute(&mut admin).await?;
                admin.close().await
            })?;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "could not drop test database {}; drop it by hand",
                self.name
            );
        }
    }
}

/// Connects to the admin database, or fails the test with what to do about it.
pub async fn admin_connect(admin_url: &str) -> PgConnection {
    let options = PgConnectOptions::from_str(admin_url).unwrap_or_else(|error| {
        panic!("FERRIC_TEST_POSTGRES_URL={admin_url} is not a PostgreSQL URL: {error}")
    });
    let connected = tokio::time::timeout(
        Duration::from_secs(10),
        PgConnection::connect_with(&options),
    )
    .await;
    match connected {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => panic!("{}", unreachable_message(admin_url, &error.to_string())),
        Err(_) => panic!("{}", unreachable_message(admin_url, "timed out after 10 s")),
    }
}

fn unreachable_message(admin_url: &str, error: &str) -> String {
    format!(
        "PostgreSQL is not reachable at {admin_url} ({error}).\n\
         The storage tests run on both SQLite and PostgreSQL and do not skip either. Run them \
         with the project's test command, `cargo xtask test`, which installs and starts \
         PostgreSQL; or point FERRIC_TEST_POSTGRES_URL at an admin connection URL of a running \
         PostgreSQL server (default {DEFAULT_POSTGRES_URL})."
    )
}

/// `admin_url` with its database name replaced by `database`.
fn database_url(admin_url: &str, database: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (admin_url, String::new()),
    };
    let authority_start = base.find("://").map_or(0, |at| at + 3);
    let host_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |at| authority_start + at);
    format!("{}/{database}{query}", &base[..host_end])
}

#[cfg(test)]
#[test]
fn database_urls_replace_only_the_database() {
    assert_eq!(
        database_url("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
        "postgres://postgres@127.0.0.1:5432/t1"
    );
    assert_eq!(
        database_url("postgres://u:p@h/db?sslmode=disable", "t2"),
        "postgres://u:p@h/t2?sslmode=disable"
    );
    assert_eq!(database_url("postgres://h", "t3"), "postgres://h/t3");
}
