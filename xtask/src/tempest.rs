//! `cargo xtask tempest`: Ironic's own API conformance tests — ironic-tempest-plugin's
//! `ironic_tempest_plugin.tests.api`, run by Tempest, both unmodified from PyPI and pinned in
//! tests/tempest/requirements.txt — against Ferric behind a real Keystone
//! (`auth_strategy = keystone`, fake-hardware enabled), then a summary: passed, failed,
//! skipped and the failing tests' names (docs/keystone.md#tempest).
//!
//! Steps: the Tempest venv (~/.cache/ferric/tempest-venv, rebuilt when the requirements
//! change), the debug `ferric` built and started on a free port, Keystone started with its
//! catalog's `baremetal` endpoint pointing there (`scripts/keystone.sh`), a Tempest workspace
//! with a generated tempest.conf in `<target>/tempest/`, `tempest run`, and the summary from
//! `stestr`. Everything stays in that directory for the reader: ferric.log, the Keystone
//! logs, tempest.log and `failures.txt` (every failing test's traceback).
//!
//! `cargo xtask ci` runs it: any failure fails CI, except the tests listed with their cause
//! in tests/tempest/known-failures.txt (left out; `--all` runs them too).
//!
//! `--with-ironic` then runs the same Tempest configuration against OpenStack Ironic 39
//! (`scripts/ironic-standalone.sh --keystone`, fake-hardware, its own Keystone started the same
//! way with the catalog's `baremetal` pointing at Ironic), every test (the reference has no
//! known failures), and prints both servers' counts side by side and the tests that pass on
//! one and not the other. Ironic's files are in `<target>/tempest/ironic*`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::keystone;
use crate::process::{free_port, target_dir};
use crate::server::RunningServer;

const HELP: &str = "\
usage: cargo xtask tempest [--regex REGEX] [--concurrency N] [--all] [--retry-failed] [--keep]
                           [--summary] [--with-ironic]

Runs ironic-tempest-plugin's API tests against a debug ferric behind a real Keystone and
prints passed/failed/skipped and the failing tests; fails when any test fails. The tests in
tests/tempest/known-failures.txt (each with its cause) are left out unless --all.
Files: <target>/tempest/.

  --regex REGEX     the tests to run (default ^ironic_tempest_plugin\\.tests\\.api)
  --concurrency N   test workers (default 2)
  --all             run the known failures too
  --retry-failed    run the failed tests once more (at most 5) and pass if they pass then;
                    they are named as flaky (CI uses this: one intermittent failure must not
                    hide the rest of the run, and a test failing twice still fails it)
  --keep            leave Ferric and Keystone running afterwards (stop Keystone with
                    `cargo xtask keystone purge --dir <target>/tempest/keystone`)
  --summary         only print the summary of the last run again
  --with-ironic     also run the same tests against Ironic 39 behind its own Keystone, and
                    print both servers' counts side by side and the tests that differ
";

/// The Ironic settings Tempest is told about, and Ferric is started with.
const HARDWARE_TYPES: &str = "fake-hardware";

#[derive(Debug, Clone)]
struct Options {
    regex: String,
    concurrency: u32,
    /// Run the tests of tests/tempest/known-failures.txt too.
    all: bool,
    /// Run failed tests once more (CI).
    retry_failed: bool,
    keep: bool,
    summary_only: bool,
    /// Run the same tests against Ironic 39 too, and compare.
    with_ironic: bool,
}

/// Stops and removes the run's Keystone when dropped (also on errors), unless kept.
struct KeystoneGuard<'a> {
    root: &'a Path,
    dir: PathBuf,
    keep: bool,
}

impl Drop for KeystoneGuard<'_> {
    fn drop(&mut self) {
        if !self.keep {
            keystone::purge(self.root, &self.dir);
        }
    }
}

