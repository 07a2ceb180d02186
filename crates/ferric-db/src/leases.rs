//! Node leases: the exclusive, expiring lock a conductor holds on a node while it works on it
//! (`reference/ironic.md` §6.1, with an expiry instead of a bare `reservation` column).
//!
//! Theory of operation: a lease is a row in `node_leases`, at most one per node. Acquiring is a
//! single upsert whose `ON CONFLICT … DO UPDATE … WHERE` only overwrites a lease that has
//! expired or is already ours; if the `WHERE` refuses, the statement returns no row and the
//! caller learns who holds the node. Both PostgreSQL (row lock on the conflicting row) and
//! SQLite (one writer at a time) make that compare-and-set atomic, with no transaction held
//! open. The holder renews before `expires_at`; if it dies it stops renewing, the lease lapses,
//! and any other conductor may take the node over. Renew and release only touch a lease the
//! caller still holds.
//!
//! Fencing: every grant of a lease (a new lease, one taken over, or one its holder takes
//! again) carries a new `generation`, from one sequence (PostgreSQL) or one-row counter
//! (SQLite) that only grows. The holder names its [`Fence`] — holder and generation — in every
//! write it makes for the node ([`Store::node_save`], [`Store::node_history_add_fenced`],
//! renew, release), checked in the same statement as the write: a conductor that was cut off,
//! lost its lease to another and comes back finds its writes refused
//! ([`Error::LeaseLost`]) and nothing it tried lands over the new owner's work.
//!
//! Times are the store's clock, the database's (`clock.rs`), so hosts whose clocks disagree
//! agree on expiry. On PostgreSQL a lease whose holder registered under its liveness lock and
//! no longer holds it (its process died: `liveness.rs`) is free too, without waiting for
//! `expires_at`: that is how a crashed conductor's nodes are taken over at once. (On SQLite one
//! process runs the conductor; a restart releases its earlier run's leases itself.)

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ferric_model::resources::NodeLease;
use uuid::Uuid;

use crate::error::{Error, Kind, backend, is_foreign_key_violation};
use crate::liveness::pg_lock_lost;
use crate::sql::{Arg, DbRow, SqlBuilder};
use crate::store::Store;

const LEASE_COLUMNS: &str = "node_uuid, holder, acquired_at, expires_at, generation";

fn lease_from_row(row: &dyn DbRow) -> Result<NodeLease, sqlx::Error> {
    Ok(NodeLease {
        node: row.uuid("node_uuid")?,
        holder: row.text("holder")?,
        acquired_at: row.time("acquired_at")?,
        expires_at: row.time("expires_at")?,
        generation: row.int("generation")?,
    })
}

/// The lease a write is made under: who holds it and which grant ([`NodeLease::generation`]).
/// A fenced write lands only while exactly this grant stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence<'a> {
    pub holder: &'a str,
    pub generation: i64,
}

impl<'a> Fence<'a> {
    /// The fence of a lease as granted.
    pub fn of(lease: &'a NodeLease) -> Self {
        Self {
            holder: &lease.holder,
            generation: lease.generation,
        }
    }

    /// SQL true while the fence stands on `node` (bound), or with `None` on the row of `nodes`
    /// being written; binds holder and generation.
    ///
    /// With `lock` (PostgreSQL) the lease row is also locked `FOR SHARE` until the write's
    /// transaction ends: a takeover (which updates that row) waits for the write to commit,
    /// or the write, having waited for the takeover, finds the row changed and matches
    /// nothing. Without it, under READ COMMITTED, a takeover could commit between the check
    /// and the end of the write's transaction (the history entry of a transition landing
    /// after the lease moved on). SQLite has one writer at a time: nothing to lock.
    pub(crate) fn push_condition<'q>(
        &self,
        query: &mut SqlBuilder<'q>,
        node: Option<Uuid>,
        lock: bool,
    ) where
        'a: 'q,
    {
        query.push("EXISTS (SELECT 1 FROM node_leases WHERE node_leases.node_uuid = ");
        match node {
            Some(node) => query.arg(node),
            None => query.push("nodes.uuid"),
        };
        query
            .push(" AND node_leases.holder = ")
            .arg(self.holder)
            .push(" AND node_leases.generation = ")
            .arg(self.generation)
            .push(if lock { " FOR SHARE)" } else { ")" });
    }
}

/// PostgreSQL: SQL that is true when the lease row `node_leases` belongs to a conductor whose
/// process died (its liveness lock is gone).
fn holder_gone() -> String {
    format!(
        "node_leases.holder IN (SELECT hostname FROM conductors WHERE {})",
        pg_lock_lost("conductors")
    )
}

