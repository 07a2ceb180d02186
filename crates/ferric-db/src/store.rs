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
//! [`Store::fetch_optional_then`], a node's state change with its history entry): nothing
//! holds a transaction open across anything but SQL, let alone across a BMC or network call.
//! Races between writers are settled by the statements themselves (revision-guarded
//! `UPDATE`s, compare-and-set lease upserts).
//!
//! SQLite's writes: SQLite has one writer at a time, so this process's writers queue for one
//! dedicated connection ([`Writer`], taken by `write_turn` for every statement that may
//! write) instead of meeting SQLite's busy lock, whose handler sleeps (1, 2, 5, 10 … ms) and
//! leaves the database idle meanwhile. That connection is not sqlx's: it is driven with
//! rusqlite on the writer's own thread while it holds the turn ([`crate::local`]), because a
//! sqlx SQLite statement is a round trip to the connection's thread, and writes paid those
//! round trips one after the other (`docs/benchmarks.md`, the fleet cycle). A write runs
//! without an `.await` from its first statement to its last, so a cancelled caller never
//! leaves half a transaction behind; a failed statement inside one rolls it back. The
//! connection is closed after [`SQLITE_IDLE_TIMEOUT`] unused, like the pool's, and opened
//! again by the next write. `SELECT`s run the same way on read connections of their own
//! ([`Local`]); `PRAGMA`s, `VACUUM`, the schema's migrations and in-memory databases (one
//! connection in all) use sqlx's pool.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::{Error, backend, redact};
use crate::local::{LocalConnection, LocalRow, Outcome, is_constraint};
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
    /// SQLite files only: the connections driven on the caller's thread (module comment).
    /// `None` on PostgreSQL, and on SQLite in memory (one connection in all) or read-only.
    local: Option<Arc<Local>>,
}

/// How many idle read connections [`Local`] keeps.
const IDLE_READERS: usize = 2;

/// SQLite's write connection, held by one writer at a time (the mutex is the write turn), and
/// the connections of `SELECT`s, taken one per read: a look-up by key is a few tens of
/// microseconds, less than a round trip to a sqlx connection's thread, and a page of 1,000
/// nodes a few milliseconds, less than sqlx took for it (its thread hands the rows over and
/// copies each value twice). A read blocks its runtime thread meanwhile; the runtime's other
/// threads take over the tasks queued there.
#[derive(Debug)]
struct Local {
    opener: Arc<Opener>,
    slot: tokio::sync::Mutex<WriterSlot>,
    readers: std::sync::Mutex<Readers>,
}

/// The database file and how to open it (the pool's settings).
#[derive(Debug)]
struct Opener {
    path: std::path::PathBuf,
    sync: SqliteSync,
    busy_timeout: Duration,
}

impl Opener {
    fn open(&self) -> Result<LocalConnection, sqlx::Error> {
        LocalConnection::open(&self.path, self.sync, self.busy_timeout)
    }
}

#[derive(Debug)]
struct Readers {
    idle: Vec<LocalConnection>,
    last_used: Instant,
    /// Set by [`Store::close`]: reads fail as they do on a closed pool.
    closed: bool,
}

impl Local {
    fn readers(&self) -> std::sync::MutexGuard<'_, Readers> {
        self.readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs the read `sql` on an idle read connection (or a new one), kept for the next read
    /// unless the read failed.
    fn read(&self, sql: &str, args: &[Arg<'_>]) -> Result<Outcome, sqlx::Error> {
        let idle = {
            let mut readers = self.readers();
            if readers.closed {
                return Err(sqlx::Error::PoolClosed);
            }
            readers.last_used = Instant::now();
            readers.idle.pop()
        };
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.opener.open()?,
        };
        let outcome = connection.run(sql, args)?;
        let mut readers = self.readers();
        if !readers.closed && readers.idle.len() < IDLE_READERS {
            readers.idle.push(connection);
        }
        Ok(outcome)
    }

    /// The write turn, once the writers before have finished with the write connection.
    async fn write_turn(&self) -> tokio::sync::MutexGuard<'_, WriterSlot> {
        self.slot.lock().await
    }
}