fn parse(args: &[String]) -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        regex: r"^ironic_tempest_plugin\.tests\.api".to_owned(),
        concurrency: 2,
        all: false,
        retry_failed: false,
        keep: false,
        summary_only: false,
        with_ironic: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--regex" => options.regex = args.next().context("--regex needs a value")?.clone(),
            "--concurrency" => {
                options.concurrency = args
                    .next()
                    .context("--concurrency needs a value")?
                    .parse()
                    .context("--concurrency takes a number")?;
            }
            "--all" => options.all = true,
            "--retry-failed" => options.retry_failed = true,
            "--keep" => options.keep = true,
            "--summary" => options.summary_only = true,
            "--with-ironic" => options.with_ironic = true,
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(None);
            }
            other => bail!("unknown option {other}\n\n{HELP}"),
        }
    }
    Ok(Some(options))
}

pub(crate) fn tempest(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let Some(options) = parse(args)? else {
        return Ok(());
    };
    let venv = tempest_venv(root)?;
    let dir = target_dir().join("tempest");
    if options.summary_only {
        return summarize(&venv, &dir.join("workspace"), &dir, "ferric").map(drop);
    }
    let keystone_dir = dir.join("keystone");
    keystone::purge(root, &keystone_dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;

    // Ferric first, on a port chosen now; Keystone (on a port chosen now too) next, its
    // catalog pointing at Ferric. Ferric contacts Keystone only when requests come.
    let keystone_port = free_port()?;
    let auth_url = format!("http://127.0.0.1:{keystone_port}/v3");
    let settings = [
        ("FERRIC_AUTH_STRATEGY", "keystone"),
        ("FERRIC_KEYSTONE_AUTH_URL", auth_url.as_str()),
        ("FERRIC_KEYSTONE_USERNAME", "ferric"),
        ("FERRIC_KEYSTONE_PASSWORD", "ferric-test-ferric"),
        ("FERRIC_KEYSTONE_PROJECT_NAME", "service"),
        ("FERRIC_ENABLED_HARDWARE_TYPES", HARDWARE_TYPES),
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
    ];
    let started = std::time::Instant::now();
    let ferric = RunningServer::ferric_with(&dir, free_port()?, &settings)?;
    eprintln!(
        "xtask: ferric at {} ({:?})",
        ferric.endpoint,
        started.elapsed()
    );
    let started = std::time::Instant::now();
    let output = Command::new(keystone::script(root))
        .args(["start", "--port", &keystone_port.to_string(), "--dir"])
        .arg(&keystone_dir)
        .args(["--baremetal-url", &ferric.endpoint])
        .stderr(Stdio::inherit())
        .output()
        .context("run scripts/keystone.sh")?;
    let keystone_guard = KeystoneGuard {
        root,
        dir: keystone_dir.clone(),
        keep: options.keep,
    };
    if !output.status.success() {
        bail!("Keystone did not start ({})", output.status);
    }
    eprintln!("xtask: keystone at {auth_url} ({:?})", started.elapsed());

    let ferric_run = run_suite(&venv, &dir, "workspace", &auth_url, &options, true, root)?;
    drop(keystone_guard);
    if options.keep {
        std::mem::forget(ferric);
        eprintln!("xtask: ferric and keystone left running (--keep)");
    } else {
        drop(ferric);
    }
    if options.with_ironic {
        let ironic_run = run_on_ironic(root, &venv, &dir, &options)?;
        compare(&ferric_run, &ironic_run);
    }
    if ferric_run.failed > 0 {
        bail!(
            "{} Tempest test(s) failed (tracebacks in {})",
            ferric_run.failed,
            dir.join("failures.txt").display()
        );
    }
    Ok(())
}

/// Ironic 39 behind a Keystone of its own (same script, same identities, its catalog's
/// `baremetal` pointing at Ironic), the same Tempest configuration, every test.
fn run_on_ironic(
    root: &Path,
    venv: &Path,
    dir: &Path,
    options: &Options,
) -> anyhow::Result<Summary> {
    let keystone_dir = dir.join("ironic-keystone");
    keystone::purge(root, &keystone_dir);
    let keystone_port = free_port()?;
    let auth_url = format!("http://127.0.0.1:{keystone_port}/v3");
    let ironic_port = free_port()?;
    let ironic_url = format!("http://127.0.0.1:{ironic_port}");
    let output = Command::new(keystone::script(root))
        .args(["start", "--port", &keystone_port.to_string(), "--dir"])
        .arg(&keystone_dir)
        .args(["--baremetal-url", &ironic_url])
        .stderr(Stdio::inherit())
        .output()
        .context("run scripts/keystone.sh")?;
    let _keystone_guard = KeystoneGuard {
        root,
        dir: keystone_dir,
        keep: false,
    };
    if !output.status.success() {
        bail!("Keystone (for Ironic) did not start ({})", output.status);
    }
    let started = std::time::Instant::now();
    let ironic_dir = dir.join("ironic-run");
    std::fs::create_dir_all(&ironic_dir)?;
    let ironic =
        RunningServer::ironic_with(root, &ironic_dir, ironic_port, &["--keystone", &auth_url])?;
    eprintln!(
        "xtask: ironic at {} behind {auth_url} ({:?})",
        ironic.endpoint,
        started.elapsed()
    );
    let reference = Options {
        all: true,
        retry_failed: false,
        ..options.clone()
    };
    let summary = run_suite(
        venv,
        dir,
        "ironic-workspace",
        &auth_url,
        &reference,
        false,
        root,
    )?;
    drop(ironic);
    Ok(summary)
}

/// One Tempest run: a workspace `name` under `dir` with the generated tempest.conf, `tempest
/// run`, the summary (and for Ferric with `--retry-failed`, the failed tests once more).
fn run_suite(
    venv: &Path,
    dir: &Path,
    name: &str,
    auth_url: &str,
    options: &Options,
    ferric: bool,
    root: &Path,
) -> anyhow::Result<Summary> {
    let label = if ferric { "ferric" } else { "ironic" };
    let workspace = dir.join(name);
    // The run's own workspace registry: the default, ~/.tempest/workspace.yaml, refuses a
    // second `init` of a workspace name it already holds, so every run after the first would
    // fail.
    let registry = dir.join(format!("{name}.yaml"));
    run_in(
        &venv.join("bin/tempest"),
        &[
            "init".as_ref(),
            "--workspace-path".as_ref(),
            registry.as_os_str(),
            workspace.as_os_str(),
        ],
        dir,
    )?;
    std::fs::write(
        workspace.join("etc/tempest.conf"),
        tempest_conf(auth_url, &workspace),
    )?;
    let started = std::time::Instant::now();
    let mut run = Command::new(venv.join("bin/tempest"));
    run.args(["run", "--regex", &options.regex])
        .args(["--concurrency", &options.concurrency.to_string()]);
    if !options.all {
        run.arg("--exclude-list").arg(root.join(KNOWN_FAILURES));
    }
    let status = run
        .current_dir(&workspace)
        .env("PATH", path_with(venv))
        .stdout(std::fs::File::create(
            dir.join(format!("{label}-tempest-run.txt")),
        )?)
        .stderr(Stdio::inherit())
        .status()
        .context("run tempest")?;
    let elapsed = started.elapsed();
    let mut summary = summarize(venv, &workspace, dir, label)?;
    if options.retry_failed && (1..=MAX_RETRIED).contains(&summary.failed) {
        let first = std::fs::read_to_string(dir.join("failures.txt")).unwrap_or_default();
        std::fs::write(dir.join("failures-first-try.txt"), &first)?;
        eprintln!(
            "xtask: tempest: {} failed; running them once more (--retry-failed)",
            summary.failed
        );
        let status = Command::new(venv.join("bin/stestr"))
            .args(["run", "--failing"])
            .current_dir(&workspace)
            .env("PATH", path_with(venv))
            .stdout(std::fs::File::create(dir.join("tempest-retry.txt"))?)
            .stderr(Stdio::inherit())
            .status()
            .context("run stestr --failing")?;
        let retried = summarize(venv, &workspace, dir, label)?;
        if retried.failed == 0 {
            println!(
                "  FLAKY: passed on the second try (first tracebacks in {}); status {status}",
                dir.join("failures-first-try.txt").display()
            );
        }
        // The first run's outcomes, with the retried tests' second results.
        summary.passed += summary.failed - retried.failed;
        summary.failed = retried.failed;
        for (test, passed) in retried.outcomes {
            summary.outcomes.insert(test, passed);
        }
    }
    eprintln!(
        "xtask: tempest run against {label} took {elapsed:?} (exit {status}); files in {}",
        dir.display()
    );
    Ok(summary)
}

/// Both servers' counts side by side, and the tests whose outcome differs.
fn compare(ferric: &Summary, ironic: &Summary) {
    println!("tempest (ironic_tempest_plugin.tests.api), side by side:");
    println!(
        "  {:<8} {:>7} {:>7} {:>7}",
        "", "passed", "failed", "skipped"
    );
    for (name, summary) in [("ferric", ferric), ("ironic", ironic)] {
        println!(
            "  {name:<8} {:>7} {:>7} {:>7}",
            summary.passed, summary.failed, summary.skipped
        );
    }
    let mut differ = 0;
    for (test, &on_ironic) in &ironic.outcomes {
        let on_ferric = ferric.outcomes.get(test).copied();
        if on_ironic == Outcome::Passed && on_ferric != Some(Outcome::Passed) {
            differ += 1;
            let shown = on_ferric.map_or("not run (known failure)", Outcome::as_str);
            println!("  PASSES ON IRONIC ONLY ({shown} on ferric): {test}");
        }
    }
    for (test, &on_ferric) in &ferric.outcomes {
        let on_ironic = ironic.outcomes.get(test).copied();
        if on_ferric == Outcome::Passed && on_ironic != Some(Outcome::Passed) {
            differ += 1;
            let shown = on_ironic.map_or("not run", Outcome::as_str);
            println!("  PASSES ON FERRIC ONLY ({shown} on ironic): {test}");
        }
    }
    println!("  {differ} test(s) differ");
}

/// The tests left out of a run (regexes, each with its cause): those Ferric is known to fail.
const KNOWN_FAILURES: &str = "tests/tempest/known-failures.txt";

/// The most failed tests `--retry-failed` runs again; more is no longer "intermittent".
const MAX_RETRIED: usize = 5;

/// PATH with the venv's bin first (tempest runs stestr, stestr runs python).
fn path_with(venv: &Path) -> std::ffi::OsString {
    let mut paths = vec![venv.join("bin")];
    if let Some(path) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

fn run_in(program: &Path, args: &[&std::ffi::OsStr], dir: &Path) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("run {}", program.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", program.display());
    }
    Ok(())
}

/// What became of one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    Skipped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }
}

