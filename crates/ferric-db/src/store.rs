//! [`Store`]: the handle every other crate holds, opened from a URL, with the connection pool
//! for whichever backend the URL names.
//!
//! Theory of operation: a `Store` is an enum over the two sqlx pools. Resource modules
//! (`nodes.rs`, `ports.rs`, …) never look inside it; they pass SQL text and [`Arg`]s to the three
//! helpers at the bottom of this file ([`Store::fetch_optional`], [`Store::fetch_all`],
//! [`Store::execute`]), which are the only place the `on_pool!` macro expands the same code once
//! per backend. So there is one copy of every query, and a backend difference lives here or in
//! the migrations, not scattered through the resource code.
//!
//! Every operation is a single statement in autocommit mode (two exceptions, a pair of
//! statements in one transaction: [`Store::execute_then`], for abort requests, and
//! [`Store::fetch_optional_then`], a node's state change with its history entry; on SQLite
//! every statement that may write first takes the process's write turn, `write_turn`): nothing holds a transaction
//! open across anything but SQL, let alone across a BMC or network call. Races between writers are settled by
//! the statements themselves (revision-guarded `UPDATE`s, compare-and-set lease upserts).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::{Error, backend, redact};
use crate::schema::SchemaPolicy;
use crate::sql::{Arg, BindArgs, DbRow, db_time};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// How long a SQLite connection may sit idle in the pool before it is closed.
const SQLITE_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Maps one row to a record; written once per resource against [`DbRow`].
pub(crate) type RowMapper<T> = fn(&dyn DbRow) -> Result<T, sqlx::Error>;

/// Connection settings; the defaults suit both the all-in-one server and a conductor.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Pool size. Default: 4 on SQLite (WAL lets readers run beside the one writer; more
    /// connections would only queue on the write lock), 10 on PostgreSQL.
    pub max_connections: Option<u32>,
    /// How long a caller waits for a free connection before the operation fails.
    pub acquire_timeout: Duration,
    /// SQLite only: how long a writer waits for another writer to finish.
    pub busy_timeout: Duration,
    /// What opening does with a schema that is behind this binary's (`schema.rs`).
    pub schema: SchemaPolicy,
    /// SQLite only: when a commit reaches the disk (ARCHITECTURE.md, "Durability on SQLite").
    pub sqlite_sync: SqliteSync,
}

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

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: None,
            acquire_timeout: Duration::from_secs(10),
            busy_timeout: Duration::from_secs(10),
            schema: SchemaPolicy::Upgrade,
            sqlite_sync: SqliteSync::default(),
        }
    }
}

/// Ferric's storage. Cheap to clone: clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Store {
    pool: Pool,
    /// SQLite only: taken by every statement that may write, so this process's writers queue
    /// here and hand over at once instead of meeting SQLite's busy lock, whose handler sleeps
    /// (1, 2, 5, 10 … ms) and leaves the database idle meanwhile (`docs/benchmarks.md`).
    writer: Option<Arc<tokio::sync::Mutex<()>>>,
}

#[derive(Debug, Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Expands `$body` once per backend with `$pool` bound to that backend's pool. The body is
/// type-checked separately for each, so it may use anything both drivers implement.
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

impl Store {
    /// Opens the database `url` names and brings its schema up to date (refusing one that a
    /// newer Ferric upgraded: [`Error::SchemaTooNew`]).
    ///
    /// - `postgres://user@host:port/db` (or `postgresql://`) → PostgreSQL;
    /// - `sqlite://path?mode=rwc`, `sqlite:path`, `sqlite::memory:` → SQLite;
    /// - anything else is a path to a SQLite file, created if missing.
    ///
    /// SQLite files are opened in WAL mode with foreign keys on and a busy timeout, so readers
    /// never block the writer and concurrent writers wait instead of failing.
    pub async fn open(url: &str) -> Result<Self, Error> {
        Self::open_with(url, &StoreOptions::default()).await
    }

    /// [`Store::open`] with explicit connection settings and schema policy.
    pub async fn open_with(url: &str, options: &StoreOptions) -> Result<Self, Error> {
        let store = Self::connect(url, options).await?;
        if let Err(error) = store.apply_schema_policy(options.schema).await {
            store.close().await;
            return Err(error);
        }
        tracing::debug!(backend = store.backend_name(), location = %redact(url), "database open");
        Ok(store)
    }

