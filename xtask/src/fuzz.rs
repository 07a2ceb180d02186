//! `cargo xtask fuzz`: every cargo-fuzz target in `fuzz/` for a bounded time, then
//! schemathesis against `docs/openapi.json` on a running `ferric server` (SQLite in a temporary
//! directory, fake-hardware nodes and ports seeded), and one summary: crashes, 5xx answers and
//! schema violations, all of which must be zero.
//!
//! cargo-fuzz passes nightly-only flags to rustc; `RUSTC_BOOTSTRAP=1` lets the stable
//! toolchain take them. The targets build without a sanitizer (Ferric forbids `unsafe`, so
//! AddressSanitizer would find nothing the panics do not) and with debug assertions and
//! overflow checks on. Corpora and logs live under the target directory, so runs build on each
//! other; `fuzz/seeds/<target>` holds the checked-in starting inputs.
//!
//! `cargo xtask ci` runs every target for [`CI_SECONDS`] (`ci`, no schemathesis), so a parser
//! regression fails CI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::process::{free_port, run, target_dir, workspace_root};
use crate::server::RunningServer;

const USAGE: &str = "\
usage: cargo xtask fuzz [--seconds N] [--requests N] [--targets A,B] [--no-schemathesis]
                        [--no-targets]

  --seconds N        how long each fuzz target runs (default 30)
  --requests N       schemathesis' fuzzing phase sends about this many requests (default
                     3000), after the document's examples and its coverage phase (the
                     summary counts every request sent)
  --targets A,B      run only these fuzz targets (default: every one in fuzz/)
  --no-schemathesis  skip the API run
  --no-targets       skip the fuzz targets
";

/// The API version schemathesis asks for: the document describes the latest one.
const VERSION: &str = "latest";

/// The schemathesis checks that make the summary: no 5xx, and status codes, content types
/// and bodies as the document says.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
                      response_schema_conformance";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    seconds: u64,
    requests: u64,
    targets: Option<Vec<String>>,
    schemathesis: bool,
    fuzz_targets: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        seconds: 30,
        requests: 3000,
        targets: None,
        schemathesis: true,
        fuzz_targets: true,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n\n{USAGE}"))
        };
        match flag.as_str() {
            "--seconds" => {
                options.seconds = value()?.parse().context("--seconds needs a number")?;
            }
            "--requests" => {
                options.requests = value()?.parse().context("--requests needs a number")?;
            }
            "--targets" => {
                options.targets = Some(value()?.split(',').map(str::to_owned).collect());
            }
            "--no-schemathesis" => options.schemathesis = false,
            "--no-targets" => options.fuzz_targets = false,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other:?}\n\n{USAGE}"),
        }
    }
    if options.seconds == 0 || options.requests == 0 {
        bail!("--seconds and --requests must be at least 1");
    }
    Ok(options)
}

/// One fuzz target's run.
#[derive(Debug)]
struct TargetRun {
    name: String,
    executions: u64,
    crashed: bool,
    artifact: Option<String>,
}

/// What schemathesis found.
#[derive(Debug, Default)]
struct ApiRun {
    operations: u64,
    requests: u64,
    server_errors: u64,
    schema_violations: u64,
    other_failures: u64,
    failures: Vec<String>,
}

/// Seconds each fuzz target runs in `cargo xtask ci`: seven targets make about two and a half
/// minutes of fuzzing after the build, enough for a regression in a parser the seeds reach.
pub(crate) const CI_SECONDS: u64 = 20;

/// The bounded run `cargo xtask ci` makes: every target for [`CI_SECONDS`], no schemathesis
/// (its API run takes minutes more; `cargo xtask fuzz` does it).
pub(crate) fn ci() -> anyhow::Result<()> {
    fuzz(&[
        "--seconds".to_owned(),
        CI_SECONDS.to_string(),
        "--no-schemathesis".to_owned(),
    ])
}

