//! `ferric db upgrade|backup|restore`: the database chores of an upgrade, run explicitly by the
//! operator (or a package's maintainer script) rather than as a side effect of starting.
//!
//! Backups of SQLite are taken by SQLite itself while the server runs (`VACUUM INTO` reads one
//! snapshot); a restore replaces the file and so needs every server on it stopped, which it
//! checks through the conductors' heartbeats. PostgreSQL has its own tools (`pg_dump`,
//! `pg_restore`), which these commands name instead of wrapping.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ferric_db::{SchemaPolicy, SchemaStatus, Store, StoreOptions};

use crate::config::Settings;

/// Database chores: schema upgrades, backups and restores (docs/operator-guide.md#upgrades).
#[derive(Debug, clap::Subcommand)]
pub(crate) enum DbCommand {
    /// Bring the database schema up to this binary's version (what `ferric server` does at
    /// start unless given --no-db-upgrade). With --check, change nothing: print where the
    /// schema stands and exit 1 when an upgrade is pending.
    Upgrade {
        #[command(flatten)]
        database: DbArgs,
        /// Only report; exit status 0 when the schema is current, 1 when it needs upgrading.
        #[arg(long)]
        check: bool,
    },
    /// Write a consistent copy of a SQLite database to FILE while the server runs. For
    /// PostgreSQL use pg_dump (docs/operator-guide.md#backups).
    Backup {
        #[command(flatten)]
        database: DbArgs,
        /// Where to write the copy; must not exist yet.
        file: PathBuf,
    },
    /// Replace the SQLite database with a backup taken by `ferric db backup`. Every server
    /// using the database must be stopped first; this checks that no conductor is alive.
    Restore {
        #[command(flatten)]
        database: DbArgs,
        /// The backup to restore.
        file: PathBuf,
    },
}

/// Which database: the server's settings file and environment, or a URL given here.
#[derive(Debug, clap::Args)]
pub(crate) struct DbArgs {
    /// TOML file with settings, as given to `ferric server` (its database_url is used).
    #[arg(long, env = "FERRIC_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Database URL or SQLite path; wins over the file and FERRIC_DATABASE_URL.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
}

impl DbArgs {
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        let mut settings = Settings::load(self.config.as_deref(), &Default::default())?;
        if let Some(url) = &self.database_url {
            settings.database_url.clone_from(url);
        }
        Ok(settings)
    }
}

