//! Conductor liveness by lock: a conductor proves it is alive by holding a lock that dies with
//! its process, so a crash frees its name and its nodes at once, not after a heartbeat timeout.
//!
//! Theory of operation: [`Store::conductor_lock`] takes the lock of a conductor name and
//! returns a [`ConductorLock`] that holds it until dropped or until the process dies:
//!
//! - on PostgreSQL, a session-level advisory lock on a 64-bit hash of the name, held on a
//!   connection of its own. The hash is PostgreSQL's (`hashtextextended(name, LOCK_SEED)`), so
//!   every process and every statement computes the same key, and a statement can ask
//!   `pg_locks` whether the conductor of a row holds its lock. When the process dies its
//!   connection closes and PostgreSQL drops the lock. The connection has TCP keepalives (10 s,
//!   then 3 probes 5 s apart), so a host that vanishes without closing it loses the lock in
//!   about 25 s instead of when the kernel gives up (hours).
//! - on a SQLite file (one host), an exclusive `flock` on `<database>.conductor-<name>.lock`
//!   beside it, which the kernel releases when the process dies. The holder writes its process
//!   id into the file, so a refused start can say who holds it. Another look at the lock
//!   ([`lock_file_held`]) takes a shared lock for an instant and gives it back.
//!
//! A registration made under the lock sets `conductors.liveness_lock`. Such a conductor counts
//! as online only while its lock is held (`conductors.rs`), and a lease it holds is free once
//! its lock is gone (`leases.rs`). Rows without the mark — conductors of a release before the
//! lock, still running during a rolling upgrade — are judged by their heartbeat alone, as
//! before. The heartbeat stays for everyone: a conductor whose connection hangs keeps its lock
//! but stops heartbeating, and is dropped after `conductor_heartbeat_timeout`; a restart under
//! its name then ends the hung session ([`Store::conductor_lock`]'s `stale_after`).
//!
//! When PostgreSQL itself restarts, every lock is gone until each conductor has taken its own
//! again ([`ConductorLock::check`], every second); for [`RESTART_GRACE_SECS`] after a restart the
//! lock is not asked, so a database restart does not make every conductor look dead.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::error::{Error, backend};
use crate::sql::Arg;
use crate::store::Store;

/// The seed of the names' hash: Ferric's own key space among the database's advisory locks.
const LOCK_SEED: i64 = 0x6665_7272_6963; // "ferric"

/// Seconds after PostgreSQL started during which conductors are judged by heartbeat alone.
pub(crate) const RESTART_GRACE_SECS: i64 = 10;

/// PostgreSQL: SQL that is true while the conductor named by the expression `hostname` holds
/// its lock (a `bigint` advisory lock shows its key's halves in `classid` and `objid`).
fn pg_lock_held(hostname: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM pg_locks WHERE {})",
        pg_lock_match(hostname)
    )
}

/// PostgreSQL: SQL that is true for a row of `conductors` (named `table` in the statement)
/// whose process is gone: it registered under its lock, and the lock is no longer held.
pub(crate) fn pg_lock_lost(table: &str) -> String {
    format!(
        "({table}.liveness_lock AND NOT {held} \
         AND pg_postmaster_start_time() < now() - interval '{RESTART_GRACE_SECS} seconds')",
        held = pg_lock_held(&format!("{table}.hostname"))
    )
}

/// The lock file of conductor `hostname` beside the SQLite file `database`. Characters other
/// than letters, digits, `.`, `-` and `_` are written as `%XX`, so two names never share a file.
pub(crate) fn lock_file(database: &Path, hostname: &str) -> PathBuf {
    let mut escaped = String::with_capacity(hostname.len());
    for byte in hostname.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    let mut path = database.as_os_str().to_owned();
    path.push(format!(".conductor-{escaped}.lock"));
    PathBuf::from(path)
}

/// Whether some process holds the lock file at `path`. A file that cannot be looked at counts
/// as held: a conductor is never declared dead on a guess.
pub(crate) fn lock_file_held(path: &Path) -> bool {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return error.kind() != std::io::ErrorKind::NotFound,
    };
    // Taken and given back at once (when `file` closes): nobody held it exclusively.
    !matches!(flock(&file, FlockOperation::NonBlockingLockShared), Ok(()))
}

/// The lock that proves a conductor alive; held until dropped (or the process dies).
pub struct ConductorLock {
    hostname: String,
    hold: Hold,
}

enum Hold {
    /// The open, `flock`ed file beside a SQLite database.
    File(#[allow(dead_code, reason = "held for its lock, never read")] File),
    /// The session holding the advisory lock (`None` after it broke, until `check` reconnects).
    Postgres {
        options: PgConnectOptions,
        session: tokio::sync::Mutex<Option<PgConnection>>,
    },
    /// An in-memory SQLite database: one process, one store, nothing to lock against.
    Memory,
}

impl std::fmt::Debug for ConductorLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.hold {
            Hold::File(_) => "file",
            Hold::Postgres { .. } => "advisory",
            Hold::Memory => "none",
        };
        f.debug_struct("ConductorLock")
            .field("hostname", &self.hostname)
            .field("kind", &kind)
            .finish()
    }
}

