//! What can go wrong in storage, in terms a caller can branch on and an operator can act on.
//!
//! Caller mistakes and races (not found, duplicate, stale revision, lease held) get their own
//! variants so the API can map them to 404/409 without parsing text; everything the database
//! itself failed at is [`Error::Backend`], naming the operation and keeping sqlx's error as the
//! source.

use std::fmt;

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The kind of record an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Node,
    Port,
    Portgroup,
    Chassis,
    Conductor,
    NodeLease,
    NodeHistory,
    Allocation,
    VolumeConnector,
    VolumeTarget,
    DeployTemplate,
    Runbook,
    Introspection,
    IntrospectionRule,
    InspectionRule,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::Port => "port",
            Self::Portgroup => "portgroup",
            Self::Chassis => "chassis",
            Self::Conductor => "conductor",
            Self::NodeLease => "node lease",
            Self::NodeHistory => "node history entry",
            Self::Allocation => "allocation",
            Self::VolumeConnector => "volume connector",
            Self::VolumeTarget => "volume target",
            Self::DeployTemplate => "deploy template",
            Self::Runbook => "runbook",
            Self::Introspection => "introspection",
            Self::IntrospectionRule => "introspection rule",
            Self::InspectionRule => "inspection rule",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No record has this UUID or name.
    #[error("{kind} {ident} was not found")]
    NotFound { kind: Kind, ident: String },

    /// A unique field already holds this value in another record (a port's MAC address, a
    /// node's name or instance UUID, …).
    #[error("a {kind} with {field} '{value}' already exists")]
    Duplicate {
        kind: Kind,
        field: &'static str,
        value: String,
    },

    /// A guarded update lost a race: the record changed since the caller read it.
    #[error(
        "{kind} {ident} was changed by someone else (expected revision {expected}, it is now \
         {actual}); read it again and retry"
    )]
    StaleRevision {
        kind: Kind,
        ident: String,
        expected: i64,
        actual: i64,
    },

    /// The record cannot be deleted (or pointed at) because others depend on it.
    #[error("{kind} {ident} is still used by {dependents}; remove or move those first")]
    InUse {
        kind: Kind,
        ident: String,
        dependents: &'static str,
    },

    /// A listing's `marker` names no record of that kind.
    #[error("the marker {marker} names no {kind}; start the listing again without a marker")]
    MarkerNotFound { kind: Kind, marker: Uuid },

    /// Someone else holds an unexpired lease on the node.
    #[error("node {node} is locked by {holder} until {expires_at}")]
    LeaseHeld {
        node: Uuid,
        holder: String,
        expires_at: DateTime<Utc>,
    },

    /// A renew or release by a holder that does not (or no longer) hold the node's lease.
    #[error(
        "{holder} does not hold the lease on node {node} (it expired and was taken over, or \
         was released)"
    )]
    LeaseNotHeld { node: Uuid, holder: String },

    /// A fenced write ([`crate::Fence`]) by a holder whose grant of the node's lease no longer
    /// stands: it lapsed and was taken over (or released) meanwhile. Nothing was written; the
    /// holder must abandon the node to whoever holds it now.
    #[error(
        "write refused: {holder} no longer holds lease generation {generation} on node {node} \
         (the lease was taken over or released meanwhile); nothing was written"
    )]
    LeaseLost {
        node: Uuid,
        holder: String,
        generation: i64,
    },

    /// Another live process holds this conductor name's liveness lock (`liveness.rs`).
    #[error("conductor name {hostname} is in use: its lock is held by {holder}")]
    ConductorLocked {
        hostname: String,
        /// Who holds it, as far as the database or the lock file tells.
        holder: String,
    },

    /// The conductor's liveness lock could not be taken or checked.
    #[error("cannot take the liveness lock of conductor {hostname} ({what})")]
    LockFailed {
        hostname: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The database could not be opened.
    #[error("cannot open the database at {location}")]
    Open {
        /// The URL or path, with any password removed.
        location: String,
        #[source]
        source: sqlx::Error,
    },

    /// Bringing the schema up to date failed; the database is left at the last good version.
    #[error("cannot migrate the {backend} database schema")]
    Migrate {
        backend: &'static str,
        #[source]
        source: sqlx::migrate::MigrateError,
    },

    /// A newer Ferric upgraded the database: this binary does not know its schema and could
    /// lose what it does not know about.
    #[error(
        "the {backend} database's schema is at version {database_version} ({description}), \
         newer than this ferric {binary} knows (up to version {binary_version}): run the Ferric \
         release that upgraded it or a newer one, or restore a backup taken before that upgrade",
        binary = env!("CARGO_PKG_VERSION")
    )]
    SchemaTooNew {
        backend: &'static str,
        database_version: i64,
        /// The newest migration's name.
        description: String,
        binary_version: i64,
    },

    /// The database's schema is behind this binary's and the caller asked not to upgrade it.
    #[error(
        "the {backend} database's schema is at version {database_version} and this ferric needs \
         version {binary_version}: run `ferric db upgrade` (back the database up first), or \
         start the server without --no-db-upgrade"
    )]
    SchemaOutdated {
        backend: &'static str,
        database_version: i64,
        binary_version: i64,
    },

    /// `Store::backup_to` on a backend whose backups belong to its own tools.
    #[error(
        "ferric backs up only SQLite databases itself; back up {backend} with its own tools \
         (pg_dump --format=custom, see docs/operator-guide.md#backups)"
    )]
    BackupUnsupported { backend: &'static str },

    /// SQLite's integrity check found damage.
    #[error("the database file is damaged: {problems}")]
    Corrupt { problems: String },

    /// An import's transaction failed at a row of `table` (a unique name or address taken
    /// by another record, a missing parent, …): nothing of it was written.
    #[error("the import failed writing to {table}; nothing was written")]
    Import {
        table: &'static str,
        #[source]
        source: sqlx::Error,
    },

    /// The database failed at something it should have done.
    #[error("database error during {operation}")]
    Backend {
        operation: &'static str,
        #[source]
        source: sqlx::Error,
    },
}

