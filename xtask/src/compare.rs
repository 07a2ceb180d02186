//! `cargo xtask bench-compare`: Ferric beside OpenStack Ironic on the same machine, in the same
//! run (issue 11). Not a test: it builds the release `ferric`, runs the workloads against it
//! and, with `--ironic`, against Ironic standalone (`scripts/ironic-standalone.sh`: PyPI,
//! noauth, SQLite, fake-hardware, `rpc_transport = none`), one server after the other, and
//! prints one table with both and the ratio.
//!
//! Theory of operation: each server is started once and gets, in order, the fleets (N nodes
//! with a port each, then manage → provide → deploy → undeploy → delete), the reads at 10,000
//! nodes (the `bench-api` paths) and an idle pause. A fleet phase is issue 26's workload: the
//! C client threads send the phase's verb for every node (each taking the next node, never
//! waiting for one to finish; 409 and 503 are retried after 20 ms) while one poller reads the
//! collection (`GET /v1/nodes?fields=uuid,provision_state,…&limit=1000`, every page) every
//! 25 ms; the phase ends when a poll begun after the last request shows every node resting in
//! the expected state with no target and no reservation, and a node in a failed state ends the
//! run with its `last_error`. So the figure is the server's throughput, not one node's latency
//! times N / C. A sampler thread reads the resident memory of the server's whole process tree
//! (Ironic forks a worker) every 200 ms for the peak; the idle figure is read after the pause.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::bench_http::{self, percentile};
use crate::fleet::{create_node_with_port, delete_node, parallel, phase_until_rested, retried};
use crate::process::{free_port, run, target_dir, workspace_root};
use crate::server::RunningServer;

pub(crate) const USAGE: &str = "\
usage: cargo xtask bench-compare [--ironic] [--fleet N,N] [--clients C] [--read-nodes N]
                                 [--seconds S] [--ferric-binary PATH]

  --ironic            also run every workload against OpenStack Ironic standalone (installed
                      from PyPI into ~/.cache/ferric/ironic-venv by scripts/ironic-standalone.sh)
  --fleet N,N         fleet sizes (default 100,1000): create N nodes with a port each, then
                      manage, provide, deploy, undeploy and delete them on fake-hardware
  --clients C         concurrent client threads for fleets, enrolling and throughput (default 10)
  --read-nodes N      nodes enrolled for the read benchmark (default 10000; 0 skips reads)
  --seconds S         length of the single-node throughput run (default 10)
  --ferric-binary P   use this ferric binary instead of building the release one

Ironic 39 on this 2-core machine needs ~14 minutes for the 1,000-node fleet and as long
again to enroll 10,000 nodes; `--fleet 100 --read-nodes 1000` gives a first look in minutes.
";

#[derive(Debug, Clone)]
struct Options {
    ironic: bool,
    fleets: Vec<usize>,
    clients: usize,
    read_nodes: usize,
    seconds: u64,
    ferric_binary: Option<PathBuf>,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        ironic: false,
        fleets: vec![100, 1000],
        clients: 10,
        read_nodes: 10_000,
        seconds: 10,
        ferric_binary: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> anyhow::Result<String> {
            args.next()
                .cloned()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        let number = |name: &str, value: &str, zero_ok: bool| -> anyhow::Result<usize> {
            match value.parse::<usize>() {
                Ok(n) if n > 0 || zero_ok => Ok(n),
                _ => bail!("{name} {value:?}: expected a positive whole number\n\n{USAGE}"),
            }
        };
        match arg.as_str() {
            "--ironic" => options.ironic = true,
            "--fleet" => {
                let list = value("--fleet")?;
                options.fleets = list
                    .split(',')
                    .map(|size| number("--fleet", size.trim(), false))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--clients" => options.clients = number("--clients", &value("--clients")?, false)?,
            "--read-nodes" => {
                options.read_nodes = number("--read-nodes", &value("--read-nodes")?, true)?;
            }
            "--seconds" => {
                options.seconds = number("--seconds", &value("--seconds")?, false)? as u64;
            }
            "--ferric-binary" => options.ferric_binary = Some(value("--ferric-binary")?.into()),
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    Ok(options)
}

/// Which way a figure is better, and so which way the ratio is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Lower,
    Higher,
}

/// One measured figure of one server.
#[derive(Debug, Clone)]
struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
    better: Better,
    /// The target for Ferric, where it names one.
    target: Option<&'static str>,
}

impl Figure {
    fn seconds(name: String, elapsed: Duration) -> Self {
        Self {
            name,
            value: elapsed.as_secs_f64(),
            unit: "s",
            better: Better::Lower,
            target: None,
        }
    }