impl ConductorLock {
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Gives the lock up now (a clean shutdown; dropping it does the same, PostgreSQL noticing
    /// the closed session a moment later).
    pub async fn release(self) {
        if let Hold::Postgres { session, .. } = self.hold
            && let Some(mut connection) = session.into_inner()
        {
            // Unlocked before the session closes: the backend ends a moment after it is told.
            let _ = sqlx::query("SELECT pg_advisory_unlock(hashtextextended($1, $2))")
                .bind(&self.hostname)
                .bind(LOCK_SEED)
                .execute(&mut connection)
                .await;
            let _ = connection.close().await;
        }
    }

    /// Checks that the lock is still held; on PostgreSQL, a session that broke (the database
    /// restarted, the network dropped it) is opened again and the lock taken again.
    /// [`Error::ConductorLocked`] when another process took the name meanwhile: this one was
    /// taken for dead and must stop working under it.
    pub async fn check(&self, store: &Store) -> Result<(), Error> {
        let Hold::Postgres { options, session } = &self.hold else {
            return Ok(());
        };
        let mut session = session.lock().await;
        if let Some(connection) = session.as_mut()
            && sqlx::query("SELECT 1")
                .execute(&mut *connection)
                .await
                .is_ok()
        {
            return Ok(());
        }
        *session = None;
        // The store's options, not the ones the lock was first taken with: with several hosts
        // in the database URL they follow the primary after a failover (`pg_hosts.rs`).
        let options = store
            .pg_connect_options()
            .unwrap_or_else(|| options.clone());
        match pg_try_lock(&options, &self.hostname).await? {
            Some(connection) => {
                tracing::warn!(
                    hostname = %self.hostname,
                    "the conductor's lock session was lost (database restart or network); \
                     lock taken again"
                );
                *session = Some(connection);
                Ok(())
            }
            None => Err(Error::ConductorLocked {
                hostname: self.hostname.clone(),
                holder: store.pg_lock_holder(&self.hostname).await?,
            }),
        }
    }
}

fn lock_failed(hostname: &str, what: &str) -> impl FnOnce(sqlx::Error) -> Error {
    let (hostname, what) = (hostname.to_owned(), what.to_owned());
    move |source| Error::LockFailed {
        hostname,
        what,
        source: Box::new(source),
    }
}

/// Opens a session of its own and tries to take `hostname`'s advisory lock in it; `None` when
/// another session holds it.
async fn pg_try_lock(
    options: &PgConnectOptions,
    hostname: &str,
) -> Result<Option<PgConnection>, Error> {
    let options = options
        .clone()
        .application_name(&format!("ferric conductor {hostname} (liveness lock)"));
    let mut connection = PgConnection::connect_with(&options)
        .await
        .map_err(lock_failed(hostname, "connecting"))?;
    sqlx::query(
        "SELECT set_config('tcp_keepalives_idle', '10', false), \
         set_config('tcp_keepalives_interval', '5', false), \
         set_config('tcp_keepalives_count', '3', false)",
    )
    .execute(&mut connection)
    .await
    .map_err(lock_failed(hostname, "setting keepalives"))?;
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, $2))")
        .bind(hostname)
        .bind(LOCK_SEED)
        .fetch_one(&mut connection)
        .await
        .map_err(lock_failed(hostname, "pg_try_advisory_lock"))?;
    if taken {
        Ok(Some(connection))
    } else {
        let _ = connection.close().await;
        Ok(None)
    }
}

impl Store {
    /// Takes the liveness lock of conductor `hostname`, or [`Error::ConductorLocked`] naming
    /// the process that holds it: another live conductor under this name.
    ///
    /// On PostgreSQL, a holder whose conductor has not heartbeated for `stale_after` is taken
    /// to hang (its host gone, its connection not yet noticed dead): its session is ended and
    /// the lock taken. On a SQLite file the lock is a file lock, which a dead process never
    /// holds; a look at it by another process ([`lock_file_held`]) holds it for an instant,
    /// so a refused attempt is repeated twice, 20 ms apart, before the name is called taken.
    pub async fn conductor_lock(
        &self,
        hostname: &str,
        stale_after: Duration,
    ) -> Result<ConductorLock, Error> {
        let hold = if let Some(options) = self.pg_connect_options() {
            self.pg_lock(&options, hostname, stale_after).await?
        } else if let Some(database) = self.sqlite_file() {
            file_lock(&lock_file(database, hostname), hostname).await?
        } else {
            Hold::Memory
        };
        Ok(ConductorLock {
            hostname: hostname.to_owned(),
            hold,
        })
    }

