//! `cargo xtask clients`: drives the real OpenStack clients (the `baremetal` CLI and
//! openstacksdk) through the scenario in `tests/clients/` against a server started here, and
//! compares every step with the goldens recorded from OpenStack Ironic. The `bmo` scenario
//! replays the requests Metal3's baremetal-operator sends, against a server configured with
//! the hardware types BMO registers nodes with (a second server, started after the first).
//!
//! Theory of operation: the scenario itself is Python (it has to be: it imports openstacksdk
//! and runs the CLI); this task only prepares what it needs and owns the server's life. It
//! creates the clients' virtualenv (`scripts/clients-venv.sh`), builds and starts `ferric
//! server` on a free port with a fresh SQLite file — or the real Ironic through
//! `scripts/ironic-standalone.sh` — runs `python -m ferric_clients`, and stops the server
//! even when the scenario fails. Everything a reader needs afterwards (server log, database,
//! report, raw observations) stays in `target/clients/<server>/`.
//!
//! Part of `ci`: a difference or an unmet expectation fails it; the few allowed differences and
//! their reasons are in `tests/clients/ferric_clients/allowed.py` and its README. The `bmo`
//! scenario (`bmo_scenario.py`) runs against a second server with the `ipmi` and `redfish` types
//! (Ironic's side from `ironic-standalone.sh --profile bmo`); before it runs, the task checks that
//! the BMO commit the README names is the replay's `BMO_COMMIT`. What the replay needs of Ferric is
//! also held by `crates/ferric-api/tests/metal3.rs`.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{run, workspace_root};

pub(crate) const USAGE: &str = "\
usage: cargo xtask clients [--against ferric|ironic] [--record] [--scenario cli,sdk,bmo]
                           [--wait-timeout SECONDS]

  --against ferric   (default) build and start ferric, compare each step with the goldens
  --against ironic   start OpenStack Ironic standalone (scripts/ironic-standalone.sh) instead
  --record           with --against ironic: rewrite tests/clients/golden/ from this run
  --scenario LIST    any of cli, sdk, bmo (default all three; bmo, Metal3's requests, runs
                     against a server of its own with the ipmi and redfish types enabled)
  --wait-timeout S   how long a step waits for a node to reach a state (default 30)
";

/// The allocator settings `packaging/systemd/ferric.service` runs `ferric` with: freed memory
/// goes back to the system at once, arenas are committed as used.
pub(crate) const MIMALLOC_ENV: &[(&str, &str)] = &[
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
    // SQLite's C code allocates with glibc's malloc, which keeps a 5–6 MB arena per thread
    // that ever allocated; one arena takes ~10 MB off RSS at 10,000 nodes (docs/benchmarks.md).
    ("MALLOC_ARENA_MAX", "1"),
];

/// Ferric configured as `scripts/ironic-standalone.sh` configures the reference Ironic, as
/// far as the goldens need: the same two hardware types. (Ironic also narrows each interface
/// kind with `enabled_<kind>_interfaces`; Ferric has the same settings but the suite leaves
/// them at their defaults, so its fake-hardware lists more interfaces: see
/// tests/clients/README.md.)
const REFERENCE_SETTINGS: &[(&str, &str)] = &[(
    "FERRIC_ENABLED_HARDWARE_TYPES",
    r#"["fake-hardware", "manual-management"]"#,
)];

/// Ferric configured as `scripts/ironic-standalone.sh --profile bmo` configures Ironic for
/// the BMO replay: the hardware types BMO registers nodes with, beside fake-hardware, and
/// network boot configured (the live ISO boots through iPXE; Ironic has `http_url` and the
/// API's URL). Nothing listens there: no machine boots. The boot file server's root is the
/// run's directory (added in [`run_scenarios`]).
const BMO_SETTINGS: &[(&str, &str)] = &[
    (
        "FERRIC_ENABLED_HARDWARE_TYPES",
        r#"["fake-hardware", "ipmi", "redfish"]"#,
    ),
    ("FERRIC_BOOT_HTTP_URL", "http://127.0.0.1:8089"),
    ("FERRIC_API_URL", "http://127.0.0.1:6385"),
];

/// The scenarios that need the BMO configuration rather than the reference one.
const BMO_SCENARIOS: &[&str] = &["bmo"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Ferric,
    Ironic,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Ferric => "ferric",
            Server::Ironic => "ironic",
        }
    }
}

