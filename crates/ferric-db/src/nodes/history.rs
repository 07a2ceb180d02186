//! Node history: the events the API shows at `/v1/nodes/{node}/history`, pruned to a bounded
//! number per node. A state change and its entry are written in one transaction
//! ([`Store::node_update_recorded`]): one commit per transition, and no state change without
//! its record.

use ferric_model::resources::{Node, NodeHistoryEntry};
use uuid::Uuid;

use super::{node_changes, node_from_row, node_values, write_error};
use crate::error::{Error, Kind, backend, is_foreign_key_violation, unique_violation};
use crate::leases::Fence;
use crate::sql::{Arg, DbRow, SqlBuilder, update_returning_if};
use crate::store::{InsertRow, Store};

/// When [`Store::node_update_recorded`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteGuard {
    /// Over the revision the caller read (as [`Store::node_update`]).
    Revision,
    /// Over that revision and only while no abort is requested (as
    /// [`Store::node_update_unless_aborted`]).
    RevisionUnlessAborted,
}

/// A lease given up by the write that ends a task ([`Store::node_save_releasing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRelease<'a> {
    /// The lease that goes, and the one the write is made under; any other grant (someone
    /// else's, or a later one under the same name) is never removed, and refuses the write.
    pub fence: Fence<'a>,
    /// Whether an abort mark left on the node goes too (a flow ends, and an abort marked too
    /// late to matter with it, as [`Store::node_lease_release_ending`]).
    pub forget_abort: bool,
}

/// How [`Store::node_write`] writes: its guard, the lease it is made under, and what commits
/// with it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeWrite<'a> {
    pub(crate) guard: WriteGuard,
    pub(crate) fence: Option<Fence<'a>>,
    pub(crate) entry: Option<&'a NodeHistoryEntry>,
    pub(crate) release: Option<LeaseRelease<'a>>,
}

impl NodeWrite<'_> {
    /// A write guarded by `guard` alone: no lease, nothing with it (the API's writes).
    pub(crate) fn unfenced(guard: WriteGuard) -> Self {
        Self {
            guard,
            fence: None,
            entry: None,
            release: None,
        }
    }
}

const HISTORY_COLUMNS: &str =
    "uuid, node_uuid, created_at, severity, event_type, event, conductor, user_name";

fn entry_from_row(row: &dyn DbRow) -> Result<NodeHistoryEntry, sqlx::Error> {
    Ok(NodeHistoryEntry {
        uuid: row.uuid("uuid")?,
        node: row.uuid("node_uuid")?,
        created_at: row.time("created_at")?,
        severity: row.text("severity")?,
        event_type: row.text("event_type")?,
        event: row.text("event")?,
        conductor: row.opt_text("conductor")?,
        user: row.opt_text("user_name")?,
    })
}

/// `entry`'s values in the order of [`HISTORY_COLUMNS`].
fn entry_args(entry: &NodeHistoryEntry) -> [Arg<'_>; 8] {
    [
        Arg::Uuid(entry.uuid),
        Arg::Uuid(entry.node),
        Arg::Time(entry.created_at),
        Arg::Text(&entry.severity),
        Arg::Text(&entry.event_type),
        Arg::Text(&entry.event),
        (&entry.conductor).into(),
        (&entry.user).into(),
    ]
}

impl Store {
    /// Records an event for `entry.node`, keeping the entry's own `created_at`.
    pub async fn node_history_add(
        &self,
        entry: &NodeHistoryEntry,
    ) -> Result<NodeHistoryEntry, Error> {
        let sql = format!(
            "INSERT INTO node_history ({HISTORY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             RETURNING {HISTORY_COLUMNS}"
        );
        let args = entry_args(entry);
        self.fetch_optional(&sql, &args, entry_from_row)
            .await
            .map_err(|error| {
                if is_foreign_key_violation(&error) {
                    return Error::NotFound {
                        kind: Kind::Node,
                        ident: entry.node.to_string(),
                    };
                }
                let fields = [("uuid", entry.uuid.to_string())];
                match unique_violation(&error, "node_history", &fields) {
                    Some((field, value)) => Error::Duplicate {
                        kind: Kind::NodeHistory,
                        field,
                        value,
                    },
                    None => Error::Backend {
                        operation: "node_history_add",
                        source: error,
                    },
                }
            })?
            .ok_or_else(|| Error::NotFound {
                kind: Kind::NodeHistory,
                ident: entry.uuid.to_string(),
            })
    }