/// `now + ttl`, saturating at the far future for absurd TTLs.
fn expiry(now: DateTime<Utc>, ttl: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(ttl)
        .ok()
        .and_then(|ttl| now.checked_add_signed(ttl))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Store {
    /// Takes the lease on `node` for `holder` until `now + ttl`: succeeds if the node has no
    /// lease, its lease has expired, or `holder` already holds it (then it is extended and
    /// keeps its `acquired_at`). Otherwise [`Error::LeaseHeld`] names the holder.
    pub async fn node_lease_acquire(
        &self,
        node: Uuid,
        holder: &str,
        ttl: Duration,
    ) -> Result<NodeLease, Error> {
        self.node_lease_acquire_with(node, holder, ttl, false).await
    }

    /// [`Store::node_lease_acquire`] for a new request on the node: once the lease is taken, no
    /// flow runs on the node, so an abort mark still there is stale and goes in the same call
    /// ([`Store::node_abort_request_clear`]); a refused lease leaves the mark alone.
    pub async fn node_lease_acquire_for_request(
        &self,
        node: Uuid,
        holder: &str,
        ttl: Duration,
    ) -> Result<NodeLease, Error> {
        self.node_lease_acquire_with(node, holder, ttl, true).await
    }

    async fn node_lease_acquire_with(
        &self,
        node: Uuid,
        holder: &str,
        ttl: Duration,
        forget_abort: bool,
    ) -> Result<NodeLease, Error> {
        let holder_gone = match self.backend_name() {
            "sqlite" => String::new(),
            _ => format!(" OR {}", holder_gone()),
        };
        // Each grant a new generation, even the holder's own again: a task of an earlier
        // grant (another process under the same name) is fenced off too.
        let (bump, generation) = match self.backend_name() {
            "sqlite" => (
                "INSERT INTO node_lease_generation (id, value) VALUES (1, 1) \
                 ON CONFLICT (id) DO UPDATE SET value = value + 1; ",
                "(SELECT value FROM node_lease_generation WHERE id = 1)",
            ),
            _ => ("", "nextval('node_lease_generation')"),
        };
        let upsert = format!(
            "INSERT INTO node_leases ({LEASE_COLUMNS}) VALUES ($1, $2, $3, $4, {generation}) \
             ON CONFLICT (node_uuid) DO UPDATE SET holder = excluded.holder, \
             expires_at = excluded.expires_at, generation = excluded.generation, \
             acquired_at = CASE WHEN node_leases.holder = excluded.holder \
             THEN node_leases.acquired_at ELSE excluded.acquired_at END \
             WHERE node_leases.holder = excluded.holder \
             OR node_leases.expires_at <= excluded.acquired_at{holder_gone} \
             RETURNING {LEASE_COLUMNS}"
        );
        let sql = match (forget_abort, self.backend_name()) {
            (false, _) => format!("{bump}{upsert}"),
            // Statements in one call; `changes()` is 0 after a refused upsert.
            (true, "sqlite") => format!(
                "{bump}{upsert}; DELETE FROM node_abort_requests \
                 WHERE node_uuid = $1 AND changes() > 0"
            ),
            (true, _) => format!(
                "WITH lease AS ({upsert}), cleared AS (DELETE FROM node_abort_requests \
                 WHERE node_uuid = $1 AND EXISTS (SELECT 1 FROM lease)) SELECT * FROM lease"
            ),
        };
        // A lease released between our refused attempt and our look at the holder is free:
        // try once more rather than report a holder that no longer exists.
        for _ in 0..2 {
            let now = self.now();
            let args = [
                Arg::Uuid(node),
                Arg::Text(holder),
                Arg::Time(now),
                Arg::Time(expiry(now, ttl)),
            ];
            // `fetch_all`: every statement runs (a fetch of one row stops after the first).
            let acquired = self
                .fetch_all(&sql, &args, lease_from_row)
                .await
                .map(|leases| leases.into_iter().next())
                .map_err(|error| {
                    if is_foreign_key_violation(&error) {
                        Error::NotFound {
                            kind: Kind::Node,
                            ident: node.to_string(),
                        }
                    } else {
                        Error::Backend {
                            operation: "node_lease_acquire",
                            source: error,
                        }
                    }
                })?;
            if let Some(lease) = acquired {
                return Ok(lease);
            }
            if let Some(lease) = self.node_lease_get(node).await? {
                return Err(Error::LeaseHeld {
                    node,
                    holder: lease.holder,
                    expires_at: lease.expires_at,
                });
            }
        }
        Err(Error::LeaseHeld {
            node,
            holder: "another holder".to_owned(),
            expires_at: self.now(),
        })
    }

    /// Extends the lease `fence` names on `node` to `now + ttl`, keeping its generation.
    /// [`Error::LeaseNotHeld`] if the lease is gone or was granted again since (to someone
    /// else, or to the same name): the caller must stop working on the node.
    ///
    /// A lapsed lease that nobody took over is renewed: the holder did not lose anything.
    pub async fn node_lease_renew(
        &self,
        node: Uuid,
        fence: Fence<'_>,
        ttl: Duration,
    ) -> Result<NodeLease, Error> {
        let sql = format!(
            "UPDATE node_leases SET expires_at = $3 WHERE node_uuid = $1 AND holder = $2 \
             AND generation = $4 RETURNING {LEASE_COLUMNS}"
        );
        let args = [
            Arg::Uuid(node),
            Arg::Text(fence.holder),
            Arg::Time(expiry(self.now(), ttl)),
            Arg::Int(fence.generation),
        ];
        self.fetch_optional(&sql, &args, lease_from_row)
            .await
            .map_err(backend("node_lease_renew"))?
            .ok_or_else(|| Error::LeaseNotHeld {
                node,
                holder: fence.holder.to_owned(),
            })
    }

    /// Gives up the lease `fence` names on `node` (with, if `forget_abort`, any abort mark
    /// left on the node, as [`Store::node_lease_release_ending`]). [`Error::LeaseNotHeld`] if
    /// that grant no longer stands: a later grant, even to the same name, is never removed.
    pub async fn node_lease_give_back(
        &self,
        node: Uuid,
        fence: Fence<'_>,
        forget_abort: bool,
    ) -> Result<(), Error> {
        const DELETE: &str = "DELETE FROM node_leases \
             WHERE node_uuid = $1 AND holder = $2 AND generation = $3 RETURNING node_uuid";
        let sql = match (forget_abort, self.backend_name()) {
            (false, _) => DELETE.to_owned(),
            // The mark goes only if the lease did (`changes()` of the DELETE before it).
            (true, "sqlite") => format!(
                "{DELETE}; DELETE FROM node_abort_requests WHERE node_uuid = $1 \
                 AND changes() > 0"
            ),
            (true, _) => format!(
                "WITH lease AS ({DELETE}), cleared AS (DELETE FROM node_abort_requests \
                 WHERE node_uuid = $1 AND EXISTS (SELECT 1 FROM lease)) SELECT * FROM lease"
            ),
        };
        let args = [
            Arg::Uuid(node),
            Arg::Text(fence.holder),
            Arg::Int(fence.generation),
        ];
        let released = self
            .fetch_all(&sql, &args, |row| row.uuid("node_uuid"))
            .await
            .map_err(backend("node_lease_give_back"))?;
        if released.is_empty() {
            return Err(Error::LeaseNotHeld {
                node,
                holder: fence.holder.to_owned(),
            });
        }
        Ok(())
    }

    /// Whether the lease `fence` names still stands on `node` (why a fenced write matched no
    /// row: the fence, or the revision).
    pub(crate) async fn node_lease_fence_stands(
        &self,
        node: Uuid,
        fence: Fence<'_>,
    ) -> Result<bool, Error> {
        // The generation itself (a BIGINT on both backends; a bare `1` is an INT4 on
        // PostgreSQL, which does not decode as the i64 `row.int` reads).
        let sql = "SELECT generation FROM node_leases \
                   WHERE node_uuid = $1 AND holder = $2 AND generation = $3";
        let args = [
            Arg::Uuid(node),
            Arg::Text(fence.holder),
            Arg::Int(fence.generation),
        ];
        self.fetch_optional(sql, &args, |row| row.int("generation"))
            .await
            .map(|held| held.is_some())
            .map_err(backend("node_lease_fence_stands"))
    }

    /// Gives up `holder`'s lease on `node`. [`Error::LeaseNotHeld`] if `holder` does not hold
    /// it; someone else's lease is never removed.
    pub async fn node_lease_release(&self, node: Uuid, holder: &str) -> Result<(), Error> {
        let sql = "DELETE FROM node_leases WHERE node_uuid = $1 AND holder = $2";
        let released = self
            .execute(sql, &[Arg::Uuid(node), Arg::Text(holder)])
            .await
            .map_err(backend("node_lease_release"))?;
        if released == 0 {
            return Err(Error::LeaseNotHeld {
                node,
                holder: holder.to_owned(),
            });
        }
        Ok(())
    }

    /// [`Store::node_lease_release`] and [`Store::node_abort_request_clear`] at once, one call
    /// to the database: a flow ends, and an abort marked too late to matter goes with it.
    pub async fn node_lease_release_ending(&self, node: Uuid, holder: &str) -> Result<(), Error> {
        let sql = match self.backend_name() {
            // SQLite has no DELETE in a WITH: two statements in one call, each its own commit.
            "sqlite" => {
                "DELETE FROM node_abort_requests WHERE node_uuid = $1; \
                 DELETE FROM node_leases WHERE node_uuid = $1 AND holder = $2 \
                 RETURNING node_uuid"
            }
            _ => {
                "WITH cleared AS (DELETE FROM node_abort_requests WHERE node_uuid = $1) \
                 DELETE FROM node_leases WHERE node_uuid = $1 AND holder = $2 \
                 RETURNING node_uuid"
            }
        };
        let released = self
            .fetch_all(sql, &[Arg::Uuid(node), Arg::Text(holder)], |row| {
                row.uuid("node_uuid")
            })
            .await
            .map_err(backend("node_lease_release_ending"))?;
        if released.is_empty() {
            return Err(Error::LeaseNotHeld {
                node,
                holder: holder.to_owned(),
            });
        }
        Ok(())
    }

    /// Gives up every lease `holder` has: a conductor starting up clears what its previous
    /// life left behind. Returns how many were released.
    pub async fn node_lease_release_all(&self, holder: &str) -> Result<u64, Error> {
        self.execute(
            "DELETE FROM node_leases WHERE holder = $1",
            &[Arg::Text(holder)],
        )
        .await
        .map_err(backend("node_lease_release_all"))
    }

    /// The lease on `node`, expired or not, if there is a row for it. (The API's `reservation`
    /// field is its holder while it has not expired.)
    pub async fn node_lease_get(&self, node: Uuid) -> Result<Option<NodeLease>, Error> {
        let sql = format!("SELECT {LEASE_COLUMNS} FROM node_leases WHERE node_uuid = $1");
        self.fetch_optional(&sql, &[Arg::Uuid(node)], lease_from_row)
            .await
            .map_err(backend("node_lease_get"))
    }

    /// Every lease that is held — not expired, its holder alive: the nodes some conductor is
    /// working on right now. A listing reads them once per page instead of once per node;
    /// there are at most as many as the conductors have worker slots.
    pub async fn node_lease_list_held(&self) -> Result<Vec<NodeLease>, Error> {
        let sql = format!(
            "SELECT {LEASE_COLUMNS} FROM node_leases WHERE {}",
            self.lease_held_sql()
        );
        self.fetch_all(&sql, &[Arg::Time(self.now())], lease_from_row)
            .await
            .map_err(backend("node_lease_list_held"))
    }

    /// The lease on `node` if it is held: not expired, and its holder alive. `None` for no
    /// lease, a lapsed one, or one whose holder died (anyone may take it over).
    pub async fn node_lease_get_held(&self, node: Uuid) -> Result<Option<NodeLease>, Error> {
        let sql = format!(
            "SELECT {LEASE_COLUMNS} FROM node_leases WHERE node_uuid = $2 AND {}",
            self.lease_held_sql()
        );
        self.fetch_optional(
            &sql,
            &[Arg::Time(self.now()), Arg::Uuid(node)],
            lease_from_row,
        )
        .await
        .map_err(backend("node_lease_get_held"))
    }

    /// The condition of a held lease row, with now as `$1`.
    fn lease_held_sql(&self) -> String {
        match self.backend_name() {
            "sqlite" => "expires_at > $1".to_owned(),
            _ => format!("expires_at > $1 AND NOT {}", holder_gone()),
        }
    }

    /// Leases that have expired by now, oldest first: nodes whose holder stopped renewing.
    pub async fn node_lease_list_expired(&self) -> Result<Vec<NodeLease>, Error> {
        let sql = format!(
            "SELECT {LEASE_COLUMNS} FROM node_leases WHERE expires_at <= $1 ORDER BY expires_at"
        );
        self.fetch_all(&sql, &[Arg::Time(self.now())], lease_from_row)
            .await
            .map_err(backend("node_lease_list_expired"))
    }
}
