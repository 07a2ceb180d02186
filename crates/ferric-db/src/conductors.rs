//! Conductors: registration (an upsert, so a restarted conductor simply re-registers),
//! heartbeats, listing and going offline.

use chrono::{DateTime, Utc};
use ferric_model::resources::Conductor;

use crate::error::{Error, Kind, backend};
use crate::sql::{Arg, DbRow, SqlBuilder};
use crate::store::Store;

/// Which conductors `conductor_list` returns; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct ConductorFilter {
    /// Only online conductors whose last heartbeat is at or after this time: the live ones,
    /// given `now - heartbeat_timeout`.
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
    /// this group and these hardware types.
    pub async fn conductor_register(
        &self,
        hostname: &str,
        conductor_group: &str,
        drivers: &[String],
    ) -> Result<Conductor, Error> {
        let drivers = drivers.to_vec();
        let sql = format!(
            "INSERT INTO conductors ({CONDUCTOR_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (hostname) DO UPDATE SET conductor_group = excluded.conductor_group, \
             drivers = excluded.drivers, online = excluded.online, \
             updated_at = excluded.updated_at \
             RETURNING {CONDUCTOR_COLUMNS}"
        );
        let args = [
            Arg::Text(hostname),
            Arg::Text(conductor_group),
            (&drivers).into(),
            Arg::Bool(true),
            Arg::Time(self.now()),
        ];
        self.fetch_optional(&sql, &args, conductor_from_row)
            .await
            .map_err(backend("conductor_register"))?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::Conductor,
                ident: hostname.to_owned(),
            })
    }

    /// Registers `hostname` like [`Store::conductor_register`], but only if no live
    /// conductor holds the name: the row is new, offline (a clean shutdown), or its last
    /// heartbeat is older than `alive_since`. `None` when a live conductor holds it; one
    /// statement, so of two conductors starting at once under one name only one gets it.
    pub async fn conductor_claim(
        &self,
        hostname: &str,
        conductor_group: &str,
        drivers: &[String],
        alive_since: DateTime<Utc>,
    ) -> Result<Option<Conductor>, Error> {
        let drivers = drivers.to_vec();
        let sql = format!(
            "INSERT INTO conductors ({CONDUCTOR_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (hostname) DO UPDATE SET conductor_group = excluded.conductor_group, \
             drivers = excluded.drivers, online = excluded.online, \
             updated_at = excluded.updated_at \
             WHERE conductors.online = $6 OR conductors.updated_at < $7 \
             RETURNING {CONDUCTOR_COLUMNS}"
        );
        let args = [
            Arg::Text(hostname),
            Arg::Text(conductor_group),
            (&drivers).into(),
            Arg::Bool(true),
            Arg::Time(self.now()),
            Arg::Bool(false),
            Arg::Time(alive_since),
        ];
        self.fetch_optional(&sql, &args, conductor_from_row)
            .await
            .map_err(backend("conductor_claim"))
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

    /// Conductors in hostname order (the API's paging key for conductors).
    pub async fn conductor_list(&self, filter: &ConductorFilter) -> Result<Vec<Conductor>, Error> {
        let mut query = SqlBuilder::new("SELECT ");
        query.push(CONDUCTOR_COLUMNS).push(" FROM conductors");
        if let Some(since) = filter.alive_since {
            query
                .and_eq("online", true)
                .and()
                .push("updated_at >= ")
                .arg(since);
        }
        if let Some(group) = &filter.conductor_group {
            query.and_eq("conductor_group", group);
        }
        query.push(" ORDER BY hostname");
        self.fetch_all(query.sql(), query.args(), conductor_from_row)
            .await
            .map_err(backend("conductor_list"))
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