    /// [`Store::node_history_add`] by the holder of the node's lease: the entry is written
    /// only while `fence`'s grant stands (checked in the same statement), and
    /// [`Error::LeaseLost`] otherwise.
    pub async fn node_history_add_fenced(
        &self,
        entry: &NodeHistoryEntry,
        fence: Fence<'_>,
    ) -> Result<(), Error> {
        let mut query = SqlBuilder::new("INSERT INTO node_history (");
        query.push(HISTORY_COLUMNS).push(") SELECT ");
        for (at, arg) in entry_args(entry).into_iter().enumerate() {
            query.push(if at == 0 { "" } else { ", " }).arg(arg);
        }
        query.push(" WHERE ");
        fence.push_condition(&mut query, Some(entry.node), self.is_postgres());
        let written = self
            .execute(query.sql(), query.args())
            .await
            .map_err(backend("node_history_add_fenced"))?;
        if written == 0 {
            return Err(Error::LeaseLost {
                node: entry.node,
                holder: fence.holder.to_owned(),
                generation: fence.generation,
            });
        }
        Ok(())
    }

    /// [`Store::node_update`] (or, with [`WriteGuard::RevisionUnlessAborted`],
    /// [`Store::node_update_unless_aborted`]) and [`Store::node_history_add`] of `entry` in one
    /// transaction: both or neither. `Ok(None)`: an abort is requested and nothing was written.
    pub async fn node_update_recorded(
        &self,
        node: &Node,
        expected_version: i64,
        guard: WriteGuard,
        entry: &NodeHistoryEntry,
    ) -> Result<Option<Node>, Error> {
        let values = node_values(node);
        let write = NodeWrite {
            guard,
            fence: None,
            entry: Some(entry),
            release: None,
        };
        self.node_write(node, &values, expected_version, write)
            .await
    }

    /// Saves `node` over `base`, the same node as read at the revision the write is guarded
    /// by (`base.version`): only the columns that differ from `base` are written — a
    /// transition touches three, and an `UPDATE` that names every column rewrites every
    /// index of the table (SQLite) or the whole row's index entries (PostgreSQL's non-HOT
    /// update). With `entry`, its history entry commits with it; `Ok(None)` as
    /// [`Store::node_update_recorded`]. A `base` that is another node or another revision
    /// than `node`'s is not trusted: then every column is written over `node.version`.
    ///
    /// The write is the lease holder's: it lands only while `fence`'s grant of the node's
    /// lease stands, checked in the same statement; [`Error::LeaseLost`] otherwise, and
    /// nothing is written.
    pub async fn node_save(
        &self,
        node: &Node,
        base: &Node,
        fence: Fence<'_>,
        guard: WriteGuard,
        entry: Option<&NodeHistoryEntry>,
    ) -> Result<Option<Node>, Error> {
        let values = if base.uuid == node.uuid && base.version == node.version {
            node_changes(node, base)
        } else {
            node_values(node)
        };
        let write = NodeWrite {
            guard,
            fence: Some(fence),
            entry,
            release: None,
        };
        self.node_write(node, &values, node.version, write).await
    }

    /// [`Store::node_save`] that also gives up `release.holder`'s lease on the node in the
    /// same transaction, so nobody ever sees the state a task ended in while the node is
    /// still leased: a client that reads the new state can act on the node at once. Nothing
    /// is released when nothing is written (`Ok(None)`, or an error). Fenced by the lease it
    /// releases, as [`Store::node_save`].
    pub async fn node_save_releasing(
        &self,
        node: &Node,
        base: &Node,
        guard: WriteGuard,
        entry: Option<&NodeHistoryEntry>,
        release: LeaseRelease<'_>,
    ) -> Result<Option<Node>, Error> {
        let values = if base.uuid == node.uuid && base.version == node.version {
            node_changes(node, base)
        } else {
            node_values(node)
        };
        let write = NodeWrite {
            guard,
            fence: Some(release.fence),
            entry,
            release: Some(release),
        };
        self.node_write(node, &values, node.version, write).await
    }

