//! Conductors: registration (an upsert, so a restarted conductor simply re-registers),
//! heartbeats, listing and going offline. A conductor registered under its liveness lock
//! (`liveness.rs`) is listed online only while the lock is held.

use chrono::{DateTime, Utc};
use ferric_model::resources::Conductor;

use crate::error::{Error, Kind, backend};
use crate::liveness::{ConductorLock, lock_file, lock_file_held, pg_lock_lost};
use crate::sql::{Arg, DbRow, SqlBuilder};
use crate::store::Store;

/// Which conductors `conductor_list` returns; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct ConductorFilter {
    /// Only online conductors whose last heartbeat is at or after this time: the live ones,
    /// given `store.now() - heartbeat_timeout` (the database's clock: `Store::now`).
    pub alive_since: Option<DateTime<Utc>>,
    pub conductor_group: Option<String>,
}

fn conductor_from_row(row: &dyn DbRow) -> Result<Conductor, sqlx::Error> {
    Ok(Conductor {
        hostname: row.text("hostname")?,
        conductor_group: row.text("conductor_group")?,
        drivers: row.json_list("drivers")?,
        online: row.bool("online")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

const CONDUCTOR_COLUMNS: &str =
    "hostname, conductor_group, drivers, online, created_at, updated_at";

impl Store {
    /// Registers `hostname` (or re-registers it after a restart): online, heartbeat now, with
    /// this group and these hardware types, judged alive by its heartbeat alone.
    pub async fn conductor_register(
        &self,
        hostname: &str,
        conductor_group: &str,
        drivers: &[String],
    ) -> Result<Conductor, Error> {
        self.conductor_register_with(hostname, conductor_group, drivers, false)
            .await
    }

    /// Registers the conductor whose liveness lock is `lock` ([`Store::conductor_lock`]):
    /// holding the lock proves no other live process has the name, so whatever the row says
    /// (an earlier run that crashed a moment ago) is overwritten. Listed online only while
    /// the lock is held.
    pub async fn conductor_register_locked(
        &self,
        lock: &ConductorLock,
        conductor_group: &str,
        drivers: &[String],
    ) -> Result<Conductor, Error> {
        self.conductor_register_with(lock.hostname(), conductor_group, drivers, true)
            .await
    }

    async fn conductor_register_with(
        &self,
        hostname: &str,
        conductor_group: &str,
        drivers: &[String],
        locked: bool,
    ) -> Result<Conductor, Error> {
        let drivers = drivers.to_vec();
        let sql = format!(
            "INSERT INTO conductors ({CONDUCTOR_COLUMNS}, liveness_lock) \
             VALUES ($1, $2, $3, $4, $5, $5, $6) \
             ON CONFLICT (hostname) DO UPDATE SET conductor_group = excluded.conductor_group, \
             drivers = excluded.drivers, online = excluded.online, \
             updated_at = excluded.updated_at, liveness_lock = excluded.liveness_lock \
             RETURNING {CONDUCTOR_COLUMNS}"
        );
        let args = [
            Arg::Text(hostname),
            Arg::Text(conductor_group),
            (&drivers).into(),
            Arg::Bool(true),
            Arg::Time(self.now()),
            Arg::Bool(locked),
        ];
        self.fetch_optional(&sql, &args, conductor_from_row)
            .await
            .map_err(backend("conductor_register"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Conductor,
                ident: hostname.to_owned(),
            })
    }

    /// Records that `hostname` is alive now. [`Error::NotFound`] if it never registered (or was
    /// deleted as stale): the conductor should register again.
    pub async fn conductor_heartbeat(&self, hostname: &str) -> Result<Conductor, Error> {
        let sql = format!(
            "UPDATE conductors SET updated_at = $2, online = $3 WHERE hostname = $1 \
             RETURNING {CONDUCTOR_COLUMNS}"
        );
        let args = [Arg::Text(hostname), Arg::Time(self.now()), Arg::Bool(true)];
        self.fetch_optional(&sql, &args, conductor_from_row)
            .await
            .map_err(backend("conductor_heartbeat"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Conductor,
                ident: hostname.to_owned(),
            })
    }

    /// The conductor registered as `hostname`, online or not.
    pub async fn conductor_get(&self, hostname: &str) -> Result<Conductor, Error> {
        let sql = format!("SELECT {CONDUCTOR_COLUMNS} FROM conductors WHERE hostname = $1");
        self.fetch_optional(&sql, &[Arg::Text(hostname)], conductor_from_row)
            .await
            .map_err(backend("conductor_get"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Conductor,
                ident: hostname.to_owned(),
            })
    }

    /// Conductors in hostname order (the API's paging key for conductors). `online` is false
    /// for a conductor registered under its liveness lock whose lock is gone: its process died.
    pub async fn conductor_list(&self, filter: &ConductorFilter) -> Result<Vec<Conductor>, Error> {
        // PostgreSQL asks `pg_locks` in the statement; on SQLite the lock files are looked at
        // after it.
        let online = if self.is_shared() {
            format!("(conductors.online AND NOT {})", pg_lock_lost("conductors"))
        } else {
            "conductors.online".to_owned()
        };
        let mut query = SqlBuilder::new("SELECT ");
        let columns = format!(
            "hostname, conductor_group, drivers, {online} AS online, created_at, updated_at, \
             liveness_lock FROM conductors"
        );
        query.push(&columns);
        if let Some(since) = filter.alive_since {
            query
                .and()
                .push(&online)
                .and()
                .push("updated_at >= ")
                .arg(since);
        }
        if let Some(group) = &filter.conductor_group {
            query.and_eq("conductor_group", group);
        }
        query.push(" ORDER BY hostname");
        let listed = self
            .fetch_all(query.sql(), query.args(), |row| {
                Ok((conductor_from_row(row)?, row.bool("liveness_lock")?))
            })
            .await
            .map_err(backend("conductor_list"))?;
        let database = self.sqlite_file().filter(|_| !self.is_shared());
        let mut conductors = Vec::with_capacity(listed.len());
        for (mut conductor, locked) in listed {
            if let Some(database) = database
                && locked
                && conductor.online
                && !lock_file_held(&lock_file(database, &conductor.hostname))
            {
                if filter.alive_since.is_some() {
                    continue;
                }
                conductor.online = false;
            }
            conductors.push(conductor);
        }
        Ok(conductors)
    }

    /// Marks `hostname` offline (a clean shutdown). The row stays, as in Ironic, so the API can
    /// still show it; its nodes' leases lapse or are released by the conductor itself.
    pub async fn conductor_unregister(&self, hostname: &str) -> Result<(), Error> {
        let sql = "UPDATE conductors SET online = $2 WHERE hostname = $1";
        let changed = self
            .execute(sql, &[Arg::Text(hostname), Arg::Bool(false)])
            .await
            .map_err(backend("conductor_unregister"))?;
        if changed == 0 {
            return Err(Error::NotFound {
                kind: Kind::Conductor,
                ident: hostname.to_owned(),
            });
        }
        Ok(())
    }

    /// Deletes conductors whose last heartbeat is older than `before` (periodic cleanup of
    /// hosts that are gone for good). Returns how many were deleted.
    pub async fn conductor_delete_stale(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        self.execute(
            "DELETE FROM conductors WHERE updated_at < $1",
            &[Arg::Time(before)],
        )
        .await
        .map_err(backend("conductor_delete_stale"))
    }
}