    fn millis(name: String, elapsed: Duration) -> Self {
        Self {
            name,
            value: elapsed.as_secs_f64() * 1000.0,
            unit: "ms",
            better: Better::Lower,
            target: None,
        }
    }

    fn with_target(mut self, target: &'static str) -> Self {
        self.target = Some(target);
        self
    }

    fn shown(&self) -> String {
        match self.unit {
            "ms" if self.value < 10.0 => format!("{:.2} ms", self.value),
            "ms" => format!("{:.1} ms", self.value),
            "s" if self.value < 10.0 => format!("{:.2} s", self.value),
            "s" => format!("{:.1} s", self.value),
            unit => format!("{:.0} {unit}", self.value),
        }
    }
}

pub(crate) fn bench_compare(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let root = workspace_root();
    let run_dir = target_dir().join("bench-compare");
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    let binary = match &options.ferric_binary {
        Some(binary) => binary.clone(),
        None => {
            run(
                "cargo",
                &["build", "--release", "--locked", "--bin", "ferric"],
                &[],
            )?;
            target_dir().join("release").join("ferric")
        }
    };

    let mut columns = vec![("ferric", measure_ferric(&binary, &run_dir, &options)?)];
    if options.ironic {
        let ironic_dir = run_dir.join("ironic");
        std::fs::create_dir_all(&ironic_dir)?;
        let server = RunningServer::ironic(&root, &ironic_dir, free_port()?)?;
        println!("bench-compare: ironic at {}", server.endpoint);
        let figures = measure(&server, &options, "ironic")?;
        drop(server);
        columns.push(("ironic", figures));
    }
    println!();
    print!("{}", table(&columns));
    let record = run_dir.join("results.json");
    let results: Value = columns
        .iter()
        .map(|(server, figures)| {
            let figures: serde_json::Map<String, Value> = figures
                .iter()
                .map(|figure| (figure.name.clone(), json!([figure.value, figure.unit])))
                .collect();
            ((*server).to_owned(), Value::Object(figures))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    std::fs::write(&record, serde_json::to_string_pretty(&results)?)?;
    println!("\nfigures also in {}", record.display());
    Ok(())
}

/// Starts `binary server` on a fresh SQLite file under `run_dir` and measures it.
fn measure_ferric(binary: &Path, run_dir: &Path, options: &Options) -> anyhow::Result<Vec<Figure>> {
    let dir = run_dir.join("ferric");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let database = dir.join("ferric.db").display().to_string();
    let server = RunningServer::ferric_binary(binary, &dir, free_port()?, &database)?;
    println!(
        "bench-compare: ferric ({}) at {}",
        binary.display(),
        server.endpoint
    );
    measure(&server, options, "ferric")
}

/// Runs every workload against `server`.
fn measure(server: &RunningServer, options: &Options, label: &str) -> anyhow::Result<Vec<Figure>> {
    let pid = server
        .pid()
        .with_context(|| format!("the {label} server's process id is unknown"))?;
    let tree = ProcessTree { root: pid };
    let sampler = PeakSampler::start(tree);
    let endpoint = &server.endpoint;
    let mut figures = Vec::new();
    for (round, &size) in options.fleets.iter().enumerate() {
        fleet(endpoint, round, size, options.clients, &tree, &mut figures)
            .with_context(|| format!("{label}: fleet of {size}"))?;
    }
    if options.read_nodes > 0 {
        reads(endpoint, options, &tree, &mut figures).with_context(|| format!("{label}: reads"))?;
        // Let the server settle (request buffers freed, caches as they stay) before reading
        // its idle footprint.
        thread::sleep(Duration::from_secs(3));
        figures.push(
            Figure {
                name: format!("memory: RSS idle with {} nodes", options.read_nodes),
                value: tree.rss_bytes()? as f64 / 1e6,
                unit: "MB",
                better: Better::Lower,
                target: None,
            }
            .with_target("≤ 40 MB at 10,000"),
        );
    }
    figures.push(Figure {
        name: "memory: peak RSS over the run".to_owned(),
        value: sampler.stop() as f64 / 1e6,
        unit: "MB",
        better: Better::Lower,
        target: None,
    });
    Ok(figures)
}

/// One fleet of `size` nodes (the workload below) against the server whose pid is `pid`, its
/// phases printed: `bench-api`'s fleet cycle, so both benchmarks run the same workload.
pub(crate) fn fleet_of(url: &str, pid: u32, size: usize, clients: usize) -> anyhow::Result<()> {
    let tree = ProcessTree { root: pid };
    fleet(url, 0, size, clients, &tree, &mut Vec::new())
}

/// The fleet workload: `size` nodes with a port each through every phase, `clients` at once.
fn fleet(
    endpoint: &str,
    round: usize,
    size: usize,
    clients: usize,
    tree: &ProcessTree,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    println!("fleet of {size} nodes, {clients} clients:");
    let cpu_before = tree.cpu_seconds()?;
    let mut total = Duration::ZERO;
    let mut retries = retried();
    let mut phase = |name: &str, elapsed: Duration, figures: &mut Vec<Figure>| {
        let now = retried();
        let (locked, busy) = (now.0 - retries.0, now.1 - retries.1);
        retries = now;
        if locked + busy > 0 {
            println!(
                "  {name}: {:.2} s ({locked} × 409 and {busy} × 503 sent again)",
                elapsed.as_secs_f64()
            );
        } else {
            println!("  {name}: {:.2} s", elapsed.as_secs_f64());
        }
        total += elapsed;
        figures.push(Figure::seconds(format!("fleet {size}: {name}"), elapsed));
    };

    let started = Instant::now();
    let uuids = parallel(size, clients, |agent, n| {
        create_node_with_port(agent, endpoint, round, n)
    })?;
    phase("create (node + port)", started.elapsed(), figures);

    for (name, target, expect) in [
        ("manage", "manage", "manageable"),
        ("provide", "provide", "available"),
        ("deploy", "active", "active"),
        ("undeploy", "deleted", "available"),
    ] {
        let started = Instant::now();
        let rested = phase_until_rested(endpoint, &uuids, clients, target, expect)?;
        phase(name, rested.duration_since(started), figures);
    }

    let started = Instant::now();
    parallel(size, clients, |agent, n| {
        delete_node(agent, endpoint, &uuids[n])
    })?;
    phase("delete", started.elapsed(), figures);

    let mut total_figure = Figure::seconds(format!("fleet {size}: total"), total);
    if size >= 1000 {
        total_figure = total_figure.with_target("≥ 30× faster than Ironic");
    }
    println!("  total: {:.2} s", total.as_secs_f64());
    figures.push(total_figure);
    figures.push(Figure::seconds(
        format!("fleet {size}: server CPU time"),
        Duration::from_secs_f64((tree.cpu_seconds()? - cpu_before).max(0.0)),
    ));
    Ok(())
}

/// The reads of `bench-api` at `options.read_nodes` nodes.
fn reads(
    endpoint: &str,
    options: &Options,
    tree: &ProcessTree,
    figures: &mut Vec<Figure>,
) -> anyhow::Result<()> {
    let nodes = options.read_nodes;
    println!("reads at {nodes} nodes:");
    let started = Instant::now();
    let uuids = bench_http::enroll(endpoint, nodes, options.clients)?;
    let elapsed = started.elapsed();
    println!("  enrolled in {:.1} s", elapsed.as_secs_f64());
    figures.push(Figure::seconds(
        format!("reads: enroll {nodes} nodes"),
        elapsed,
    ));
    thread::sleep(Duration::from_secs(3));
    figures.push(megabytes(
        format!("memory: RSS idle after enrolling {nodes} nodes"),
        tree.rss_bytes()?,
        "≤ 40 MB at 10,000",
    ));

    let agent = bench_http::agent();
    let detail = format!("{endpoint}/v1/nodes/detail?limit=1000");
    let fields = format!("{endpoint}/v1/nodes?fields=uuid,provision_state&limit=1000");
    // Warm-up, as an operator's server is warm.
    bench_http::walk_pages(&agent, &detail)?;
    bench_http::walk_pages(&agent, &fields)?;
    for (name, url, target) in [
        (
            "GET /v1/nodes/detail, pages of 1,000",
            &detail,
            Some("≤ 15 ms p50"),
        ),
        ("GET /v1/nodes?fields=uuid,provision_state", &fields, None),
    ] {
        let mut latencies = Vec::new();
        for _ in 0..3 {
            latencies.extend(bench_http::walk_pages(&agent, url)?);
        }
        latencies.sort_unstable();
        if *url == detail {
            figures.push(megabytes(
                format!("memory: RSS after 4 detail walks of {nodes} nodes"),
                tree.rss_bytes()?,
                "≤ 64 MB at 10,000",
            ));
        }
        let mut p50 = Figure::millis(format!("reads: {name} p50"), percentile(&latencies, 50));
        if let Some(target) = target {
            p50 = p50.with_target(target);
        }
        println!("  {name}: p50 {}", p50.shown());
        figures.push(p50);
        figures.push(Figure::millis(
            format!("reads: {name} p99"),
            percentile(&latencies, 99),
        ));
    }

    let (requests, mut latencies, elapsed) =
        bench_http::throughput(endpoint, &uuids, options.clients, options.seconds)?;
    latencies.sort_unstable();
    let threads = options.clients;
    let name = format!("GET /v1/nodes/{{uuid}}, {threads} threads");
    figures.push(Figure::millis(
        format!("reads: {name} p50"),
        percentile(&latencies, 50),
    ));
    figures.push(Figure::millis(
        format!("reads: {name} p99"),
        percentile(&latencies, 99),
    ));
    let rate = requests as f64 / elapsed.as_secs_f64().max(f64::EPSILON);
    println!("  {name}: {rate:.0} requests/s");
    figures.push(
        Figure {
            name: format!("reads: {name}"),
            value: rate,
            unit: "req/s",
            better: Better::Higher,
            target: None,
        }
        .with_target("≥ 10,000 req/s"),
    );
    Ok(())
}

/// A resident-memory figure in MB.
fn megabytes(name: String, bytes: u64, target: &'static str) -> Figure {
    Figure {
        name,
        value: bytes as f64 / 1e6,
        unit: "MB",
        better: Better::Lower,
        target: None,
    }
    .with_target(target)
}

/// A server process and its descendants (Ironic's all-in-one command forks a worker).
#[derive(Debug, Clone, Copy)]
struct ProcessTree {
    root: u32,
}

impl ProcessTree {
    /// The root's pid and its descendants', found through the parent pid in `/proc/*/stat`.
    fn pids(&self) -> anyhow::Result<Vec<u32>> {
        let mut parents = Vec::new();
        for entry in std::fs::read_dir("/proc").context("cannot read /proc")? {
            let Ok(entry) = entry else { continue };
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(fields) = stat_fields(pid)
                && let Some(parent) = fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok())
            {
                parents.push((pid, parent));
            }
        }
        let mut tree = vec![self.root];
        let mut grew = true;
        while grew {
            grew = false;
            for (pid, parent) in &parents {
                if tree.contains(parent) && !tree.contains(pid) {
                    tree.push(*pid);
                    grew = true;
                }
            }
        }
        Ok(tree)
    }

    /// Resident memory of the whole tree, in bytes.
    fn rss_bytes(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for pid in self.pids()? {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let kib = status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| {
                    value
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0);
            total += kib * 1024;
        }
        Ok(total)
    }

    /// CPU seconds (user + system) the tree's live processes have used.
    fn cpu_seconds(&self) -> anyhow::Result<f64> {
        let ticks = clock_ticks()?;
        let mut total = 0.0;
        for pid in self.pids()? {
            if let Some(fields) = stat_fields(pid) {
                // After the name: state is field 0 here, utime 11 and stime 12.
                let used: f64 = [11, 12]
                    .iter()
                    .filter_map(|&index| fields.get(index)?.parse::<f64>().ok())
                    .sum();
                total += used / ticks;
            }
        }
        Ok(total)
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (which may hold spaces).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

fn clock_ticks() -> anyhow::Result<f64> {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("cannot run getconf CLK_TCK")?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .context("getconf CLK_TCK did not print a number")
}

/// Samples a tree's resident memory every 200 ms and keeps the peak.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl PeakSampler {
    fn start(tree: ProcessTree) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = tree.rss_bytes() {
                        peak.fetch_max(rss, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(200));
                }
            })
        };
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// Stops sampling; returns the peak in bytes.
    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// One table: every figure of the first column's server, the others beside it, and the ratio
/// (how many times better the first server is) where both have the figure.
fn table(columns: &[(&str, Vec<Figure>)]) -> String {
    let Some((_, first)) = columns.first() else {
        return String::new();
    };
    let width = first
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!("{:width$}", "workload");
    for (server, _) in columns {
        out.push_str(&format!("  {server:>12}"));
    }
    if columns.len() > 1 {
        out.push_str(&format!("  {:>8}", "ratio"));
    }
    out.push_str("  target\n");
    for figure in first {
        out.push_str(&format!("{:width$}", figure.name));
        out.push_str(&format!("  {:>12}", figure.shown()));
        let others: Vec<Option<&Figure>> = columns[1..]
            .iter()
            .map(|(_, figures)| figures.iter().find(|other| other.name == figure.name))
            .collect();
        for other in &others {
            let shown = other.map(Figure::shown).unwrap_or_else(|| "-".to_owned());
            out.push_str(&format!("  {shown:>12}"));
        }
        if let Some(Some(other)) = others.first() {
            out.push_str(&format!("  {:>8}", ratio(figure, other)));
        } else if columns.len() > 1 {
            out.push_str(&format!("  {:>8}", "-"));
        }
        out.push_str(&format!("  {}\n", figure.target.unwrap_or("")));
    }
    out
}

/// How many times better `ours` is than `theirs`.
fn ratio(ours: &Figure, theirs: &Figure) -> String {
    let ratio = match ours.better {
        Better::Lower => theirs.value / ours.value,
        Better::Higher => ours.value / theirs.value,
    };
    if ratio.is_finite() {
        format!("{ratio:.1}×")
    } else {
        "-".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_are_checked() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.fleets, vec![100, 1000]);
        assert!(!options.ironic);
        assert_eq!(options.read_nodes, 10_000);
        let options = parse(&strings(&[
            "--ironic",
            "--fleet",
            "5,50",
            "--read-nodes",
            "0",
        ]))
        .unwrap();
        assert!(options.ironic);
        assert_eq!(options.fleets, vec![5, 50]);
        assert_eq!(options.read_nodes, 0);
        assert!(parse(&strings(&["--fleet", "5,x"])).is_err());
        assert!(parse(&strings(&["--clients", "0"])).is_err());
        assert!(parse(&strings(&["--fast"])).is_err());
    }