pub(crate) fn fuzz(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    run("bash", &["scripts/install-deps.sh", "--fuzz"], &[])?;
    let root = workspace_root();
    let work = target_dir().join("xtask-fuzz");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let started = Instant::now();

    let targets = if options.fuzz_targets {
        run_targets(&root, &work, &options)?
    } else {
        Vec::new()
    };
    let api = if options.schemathesis {
        Some(run_schemathesis(&root, &work, options.requests)?)
    } else {
        None
    };

    println!();
    println!(
        "fuzz summary ({:.0} s in all)",
        started.elapsed().as_secs_f64()
    );
    for target in &targets {
        println!(
            "  {:<18} {:>10} executions in {} s  {}",
            target.name,
            target.executions,
            options.seconds,
            if target.crashed {
                format!(
                    "CRASH ({})",
                    target.artifact.as_deref().unwrap_or("see the log")
                )
            } else {
                "ok".to_owned()
            }
        );
    }
    let crashes = targets.iter().filter(|target| target.crashed).count();
    if options.fuzz_targets {
        println!("  crashes: {crashes}");
    }
    if let Some(api) = &api {
        println!(
            "  schemathesis: {} operations, {} requests; 5xx: {}, schema violations: {}, other \
             failures: {}",
            api.operations,
            api.requests,
            api.server_errors,
            api.schema_violations,
            api.other_failures
        );
        for failure in &api.failures {
            println!("    {failure}");
        }
    }
    let api_failed = api
        .as_ref()
        .is_some_and(|api| api.server_errors + api.schema_violations + api.other_failures > 0);
    if crashes > 0 || api_failed {
        bail!(
            "fuzzing found problems (logs in {}); every crash, 5xx and schema violation is a \
             bug to fix",
            work.display()
        );
    }
    Ok(())
}

/// The flags every cargo-fuzz call shares, so `run` reuses what `build` made.
fn cargo_fuzz_flags(target_dir: &Path) -> Vec<String> {
    vec![
        "--sanitizer".to_owned(),
        "none".to_owned(),
        "--codegen-units".to_owned(),
        "16".to_owned(),
        "--target-dir".to_owned(),
        target_dir.display().to_string(),
    ]
}

