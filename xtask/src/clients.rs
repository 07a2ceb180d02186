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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::process::{free_port, target_dir, workspace_root};
use crate::server::{RunningServer, Server};

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
    let run_dir = target_dir().join("clients").join(run_name);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;

    let venv = clients_venv(&root)?;
    let port = free_port()?;
    let server = match (options.against, bmo) {
        (Server::Ferric, false) => RunningServer::ferric_with(&run_dir, port, REFERENCE_SETTINGS)?,
        (Server::Ferric, true) => {
            let boot_root = run_dir.join("boot").display().to_string();
            let mut settings = BMO_SETTINGS.to_vec();
            settings.push(("FERRIC_BOOT_HTTP_ROOT", &boot_root));
            RunningServer::ferric_with(&run_dir, port, &settings)?
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