/// Runs one `ferric db` command, printing what it did; errors say what to do next.
pub(crate) fn run(command: DbCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ferric db: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match command {
            DbCommand::Upgrade { database, check } => upgrade(&database.settings()?, check).await,
            DbCommand::Backup { database, file } => {
                backup(&database.settings()?, &file).await?;
                Ok(ExitCode::SUCCESS)
            }
            DbCommand::Restore { database, file } => {
                restore(&database.settings()?, &file).await?;
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    outcome.unwrap_or_else(|error| {
        eprintln!("ferric db: {error:#}");
        ExitCode::FAILURE
    })
}

/// Opens the database without touching its schema.
async fn open_unchecked(url: &str) -> anyhow::Result<Store> {
    let mut options = StoreOptions::default();
    options.schema = SchemaPolicy::Unchecked;
    Ok(Store::open_with(url, &options).await?)
}

fn describe(status: &SchemaStatus) -> String {
    format!(
        "{} database schema at version {}; this ferric {} carries version {}",
        status.backend,
        status.database_version,
        env!("CARGO_PKG_VERSION"),
        status.binary_version
    )
}

async fn upgrade(settings: &Settings, check: bool) -> anyhow::Result<ExitCode> {
    let store = open_unchecked(&settings.database_url).await?;
    let status = store.schema_status().await?;
    println!("{}", describe(&status));
    let outcome = if check {
        status.check_not_newer()?;
        for migration in &status.pending {
            println!(
                "pending: {:04} {}",
                migration.version, migration.description
            );
        }
        if status.pending.is_empty() {
            println!("up to date");
            ExitCode::SUCCESS
        } else {
            println!("an upgrade is pending: back the database up, then run `ferric db upgrade`");
            ExitCode::FAILURE
        }
    } else {
        let applied = store.schema_upgrade().await?;
        for migration in &applied {
            println!(
                "applied: {:04} {}",
                migration.version, migration.description
            );
        }
        println!(
            "{}",
            if applied.is_empty() {
                "up to date; nothing to do"
            } else {
                "upgraded"
            }
        );
        ExitCode::SUCCESS
    };
    store.close().await;
    Ok(outcome)
}

async fn backup(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        !file.exists(),
        "{} already exists: give a new file name (backups never overwrite)",
        file.display()
    );
    let store = open_unchecked(&settings.database_url).await?;
    let status = store.schema_status().await?;
    let copied = store.backup_to(file).await;
    store.close().await;
    copied?;
    // Prove the copy opens and is sound before calling it a backup.
    let copy = Store::open_sqlite_file_read_only(file).await?;
    let checked = copy.integrity_check().await;
    let copy_status = copy.schema_status().await;
    copy.close().await;
    checked.with_context(|| format!("the backup {} is not sound", file.display()))?;
    anyhow::ensure!(
        copy_status?.database_version == status.database_version,
        "the backup's schema version differs from the database's; try again"
    );
    println!(
        "backed up the database (schema version {}) to {}",
        status.database_version,
        file.display()
    );
    Ok(())
}

async fn restore(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    let url = &settings.database_url;
    anyhow::ensure!(
        !(url.starts_with("postgres://") || url.starts_with("postgresql://")),
        "ferric restores only SQLite databases itself; restore PostgreSQL with pg_restore \
         (docs/operator-guide.md#backups), with every ferric process stopped"
    );
    anyhow::ensure!(
        !url.contains(":memory:") && !url.contains("mode=memory"),
        "database_url names an in-memory database: there is no file to restore into"
    );
    let target = sqlite_path(url);
    anyhow::ensure!(
        file.is_file(),
        "{} is not a file: give the path of a backup written by `ferric db backup`",
        file.display()
    );

    // The server must be stopped: a live conductor heartbeats at least every
    // conductor_heartbeat_timeout.
    if target.exists() {
        let store = open_unchecked(url).await?;
        let alive = live_conductors(&store, settings.conductor_heartbeat_timeout).await;
        store.close().await;
        let alive = alive?;
        anyhow::ensure!(
            alive.is_empty(),
            "a server is running on {}: conductor {} heartbeated within the last {} s \
             (conductor_heartbeat_timeout). Stop every ferric server using the database \
             (systemctl stop ferric) and run the restore again; a server killed without \
             stopping counts as alive until its heartbeat is that old",
            target.display(),
            alive.join(", "),
            settings.conductor_heartbeat_timeout
        );
    }

    // Check a copy next to the target, then move it into place in one rename.
    let staging = with_suffix(&target, ".restoring");
    std::fs::copy(file, &staging)
        .with_context(|| format!("cannot copy {} to {}", file.display(), staging.display()))?;
    let checked = check_backup(&staging).await;
    let status = match checked {
        Ok(status) => status,
        Err(error) => {
            let _ = std::fs::remove_file(&staging);
            return Err(error.context(format!("{} cannot be restored", file.display())));
        }
    };
    std::fs::rename(&staging, &target).with_context(|| {
        format!(
            "cannot move {} into place at {}",
            staging.display(),
            target.display()
        )
    })?;
    // A write-ahead log left beside the old file would be replayed into the restored one.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(with_suffix(&target, suffix));
    }
    // A backup taken while the server ran records its conductor as alive; nothing runs on the
    // restored file (checked above), so mark them offline, or the next server would wait out
    // conductor_heartbeat_timeout before taking its own name back.
    let store = open_unchecked(url).await?;
    let marked = async {
        for hostname in live_conductors(&store, settings.conductor_heartbeat_timeout).await? {
            store.conductor_unregister(&hostname).await?;
        }
        anyhow::Ok(())
    }
    .await;
    store.close().await;
    marked.context("cannot mark the restored database's conductors offline")?;
    println!("restored {} into {}", file.display(), target.display());
    println!("{}", describe(&status));
    if !status.pending.is_empty() {
        println!(
            "the restored schema is older: `ferric server` upgrades it at start, or run \
             `ferric db upgrade`"
        );
    }
    Ok(())
}

/// Opens a staged backup: a sound Ferric database this binary can run.
async fn check_backup(path: &Path) -> anyhow::Result<SchemaStatus> {
    let store = Store::open_sqlite_file_read_only(path).await?;
    let checked = async {
        store.integrity_check().await?;
        let status = store.schema_status().await?;
        anyhow::ensure!(
            status.database_version > 0,
            "it holds no Ferric schema (no applied migrations): is it a `ferric db backup` file?"
        );
        status.check_not_newer()?;
        Ok(status)
    }
    .await;
    store.close().await;
    checked
}

/// Hostnames of conductors online with a heartbeat younger than `timeout_seconds`.
async fn live_conductors(store: &Store, timeout_seconds: u64) -> anyhow::Result<Vec<String>> {
    let status = store.schema_status().await?;
    if status.database_version == 0 {
        return Ok(Vec::new());
    }
    let since = store.now() - chrono::Duration::seconds(timeout_seconds.try_into()?);
    let filter = ferric_db::ConductorFilter {
        alive_since: Some(since),
        ..Default::default()
    };
    Ok(store
        .conductor_list(&filter)
        .await?
        .into_iter()
        .map(|conductor| conductor.hostname)
        .collect())
}

/// The file a SQLite `database_url` names (`sqlite://path?…`, `sqlite:path` or a bare path).
fn sqlite_path(url: &str) -> PathBuf {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    PathBuf::from(path.split('?').next().unwrap_or(path))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file() {
        assert_eq!(
            sqlite_path("sqlite:///var/lib/ferric/ferric.db?mode=rwc"),
            PathBuf::from("/var/lib/ferric/ferric.db")
        );
        assert_eq!(
            sqlite_path("sqlite://ferric.db"),
            PathBuf::from("ferric.db")
        );
        assert_eq!(sqlite_path("sqlite:state.db"), PathBuf::from("state.db"));
        assert_eq!(
            sqlite_path("/srv/ferric.db"),
            PathBuf::from("/srv/ferric.db")
        );
    }
}
