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
//!
//! Durability on SQLite: the file is in WAL mode with `synchronous = NORMAL` by default
//! ([`SqliteSync`], setting `sqlite_full_sync`). A commit is appended to the write-ahead log before
//! it returns, so a killed process (SIGKILL, a crash, OOM) loses nothing that was acknowledged —
//! the kernel has the write; only the `fsync` per commit is skipped, and the log is synced at each
//! checkpoint. What `NORMAL` gives up is the last commits before an operating-system crash or power
//! loss (the database stays consistent: they roll back whole). `sqlite_full_sync = true` (`FULL`)
//! syncs every commit, about 9 `fsync`s per provision request on fake-hardware, for sites that want
//! acknowledged work to survive power loss too; PostgreSQL deployments choose with its own
//! `synchronous_commit`.
//!
//! Fewer round trips per request: a task's save writes only the columns it changed
//! (`Store::node_save`, `history.rs`), the lease calls that bracket a provision request take the
//! stale abort mark with them (`node_lease_acquire_for_request`, `node_lease_release_ending` in
//! `leases.rs`: two statements in one call on SQLite, a data-modifying `WITH` on PostgreSQL), and
//! the hand-off routes by the node the API has just read. Together a fake-hardware provision
//! request costs 8–9 database calls, each a function call on SQLite (`docs/benchmarks.md`, the
//! fleet cycle).

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::clock::Clock;
use crate::error::{Error, backend, redact};
use crate::local::{LocalConnection, LocalRow, Outcome, SqliteSync, is_constraint};
use crate::pg_hosts::Hosts;
use crate::sql::{Arg, BindArgs, DbRow, db_time};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// What [`Store::open_with`] does about the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaPolicy {
    /// Apply the migrations the database lacks (after checking it is not newer).
    #[default]
    Upgrade,
    /// Refuse a database that is behind or ahead of this binary (`--no-db-upgrade`).
    RequireCurrent,
    /// Check nothing and change nothing: for reading the status, backups and restores.
    Unchecked,
}

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
    /// The database's time (`clock.rs`).
    clock: Arc<Clock>,
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
            clock: Arc::default(),
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
            let hosts = Hosts::parse(url).map_err(open_error)?;
            let connect = hosts.pick().await.map_err(open_error)?;
            let mut pool_options = PgPoolOptions::new()
                .max_connections(options.max_connections.unwrap_or(10))
                .acquire_timeout(options.acquire_timeout);
            if hosts.primary_only() {
                pool_options = pool_options.after_connect(|connection, _| {
                    Box::pin(crate::pg_hosts::refuse_standby(connection, true))
                });
            }
            let pool = pool_options
                .connect_with(connect)
                .await
                .map_err(open_error)?;
            hosts.follow(pool.clone());
            let clock = Arc::new(Clock::default());
            crate::clock::spawn_sync(clock.clone(), pool.clone()).await;
            Self {
                pool: Pool::Postgres(pool),
                local: None,
                clock,
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
                clock: Arc::default(),
            }
        };
        Ok(store)
    }

    /// `"sqlite"` or `"postgres"`.
    /// Whether the store is on PostgreSQL (several processes writing at once).
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

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

    /// The store's clock: now by the database's time, at the precision it keeps. Every time
    /// the store writes (heartbeats, lease expiries, history) and every time a caller compares
    /// with one should come from here, so processes on hosts whose clocks disagree still agree
    /// (`clock.rs`; on SQLite, one host, it is that host's clock).
    pub fn now(&self) -> DateTime<Utc> {
        db_time(self.clock.now())
    }

    /// PostgreSQL: the options the pool connects with (a dedicated connection's, `liveness.rs`).
    pub(crate) fn pg_connect_options(&self) -> Option<PgConnectOptions> {
        match &self.pool {
            Pool::Postgres(pool) => Some((*pool.connect_options()).clone()),
            Pool::Sqlite(_) => None,
        }
    }

    /// A SQLite file's path (`None` on PostgreSQL and for in-memory databases).
    pub(crate) fn sqlite_file(&self) -> Option<&std::path::Path> {
        self.local.as_ref().map(|local| local.opener.path.as_path())
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

    /// Runs every statement in one transaction (SQL only inside, nothing else awaited):
    /// all commit or none do. Returns how many rows they changed; on failure, the index of
    /// the statement that failed (`statements.len()` for the commit) with its error.
    /// `done` is called after each statement with how many have run (progress for a long
    /// batch; nothing is committed until the last).
    pub(crate) async fn execute_all(
        &self,
        statements: &[(&str, &[Arg<'_>])],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<u64, (usize, sqlx::Error)> {
        let at = |index: usize| move |error: sqlx::Error| (index, error);
        let end = statements.len();
        if let Some(local) = &self.local {
            let mut slot = local.write_turn().await;
            let mut failed_at = end;
            let result = slot.with(|connection| {
                connection.batch("BEGIN")?;
                let mut changed = 0;
                for (index, (sql, args)) in statements.iter().enumerate() {
                    failed_at = index;
                    changed += connection.run(sql, args)?.changed;
                    done(index + 1);
                }
                failed_at = end;
                connection.batch("COMMIT")?;
                Ok(changed)
            });
            return result.map_err(at(failed_at));
        }
        on_pool!(self, pool => {
            let mut transaction = pool.begin().await.map_err(at(0))?;
            let mut changed = 0;
            for (index, (sql, args)) in statements.iter().enumerate() {
                changed += sqlx::query(sql)
                    .bind_args(args)
                    .execute(&mut *transaction)
                    .await
                    .map_err(at(index))?
                    .rows_affected();
                done(index + 1);
            }
            transaction.commit().await.map_err(at(end))?;
            Ok(changed)
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
mod tests;