    /// Opens a SQLite file that nobody else writes (a backup) read-only and as it is: no
    /// journal mode change, no `-wal`/`-shm` files beside it, the schema untouched. For
    /// [`Store::integrity_check`] and [`Store::schema_status`] before a restore.
    pub async fn open_sqlite_file_read_only(path: &std::path::Path) -> Result<Self, Error> {
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .immutable(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(connect)
            .await
            .map_err(|source| Error::Open {
                location: path.display().to_string(),
                source,
            })?;
        Ok(Self {
            pool: Pool::Sqlite(pool),
            writer: None,
        })
    }

    /// The migrations compiled into this binary for this store's backend.
    pub(crate) fn migrator(&self) -> &'static Migrator {
        match self.pool {
            Pool::Sqlite(_) => &SQLITE_MIGRATIONS,
            Pool::Postgres(_) => &POSTGRES_MIGRATIONS,
        }
    }

    /// Applies every migration the database lacks (sqlx's migrator; `schema_upgrade` checks
    /// first that the database is not newer).
    pub(crate) async fn run_migrations(&self) -> Result<(), Error> {
        let migrator = self.migrator();
        let backend = self.backend_name();
        on_pool!(self, pool => migrator.run(pool).await)
            .map_err(|source| Error::Migrate { backend, source })
    }