/// The counts of one run and each test's outcome (by test id, without its `[…]` tags).
#[derive(Debug, Default)]
struct Summary {
    passed: usize,
    failed: usize,
    skipped: usize,
    outcomes: std::collections::BTreeMap<String, Outcome>,
}

/// Prints passed/failed/skipped (stestr's last run) and the failing tests; writes their
/// tracebacks to `dir/failures.txt` (`dir/<label>-failures.txt` for Ironic).
fn summarize(venv: &Path, workspace: &Path, dir: &Path, label: &str) -> anyhow::Result<Summary> {
    let stestr = venv.join("bin/stestr");
    let subunit = Command::new(&stestr)
        .args(["last", "--subunit"])
        .current_dir(workspace)
        .output()
        .context("stestr last --subunit")?;
    // Through a file: a pipe written whole before reading the answer deadlocks once
    // subunit2csv's output fills its pipe.
    let stream = dir.join("last.subunit");
    std::fs::write(&stream, &subunit.stdout)?;
    let csv = Command::new(venv.join("bin/subunit2csv"))
        .stdin(std::fs::File::open(&stream)?)
        .output()
        .context("subunit2csv")?;
    let text = String::from_utf8_lossy(&csv.stdout);
    let mut summary = Summary::default();
    let mut failing = Vec::new();
    for line in text.lines().skip(1) {
        // test,status,start_time,stop_time — test ids may hold commas (`[id-…,negative]`).
        let mut fields = line.rsplitn(4, ',');
        let (Some(_stop), Some(_start), Some(status), Some(test)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        // Class-level fixtures (setUpClass) report as tests too; their failure fails the class.
        let test = test.trim_matches('"');
        let test = test.split('[').next().unwrap_or(test).to_owned();
        let outcome = match status {
            "success" => {
                summary.passed += 1;
                Outcome::Passed
            }
            "skip" => {
                summary.skipped += 1;
                Outcome::Skipped
            }
            "fail" | "failure" => {
                summary.failed += 1;
                failing.push(test.clone());
                Outcome::Failed
            }
            _ => continue,
        };
        summary.outcomes.insert(test, outcome);
    }
    let failures = Command::new(&stestr)
        .arg("failing")
        .current_dir(workspace)
        .output()
        .context("stestr failing")?;
    let tracebacks = if label == "ferric" {
        dir.join("failures.txt")
    } else {
        dir.join(format!("{label}-failures.txt"))
    };
    std::fs::write(&tracebacks, &failures.stdout)?;
    failing.sort();
    println!("tempest (ironic_tempest_plugin.tests.api) against {label}:");
    println!(
        "  passed {}, failed {}, skipped {}",
        summary.passed, summary.failed, summary.skipped
    );
    for test in &failing {
        println!("  FAILED {test}");
    }
    println!("  tracebacks: {}", tracebacks.display());
    Ok(summary)
}

/// tempest.conf: Keystone's admin for dynamic credentials, only Ironic available, the fake
/// hardware type, system-scoped admin for the baremetal client (`enforce_scope`).
fn tempest_conf(auth_url: &str, workspace: &Path) -> String {
    let base = auth_url.trim_end_matches("/v3");
    let log = workspace.join("tempest.log");
    let log = log.display();
    format!(
        "# Written by cargo xtask tempest (xtask/src/tempest.rs).
[DEFAULT]
log_file = {log}

[auth]
use_dynamic_credentials = true
admin_username = admin
admin_password = ferric-test-admin
admin_project_name = admin
admin_domain_name = Default
admin_system = all

[identity]
uri = {base}/v3
uri_v3 = {base}/v3
auth_version = v3
region = RegionOne
v3_endpoint_type = public

[identity-feature-enabled]
api_v2 = false
api_v3 = true

[enforce_scope]
ironic = true
keystone = true

[service_available]
ironic = true
nova = false
neutron = false
glance = false
cinder = false
swift = false
ironic_inspector = false

[baremetal]
driver = fake-hardware
enabled_hardware_types = {HARDWARE_TYPES}
min_microversion = 1.1
max_microversion = latest
endpoint_type = public
power_timeout = 60
unprovision_timeout = 120
deploywait_timeout = 60
active_timeout = 120
association_timeout = 60
"
    )
}

/// Creates or reuses the Tempest venv; its path.
fn tempest_venv(root: &Path) -> anyhow::Result<PathBuf> {
    let requirements = root.join("tests/tempest/requirements.txt");
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let venv = PathBuf::from(home).join(".cache/ferric/tempest-venv");
    let python = Command::new("python3").arg("--version").output()?;
    let stamp = format!(
        "{} {}",
        std::fs::read_to_string(&requirements)?.len(),
        String::from_utf8_lossy(&python.stdout).trim()
    );
    let stamp_file = venv.join(".ferric-stamp");
    if venv.join("bin/tempest").is_file()
        && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(stamp.as_str())
    {
        return Ok(venv);
    }
    eprintln!(
        "xtask: creating {} (tempest, ironic-tempest-plugin; about a minute)",
        venv.display()
    );
    let _ = std::fs::remove_dir_all(&venv);
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()?;
    if !status.success() {
        bail!("python3 -m venv failed");
    }
    let status = Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "-r",
        ])
        .arg(&requirements)
        .status()?;
    if !status.success() {
        bail!("pip install -r {} failed", requirements.display());
    }
    std::fs::write(&stamp_file, stamp)?;
    Ok(venv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let options = parse(&["--concurrency".to_owned(), "4".to_owned()])
            .unwrap()
            .unwrap();
        assert_eq!(options.concurrency, 4);
        assert!(options.regex.contains("tests"));
        assert!(!options.all);
        assert!(parse(&["--all".to_owned()]).unwrap().unwrap().all);
        assert!(parse(&["--bogus".to_owned()]).is_err());
    }

    #[test]
    fn the_configuration_names_keystone_and_the_fake_driver() {
        let conf = tempest_conf("http://127.0.0.1:5000/v3", Path::new("/w"));
        assert!(conf.contains("uri_v3 = http://127.0.0.1:5000/v3"));
        assert!(conf.contains("driver = fake-hardware"));
    }
}
