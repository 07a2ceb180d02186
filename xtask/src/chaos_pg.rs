//! The PostgreSQL of `cargo xtask chaos`: private clusters made with Debian's PostgreSQL 15
//! binaries (`initdb`, `pg_ctl`, `pg_basebackup`, run as the `postgres` user) on their own
//! ports and data directories, so restarting or killing them never touches the machine's
//! shared server; and a synchronous streaming replica that can be promoted. Ferric reaches
//! them through a multi-host `database_url` with `target_session_attrs=read-write` and follows
//! the primary itself (`ferric-db/src/pg_hosts.rs`); each cluster listens on loopback and on
//! the host ends of the conductors' network namespaces (`chaos_net.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Debian's PostgreSQL 15 server binaries (scripts/install-deps.sh installs postgresql).
pub(crate) const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The database Ferric uses in the private cluster.
pub(crate) const DATABASE: &str = "ferric_chaos";

/// One private PostgreSQL cluster.
pub(crate) struct Cluster {
    pub(crate) name: String,
    data: PathBuf,
    pub(crate) port: u16,
    socket_dir: PathBuf,
    log: PathBuf,
    /// Addresses it listens on besides 127.0.0.1 (comma-separated, may be empty).
    listen: String,
}

/// Runs a PostgreSQL program as the `postgres` user (the server refuses to run as root).
fn as_postgres(program: &str, args: &[&str]) -> anyhow::Result<()> {
    let path = Path::new(PG_BIN).join(program);
    let output = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(&path)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", path.display()))?;
    if !output.status.success() {
        bail!(
            "{program} {args:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

impl Cluster {
    fn at(dir: &Path, name: &str, port: u16, listen: &str) -> Self {
        Self {
            listen: listen.to_owned(),
            name: name.to_owned(),
            data: dir.join(name),
            port,
            socket_dir: dir.to_path_buf(),
            log: dir.join(format!("{name}.log")),
        }
    }

    /// A new primary in `dir/name`, not started, that will also listen on `listen` (a list of
    /// addresses) and trust connections from the network `clients`.
    pub(crate) fn init(
        dir: &Path,
        name: &str,
        port: u16,
        listen: &[String],
        clients: &str,
    ) -> anyhow::Result<Self> {
        let cluster = Self::at(dir, name, port, &listen.join(","));
        let data = cluster.data.to_string_lossy().into_owned();
        as_postgres(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        )?;
        // Copied to replicas by pg_basebackup.
        let hba = cluster.data.join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba)?;
        rules.push_str(&format!(
            "host all all {clients} trust\nhost replication all {clients} trust\n"
        ));
        std::fs::write(&hba, rules)?;
        Ok(cluster)
    }

    /// A streaming replica of `primary` in `dir/name` (its data directory made afresh with
    /// `pg_basebackup`), not started.
    pub(crate) fn replica_of(
        dir: &Path,
        name: &str,
        port: u16,
        primary: &Cluster,
    ) -> anyhow::Result<Self> {
        let cluster = Self::at(dir, name, port, &primary.listen);
        cluster.remove_data()?;
        let data = cluster.data.to_string_lossy().into_owned();
        let port = primary.port.to_string();
        as_postgres(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &data,
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ],
        )?;
        Ok(cluster)
    }

    fn remove_data(&self) -> anyhow::Result<()> {
        if self.data.exists() {
            std::fs::remove_dir_all(&self.data)
                .with_context(|| format!("cannot remove {}", self.data.display()))?;
        }
        Ok(())
    }

    /// Starts the server and waits until it accepts connections.
    pub(crate) fn start(&self) -> anyhow::Result<()> {
        let options = format!(
            "-p {} -c listen_addresses={} -k {} -c max_connections=200 \
             -c fsync=off -c wal_keep_size=256MB",
            self.port,
            if self.listen.is_empty() {
                "127.0.0.1".to_owned()
            } else {
                format!("127.0.0.1,{}", self.listen)
            },
            self.socket_dir.display()
        );
        let data = self.data.to_string_lossy().into_owned();
        let log = self.log.to_string_lossy().into_owned();
        as_postgres(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-o", &options, "-w", "-t", "60", "start",
            ],
        )
    }

    /// Stops the server the way a crash does: no checkpoint, no goodbye to clients; the next
    /// start recovers from the write-ahead log.
    pub(crate) fn crash(&self) -> anyhow::Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"])
    }

    /// Stops the server if it runs (for the end of the run).
    pub(crate) fn stop_quietly(&self) {
        let data = self.data.to_string_lossy().into_owned();
        let _ = as_postgres("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }

    /// Makes a replica the primary.
    pub(crate) fn promote(&self) -> anyhow::Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        as_postgres("pg_ctl", &["-D", &data, "-w", "-t", "60", "promote"])
    }

    /// Runs `sql` with psql on `database`; returns its unaligned output.
    pub(crate) fn psql(&self, database: &str, sql: &str) -> anyhow::Result<String> {
        let output = Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "postgres", "-At", "-q"])
            .args(["-p", &self.port.to_string(), "-d", database, "-c", sql])
            .env("PGOPTIONS", "-c client_min_messages=warning")
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null())
            .output()
            .context("cannot run psql")?;
        if !output.status.success() {
            bail!(
                "psql on {} failed: {}",
                self.name,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// Makes every commit wait until the standby has it too (`false`: no standby to wait
    /// for): a commit the primary acknowledged is then on the replica when it is promoted.
    pub(crate) fn synchronous_standby(&self, wait: bool) -> anyhow::Result<()> {
        let names = if wait { "*" } else { "" };
        self.psql(
            "postgres",
            &format!("ALTER SYSTEM SET synchronous_standby_names = '{names}'"),
        )?;
        self.psql("postgres", "SELECT pg_reload_conf()")?;
        Ok(())
    }

    /// Waits until a standby streams from this primary synchronously.
    pub(crate) fn wait_for_sync_standby(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let sql = "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'";
        loop {
            if self.psql("postgres", sql).is_ok_and(|count| count == "1") {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("no synchronous standby streams from {}", self.name);
            }
            thread::sleep(Duration::from_millis(200));
        }
    }
}
