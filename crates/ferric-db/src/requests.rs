//! Conductor requests and abort requests: how work crosses processes on one PostgreSQL.
//!
//! Theory of operation: an API process that does not own a node inserts a request addressed
//! to the conductor that does ([`Store::conductor_request_create`]) and wakes it with a
//! `NOTIFY` on [`REQUESTS_CHANNEL`] (payload: the conductor's hostname). The conductor claims
//! requests one at a time with a compare-and-set `UPDATE` ([`Store::conductor_request_claim`]),
//! runs them, writes the reply ([`Store::conductor_request_reply`]) and notifies
//! [`REPLIES_CHANNEL`] (payload: the request id). Notifications are only a wake-up: both sides
//! also poll, so a lost notification (a listener reconnecting) delays, never loses, a request.
//! An API that gives up withdraws its request if nobody claimed it yet
//! ([`Store::conductor_request_withdraw`]), so a late conductor never runs a request whose
//! caller already heard 503. Every statement is a single autocommit statement.
//!
//! Abort requests (`node_abort_requests`) are flags any process may set on a node while a
//! conductor runs a flow on it; the worker that holds the node, on whichever conductor, sees
//! them at its next step boundary, while it waits, and in the write that would move the node
//! on ([`Store::node_update_unless_aborted`]). The one multi-statement transaction of the
//! store is here: setting a flag bumps the node's revision with it (nothing but SQL inside).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use ferric_model::ProvisionState;
use ferric_model::resources::Node;

use crate::error::{Error, backend};
use crate::nodes::history::{NodeWrite, WriteGuard};
use crate::nodes::node_values;
use crate::sql::{Arg, DbRow, SqlBuilder};
use crate::store::Store;

/// The channel conductors listen on; the payload is the addressed conductor's hostname.
pub const REQUESTS_CHANNEL: &str = "ferric_conductor_requests";
/// The channel API processes listen on; the payload is the answered request's id.
pub const REPLIES_CHANNEL: &str = "ferric_conductor_replies";
/// The channel every process listens on to rebuild its hash ring at once when a conductor
/// registers or leaves; the payload is its hostname.
pub const MEMBERSHIP_CHANNEL: &str = "ferric_conductor_membership";

/// A request as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConductorRequest {
    pub id: i64,
    /// The hostname of the conductor it is addressed to.
    pub conductor: String,
    pub node: Uuid,
    /// What to do, as the conductor crate serialized it.
    pub body: String,
    pub created_at: DateTime<Utc>,
    /// After this the caller no longer waits: an unclaimed request is not run.
    pub deadline: DateTime<Utc>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub reply: Option<String>,
}

const REQUEST_COLUMNS: &str =
    "id, conductor, node_uuid, body, created_at, deadline, claimed_at, reply";

fn request_from_row(row: &dyn DbRow) -> Result<ConductorRequest, sqlx::Error> {
    Ok(ConductorRequest {
        id: row.int("id")?,
        conductor: row.text("conductor")?,
        node: row.uuid("node_uuid")?,
        body: row.text("body")?,
        created_at: row.time("created_at")?,
        deadline: row.time("deadline")?,
        claimed_at: row.opt_time("claimed_at")?,
        reply: row.opt_text("reply")?,
    })
}

impl Store {
    /// Whether this store can carry requests between processes (PostgreSQL: `NOTIFY`).
    pub fn is_shared(&self) -> bool {
        self.backend_name() == "postgres"
    }

    /// Sends a notification on `channel` (PostgreSQL; a no-op on SQLite, where every role runs
    /// in one process).
    pub async fn notify(&self, channel: &str, payload: &str) -> Result<(), Error> {
        if !self.is_shared() {
            return Ok(());
        }
        self.execute(
            "SELECT pg_notify($1, $2)",
            &[Arg::Text(channel), Arg::Text(payload)],
        )
        .await
        .map(drop)
        .map_err(backend("notify"))
    }

    /// Records a request for `conductor` and notifies it. Returns the request's id.
    pub async fn conductor_request_create(
        &self,
        conductor: &str,
        node: Uuid,
        body: &str,
        deadline: DateTime<Utc>,
    ) -> Result<i64, Error> {
        let sql = "INSERT INTO conductor_requests (conductor, node_uuid, body, created_at, \
                   deadline) VALUES ($1, $2, $3, $4, $5) RETURNING id";
        let args = [
            Arg::Text(conductor),
            Arg::Uuid(node),
            Arg::Text(body),
            Arg::Time(self.now()),
            Arg::Time(deadline),
        ];
        let id = self
            .fetch_optional(sql, &args, |row| row.int("id"))
            .await
            .map_err(backend("conductor_request_create"))?
            .ok_or_else(|| Error::Backend {
                operation: "conductor_request_create",
                source: sqlx::Error::RowNotFound,
            })?;
        self.notify(REQUESTS_CHANNEL, conductor).await?;
        Ok(id)
    }

    /// Claims the oldest unclaimed request for `conductor` whose caller still waits, if any.
    /// Two claimers never get the same request (the `UPDATE … WHERE claimed_at IS NULL` is a
    /// compare-and-set).
    pub async fn conductor_request_claim(
        &self,
        conductor: &str,
    ) -> Result<Option<ConductorRequest>, Error> {
        let now = self.now();
        let sql = format!(
            "UPDATE conductor_requests SET claimed_at = $2 WHERE claimed_at IS NULL AND id = \
             (SELECT id FROM conductor_requests WHERE conductor = $1 AND claimed_at IS NULL \
             AND deadline > $2 ORDER BY id LIMIT 1) RETURNING {REQUEST_COLUMNS}"
        );
        self.fetch_optional(
            &sql,
            &[Arg::Text(conductor), Arg::Time(now)],
            request_from_row,
        )
        .await
        .map_err(backend("conductor_request_claim"))
    }