    /// Connects: the pool only, the schema untouched.
    async fn connect(url: &str, options: &StoreOptions) -> Result<Self, Error> {
        let open_error = |source| Error::Open {
            location: redact(url),
            source,
        };
        let store = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let connect = PgConnectOptions::from_str(url).map_err(open_error)?;
            let pool = PgPoolOptions::new()
                .max_connections(options.max_connections.unwrap_or(10))
                .acquire_timeout(options.acquire_timeout)
                .connect_with(connect)
                .await
                .map_err(open_error)?;
            Self {
                pool: Pool::Postgres(pool),
                writer: None,
            }
        } else {
            let (connect, in_memory) = if url.starts_with("sqlite:") {
                let mut connect = SqliteConnectOptions::from_str(url).map_err(open_error)?;
                // Like a bare path, a URL without an explicit `mode=` creates a missing file:
                // `sqlite://ferric.db` is the server's default and must work on first start.
                if !url.contains("mode=") {
                    connect = connect.create_if_missing(true);
                }
                (
                    connect,
                    url.contains(":memory:") || url.contains("mode=memory"),
                )
            } else {
                (
                    SqliteConnectOptions::new()
                        .filename(url)
                        .create_if_missing(true),
                    false,
                )
            };
            let connect = connect
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(match options.sqlite_sync {
                    SqliteSync::Normal => SqliteSynchronous::Normal,
                    SqliteSync::Full => SqliteSynchronous::Full,
                })
                .foreign_keys(true)
                .busy_timeout(options.busy_timeout)
                // SQLite's default page cache is 2 MB per connection; the listings' rows are
                // read from the OS's file cache anyway, so 1 MiB (every B-tree interior page
                // up to ~40,000 nodes) is enough, and 1 MiB less per pooled connection.
                .pragma("cache_size", "-1024");
            // An in-memory database lives as long as its one connection: keep exactly one.
            let max_connections = if in_memory {
                1
            } else {
                options.max_connections.unwrap_or(4)
            };
            let mut pool_options = SqlitePoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(options.acquire_timeout);
            if in_memory {
                pool_options = pool_options
                    .min_connections(1)
                    .idle_timeout(None)
                    .max_lifetime(None);
            } else {
                // Each connection keeps a page cache and its prepared statements (megabytes
                // after a walk over every node): connections left idle are closed, so an idle
                // server gives that memory back (issue 26; docs/benchmarks.md).
                pool_options = pool_options.idle_timeout(SQLITE_IDLE_TIMEOUT);
            }
            let pool = pool_options
                .connect_with(connect)
                .await
                .map_err(open_error)?;
            Self {
                pool: Pool::Sqlite(pool),
                writer: Some(Arc::new(tokio::sync::Mutex::new(()))),
            }
        };
        Ok(store)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite(_) => "sqlite",
            Pool::Postgres(_) => "postgres",
        }
    }

    /// Checks that the database answers (for health checks).
    pub async fn ping(&self) -> Result<(), Error> {
        self.execute("SELECT 1", &[])
            .await
            .map(drop)
            .map_err(backend("ping"))
    }

    /// A connection listening for notifications on `channels`; `None` on SQLite, which has
    /// no notifications (and needs none: one process runs every role there).
    pub async fn listen(&self, channels: &[&str]) -> Result<Option<Listener>, Error> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(None);
        };
        let mut listener = sqlx::postgres::PgListener::connect_with(pool)
            .await
            .map_err(backend("listen"))?;
        listener
            .listen_all(channels.iter().copied())
            .await
            .map_err(backend("listen"))?;
        Ok(Some(Listener { listener }))
    }

    /// Closes every connection; waits for those in use to be returned.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await);
    }

    /// The store's clock: now, at the precision the database keeps.
    ///
    /// TODO-correctness: lease expiry compares times written by different hosts' clocks, so
    /// conductors need synchronised clocks (NTP); skew eats into the lease TTL.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        db_time(Utc::now())
    }

    /// On SQLite, the turn to write for a statement that may write (`None`: go ahead).
    async fn write_turn(&self, sql: &str) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let writer = self.writer.as_ref()?;
        let verb = sql.split_whitespace().next().unwrap_or_default();
        let reads = ["SELECT", "PRAGMA", "VACUUM"]
            .iter()
            .any(|read| verb.eq_ignore_ascii_case(read));
        if reads {
            return None;
        }
        Some(writer.lock().await)
    }

    /// Runs `sql` and maps the first row, if any.
    pub(crate) async fn fetch_optional<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        map: RowMapper<T>,
    ) -> Result<Option<T>, sqlx::Error> {
        let _turn = self.write_turn(sql).await;
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind_args(args).fetch_optional(pool).await?;
            row.map(|row| map(&row)).transpose()
        })
    }

    /// Runs `sql` and maps every row.
    pub(crate) async fn fetch_all<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        map: RowMapper<T>,
    ) -> Result<Vec<T>, sqlx::Error> {
        let _turn = self.write_turn(sql).await;
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind_args(args).fetch_all(pool).await?;
            rows.iter().map(|row| map(row)).collect()
        })
    }

    /// [`Store::fetch_all`] with a mapper that carries state (which columns were selected).
    pub(crate) async fn fetch_all_with<T, F>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        map: F,
    ) -> Result<Vec<T>, sqlx::Error>
    where
        F: Fn(&dyn DbRow) -> Result<T, sqlx::Error>,
    {
        let _turn = self.write_turn(sql).await;
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind_args(args).fetch_all(pool).await?;
            rows.iter().map(|row| map(row)).collect()
        })
    }

    /// Runs `sql` and returns how many rows it changed.
    pub(crate) async fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        let _turn = self.write_turn(sql).await;
        on_pool!(self, pool => {
            Ok(sqlx::query(sql).bind_args(args).execute(pool).await?.rows_affected())
        })
    }

    /// Runs `first` and, only if it returned a row, `then`, in one transaction (SQL only
    /// inside, nothing else awaited): a write and the record of it commit together, one
    /// commit instead of two. Returns `first`'s row, `None` if it had none (and so nothing ran).
    pub(crate) async fn fetch_optional_then<T>(
        &self,
        first: (&str, &[Arg<'_>], RowMapper<T>),
        then: (&str, &[Arg<'_>]),
    ) -> Result<Option<T>, sqlx::Error> {
        let _turn = self.write_turn(first.0).await;
        on_pool!(self, pool => {
            let mut transaction = pool.begin().await?;
            let row = sqlx::query(first.0)
                .bind_args(first.1)
                .fetch_optional(&mut *transaction)
                .await?;
            let Some(row) = row else {
                transaction.rollback().await?;
                return Ok(None);
            };
            let record = first.2(&row)?;
            sqlx::query(then.0).bind_args(then.1).execute(&mut *transaction).await?;
            transaction.commit().await?;
            Ok(Some(record))
        })
    }

    /// Runs `first` and, only if it changed a row, `then`, in one transaction (SQL only inside,
    /// nothing else awaited). Returns whether `first` changed a row (and so both ran).
    pub(crate) async fn execute_then(
        &self,
        first: (&str, &[Arg<'_>]),
        then: (&str, &[Arg<'_>]),
    ) -> Result<bool, sqlx::Error> {
        let _turn = self.write_turn(first.0).await;
        on_pool!(self, pool => {
            let mut transaction = pool.begin().await?;
            let changed = sqlx::query(first.0)
                .bind_args(first.1)
                .execute(&mut *transaction)
                .await?
                .rows_affected();
            if changed == 0 {
                transaction.rollback().await?;
                return Ok(false);
            }
            sqlx::query(then.0).bind_args(then.1).execute(&mut *transaction).await?;
            transaction.commit().await?;
            Ok(true)
        })
    }
}

/// A PostgreSQL connection that receives `NOTIFY`s (see `requests.rs`).
#[derive(Debug)]
pub struct Listener {
    listener: sqlx::postgres::PgListener,
}

impl Listener {
    /// The next notification as `(channel, payload)`. After a lost connection it reconnects
    /// and returns `Ok(None)`: notifications sent meanwhile are lost, so callers poll too.
    pub async fn recv(&mut self) -> Result<Option<(String, String)>, Error> {
        let notification = self.listener.try_recv().await.map_err(backend("listen"))?;
        Ok(notification.map(|notification| {
            (
                notification.channel().to_owned(),
                notification.payload().to_owned(),
            )
        }))
    }
}