#[derive(Debug)]
struct WriterSlot {
    /// Open while writes come; closed after [`SQLITE_IDLE_TIMEOUT`] unused or after an error
    /// that may have left it unusable, and opened again by the next write.
    connection: Option<LocalConnection>,
    last_used: Instant,
    /// Set by [`Store::close`]: writes fail as they do on a closed pool.
    closed: bool,
    opener: Arc<Opener>,
}

impl WriterSlot {
    /// Runs `work` on the connection (opened if it is not). After an error other than a
    /// refused row, whatever transaction the error left open is rolled back and the
    /// connection dropped, to be opened afresh by the next write.
    fn with<T>(
        &mut self,
        work: impl FnOnce(&mut LocalConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, sqlx::Error> {
        if self.closed {
            return Err(sqlx::Error::PoolClosed);
        }
        self.last_used = Instant::now();
        let connection = match &mut self.connection {
            Some(connection) => connection,
            empty => empty.insert(self.opener.open()?),
        };
        let result = work(connection);
        if connection.in_transaction() {
            // A statement failed inside a transaction of ours: undo the rest of it.
            let _ = connection.batch("ROLLBACK");
        }
        if let Err(error) = &result
            && !is_constraint(error)
        {
            self.connection = None;
        }
        result
    }

    /// Runs `sql` with `args`.
    fn run(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Outcome, sqlx::Error> {
        self.with(|connection| connection.run(sql, args))
    }
}

/// Closes the local connections once they have been unused for [`SQLITE_IDLE_TIMEOUT`] (their
/// page caches and prepared statements are megabytes after a busy spell); ends with the store.
async fn close_idle_local(local: std::sync::Weak<Local>) {
    loop {
        tokio::time::sleep(SQLITE_IDLE_TIMEOUT).await;
        let Some(local) = local.upgrade() else {
            return;
        };
        {
            let mut readers = local.readers();
            if readers.last_used.elapsed() >= SQLITE_IDLE_TIMEOUT {
                readers.idle.clear();
            }
        }
        let Ok(mut slot) = local.slot.try_lock() else {
            continue;
        };
        if slot.last_used.elapsed() >= SQLITE_IDLE_TIMEOUT {
            slot.connection = None;
        }
    }
}

/// Whether `sql` is a `SELECT`, which a local read connection runs on the caller's thread;
/// `PRAGMA`s and `VACUUM` (checks, backups) take longer and go to the pool.
fn is_select(sql: &str) -> bool {
    sql.trim_start()
        .get(..6)
        .is_some_and(|verb| verb.eq_ignore_ascii_case("SELECT"))
}

/// Whether `sql` only reads (and so runs beside the writer).
fn is_read(sql: &str) -> bool {
    let verb = sql.split_whitespace().next().unwrap_or_default();
    ["SELECT", "PRAGMA", "VACUUM"]
        .iter()
        .any(|read| verb.eq_ignore_ascii_case(read))
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
            local: None,
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
                local: None,
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
            // A local connection does not break between uses: no ping when one is taken
            // (one round trip to its thread less per read).
            pool_options = pool_options.test_before_acquire(false);
            let local = (!in_memory).then(|| {
                let opener = Arc::new(Opener {
                    path: connect.get_filename().to_path_buf(),
                    sync: options.sqlite_sync,
                    busy_timeout: options.busy_timeout,
                });
                Arc::new(Local {
                    opener: opener.clone(),
                    slot: tokio::sync::Mutex::new(WriterSlot {
                        connection: None,
                        last_used: Instant::now(),
                        closed: false,
                        opener,
                    }),
                    readers: std::sync::Mutex::new(Readers {
                        idle: Vec::new(),
                        last_used: Instant::now(),
                        closed: false,
                    }),
                })
            });
            let pool = pool_options
                .connect_with(connect)
                .await
                .map_err(open_error)?;
            if let Some(local) = &local {
                tokio::spawn(close_idle_local(Arc::downgrade(local)));
            }
            Self {
                pool: Pool::Sqlite(pool),
                local,
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
        if let Some(local) = &self.local {
            {
                let mut readers = local.readers();
                readers.closed = true;
                readers.idle.clear();
            }
            let mut slot = local.write_turn().await;
            slot.closed = true;
            slot.connection = None;
        }
        on_pool!(self, pool => pool.close().await);
    }

    /// The store's clock: now, at the precision the database keeps.
    ///
    /// TODO-correctness: lease expiry compares times written by different hosts' clocks, so
    /// conductors need synchronised clocks (NTP); skew eats into the lease TTL.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        db_time(Utc::now())
    }

    /// On SQLite, the turn to write for a statement that may write: the write connection,
    /// once the writers before have finished with it (`None`: use the pool).
    async fn write_turn(&self, sql: &str) -> Option<tokio::sync::MutexGuard<'_, WriterSlot>> {
        let local = self.local.as_ref()?;
        if is_read(sql) {
            return None;
        }
        Some(local.write_turn().await)
    }

    /// On a SQLite file, runs `sql` on a local connection: a `SELECT` on a read connection, a
    /// statement that may write in the write turn. `None`: the pool runs it (PostgreSQL, an
    /// in-memory database, a `PRAGMA` or `VACUUM`).
    async fn run_local(&self, sql: &str, args: &[Arg<'_>]) -> Option<Result<Outcome, sqlx::Error>> {
        let local = self.local.as_ref()?;
        if is_select(sql) {
            return Some(local.read(sql, args));
        }
        let mut slot = self.write_turn(sql).await?;
        Some(slot.run(sql, args))
    }

    /// Runs `sql` and maps the first row, if any.
    pub(crate) async fn fetch_optional<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        map: RowMapper<T>,
    ) -> Result<Option<T>, sqlx::Error> {
        if let Some(outcome) = self.run_local(sql, args).await {
            return outcome?.rows.first().map(|row| map(row)).transpose();
        }
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
        self.fetch_all_with(sql, args, map).await
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
        if let Some(outcome) = self.run_local(sql, args).await {
            return outcome?.rows.iter().map(|row| map(row)).collect();
        }
        on_pool!(self, pool => {
            let rows = sqlx::query(sql).bind_args(args).fetch_all(pool).await?;
            rows.iter().map(|row| map(row)).collect()
        })
    }

    /// Runs `sql` and returns how many rows it changed.
    pub(crate) async fn execute(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        if let Some(outcome) = self.run_local(sql, args).await {
            return Ok(outcome?.changed);
        }
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
        then: InsertRow<'_>,
    ) -> Result<Option<T>, sqlx::Error> {
        let sql = then.sql();
        self.fetch_optional_then_each(first, &[(&sql, then.args)])
            .await
    }

    /// [`Store::fetch_optional_then`] with any number of statements after `first` (each an SQL
    /// text and its arguments), all run only if `first` returned a row, all in its
    /// transaction: a node's last write of a task and the release of its lease commit together.
    pub(crate) async fn fetch_optional_then_each<T>(
        &self,
        first: (&str, &[Arg<'_>], RowMapper<T>),
        then: &[(&str, &[Arg<'_>])],
    ) -> Result<Option<T>, sqlx::Error> {
        if let Some(mut slot) = self.write_turn(first.0).await {
            let row: Option<LocalRow> = slot.with(|connection| {
                connection.batch("BEGIN")?;
                let Some(row) = connection.run(first.0, first.1)?.rows.into_iter().next() else {
                    connection.batch("ROLLBACK")?;
                    return Ok(None);
                };
                for (sql, args) in then {
                    connection.run(sql, args)?;
                }
                connection.batch("COMMIT")?;
                Ok(Some(row))
            })?;
            return row.map(|row| first.2(&row)).transpose();
        }
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
            for (sql, args) in then {
                sqlx::query(sql).bind_args(args).execute(&mut *transaction).await?;
            }
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
        if let Some(mut slot) = self.write_turn(first.0).await {
            return slot.with(|connection| {
                connection.batch("BEGIN")?;
                if connection.run(first.0, first.1)?.changed == 0 {
                    connection.batch("ROLLBACK")?;
                    return Ok(false);
                }
                connection.run(then.0, then.1)?;
                connection.batch("COMMIT")?;
                Ok(true)
            });
        }
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

/// The second statement of [`Store::fetch_optional_then`]: an `INSERT` of one row, in parts so
/// that the store can make it conditional on the first statement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InsertRow<'a> {
    /// `table (column, …)`.
    pub(crate) into: &'a str,
    /// The row's values, `$1` for `args[0]` and so on.
    pub(crate) values: &'a str,
    pub(crate) args: &'a [Arg<'a>],
}

impl InsertRow<'_> {
    pub(crate) fn sql(&self) -> String {
        format!("INSERT INTO {} VALUES ({})", self.into, self.values)
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

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Waker};

    use ferric_model::resources::JsonObject;
    use uuid::Uuid;

    use super::*;
    use crate::sql::JsonArg;
    use crate::testing::SqliteFile;

    /// Polls `future` `polls` times, yielding to the runtime between polls so the connection's
    /// thread gets on with it, then drops it: a caller that went away halfway.
    async fn abandon_after<F: Future>(future: F, polls: usize) {
        let mut future = pin!(future);
        let mut context = Context::from_waker(Waker::noop());
        for _ in 0..polls {
            if future.as_mut().poll(&mut context).is_ready() {
                return;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    fn sqlite_pool(store: &Store) -> &SqlitePool {
        match &store.pool {
            Pool::Sqlite(pool) => pool,
            Pool::Postgres(_) => unreachable!("a SQLite test store"),
        }
    }

    async fn count(store: &Store, sql: &str, a: i64) -> i64 {
        // Through the pool, not the write connection: a transaction left open on the latter
        // would hide its writes from here.
        sqlx::query_scalar(sql)
            .bind(a)
            .fetch_one(sqlite_pool(store))
            .await
            .expect("count")
    }

    async fn pairs_store(file: &SqliteFile) -> Store {
        let store = Store::open(&file.url()).await.expect("open");
        store
            .execute("CREATE TABLE pairs (a INTEGER PRIMARY KEY, b INTEGER)", &[])
            .await
            .expect("create");
        store
            .execute("CREATE TABLE marks (a INTEGER UNIQUE)", &[])
            .await
            .expect("create");
        store
    }

    const MARK: &str = "$1";

    /// A write dropped anywhere inside its transaction on the shared write connection leaves
    /// no transaction open behind it: later writes commit on their own and other connections
    /// see them, and each pair is whole or absent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_transaction_leaves_the_write_connection_clean() {
        let file = SqliteFile::new();
        let store = pairs_store(&file).await;
        for polls in 0..40 {
            let args = [Arg::Int(polls)];
            let write = store.fetch_optional_then(
                (
                    "INSERT INTO pairs (a, b) VALUES ($1, 0) RETURNING a",
                    &args,
                    |row| row.int("a"),
                ),
                InsertRow {
                    into: "marks (a)",
                    values: MARK,
                    args: &args,
                },
            );
            abandon_after(write, polls as usize).await;
            store
                .execute(
                    "INSERT INTO pairs (a, b) VALUES ($1, 2)",
                    &[Arg::Int(1000 + polls)],
                )
                .await
                .expect("a write after an abandoned one");
            let seen = count(
                &store,
                "SELECT COUNT(*) FROM pairs WHERE a = $1",
                1000 + polls,
            )
            .await;
            assert_eq!(seen, 1, "after abandoning at poll {polls}");
            let pair = count(&store, "SELECT COUNT(*) FROM pairs WHERE a = $1", polls).await;
            let mark = count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", polls).await;
            assert_eq!(pair, mark, "half a pair after abandoning at poll {polls}");
        }
        store.close().await;
        assert!(matches!(
            store.execute("DELETE FROM pairs", &[]).await,
            Err(sqlx::Error::PoolClosed)
        ));
    }

    /// The second statement runs only after a first that returned a row, with its own
    /// placeholders; when it fails, the first is undone and the connection stays usable.
    #[tokio::test]
    async fn pair_writes_both_or_neither() {
        let file = SqliteFile::new();
        let store = pairs_store(&file).await;
        let first = "UPDATE pairs SET b = b + 1 WHERE a = $1 RETURNING b";
        let pair = |a: i64| [Arg::Int(a)];
        let written = store
            .fetch_optional_then(
                (
                    "INSERT INTO pairs (a, b) VALUES ($1, 0) RETURNING b",
                    &pair(1),
                    |row| row.int("b"),
                ),
                InsertRow {
                    into: "marks (a)",
                    values: "$1",
                    args: &[Arg::Int(7)],
                },
            )
            .await
            .expect("pair");
        assert_eq!(written, Some(0));
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", 7).await,
            1
        );
        // No row from the first: the second is not written.
        let written = store
            .fetch_optional_then(
                (first, &pair(2), |row| row.int("b")),
                InsertRow {
                    into: "marks (a)",
                    values: "$1",
                    args: &[Arg::Int(8)],
                },
            )
            .await
            .expect("pair");
        assert_eq!(written, None);
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", 8).await,
            0
        );
        // The second fails (a duplicate mark): the first is rolled back with it.
        let failed = store
            .fetch_optional_then(
                (first, &pair(1), |row| row.int("b")),
                InsertRow {
                    into: "marks (a)",
                    values: "$1",
                    args: &[Arg::Int(7)],
                },
            )
            .await;
        assert!(failed.is_err(), "{failed:?}");
        let b: i64 = sqlx::query_scalar("SELECT b FROM pairs WHERE a = 1")
            .fetch_one(sqlite_pool(&store))
            .await
            .expect("b");
        assert_eq!(b, 0, "the first statement of a failed pair is undone");
        store
            .execute("INSERT INTO pairs (a, b) VALUES (3, 0)", &[])
            .await
            .expect("a write after a failed pair");
        assert_eq!(
            count(&store, "SELECT COUNT(*) FROM pairs WHERE a = $1", 3).await,
            1
        );
    }

    /// The local connections store every kind of value as sqlx's SQLite driver does, and
    /// each reads back what the other wrote: a database written by either is the same file.
    #[tokio::test]
    async fn local_connections_and_sqlx_store_values_alike() {
        let file = SqliteFile::new();
        let store = Store::open(&file.url()).await.expect("open");
        store
            .execute(
                "CREATE TABLE vals (k INTEGER, i, b, nb, t, u, nu, tm, j)",
                &[],
            )
            .await
            .expect("create");
        let uuid = Uuid::new_v4();
        let time = Utc::now();
        let mut object = JsonObject::new();
        object.insert(
            "ports".into(),
            serde_json::json!([1, "two", {"three": null}]),
        );
        let args = |k: i64| {
            [
                Arg::Int(k),
                Arg::Int(-42),
                Arg::Bool(true),
                Arg::OptBool(None),
                Arg::Text("it's; a \"text\""),
                Arg::Uuid(uuid),
                Arg::OptUuid(None),
                Arg::Time(time),
                Arg::Json(JsonArg::Object(&object)),
            ]
        };
        let insert = "INSERT INTO vals VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
        store.execute(insert, &args(1)).await.expect("local insert");
        sqlx::query(insert)
            .bind_args(&args(2))
            .execute(sqlite_pool(&store))
            .await
            .expect("sqlx insert");

        let stored: Vec<String> = sqlx::query_scalar(
            "SELECT typeof(i) || typeof(b) || typeof(nb) || typeof(t) || typeof(u) || \
             typeof(nu) || typeof(tm) || typeof(j) || ':' || quote(i) || quote(b) || \
             quote(nb) || quote(t) || quote(u) || quote(nu) || quote(tm) || quote(j) \
             FROM vals ORDER BY k",
        )
        .fetch_all(sqlite_pool(&store))
        .await
        .expect("stored");
        assert_eq!(stored.len(), 2);
        assert_eq!(
            stored[0], stored[1],
            "local (first) and sqlx (second) differ"
        );

        type Decoded = (
            i64,
            bool,
            Option<bool>,
            String,
            Uuid,
            Option<Uuid>,
            DateTime<Utc>,
        );
        fn decode(row: &dyn DbRow) -> Result<(Decoded, JsonObject), sqlx::Error> {
            Ok((
                (
                    row.int("i")?,
                    row.bool("b")?,
                    row.opt_bool("nb")?,
                    row.text("t")?,
                    row.uuid("u")?,
                    row.opt_uuid("nu")?,
                    row.time("tm")?,
                ),
                row.json_object("j")?,
            ))
        }
        let expected = (
            (
                -42,
                true,
                None,
                "it's; a \"text\"".to_owned(),
                uuid,
                None,
                db_time(time),
            ),
            object.clone(),
        );
        let select = "SELECT * FROM vals ORDER BY k";
        let local = store.fetch_all(select, &[], decode).await.expect("local");
        let pooled = sqlx::query(select)
            .fetch_all(sqlite_pool(&store))
            .await
            .expect("sqlx");
        for decoded in local
            .into_iter()
            .chain(pooled.iter().map(|row| decode(row).expect("decode")))
        {
            assert_eq!(decoded, expected);
        }
    }
}