    async fn pg_lock(
        &self,
        options: &PgConnectOptions,
        hostname: &str,
        stale_after: Duration,
    ) -> Result<Hold, Error> {
        if let Some(connection) = pg_try_lock(options, hostname).await? {
            return Ok(pg_hold(options, connection));
        }
        let stale_after = i64::try_from(stale_after.as_secs()).unwrap_or(i64::MAX);
        let stale = self
            .fetch_optional(
                "SELECT hostname FROM conductors WHERE hostname = $1 \
                 AND updated_at < now() - make_interval(secs => $2)",
                &[Arg::Text(hostname), Arg::Int(stale_after)],
                |row| row.text("hostname"),
            )
            .await
            .map_err(backend("conductor_lock"))?
            .is_some();
        if stale {
            let holder = self.pg_lock_holder(hostname).await?;
            tracing::warn!(
                hostname,
                %holder,
                "this conductor name's lock is held by a session whose conductor stopped \
                 heartbeating: ending that session"
            );
            let sql = format!(
                "SELECT pg_terminate_backend(pid) AS ended FROM pg_locks \
                 WHERE pid <> pg_backend_pid() AND {}",
                pg_lock_match("$1")
            );
            self.fetch_all(&sql, &[Arg::Text(hostname)], |row| row.bool("ended"))
                .await
                .map_err(backend("conductor_lock"))?;
            // The session ends shortly after it is told to.
            for _ in 0..20 {
                if let Some(connection) = pg_try_lock(options, hostname).await? {
                    return Ok(pg_hold(options, connection));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Err(Error::ConductorLocked {
            hostname: hostname.to_owned(),
            holder: self.pg_lock_holder(hostname).await?,
        })
    }

    /// Who holds `hostname`'s advisory lock: the PostgreSQL session, its client address and
    /// since when it is connected.
    async fn pg_lock_holder(&self, hostname: &str) -> Result<String, Error> {
        let sql = format!(
            "SELECT activity.pid::bigint AS pid, \
             coalesce(host(activity.client_addr), 'a local socket') AS client, \
             activity.backend_start AS since \
             FROM pg_locks JOIN pg_stat_activity activity USING (pid) WHERE {}",
            pg_lock_match("$1")
        );
        let holder = self
            .fetch_optional(&sql, &[Arg::Text(hostname)], |row| {
                Ok(format!(
                    "PostgreSQL session {} from {}, connected since {}",
                    row.int("pid")?,
                    row.text("client")?,
                    row.time("since")?
                ))
            })
            .await
            .map_err(backend("conductor_lock"))?;
        Ok(holder.unwrap_or_else(|| "a PostgreSQL session that just ended".to_owned()))
    }
}

/// PostgreSQL: the `pg_locks` rows of the lock of the name that the SQL expression `parameter`
/// gives.
fn pg_lock_match(parameter: &str) -> String {
    format!(
        "locktype = 'advisory' AND granted AND objsubid = 1 \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND ((classid::bigint << 32) | objid::bigint) = hashtextextended({parameter}, {LOCK_SEED})"
    )
}

fn pg_hold(options: &PgConnectOptions, connection: PgConnection) -> Hold {
    Hold::Postgres {
        options: options.clone(),
        session: tokio::sync::Mutex::new(Some(connection)),
    }
}

/// Takes the lock file at `path` for `hostname`, or says which process holds it.
async fn file_lock(path: &Path, hostname: &str) -> Result<Hold, Error> {
    let failed = |what: &str, source: std::io::Error| Error::LockFailed {
        hostname: hostname.to_owned(),
        what: format!("{what} {}", path.display()),
        source: Box::new(source),
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|error| failed("opening", error))?;
    for attempt in 0..3 {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                file.set_len(0)
                    .and_then(|()| writeln!(file, "process {}", std::process::id()))
                    .map_err(|error| failed("writing", error))?;
                return Ok(Hold::File(file));
            }
            Err(Errno::WOULDBLOCK) if attempt < 2 => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(Errno::WOULDBLOCK) => {}
            Err(errno) => return Err(failed("locking", errno.into())),
        }
    }
    let mut holder = String::new();
    let _ = file.read_to_string(&mut holder);
    let holder = match holder.trim() {
        "" => "another process".to_owned(),
        process => process.to_owned(),
    };
    Err(Error::ConductorLocked {
        hostname: hostname.to_owned(),
        holder: format!("{holder} (lock file {})", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_files_are_named_after_the_database_and_escaped() {
        let database = Path::new("/var/lib/ferric/ferric.db");
        assert_eq!(
            lock_file(database, "conductor-1.example"),
            Path::new("/var/lib/ferric/ferric.db.conductor-conductor-1.example.lock")
        );
        assert_eq!(
            lock_file(database, "a/b%c"),
            Path::new("/var/lib/ferric/ferric.db.conductor-a%2Fb%25c.lock")
        );
    }
}