    #[test]
    fn the_table_shows_ratios_the_right_way_round() {
        let ferric = vec![
            Figure::seconds("fleet 10: total".to_owned(), Duration::from_secs(2)),
            Figure {
                name: "reads: rate".to_owned(),
                value: 1000.0,
                unit: "req/s",
                better: Better::Higher,
                target: Some("≥ 10,000 req/s"),
            },
        ];
        let ironic = vec![
            Figure::seconds("fleet 10: total".to_owned(), Duration::from_secs(60)),
            Figure {
                name: "reads: rate".to_owned(),
                value: 50.0,
                unit: "req/s",
                better: Better::Higher,
                target: None,
            },
        ];
        let table = table(&[("ferric", ferric), ("ironic", ironic)]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("ferric") && lines[0].contains("ironic"));
        assert!(lines[1].contains("2.00 s") && lines[1].contains("60.0 s"));
        assert!(lines[1].contains("30.0×"), "{table}");
        assert!(
            lines[2].contains("20.0×") && lines[2].contains("≥ 10,000"),
            "{table}"
        );
    }

    /// The whole harness against the debug `ferric` on a tiny fleet: every phase runs and
    /// every figure is measured (the figures themselves are the command's business).
    #[test]
    fn runs_on_a_tiny_fleet() {
        let binary = debug_ferric();
        let dir = std::env::temp_dir().join(format!("ferric-bench-compare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let options = Options {
            ironic: false,
            fleets: vec![4],
            clients: 2,
            read_nodes: 30,
            seconds: 1,
            ferric_binary: Some(binary.clone()),
        };
        let figures = measure_ferric(&binary, &dir, &options).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        for phase in [
            "create (node + port)",
            "manage",
            "provide",
            "deploy",
            "undeploy",
            "delete",
        ] {
            let name = format!("fleet 4: {phase}");
            assert!(
                names.contains(&name.as_str()),
                "{name} missing from {names:?}"
            );
        }
        let value = |prefix: &str| {
            figures
                .iter()
                .find(|f| f.name.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix} missing from {names:?}"))
                .value
        };
        assert!(value("fleet 4: total") > 0.0);
        assert!(value("reads: GET /v1/nodes/{uuid}, 2 threads") > 0.0);
        assert!(value("memory: RSS idle with 30 nodes") > 1.0);
        assert!(value("memory: peak RSS") > 1.0);
    }

    /// `target/debug/ferric` beside this test binary (`target/debug/deps/xtask-…`), which the
    /// workspace's test build makes; built here when missing.
    fn debug_ferric() -> PathBuf {
        let exe = std::env::current_exe().unwrap();
        let debug = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let binary = debug.join("ferric");
        if !binary.exists() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "--bin", "ferric"])
                .current_dir(workspace_root())
                .status()
                .unwrap();
            assert!(status.success(), "cargo build --bin ferric failed");
        }
        binary
    }
}