fn cargo_fuzz(fuzz_dir: &Path, args: &[String]) -> Command {
    let mut command = Command::new("cargo");
    command
        .arg("fuzz")
        .args(args)
        .current_dir(fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1");
    command
}

fn run_targets(root: &Path, work: &Path, options: &Options) -> anyhow::Result<Vec<TargetRun>> {
    let fuzz_dir = root.join("fuzz");
    let build_dir = target_dir().join("fuzz");
    let flags = cargo_fuzz_flags(&build_dir);

    let listed = cargo_fuzz(&fuzz_dir, &["list".to_owned()])
        .output()
        .context("cannot run cargo fuzz list (scripts/install-deps.sh --fuzz installs it)")?;
    if !listed.status.success() {
        bail!(
            "cargo fuzz list failed: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
    }
    let all: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    let targets = match &options.targets {
        Some(wanted) => {
            if let Some(unknown) = wanted.iter().find(|name| !all.contains(name)) {
                bail!(
                    "no fuzz target {unknown:?}; the targets are {}",
                    all.join(", ")
                );
            }
            wanted.clone()
        }
        None => all,
    };

    eprintln!("xtask: building {} fuzz targets", targets.len());
    let mut build = vec!["build".to_owned()];
    build.extend(flags.iter().cloned());
    let status = cargo_fuzz(&fuzz_dir, &build)
        .status()
        .context("cannot run cargo fuzz build")?;
    if !status.success() {
        bail!("cargo fuzz build failed ({status})");
    }

    let mut runs = Vec::new();
    for name in targets {
        let corpus = work.join("corpus").join(&name);
        std::fs::create_dir_all(&corpus)?;
        let artifacts = work.join("artifacts").join(&name);
        std::fs::create_dir_all(&artifacts)?;
        let log = work.join(format!("{name}.log"));
        let mut args = vec!["run".to_owned()];
        args.extend(flags.iter().cloned());
        args.push(name.clone());
        args.push(corpus.display().to_string());
        let seeds = fuzz_dir.join("seeds").join(&name);
        if seeds.is_dir() {
            args.push(seeds.display().to_string());
        }
        args.extend([
            "--".to_owned(),
            format!("-max_total_time={}", options.seconds),
            "-timeout=10".to_owned(),
            "-rss_limit_mb=2048".to_owned(),
            "-max_len=8192".to_owned(),
            "-print_final_stats=1".to_owned(),
            format!("-artifact_prefix={}/", artifacts.display()),
        ]);
        eprintln!(
            "xtask: fuzzing {name} for {} s (log: {})",
            options.seconds,
            log.display()
        );
        let output = cargo_fuzz(&fuzz_dir, &args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run cargo fuzz run {name}"))?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        std::fs::write(&log, &text).with_context(|| format!("cannot write {}", log.display()))?;
        runs.push(TargetRun {
            executions: final_stat(&text, "stat::number_of_executed_units").unwrap_or(0),
            crashed: !output.status.success(),
            artifact: text
                .lines()
                .find_map(|line| line.split_once("Test unit written to "))
                .map(|(_, path)| path.trim().to_owned()),
            name,
        });
    }
    Ok(runs)
}

/// A number from libFuzzer's `-print_final_stats` lines (`stat::name: value`).
fn final_stat(log: &str, name: &str) -> Option<u64> {
    log.lines().find_map(|line| {
        line.strip_prefix(name)?
            .trim_start_matches(':')
            .trim()
            .parse()
            .ok()
    })
}

fn run_schemathesis(root: &Path, work: &Path, requests: u64) -> anyhow::Result<ApiRun> {
    let run_dir = work.join("api");
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)?;
    let server = RunningServer::ferric(&run_dir, free_port()?)?;
    let endpoint = server.endpoint.clone();
    seed(&endpoint)?;

    let document: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docs").join("openapi.json"))
            .context("cannot read docs/openapi.json")?,
    )
    .context("docs/openapi.json is not JSON")?;
    let operations = operation_count(&document);
    let per_operation = requests.div_ceil(operations.max(1)).max(1);
    let report = run_dir.join("schemathesis.ndjson");
    let st = home_venv().join("bin").join("st");
    let mut command = Command::new(&st);
    command
        .arg("run")
        .arg(root.join("docs").join("openapi.json"))
        .args(["--url", &endpoint])
        .args(["--checks", CHECKS])
        .args(["--max-examples", &per_operation.to_string()])
        .args([
            "--header",
            &format!("X-OpenStack-Ironic-API-Version: {VERSION}"),
        ])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--seed", "13"])
        .args(["--workers", "2"])
        .args(["--request-timeout", "30"])
        .args(["--suppress-health-check", "all"])
        .arg("--continue-on-failure")
        .args(["--report", "ndjson"])
        .arg("--report-ndjson-path")
        .arg(&report)
        .args(["--output-truncate", "false"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    eprintln!(
        "xtask: schemathesis on {endpoint}: {operations} operations, up to {per_operation} \
         examples each (log: {})",
        run_dir.join("schemathesis.log").display()
    );
    let output = command.output().with_context(|| {
        format!(
            "cannot run {} (scripts/install-deps.sh --fuzz)",
            st.display()
        )
    })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    std::fs::write(run_dir.join("schemathesis.log"), &text)?;
    drop(server);
    let events = std::fs::read_to_string(&report)
        .with_context(|| format!("schemathesis wrote no report ({}):\n{text}", output.status))?;
    let mut api = read_report(&events)?;
    api.operations = operations;
    if !output.status.success()
        && api.server_errors + api.schema_violations + api.other_failures == 0
    {
        bail!(
            "schemathesis failed ({}) without reporting a failure:\n{text}",
            output.status
        );
    }
    Ok(api)
}

fn home_venv() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache").join("ferric").join("schemathesis-venv")
}

fn operation_count(document: &Value) -> u64 {
    document["paths"]
        .as_object()
        .map(|paths| {
            paths
                .values()
                .filter_map(Value::as_object)
                .flat_map(|operations| operations.keys())
                .filter(|method| {
                    ["get", "put", "post", "patch", "delete"].contains(&method.as_str())
                })
                .count() as u64
        })
        .unwrap_or(0)
}

/// Counts requests and failures by check in schemathesis' NDJSON event stream.
fn read_report(events: &str) -> anyhow::Result<ApiRun> {
    let mut api = ApiRun::default();
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for line in events.lines().filter(|line| !line.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).context("a report line is not JSON")?;
        let Some(scenario) = event.get("ScenarioFinished") else {
            continue;
        };
        let Some(cases) = scenario
            .pointer("/recorder/cases")
            .and_then(Value::as_object)
        else {
            continue;
        };
        let label = scenario
            .pointer("/recorder/label")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        api.requests += scenario
            .pointer("/recorder/interactions")
            .and_then(Value::as_object)
            .map_or(cases.len() as u64, |interactions| interactions.len() as u64);
        let Some(checks) = scenario
            .pointer("/recorder/checks")
            .and_then(Value::as_object)
        else {
            continue;
        };
        for results in checks.values().filter_map(Value::as_array) {
            for check in results {
                let failed = check
                    .get("status")
                    .and_then(Value::as_str)
                    .is_some_and(|status| status.eq_ignore_ascii_case("failure"));
                if !failed {
                    continue;
                }
                let name = check.get("name").and_then(Value::as_str).unwrap_or("?");
                match name {
                    "not_a_server_error" => api.server_errors += 1,
                    "status_code_conformance"
                    | "response_schema_conformance"
                    | "content_type_conformance" => api.schema_violations += 1,
                    _ => api.other_failures += 1,
                }
                let title = check
                    .pointer("/failure_info/failure/title")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                *seen.entry(format!("{label}: {name}: {title}")).or_default() += 1;
            }
        }
    }
    api.failures = seen
        .into_iter()
        .map(|(what, count)| format!("{what} (×{count})"))
        .collect();
    Ok(api)
}

/// A few resources of every kind, so requests naming one find something.
fn seed(endpoint: &str) -> anyhow::Result<()> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, body: Value| -> anyhow::Result<Value> {
        let mut response = agent
            .post(&format!("{endpoint}{path}"))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .send_json(&body)
            .with_context(|| format!("POST {path}"))?;
        let status = response.status();
        let answer: Value = response.body_mut().read_json().unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("seeding: POST {path} answered {status}: {answer}");
        }
        Ok(answer)
    };
    let chassis = post("/v1/chassis", json!({"description": "rack 1"}))?;
    for n in 0..4 {
        let node = post(
            "/v1/nodes",
            json!({
                "name": format!("fuzz-{n}"),
                "driver": "fake-hardware",
                "resource_class": "baremetal",
                "chassis_uuid": chassis["uuid"],
                "driver_info": {"ipmi_address": format!("10.0.0.{n}"), "ipmi_password": "secret"},
                "properties": {"cpus": 8, "memory_mb": 16384, "local_gb": 100},
                "extra": {"rack": "r1"},
            }),
        )?;
        let portgroup = post(
            "/v1/portgroups",
            json!({"node_uuid": node["uuid"], "address": format!("52:54:00:00:01:{n:02x}")}),
        )?;
        for p in 0..2 {
            post(
                "/v1/ports",
                json!({
                    "node_uuid": node["uuid"],
                    "portgroup_uuid": portgroup["uuid"],
                    "address": format!("52:54:00:00:{n:02x}:{p:02x}"),
                }),
            )?;
        }
    }
    post(
        "/v1/allocations",
        json!({"resource_class": "baremetal", "name": "fuzz-allocation"}),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let args: Vec<String> = ["--seconds", "5", "--requests", "100", "--targets", "a,b"]
            .iter()
            .map(|arg| (*arg).to_owned())
            .collect();
        let options = parse(&args).unwrap();
        assert_eq!(options.seconds, 5);
        assert_eq!(options.requests, 100);
        assert_eq!(options.targets, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert!(parse(&["--seconds".to_owned(), "0".to_owned()]).is_err());
        assert!(parse(&["--fast".to_owned()]).is_err());
    }

    #[test]
    fn reads_libfuzzer_final_stats() {
        let log =
            "#1000 DONE cov: 12\nstat::number_of_executed_units: 123456\nstat::peak_rss_mb: 80\n";
        assert_eq!(
            final_stat(log, "stat::number_of_executed_units"),
            Some(123_456)
        );
        assert_eq!(final_stat(log, "stat::missing"), None);
    }
}