impl Error {
    /// Whether this is a caller-visible conflict (duplicate, stale revision, lease, in use),
    /// which the API shows as 409.
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            Self::Duplicate { .. }
                | Self::StaleRevision { .. }
                | Self::InUse { .. }
                | Self::LeaseHeld { .. }
                | Self::LeaseNotHeld { .. }
                | Self::LeaseLost { .. }
        )
    }
}

/// Wraps a sqlx error as [`Error::Backend`] for `operation`; for `map_err`.
pub(crate) fn backend(operation: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Backend { operation, source }
}

/// Which unique column a violation is about, if it is one and the column is among `fields`.
///
/// PostgreSQL names the constraint (`<table>_<column>_key` for a column declared `UNIQUE`);
/// SQLite only says so in its message (`UNIQUE constraint failed: <table>.<column>`).
pub(crate) fn unique_violation<'f>(
    error: &sqlx::Error,
    table: &str,
    fields: &[(&'f str, String)],
) -> Option<(&'f str, String)> {
    let db_error = error.as_database_error()?;
    if !db_error.is_unique_violation() {
        return None;
    }
    let constraint = db_error.constraint().unwrap_or_default();
    let message = db_error.message();
    fields
        .iter()
        .find(|(field, _)| {
            constraint == format!("{table}_{field}_key")
                || message.contains(&format!("{table}.{field}"))
        })
        .cloned()
}

/// Whether the error is a foreign key violation (a parent that does not exist, or a delete
/// that would orphan children).
pub(crate) fn is_foreign_key_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|db_error| db_error.is_foreign_key_violation())
}

/// `url` without a password, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_removed_from_urls() {
        assert_eq!(
            redact("postgres://ferric:s3cret@db:5432/ferric"),
            "postgres://ferric:***@db:5432/ferric"
        );
        assert_eq!(
            redact("postgres://postgres@db/ferric"),
            "postgres://postgres@db/ferric"
        );
        assert_eq!(
            redact("/var/lib/ferric/ferric.db"),
            "/var/lib/ferric/ferric.db"
        );
    }
}
