//! The schema's version: which migrations this binary carries, which ones the database has
//! applied, bringing it up to date, and refusing a database that a newer Ferric upgraded.
//!
//! Theory of operation: the migrations in `migrations/<backend>/NNNN_name.sql` are compiled
//! into the binary, and sqlx records each one it applies in the database's `_sqlx_migrations`
//! table. The schema version is the highest migration applied. An older binary on a newer
//! database would write rows without the columns and tables it does not know and could lose
//! data, so every open compares first and refuses with a message saying what to run
//! ([`Error::SchemaTooNew`]) rather than sqlx's "previously applied but missing".
//! [`SchemaPolicy`] says what an open does with a database that is behind: upgrade it (what
//! `ferric server` does by default), refuse it, or leave it alone (`ferric db upgrade --check`,
//! backups).

use sqlx::migrate::Migrator;

use crate::error::{Error, backend};
use crate::store::{SchemaPolicy, Store};

/// One migration: its number and its name (`0006_volume.sql` → `6`, `"volume"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMigration {
    pub version: i64,
    pub description: String,
}

/// Where a database's schema stands against this binary's migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStatus {
    /// `"sqlite"` or `"postgres"`.
    pub backend: &'static str,
    /// The highest migration the database has applied; 0 for an empty database.
    pub database_version: i64,
    /// The highest migration this binary carries.
    pub binary_version: i64,
    /// Migrations this binary would apply, oldest first.
    pub pending: Vec<SchemaMigration>,
    /// Migrations the database has applied that this binary does not know (a newer Ferric
    /// applied them), oldest first.
    pub unknown: Vec<SchemaMigration>,
}

impl SchemaStatus {
    /// The database is exactly at this binary's version.
    pub fn is_current(&self) -> bool {
        self.pending.is_empty() && self.unknown.is_empty()
    }

    /// [`Error::SchemaTooNew`] if a newer Ferric upgraded the database.
    pub fn check_not_newer(&self) -> Result<(), Error> {
        match self.unknown.last() {
            None => Ok(()),
            Some(newest) => Err(Error::SchemaTooNew {
                backend: self.backend,
                database_version: self.database_version,
                description: newest.description.clone(),
                binary_version: self.binary_version,
            }),
        }
    }
}

/// This binary's migrations for `backend`, oldest first.
pub(crate) fn known_migrations(migrator: &Migrator) -> Vec<SchemaMigration> {
    migrator
        .iter()
        .filter(|migration| migration.migration_type.is_up_migration())
        .map(|migration| SchemaMigration {
            version: migration.version,
            description: migration.description.to_string(),
        })
        .collect()
}

impl Store {
    /// Compares the database's applied migrations with this binary's. Reads only; an empty
    /// database (no `_sqlx_migrations` table yet) is at version 0.
    pub async fn schema_status(&self) -> Result<SchemaStatus, Error> {
        let exists_sql = if self.backend_name() == "postgres" {
            "SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = current_schema() \
             AND tablename = '_sqlx_migrations'"
        } else {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
        };
        let tables = self
            .fetch_optional(exists_sql, &[], |row| row.int("n"))
            .await
            .map_err(backend("schema_status"))?
            .unwrap_or(0);
        let applied = if tables == 0 {
            Vec::new()
        } else {
            self.fetch_all(
                "SELECT version, description FROM _sqlx_migrations WHERE success ORDER BY version",
                &[],
                |row| {
                    Ok(SchemaMigration {
                        version: row.int("version")?,
                        description: row.text("description")?,
                    })
                },
            )
            .await
            .map_err(backend("schema_status"))?
        };
        let known = known_migrations(self.migrator());
        let is_applied = |version| applied.iter().any(|done| done.version == version);
        let is_known = |version| known.iter().any(|ours| ours.version == version);
        Ok(SchemaStatus {
            backend: self.backend_name(),
            database_version: applied.last().map_or(0, |last| last.version),
            binary_version: known.last().map_or(0, |last| last.version),
            pending: known
                .iter()
                .filter(|ours| !is_applied(ours.version))
                .cloned()
                .collect(),
            unknown: applied
                .iter()
                .filter(|done| !is_known(done.version))
                .cloned()
                .collect(),
        })
    }

    /// Applies the migrations the database lacks, oldest first, and returns them (empty when
    /// it was current). Refuses a database a newer Ferric upgraded. On PostgreSQL sqlx holds
    /// an advisory lock meanwhile, so processes starting together upgrade once.
    pub async fn schema_upgrade(&self) -> Result<Vec<SchemaMigration>, Error> {
        let status = self.schema_status().await?;
        status.check_not_newer()?;
        if status.pending.is_empty() {
            return Ok(Vec::new());
        }
        tracing::info!(
            backend = status.backend,
            from = status.database_version,
            to = status.binary_version,
            "upgrading the database schema"
        );
        self.run_migrations().await?;
        Ok(status.pending)
    }

    /// Brings the schema to what `policy` asks for, right after connecting.
    pub(crate) async fn apply_schema_policy(&self, policy: SchemaPolicy) -> Result<(), Error> {
        match policy {
            SchemaPolicy::Unchecked => Ok(()),
            SchemaPolicy::Upgrade => self.schema_upgrade().await.map(drop),
            SchemaPolicy::RequireCurrent => {
                let status = self.schema_status().await?;
                status.check_not_newer()?;
                if status.pending.is_empty() {
                    Ok(())
                } else {
                    Err(Error::SchemaOutdated {
                        backend: status.backend,
                        database_version: status.database_version,
                        binary_version: status.binary_version,
                    })
                }
            }
        }
    }

    /// Writes a consistent copy of a SQLite database to `path` (which must not exist) while
    /// others keep reading and writing it: `VACUUM INTO` reads one snapshot, as SQLite's
    /// online backup does, and writes a compacted file. On PostgreSQL, use `pg_dump`.
    pub async fn backup_to(&self, path: &std::path::Path) -> Result<(), Error> {
        if self.backend_name() != "sqlite" {
            return Err(Error::BackupUnsupported {
                backend: self.backend_name(),
            });
        }
        let target = path.to_string_lossy();
        self.execute("VACUUM INTO $1", &[crate::sql::Arg::Text(&target)])
            .await
            .map(drop)
            .map_err(backend("backup"))
    }

    /// SQLite's `PRAGMA integrity_check`: `Ok` when the file is sound; on PostgreSQL, `Ok`.
    pub async fn integrity_check(&self) -> Result<(), Error> {
        if self.backend_name() != "sqlite" {
            return Ok(());
        }
        let problems = self
            .fetch_all("PRAGMA integrity_check", &[], |row| {
                row.text("integrity_check")
            })
            .await
            .map_err(backend("integrity_check"))?;
        if problems.iter().all(|line| line == "ok") {
            Ok(())
        } else {
            Err(Error::Corrupt {
                problems: problems.join("; "),
            })
        }
    }
}
