//! The PostgreSQL of `cargo xtask chaos`: private clusters made with Debian's PostgreSQL 15
//! binaries (`initdb`, `pg_ctl`, `pg_basebackup`, run as the `postgres` user) on their own
//! ports and data directories, so restarting or killing them never touches the machine's
//! shared server; a synchronous streaming replica that can be promoted; and the TCP forwarder
//! every Ferric process connects through, which follows the primary.
//!
//! Why a forwarder: sqlx 0.8 takes one host per URL (no libpq-style multi-host list, no
//! `target_session_attrs`), so Ferric needs one address that always leads to the primary. In
//! production that is a virtual IP, a DNS name or HAProxy with Patroni's health checks
//! (`docs/scale-out.md`); here it is this forwarder, switched at promotion as they would be.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
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
    fn at(dir: &Path, name: &str, port: u16) -> Self {
        Self {
            name: name.to_owned(),
            data: dir.join(name),
            port,
            socket_dir: dir.to_path_buf(),
            log: dir.join(format!("{name}.log")),
        }
    }

    /// A new primary in `dir/name`, not started.
    pub(crate) fn init(dir: &Path, name: &str, port: u16) -> anyhow::Result<Self> {
        let cluster = Self::at(dir, name, port);
        let data = cluster.data.to_string_lossy().into_owned();
        as_postgres(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
        )?;
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
        let cluster = Self::at(dir, name, port);
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
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200 \
             -c fsync=off -c wal_keep_size=256MB",
            self.port,
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

/// A TCP forwarder on a loopback port to the current primary's port; connections made
/// before a switch keep their old server (which is gone by then).
pub(crate) struct Forwarder {
    pub(crate) port: u16,
    target: Arc<AtomicU16>,
    stop: Arc<AtomicBool>,
}

impl Forwarder {
    pub(crate) fn start(target: u16) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").context("cannot bind the forwarder")?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let target = Arc::new(AtomicU16::new(target));
        let stop = Arc::new(AtomicBool::new(false));
        let (to, stopped) = (target.clone(), stop.clone());
        thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let port = to.load(Ordering::Relaxed);
                        thread::spawn(move || forward(client, port));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Self { port, target, stop })
    }

    /// From now on new connections go to `port`.
    pub(crate) fn switch(&self, port: u16) {
        self.target.store(port, Ordering::Relaxed);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies bytes both ways between `client` and the server on `port` until either side ends.
fn forward(client: TcpStream, port: u16) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nonblocking(false);
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (Ok(client_read), Ok(server_write)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let upstream = thread::spawn(move || pipe(client_read, server_write));
    pipe(server, client);
    let _ = upstream.join();
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