    /// Writes `values` of `node` over revision `expected_version` as `write` says.
    pub(crate) async fn node_write<'a>(
        &self,
        node: &Node,
        values: &[(&'static str, Arg<'a>)],
        expected_version: i64,
        write: NodeWrite<'a>,
    ) -> Result<Option<Node>, Error> {
        let NodeWrite {
            guard,
            fence,
            entry,
            release,
        } = write;
        let lock = self.is_postgres();
        let condition = |query: &mut SqlBuilder<'a>| {
            if guard == WriteGuard::RevisionUnlessAborted {
                query.push(
                    " AND NOT EXISTS (SELECT 1 FROM node_abort_requests \
                     WHERE node_abort_requests.node_uuid = nodes.uuid)",
                );
            }
            if let Some(fence) = &fence {
                query.push(" AND ");
                fence.push_condition(query, None, lock);
            }
        };
        let query = update_returning_if(
            "nodes",
            node.uuid,
            self.now(),
            expected_version,
            values,
            condition,
        );
        let updated = match (entry, release) {
            (entry, Some(release)) => {
                let into = format!("node_history ({HISTORY_COLUMNS})");
                let history_args = entry.map(entry_args);
                let insert = history_args.as_ref().map(|args| InsertRow {
                    into: &into,
                    values: "$1, $2, $3, $4, $5, $6, $7, $8",
                    args,
                });
                let insert_sql = insert.map(|insert| insert.sql());
                let lease_args = [
                    Arg::Uuid(node.uuid),
                    Arg::Text(release.fence.holder),
                    Arg::Int(release.fence.generation),
                ];
                let node_args = [Arg::Uuid(node.uuid)];
                let mut then: Vec<(&str, &[Arg<'_>])> = Vec::with_capacity(3);
                if let (Some(sql), Some(insert)) = (&insert_sql, &insert) {
                    then.push((sql, insert.args));
                }
                then.push((
                    "DELETE FROM node_leases \
                     WHERE node_uuid = $1 AND holder = $2 AND generation = $3",
                    &lease_args,
                ));
                if release.forget_abort {
                    then.push((
                        "DELETE FROM node_abort_requests WHERE node_uuid = $1",
                        &node_args,
                    ));
                }
                self.fetch_optional_then_each((query.sql(), query.args(), node_from_row), &then)
                    .await
            }
            (Some(entry), None) => {
                let into = format!("node_history ({HISTORY_COLUMNS})");
                let args = entry_args(entry);
                self.fetch_optional_then(
                    (query.sql(), query.args(), node_from_row),
                    InsertRow {
                        into: &into,
                        values: "$1, $2, $3, $4, $5, $6, $7, $8",
                        args: &args,
                    },
                )
                .await
            }
            (None, None) => {
                self.fetch_optional(query.sql(), query.args(), node_from_row)
                    .await
            }
        }
        .map_err(|error| write_error(error, node, "node_write"))?;
        // A write that matched no row: first whether its lease was lost, which no retry mends.
        if let (None, Some(fence)) = (&updated, fence)
            && !self.node_lease_fence_stands(node.uuid, fence).await?
        {
            return Err(Error::LeaseLost {
                node: node.uuid,
                holder: fence.holder.to_owned(),
                generation: fence.generation,
            });
        }
        match updated {
            Some(node) => Ok(Some(node)),
            None if guard == WriteGuard::RevisionUnlessAborted
                && self.node_abort_request_exists(node.uuid).await? =>
            {
                Ok(None)
            }
            None => Err(self
                .stale_or_missing("nodes", Kind::Node, node.uuid, expected_version)
                .await),
        }
    }

    /// `node`'s history, oldest first.
    pub async fn node_history_list(&self, node: Uuid) -> Result<Vec<NodeHistoryEntry>, Error> {
        let sql =
            format!("SELECT {HISTORY_COLUMNS} FROM node_history WHERE node_uuid = $1 ORDER BY id");
        self.fetch_all(&sql, &[Arg::Uuid(node)], entry_from_row)
            .await
            .map_err(backend("node_history_list"))
    }

    /// Keeps only the newest `keep` entries of `node`'s history; returns how many went.
    pub async fn node_history_prune(&self, node: Uuid, keep: u32) -> Result<u64, Error> {
        let sql = "DELETE FROM node_history WHERE node_uuid = $1 AND id NOT IN \
                   (SELECT id FROM node_history WHERE node_uuid = $1 ORDER BY id DESC LIMIT $2)";
        self.execute(sql, &[Arg::Uuid(node), Arg::Int(i64::from(keep))])
            .await
            .map_err(backend("node_history_prune"))
    }
}
