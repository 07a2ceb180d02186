//! A server under test for the xtask tasks that drive one (clients, tempest, openstack, the
//! benchmarks, fuzz, ui): a debug or release `ferric server` started on a loopback port with
//! the allocator settings it runs with in production, or OpenStack Ironic through
//! `scripts/ironic-standalone.sh`; stopped (SIGTERM, then SIGKILL) when dropped.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::process::{run, target_dir};

/// The allocator settings `packaging/systemd/ferric.service` runs `ferric` with: freed memory
/// goes back to the system at once, arenas are committed as used.
pub(crate) const MIMALLOC_ENV: &[(&str, &str)] = &[
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    // SQLite's C code allocates with glibc's malloc, which keeps a 5–6 MB arena per thread
    // that ever allocated; one arena takes ~10 MB off RSS at 10,000 nodes (docs/benchmarks.md).
    ("MALLOC_ARENA_MAX", "1"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    Ferric,
    Ironic,
}

impl Server {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Server::Ferric => "ferric",
            Server::Ironic => "ironic",
        }
    }
}

/// The server under test; dropping it stops it.
pub(crate) struct RunningServer {
    pub(crate) endpoint: String,
    kind: Server,
    child: Option<Child>,
    ironic_dir: PathBuf,
    root: PathBuf,
}

impl RunningServer {
    pub(crate) fn ferric(run_dir: &Path, port: u16) -> anyhow::Result<RunningServer> {
        RunningServer::ferric_with(run_dir, port, &[])
    }

    /// Builds and starts the debug `ferric` with extra `FERRIC_*` settings in `envs`.
    pub(crate) fn ferric_with(
        run_dir: &Path,
        port: u16,
        envs: &[(&str, &str)],
    ) -> anyhow::Result<RunningServer> {
        run("cargo", &["build", "--locked", "--bin", "ferric"], &[])?;
        let binary = target_dir().join("debug").join("ferric");
        let database = run_dir.join("ferric.db").display().to_string();
        RunningServer::ferric_binary_with(&binary, run_dir, port, &database, envs)
    }

    /// Starts `binary server` on `database_url`, logging into `run_dir/ferric.log`, and waits
    /// until it listens.
    pub(crate) fn ferric_binary(
        binary: &Path,
        run_dir: &Path,
        port: u16,
        database_url: &str,
    ) -> anyhow::Result<RunningServer> {
        RunningServer::ferric_binary_with(binary, run_dir, port, database_url, &[])
    }

    pub(crate) fn ferric_binary_with(
        binary: &Path,
        run_dir: &Path,
        port: u16,
        database_url: &str,
        envs: &[(&str, &str)],
    ) -> anyhow::Result<RunningServer> {
        let log_path = run_dir.join("ferric.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(binary)
            .arg("server")
            .args(["--database-url", database_url])
            .args(["--api-listen", &address.to_string()])
            // As packaging/systemd/ferric.service runs it (docs/benchmarks.md).
            .envs(MIMALLOC_ENV.iter().copied())
            .envs(envs.iter().copied())
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let mut server = RunningServer {
            endpoint: format!("http://{address}"),
            kind: Server::Ferric,
            child: Some(child),
            ironic_dir: PathBuf::new(),
            root: PathBuf::new(),
        };
        server.wait_until_listening(address, &log_path)?;
        Ok(server)
    }

    pub(crate) fn ironic(root: &Path, run_dir: &Path, port: u16) -> anyhow::Result<RunningServer> {
        RunningServer::ironic_with(root, run_dir, port, &[])
    }

    /// Ironic configured by one of `scripts/ironic-standalone.sh`'s `--profile`s.
    pub(crate) fn ironic_profile(
        root: &Path,
        run_dir: &Path,
        port: u16,
        profile: &str,
    ) -> anyhow::Result<RunningServer> {
        RunningServer::ironic_with(root, run_dir, port, &["--profile", profile])
    }

    pub(crate) fn ironic_with(
        root: &Path,
        run_dir: &Path,
        port: u16,
        extra: &[&str],
    ) -> anyhow::Result<RunningServer> {
        let ironic_dir = run_dir.join("ironic");
        let output = Command::new("bash")
            .arg(root.join("scripts").join("ironic-standalone.sh"))
            .args(["start", "--port", &port.to_string(), "--dir"])
            .arg(&ironic_dir)
            .args(extra)
            .stderr(Stdio::inherit())
            .output()
            .context("cannot run scripts/ironic-standalone.sh")?;
        let server = RunningServer {
            endpoint: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            kind: Server::Ironic,
            child: None,
            ironic_dir,
            root: root.to_path_buf(),
        };
        if !output.status.success() {
            bail!("Ironic did not start ({})", output.status);
        }
        Ok(server)
    }

    /// The server's process id: the child this task started, or Ironic's from its pid file.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self.kind {
            Server::Ferric => self.child.as_ref().map(Child::id),
            Server::Ironic => std::fs::read_to_string(self.ironic_dir.join("ironic.pid"))
                .ok()?
                .trim()
                .parse()
                .ok(),
        }
    }

    fn wait_until_listening(&mut self, address: SocketAddr, log: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                bail!("ferric exited during start-up ({status}):\n{log}");
            }
            if Instant::now() > deadline {
                bail!("ferric did not listen on {address} within 60 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        match self.kind {
            Server::Ferric => {
                let Some(mut child) = self.child.take() else {
                    return;
                };
                // SIGTERM first: ferric finishes in-flight requests and closes the database.
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = std::io::stderr().write_all(b"xtask: ferric ignored SIGTERM; killing it\n");
                let _ = child.kill();
                let _ = child.wait();
            }
            Server::Ironic => {
                let _ = Command::new("bash")
                    .arg(self.root.join("scripts").join("ironic-standalone.sh"))
                    .args(["stop", "--dir"])
                    .arg(&self.ironic_dir)
                    .status();
            }
        }
    }
}