#[derive(Debug)]
struct Options {
    against: Server,
    record: bool,
    scenario: String,
    wait_timeout: String,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        against: Server::Ferric,
        record: false,
        scenario: "cli,sdk,bmo".to_owned(),
        wait_timeout: "30".to_owned(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .cloned()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--against" => {
                options.against = match value("--against")?.as_str() {
                    "ferric" => Server::Ferric,
                    "ironic" => Server::Ironic,
                    other => bail!("--against {other:?}: expected ferric or ironic\n\n{USAGE}"),
                }
            }
            "--record" => options.record = true,
            "--scenario" => options.scenario = value("--scenario")?,
            "--wait-timeout" => options.wait_timeout = value("--wait-timeout")?,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    if options.record && options.against != Server::Ironic {
        bail!("the goldens are recorded from Ironic: use --against ironic --record");
    }
    Ok(options)
}

pub(crate) fn clients(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let (bmo, reference): (Vec<&str>, Vec<&str>) = options
        .scenario
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .partition(|name| BMO_SCENARIOS.contains(name));
    let mut failures = Vec::new();
    if !reference.is_empty()
        && let Err(error) = run_scenarios(&options, &reference.join(","), false)
    {
        failures.push(format!("{error:#}"));
    }
    if !bmo.is_empty()
        && let Err(error) = check_bmo_commit(&workspace_root())
            .and_then(|()| run_scenarios(&options, &bmo.join(","), true))
    {
        failures.push(format!("{error:#}"));
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("\n"));
    }
    Ok(())
}

/// The README says which baremetal-operator commit the BMO replay follows, and so does the
/// replay (`BMO_COMMIT`, beside the source lines its steps name): they must be the same commit,
/// or a reader would check the steps against the wrong BMO.
fn check_bmo_commit(root: &Path) -> anyhow::Result<()> {
    let clients = root.join("tests").join("clients");
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    let readme = read(clients.join("README.md"))?;
    let scenario = read(clients.join("ferric_clients").join("bmo_scenario.py"))?;
    let commit_after = |text: &str, marker: &str| -> Option<String> {
        let rest = &text[text.find(marker)? + marker.len()..];
        let commit: String = rest
            .trim_start_matches(['`', '"', ' ', '\n'])
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        (commit.len() == 40).then_some(commit)
    };
    let documented = commit_after(&readme, "baremetal-operator commit")
        .context("tests/clients/README.md names no \"baremetal-operator commit `<40 hex>`\"")?;
    let replayed = commit_after(&scenario, "BMO_COMMIT =")
        .context("bmo_scenario.py has no BMO_COMMIT = \"<40 hex>\"")?;
    if documented != replayed {
        bail!(
            "the BMO replay follows baremetal-operator {replayed} (bmo_scenario.py BMO_COMMIT) \
             but tests/clients/README.md names {documented}: make them the same commit"
        );
    }
    Ok(())
}

/// Runs `scenario` (a comma list) against a fresh server: the reference configuration, or
/// with `bmo` the one BMO's requests need. Everything stays in `clients/<server>[-bmo]/`.
fn run_scenarios(options: &Options, scenario: &str, bmo: bool) -> anyhow::Result<()> {
    let root = workspace_root();
    let run_name = if bmo {
        format!("{}-bmo", options.against.name())
    } else {
        options.against.name().to_owned()
    };
    let run_dir = target_dir(&root).join("clients").join(run_name);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;

    let venv = clients_venv(&root)?;
    let port = free_port()?;
    let server = match (options.against, bmo) {
        (Server::Ferric, false) => {
            RunningServer::ferric_with(&root, &run_dir, port, REFERENCE_SETTINGS)?
        }
        (Server::Ferric, true) => {
            let boot_root = run_dir.join("boot").display().to_string();
            let mut settings = BMO_SETTINGS.to_vec();
            settings.push(("FERRIC_BOOT_HTTP_ROOT", &boot_root));
            RunningServer::ferric_with(&root, &run_dir, port, &settings)?
        }
        (Server::Ironic, false) => RunningServer::ironic(&root, &run_dir, port)?,
        (Server::Ironic, true) => RunningServer::ironic_profile(&root, &run_dir, port, "bmo")?,
    };

    let mut command = Command::new(venv.join("bin").join("python"));
    command
        .args(["-m", "ferric_clients", "--endpoint", &server.endpoint])
        .args(["--server", options.against.name()])
        .args(["--scenario", scenario])
        .args(["--wait-timeout", &options.wait_timeout])
        .arg("--report-dir")
        .arg(&run_dir)
        .current_dir(root.join("tests").join("clients"));
    if options.record {
        command.arg("--record");
    }
    eprintln!(
        "xtask: running the {scenario} scenario against {}",
        server.endpoint
    );
    let status = command
        .status()
        .context("cannot start the scenario's Python")?;
    drop(server); // stops it before we report, so its log is complete
    eprintln!(
        "xtask: server log, database and report kept in {}",
        run_dir.display()
    );
    if !status.success() {
        if options.record {
            bail!("{scenario}: not recorded: some steps did not meet their expectations");
        }
        bail!(
            "{scenario}: the requests got answers different from Ironic's (report: {})",
            run_dir.join("report.txt").display()
        );
    }
    Ok(())
}

pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// Creates or reuses the clients' virtualenv; returns its path.
fn clients_venv(root: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new("bash")
        .arg(root.join("scripts").join("clients-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run scripts/clients-venv.sh")?;
    if !output.status.success() {
        bail!("scripts/clients-venv.sh failed ({})", output.status);
    }
    let path = String::from_utf8(output.stdout).context("venv path is not UTF-8")?;
    Ok(PathBuf::from(path.trim()))
}

pub(crate) use crate::free_port;

/// The server under test; dropping it stops it.
pub(crate) struct RunningServer {
    pub(crate) endpoint: String,
    kind: Server,
    child: Option<Child>,
    ironic_dir: PathBuf,
    root: PathBuf,
}

impl RunningServer {
    pub(crate) fn ferric(root: &Path, run_dir: &Path, port: u16) -> anyhow::Result<RunningServer> {
        RunningServer::ferric_with(root, run_dir, port, &[])
    }

    /// Builds and starts the debug `ferric` with extra `FERRIC_*` settings in `envs`.
    pub(crate) fn ferric_with(
        root: &Path,
        run_dir: &Path,
        port: u16,
        envs: &[(&str, &str)],
    ) -> anyhow::Result<RunningServer> {
        run("cargo", &["build", "--locked", "--bin", "ferric"], &[])?;
        let binary = target_dir(root).join("debug").join("ferric");
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
    fn ironic_profile(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn defaults_to_comparing_ferric() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.against, Server::Ferric);
        assert!(!options.record);
        assert_eq!(options.scenario, "cli,sdk,bmo");
    }

    #[test]
    fn records_only_from_ironic() {
        assert!(parse(&strings(&["--record"])).is_err());
        let options = parse(&strings(&["--against", "ironic", "--record"])).unwrap();
        assert_eq!(options.against, Server::Ironic);
        assert!(options.record);
    }

    #[test]
    fn the_bmo_replay_and_its_readme_name_the_same_commit() {
        check_bmo_commit(&workspace_root()).unwrap();
        let scratch =
            std::env::temp_dir().join(format!("ferric-bmo-commit-{}", std::process::id()));
        let scenario_dir = scratch.join("tests/clients/ferric_clients");
        std::fs::create_dir_all(&scenario_dir).unwrap();
        std::fs::write(
            scratch.join("tests/clients/README.md"),
            format!("baremetal-operator commit `{}` (date)", "a".repeat(40)),
        )
        .unwrap();
        std::fs::write(
            scenario_dir.join("bmo_scenario.py"),
            format!("BMO_COMMIT = \"{}\"\n", "b".repeat(40)),
        )
        .unwrap();
        let error = check_bmo_commit(&scratch).unwrap_err().to_string();
        std::fs::remove_dir_all(&scratch).unwrap();
        assert!(
            error.contains(&"b".repeat(40)) && error.contains("README"),
            "{error}"
        );
    }

    #[test]
    fn refuses_unknown_servers_and_flags() {
        assert!(parse(&strings(&["--against", "nova"])).is_err());
        assert!(parse(&strings(&["--fast"])).is_err());
        assert!(parse(&strings(&["--scenario"])).is_err());
    }
}