    /// Stores the reply to request `id` and notifies the API processes.
    pub async fn conductor_request_reply(&self, id: i64, reply: &str) -> Result<(), Error> {
        self.execute(
            "UPDATE conductor_requests SET reply = $2, replied_at = $3 WHERE id = $1",
            &[Arg::Int(id), Arg::Text(reply), Arg::Time(self.now())],
        )
        .await
        .map_err(backend("conductor_request_reply"))?;
        self.notify(REPLIES_CHANNEL, &id.to_string()).await
    }

    /// Request `id` as it is now; `None` once it was withdrawn or purged.
    pub async fn conductor_request_get(&self, id: i64) -> Result<Option<ConductorRequest>, Error> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM conductor_requests WHERE id = $1");
        self.fetch_optional(&sql, &[Arg::Int(id)], request_from_row)
            .await
            .map_err(backend("conductor_request_get"))
    }

    /// Deletes request `id` if no conductor has claimed it: `true` when it is gone for good
    /// (it will never run), `false` when a conductor already has it.
    pub async fn conductor_request_withdraw(&self, id: i64) -> Result<bool, Error> {
        let deleted = self
            .execute(
                "DELETE FROM conductor_requests WHERE id = $1 AND claimed_at IS NULL",
                &[Arg::Int(id)],
            )
            .await
            .map_err(backend("conductor_request_withdraw"))?;
        Ok(deleted > 0)
    }

    /// How many requests the table holds (answered or not), for tests and operators.
    pub async fn conductor_request_count(&self) -> Result<i64, Error> {
        self.fetch_optional(
            "SELECT COUNT(*) AS count FROM conductor_requests",
            &[],
            |row| row.int("count"),
        )
        .await
        .map(Option::unwrap_or_default)
        .map_err(backend("conductor_request_count"))
    }

    /// Deletes the request `id` once its caller has read the reply.
    pub async fn conductor_request_delete(&self, id: i64) -> Result<(), Error> {
        self.execute(
            "DELETE FROM conductor_requests WHERE id = $1",
            &[Arg::Int(id)],
        )
        .await
        .map(drop)
        .map_err(backend("conductor_request_delete"))
    }

    /// Deletes requests whose deadline passed before `before`: answered ones nobody read (the
    /// caller died) and unclaimed ones nobody will run. Returns how many.
    pub async fn conductor_request_purge(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        self.execute(
            "DELETE FROM conductor_requests WHERE deadline < $1",
            &[Arg::Time(before)],
        )
        .await
        .map_err(backend("conductor_request_purge"))
    }

    /// Marks the flow running on `node` for abort (seed 001), but only while the node is still
    /// at revision `version` and in one of `states`: what the caller checked the abort
    /// against. `false` (nothing marked) when the node moved on meanwhile.
    ///
    /// One transaction bumps the node's revision and records the flag, so the mark and a
    /// conductor's move of the node out of the running state cannot both win: the
    /// conductor's write ([`Store::node_update_unless_aborted`]) is guarded by the revision and
    /// by the flag's absence, and whichever of the two statements takes the node's row first
    /// makes the other match nothing.
    pub async fn node_abort_request_set(
        &self,
        node: Uuid,
        version: i64,
        states: &[ProvisionState],
    ) -> Result<bool, Error> {
        // No `states`: nothing can match (and `IN ()` is not SQL).
        if states.is_empty() {
            return Ok(false);
        }
        let mut bump = SqlBuilder::new("UPDATE nodes SET version = version + 1");
        bump.and_eq("uuid", node).and_eq("version", version);
        bump.and().push("provision_state IN (");
        for (n, state) in states.iter().enumerate() {
            if n > 0 {
                bump.push(", ");
            }
            bump.arg(state.as_str());
        }
        bump.push(")");
        let flag = "INSERT INTO node_abort_requests (node_uuid, requested_at) VALUES ($1, $2) \
                    ON CONFLICT (node_uuid) DO NOTHING";
        self.execute_then(
            (bump.sql(), bump.args()),
            (flag, &[Arg::Uuid(node), Arg::Time(self.now())]),
        )
        .await
        .map_err(backend("node_abort_request_set"))
    }

    /// [`Store::node_update`], unless the node is marked for abort: then nothing is written
    /// and the answer is `Ok(None)`. The conductor moves a node out of a running flow (to
    /// its next step, to `active`, to a waiting state) with this, so an accepted abort is
    /// never overtaken (see [`Store::node_abort_request_set`]).
    pub async fn node_update_unless_aborted(
        &self,
        node: &Node,
        expected_version: i64,
    ) -> Result<Option<Node>, Error> {
        let values = node_values(node);
        self.node_write(
            node,
            &values,
            expected_version,
            NodeWrite::unfenced(WriteGuard::RevisionUnlessAborted),
        )
        .await
    }

    /// Whether someone asked to stop the deployment on `node`.
    pub async fn node_abort_request_exists(&self, node: Uuid) -> Result<bool, Error> {
        self.fetch_optional(
            "SELECT node_uuid FROM node_abort_requests WHERE node_uuid = $1",
            &[Arg::Uuid(node)],
            |row| row.uuid("node_uuid"),
        )
        .await
        .map(|found| found.is_some())
        .map_err(backend("node_abort_request_exists"))
    }

    /// Forgets the abort request on `node`; `true` if there was one.
    pub async fn node_abort_request_clear(&self, node: Uuid) -> Result<bool, Error> {
        self.execute(
            "DELETE FROM node_abort_requests WHERE node_uuid = $1",
            &[Arg::Uuid(node)],
        )
        .await
        .map(|deleted| deleted > 0)
        .map_err(backend("node_abort_request_clear"))
    }
}
