//! `cargo xtask bench-scale`: Ferric at 100,000 nodes on PostgreSQL with three `--role
//! conductor` and two `--role api` processes (issue 26). Not a test: it builds the release
//! `ferric` and the Redfish BMC simulator of `bench-power-sync`, creates a fresh database
//! `ferric_scale` and prints one table (also written to `target/bench-scale/results.json`).
//!
//! Theory of operation, in the order the run does it:
//! 1. The simulator (`power_sync_bench serve`, a child process so its CPU is not the
//!    conductors') listens on one port at one loopback address per BMC, answering every
//!    `GET /redfish/v1/Systems/{id}` after `--delay-ms`.
//! 2. Enrolling: `--cycle-nodes` `fake-hardware` nodes, then `redfish` nodes pointing at the
//!    simulator (`--nodes-per-bmc` per BMC address) up to `--nodes`, by 10 client threads
//!    through both API processes alternately, at microversion 1.10 (so they start
//!    `available`, as Ironic's old microversions do, and the power sync covers them). The
//!    detail page of 1,000 is timed at 10,000 nodes and again at `--nodes`.
//! 3. The deploy cycle: every fake-hardware node asked to deploy (all requests sent, 409/503
//!    retried), then the collection (`driver=fake-hardware`, pages of 1,000) polled until all
//!    rest in `active`; then the same with undeploy to `available`.
//! 4. Takeover: one of the fake-hardware nodes whose owner (the `conductor` field) is
//!    `conductor-1` is picked, `conductor-1` is SIGKILLed; the takeover time runs from the kill
//!    until both API processes show every fake-hardware node owned by a live conductor *and*
//!    a power-off request for the picked node was accepted and carried out (its
//!    `power_state` became `power off`). Heartbeats every 1 s, timeout 5 s.
//! 5. The power sync: the conductors are restarted together with `sync_power_state_interval
//!    = 6` (heartbeats every second, so all three are in the ring when a pass begins); a
//!    pass starts 6 s after start, spreads its reads' starts over 3 s, and logs `power sync
//!    pass finished` with its node count and duration. The wall time runs from the first
//!    read the simulator answers until the last of the three conductors logs its first pass;
//!    the second pass (every state already recorded; the slowest conductor's own time) is
//!    reported too.
//! 6. RSS: every process's resident memory is sampled every 500 ms for the peak (by role, over
//!    restarts), and read once more at the end; the 1-minute load average is sampled with it.
//!
//! With `--ironic`, Ironic 39 standalone (SQLite, one process) enrolls `--ironic-nodes`
//! (default 1,000) nodes and has its detail page timed: the sizes it does here in minutes.

mod load;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::bench_http;
use crate::process::{free_port, run, target_dir, workspace_root};
use crate::server::MIMALLOC_ENV;
use load::{deploy_cycle, detail_pages, enroll, fake_nodes, ironic, power, wait_for_power};

pub(crate) const USAGE: &str = "\
usage: cargo xtask bench-scale [--nodes N] [--cycle-nodes N] [--quick] [--ironic]
                               [--ironic-nodes N] [--clients C] [--delay-ms MS]
                               [--nodes-per-bmc N]

  --nodes N          nodes in all (default 100000): the cycle's fake-hardware nodes, the rest
                     redfish nodes on the BMC simulator
  --cycle-nodes N    fake-hardware nodes deployed and undeployed (default 10000)
  --quick            small sizes for a first look: --nodes 3000 --cycle-nodes 500
  --ironic           also enroll --ironic-nodes nodes on Ironic 39 standalone (SQLite, one
                     process) and time its detail page
  --ironic-nodes N   (default 1000)
  --clients C        client threads (default 10)
  --delay-ms MS      how long a simulated BMC takes to answer (default 200)
  --nodes-per-bmc N  redfish systems behind one simulated BMC address (default 50)

PostgreSQL on 127.0.0.1:5432 (user postgres, trust); the database ferric_scale is created
afresh and dropped at the end. Logs stay in target/bench-scale/.
";

const CONDUCTORS: usize = 3;
const APIS: usize = 2;
const VICTIM: usize = 1;
/// Nodes created at this microversion start `available` (Ironic's rule before 1.11).
pub(crate) const ENROLL_VERSION: &str = "1.10";
const DATABASE: &str = "ferric_scale";
const HEARTBEAT_TIMEOUT_S: u64 = 5;
/// The power sync's period in its phase: the first pass starts this long after the start
/// (the ring has all three conductors by then) and spreads its reads over half of it.
const POWER_SYNC_INTERVAL_S: u64 = 6;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    pub(crate) nodes: usize,
    pub(crate) cycle_nodes: usize,
    pub(crate) ironic: bool,
    pub(crate) ironic_nodes: usize,
    pub(crate) clients: usize,
    pub(crate) delay_ms: u64,
    pub(crate) nodes_per_bmc: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        nodes: 100_000,
        cycle_nodes: 10_000,
        ironic: false,
        ironic_nodes: 1_000,
        clients: 10,
        delay_ms: 200,
        nodes_per_bmc: 50,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> anyhow::Result<usize> {
            let value = args
                .next()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))?;
            match value.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("{name} {value:?}: expected a positive whole number\n\n{USAGE}"),
            }
        };
        match arg.as_str() {
            "--nodes" => options.nodes = number("--nodes")?,
            "--cycle-nodes" => options.cycle_nodes = number("--cycle-nodes")?,
            "--quick" => {
                options.nodes = 3_000;
                options.cycle_nodes = 500;
            }
            "--ironic" => options.ironic = true,
            "--ironic-nodes" => options.ironic_nodes = number("--ironic-nodes")?,
            "--clients" => options.clients = number("--clients")?,
            "--delay-ms" => options.delay_ms = number("--delay-ms")? as u64,
            "--nodes-per-bmc" => options.nodes_per_bmc = number("--nodes-per-bmc")?,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    if options.cycle_nodes >= options.nodes {
        bail!(
            "--cycle-nodes {} must be below --nodes {}: the rest are the redfish nodes\n\n{USAGE}",
            options.cycle_nodes,
            options.nodes
        );
    }
    Ok(options)
}

/// One row of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) ferric: String,
    pub(crate) ironic: Option<String>,
    pub(crate) target: &'static str,
    /// The figure for results.json: value and unit.
    pub(crate) value: f64,
    pub(crate) unit: &'static str,
}

pub(crate) fn row(
    name: impl Into<String>,
    value: f64,
    unit: &'static str,
    target: &'static str,
) -> Row {
    let shown = match unit {
        "ms" if value < 10.0 => format!("{value:.2} ms"),
        "ms" | "s" => format!("{value:.1} {unit}"),
        "load" => format!("{value:.2}"),
        _ => format!("{value:.0} {unit}"),
    };
    Row {
        name: name.into(),
        ferric: shown,
        ironic: None,
        target,
        value,
        unit,
    }
}

fn table(rows: &[Row]) -> String {
    let width = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0);
    let ironic = rows.iter().any(|r| r.ironic.is_some());
    let mut out = format!("{:width$}  {:>12}", "measurement", "ferric");
    if ironic {
        out.push_str(&format!("  {:>12}", "ironic 39"));
    }
    out.push_str("  target\n");
    for r in rows {
        out.push_str(&format!("{:width$}  {:>12}", r.name, r.ferric));
        if ironic {
            out.push_str(&format!("  {:>12}", r.ironic.as_deref().unwrap_or("-")));
        }
        out.push_str(&format!("  {}\n", r.target));
    }
    out
}

pub(crate) fn bench_scale(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let root = workspace_root();
    let run_dir = target_dir().join("bench-scale");
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)?;
    // One build of both, so cargo unifies their features once.
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "--bin",
            "ferric",
            "-p",
            "ferric",
            "-p",
            "ferric-conductor",
            "--example",
            "power_sync_bench",
        ],
        &[],
    )?;
    let release = target_dir().join("release");
    let load = LoadSampler::default();
    let mut rows = {
        let mut scale = Scale::start(&release, &run_dir, &options, load.clone())?;
        let rows = scale.measure(&options);
        let rows = scale.finish(rows);
        drop(scale);
        bench_http::psql("postgres", &format!("DROP DATABASE IF EXISTS {DATABASE}"))?;
        rows?
    };
    if options.ironic {
        ironic(&root, &run_dir, &options, &mut rows)?;
    }
    rows.push(row(
        "load average (1 min): highest sampled",
        load.max(),
        "load",
        "",
    ));
    println!();
    print!("{}", table(&rows));
    let results: serde_json::Map<String, Value> = rows
        .iter()
        .map(|r| {
            let ironic = r.ironic.clone().map_or(Value::Null, Value::String);
            (
                r.name.clone(),
                json!({"value": r.value, "unit": r.unit, "shown": r.ferric, "ironic": ironic}),
            )
        })
        .collect();
    let record = run_dir.join("results.json");
    std::fs::write(&record, serde_json::to_string_pretty(&results)?)?;
    println!("\nfigures also in {}", record.display());
    Ok(())
}

/// The 1-minute load average, sampled with the RSS.
#[derive(Debug, Clone, Default)]
struct LoadSampler {
    samples: Arc<Mutex<Vec<f64>>>,
}

impl LoadSampler {
    fn sample(&self) {
        if let Some(load) = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
            && let Ok(mut samples) = self.samples.lock()
        {
            samples.push(load);
        }
    }

    fn max(&self) -> f64 {
        self.samples
            .lock()
            .map(|samples| samples.iter().copied().fold(0.0, f64::max))
            .unwrap_or(0.0)
    }
}

/// Resident memory of `pid` in bytes (0 once it is gone).
fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
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
        })
        .map_or(0, |kib| kib * 1024)
}

/// One `ferric server` process; dropping it stops it.
struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    endpoint: String,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the log has a line holding `needle`.
    fn logged(&self, needle: &str) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|log| log.contains(needle))
    }

    /// The log's lines holding `needle`.
    fn log_lines(&self, needle: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .map(|log| {
                log.lines()
                    .filter(|line| line.contains(needle))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        eprintln!("xtask: {} ignored SIGTERM; killing it", self.name);
        self.kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate();
        }
    }
}

/// The BMC simulator; dropping it stops it (closing its stdin).
struct Simulator {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
}

impl Simulator {
    fn start(binary: &Path, bmcs: usize, delay_ms: u64) -> anyhow::Result<Self> {
        let mut child = Command::new(binary)
            .args(["serve", &bmcs.to_string(), &delay_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdin = child.stdin.take();
        let mut ready = String::new();
        BufReader::new(child.stdout.take().context("simulator stdout")?).read_line(&mut ready)?;
        let port = ready
            .trim()
            .strip_prefix("ready ")
            .with_context(|| format!("the simulator said {ready:?}"))?
            .parse()?;
        Ok(Self { child, stdin, port })
    }

    /// How many system reads it has answered.
    fn answered(&self, agent: &ureq::Agent) -> anyhow::Result<u64> {
        let url = format!("http://{}:{}/count", bmc_address(0), self.port);
        Ok(agent
            .get(&url)
            .call()
            .with_context(|| format!("GET {url}"))?
            .body_mut()
            .read_to_string()?
            .trim()
            .parse()?)
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The loopback address of BMC number `index` (as `power_sync_bench` numbers them).
pub(crate) fn bmc_address(index: usize) -> String {
    let host = index + 1;
    format!("127.1.{}.{}", (host >> 8) & 255, host & 255)
}

/// The whole topology: simulator, conductors, APIs, and the peak RSS per process name.
struct Scale {
    binary: PathBuf,
    run_dir: PathBuf,
    database_url: String,
    simulator: Simulator,
    conductors: Vec<Process>,
    apis: Vec<Process>,
    peaks: Arc<Mutex<BTreeMap<String, u64>>>,
    pids: Arc<Mutex<Vec<(String, u32)>>>,
    stop: Arc<AtomicBool>,
    sampler: Option<thread::JoinHandle<()>>,
    starts: usize,
}

impl Scale {
    fn start(
        release: &Path,
        run_dir: &Path,
        options: &Options,
        load: LoadSampler,
    ) -> anyhow::Result<Self> {
        bench_http::psql("postgres", &format!("DROP DATABASE IF EXISTS {DATABASE}"))?;
        bench_http::psql("postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        let bmcs = (options.nodes - options.cycle_nodes).div_ceil(options.nodes_per_bmc);
        let simulator = Simulator::start(
            &release.join("examples").join("power_sync_bench"),
            bmcs,
            options.delay_ms,
        )?;
        let peaks: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
        let pids: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peaks, pids, stop) = (peaks.clone(), pids.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let current = pids.lock().map(|p| p.clone()).unwrap_or_default();
                    if let Ok(mut peaks) = peaks.lock() {
                        for (name, pid) in current {
                            let rss = rss_bytes(pid);
                            let peak = peaks.entry(name).or_default();
                            *peak = (*peak).max(rss);
                        }
                    }
                    load.sample();
                    thread::sleep(Duration::from_millis(500));
                }
            })
        };
        let mut scale = Self {
            binary: release.join("ferric"),
            run_dir: run_dir.to_path_buf(),
            database_url: format!("postgres://postgres@127.0.0.1:5432/{DATABASE}"),
            simulator,
            conductors: Vec::new(),
            apis: Vec::new(),
            peaks,
            pids,
            stop,
            sampler: Some(sampler),
            starts: 0,
        };
        println!(
            "bench-scale: {} nodes ({} fake-hardware, the rest redfish on {bmcs} simulated BMCs \
             answering after {} ms), {CONDUCTORS} conductors, {APIS} APIs on PostgreSQL",
            options.nodes, options.cycle_nodes, options.delay_ms
        );
        // The first conductor migrates the fresh database alone; the others then start at once.
        for n in 0..CONDUCTORS {
            let conductor = scale.spawn("conductor", n, 0)?;
            scale.conductors.push(conductor);
        }
        for n in 0..APIS {
            let api = scale.spawn("api", n, 0)?;
            scale.apis.push(api);
        }
        scale.wait_for_conductors(CONDUCTORS)?;
        Ok(scale)
    }

    /// Starts `ferric server --role <role>` number `n` (`power_sync_interval` 0: off) without
    /// waiting for it.
    fn launch(
        &mut self,
        role: &str,
        n: usize,
        power_sync_interval: u64,
    ) -> anyhow::Result<Process> {
        let name = format!("{role}-{n}");
        self.starts += 1;
        let log = self.run_dir.join(format!("{name}.{}.log", self.starts));
        let file = std::fs::File::create(&log)?;
        let port = free_port()?;
        let mut command = Command::new(&self.binary);
        command
            .arg("server")
            .args(["--role", role, "--database-url", &self.database_url])
            .args(["--api-listen", &format!("127.0.0.1:{port}")])
            .args(["--log-format", "json"])
            .env_remove("FERRIC_CONFIG")
            .envs(MIMALLOC_ENV.iter().copied())
            .env("FERRIC_CONDUCTOR_HOSTNAME", &name)
            .env(
                "FERRIC_SYNC_POWER_STATE_INTERVAL",
                power_sync_interval.to_string(),
            )
            .env("FERRIC_CONDUCTOR_HEARTBEAT_INTERVAL", "1")
            .env(
                "FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT",
                HEARTBEAT_TIMEOUT_S.to_string(),
            )
            .env("FERRIC_CONDUCTOR_REQUEST_TIMEOUT", "5")
            .env("FERRIC_LOG_LEVEL", "warn,ferric=info,ferric_conductor=info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        let process = Process {
            name: name.clone(),
            child,
            log,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        if let Ok(mut pids) = self.pids.lock() {
            pids.retain(|(known, _)| *known != name);
            pids.push((name, process.pid()));
        }
        Ok(process)
    }

    /// [`Scale::launch`], then waits until it is up.
    fn spawn(&mut self, role: &str, n: usize, power_sync_interval: u64) -> anyhow::Result<Process> {
        let mut process = self.launch(role, n, power_sync_interval)?;
        wait_until_up(&mut process, role)?;
        Ok(process)
    }

    fn api(&self, n: usize) -> &str {
        &self.apis[n % self.apis.len()].endpoint
    }

    /// Waits until both APIs list `count` conductors.
    fn wait_for_conductors(&self, count: usize) -> anyhow::Result<()> {
        let agent = bench_http::agent();
        let deadline = Instant::now() + Duration::from_secs(60);
        for api in &self.apis {
            loop {
                let (_, listed) =
                    bench_http::timed_get(&agent, &format!("{}/v1/conductors", api.endpoint))?;
                let alive = listed["conductors"]
                    .as_array()
                    .map_or(0, |c| c.iter().filter(|c| c["alive"] != false).count());
                if alive == count {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("{} does not see {count} conductors: {listed}", api.name);
                }
                thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(())
    }

    fn measure(&mut self, options: &Options) -> anyhow::Result<Vec<Row>> {
        let mut rows = Vec::new();
        let endpoints: Vec<String> = self.apis.iter().map(|a| a.endpoint.clone()).collect();
        // Enroll to 10,000 (or all), time the detail page; then to the full size.
        let first = options.nodes.min(10_000);
        let started = Instant::now();
        enroll(&endpoints, 0, first, options, self.simulator.port)?;
        let mut enroll_time = started.elapsed();
        println!(
            "enrolled {first} nodes in {:.1} s",
            enroll_time.as_secs_f64()
        );
        analyze_nodes();
        detail_pages(&endpoints, first, &mut rows)?;
        if options.nodes > first {
            let started = Instant::now();
            enroll(
                &endpoints,
                first,
                options.nodes,
                options,
                self.simulator.port,
            )?;
            enroll_time += started.elapsed();
            println!(
                "enrolled {} nodes in {:.1} s",
                options.nodes,
                enroll_time.as_secs_f64()
            );
            analyze_nodes();
            detail_pages(&endpoints, options.nodes, &mut rows)?;
            explain_detail_page(options.nodes);
        }
        rows.insert(
            0,
            row(
                format!(
                    "enroll {} nodes, {} clients",
                    options.nodes, options.clients
                ),
                options.nodes as f64 / enroll_time.as_secs_f64().max(f64::EPSILON),
                "nodes/s",
                "",
            ),
        );

        deploy_cycle(&endpoints, options, &mut rows)?;
        self.takeover(&mut rows)?;
        self.power_sync(options, &mut rows)?;
        Ok(rows)
    }

    /// SIGKILLs conductor-1 and times until its nodes are owned and served by the others.
    fn takeover(&mut self, rows: &mut Vec<Row>) -> anyhow::Result<()> {
        let agent = bench_http::agent();
        let victim = format!("conductor-{VICTIM}");
        let owners = fake_nodes(&agent, self.api(0), "uuid,conductor,power_state")?;
        let picked = owners
            .iter()
            .find(|node| node["conductor"] == victim.as_str())
            .and_then(|node| node["uuid"].as_str())
            .context("no fake-hardware node is owned by conductor-1")?
            .to_owned();
        let owned = owners
            .iter()
            .filter(|node| node["conductor"] == victim.as_str())
            .count();
        // The picked node is powered on first, so the request after the kill changes it.
        power(&agent, self.api(0), &picked, "power on")?;
        self.conductors[VICTIM].kill();
        let killed = Instant::now();
        println!("takeover: SIGKILL {victim} (it owned {owned} fake-hardware nodes)");
        let deadline = killed + Duration::from_secs(120);
        let mut ring_moved = None;
        loop {
            if Instant::now() > deadline {
                bail!("{victim}'s nodes were not taken over in 120 s");
            }
            let mut moved = true;
            for n in 0..APIS {
                let nodes = fake_nodes(&agent, self.api(n), "uuid,conductor")?;
                moved &= nodes.iter().all(|node| {
                    node["conductor"]
                        .as_str()
                        .is_some_and(|owner| owner != victim)
                });
            }
            if moved {
                ring_moved = ring_moved.or(Some(killed.elapsed()));
                let url = format!("{}/v1/nodes/{picked}/states/power", self.api(1));
                let mut response = agent
                    .put(&url)
                    .header("X-OpenStack-Ironic-API-Version", "latest")
                    .send_json(json!({"target": "power off"}))
                    .with_context(|| format!("PUT {url}"))?;
                let status = response.status().as_u16();
                let body = response.body_mut().read_to_string().unwrap_or_default();
                match status {
                    202 => break,
                    409 | 503 => {}
                    other => bail!("PUT {url} answered {other}: {body}"),
                }
            }
            thread::sleep(Duration::from_millis(100));
        }
        wait_for_power(&agent, self.api(0), &picked, "power off", deadline)?;
        let takeover = killed.elapsed();
        println!(
            "takeover: ring without {victim} on both APIs after {:.2} s, its node served after \
             {:.2} s",
            ring_moved.unwrap_or_default().as_secs_f64(),
            takeover.as_secs_f64()
        );
        rows.push(row(
            format!(
                "takeover of a SIGKILLed conductor (heartbeat timeout {HEARTBEAT_TIMEOUT_S} s)"
            ),
            takeover.as_secs_f64(),
            "s",
            "≤ 10 s",
        ));
        Ok(())
    }

    /// Restarts the conductors with the power sync on and times their first two passes.
    fn power_sync(&mut self, options: &Options, rows: &mut Vec<Row>) -> anyhow::Result<()> {
        let agent = bench_http::agent();
        for conductor in &mut self.conductors {
            conductor.terminate();
        }
        let before = self.simulator.answered(&agent)?;
        // All three at once, so each one's first pass (one interval after its start) finds
        // the others in the ring.
        let mut conductors = Vec::new();
        for n in 0..CONDUCTORS {
            conductors.push(self.launch("conductor", n, POWER_SYNC_INTERVAL_S)?);
        }
        for conductor in &mut conductors {
            wait_until_up(conductor, "conductor")?;
        }
        self.conductors = conductors;
        let redfish = (options.nodes - options.cycle_nodes) as u64;
        let deadline = Instant::now() + Duration::from_secs(900);
        let mut first_read: Option<Instant> = None;
        let mut ends: Vec<Option<Duration>> = vec![None; 2];
        let mut answered_after_first = 0;
        while ends[1].is_none() {
            if Instant::now() > deadline {
                bail!("the power sync did not finish two passes in 900 s");
            }
            let answered = self.simulator.answered(&agent)?;
            if first_read.is_none() && answered > before {
                first_read = Some(Instant::now());
            }
            for (pass, end) in ends.iter_mut().enumerate() {
                if end.is_none()
                    && let Some(first) = first_read
                    && self
                        .conductors
                        .iter()
                        .all(|c| c.log_lines("power sync pass finished").len() > pass)
                {
                    *end = Some(first.elapsed());
                    if pass == 0 {
                        answered_after_first = answered - before;
                    }
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        for conductor in &self.conductors {
            for line in conductor
                .log_lines("power sync pass finished")
                .iter()
                .take(2)
            {
                println!("  {}: {line}", conductor.name);
            }
        }
        let [Some(first), Some(second)] = ends[..] else {
            bail!("the power sync passes were not seen");
        };
        println!(
            "power sync: first pass {:.1} s ({answered_after_first} reads answered; {redfish} \
             redfish nodes), second pass ended {:.1} s after the first read",
            first.as_secs_f64(),
            second.as_secs_f64()
        );
        if answered_after_first < redfish {
            bail!(
                "the first power-sync pass read {answered_after_first} of {redfish} redfish nodes"
            );
        }
        rows.push(row(
            format!(
                "power-sync pass over {} nodes, 3 conductors: first (records every state)",
                options.nodes
            ),
            first.as_secs_f64(),
            "s",
            "",
        ));
        // The second pass starts an interval after the first ends on each conductor; its
        // own time is read from the conductors' log lines (the slowest one).
        let second_pass = self
            .conductors
            .iter()
            .filter_map(|c| {
                let line = c.log_lines("power sync pass finished").into_iter().nth(1)?;
                took_ms(&line)
            })
            .fold(0.0, f64::max);
        rows.push(row(
            format!(
                "power-sync pass over {} nodes, 3 conductors: steady (slowest conductor)",
                options.nodes
            ),
            second_pass / 1000.0,
            "s",
            "≤ 60 s",
        ));
        Ok(())
    }

    /// Stops the sampler, adds the RSS rows, and stops every process.
    fn finish(&mut self, rows: anyhow::Result<Vec<Row>>) -> anyhow::Result<Vec<Row>> {
        let mut rows = rows?;
        let now: Vec<(String, u64)> = self
            .conductors
            .iter()
            .chain(&self.apis)
            .map(|p| (p.name.clone(), rss_bytes(p.pid())))
            .collect();
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
        let peaks = self.peaks.lock().map(|p| p.clone()).unwrap_or_default();
        for (name, peak) in &peaks {
            rows.push(row(
                format!("RSS peak: {name}"),
                *peak as f64 / 1e6,
                "MB",
                "≤ 200 MB",
            ));
        }
        for (name, rss) in now {
            rows.push(row(
                format!("RSS at the end: {name}"),
                rss as f64 / 1e6,
                "MB",
                "",
            ));
        }
        Ok(rows)
    }
}

impl Drop for Scale {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // APIs first, then conductors (Process::drop sends SIGTERM and waits).
        self.apis.clear();
        self.conductors.clear();
    }
}

/// Waits until `process` logs that it is up.
/// `ANALYZE nodes`, as after any bulk load (PostgreSQL's "Populating a Database"):
/// autovacuum would do it within a minute or two, but the walks start at once, and with the
/// statistics of a nearly empty table the planner reads a detail page's heads through the
/// `parent_node` index and sorts all 100,000 rows (44 ms a page instead of ~1 ms;
/// docs/benchmarks.md). A failure is printed, not fatal.
fn analyze_nodes() {
    if let Err(error) = bench_http::psql(DATABASE, "ANALYZE nodes") {
        println!("ANALYZE nodes failed: {error:#}");
    }
}

/// Prints PostgreSQL's plan and timing of a detail page's queries in the middle of the
/// collection (after the timed walks, so it costs them nothing): the page's heads (keyset
/// paging on `id`), the held leases, and 500 whole rows by id (what a page reads for nodes the
/// API's render cache lacks). A failure is printed, not fatal.
fn explain_detail_page(nodes: usize) {
    let middle = nodes / 2;
    let ids: Vec<String> = (middle + 1..=middle + 500)
        .map(|id| id.to_string())
        .collect();
    for statement in [
        format!(
            "SELECT id, version, uuid, driver, conductor_group FROM nodes \
             WHERE parent_node IS NULL AND id > {middle} ORDER BY id LIMIT 1000"
        ),
        "SELECT * FROM node_leases WHERE expires_at > now()".to_owned(),
        format!("SELECT * FROM nodes WHERE id IN ({})", ids.join(", ")),
    ] {
        let explain = format!("EXPLAIN (ANALYZE, BUFFERS) {statement}");
        println!("{}", explain.chars().take(160).collect::<String>());
        if let Err(error) = bench_http::psql(DATABASE, &explain) {
            println!("  (not explained: {error:#})");
        }
    }
}

fn wait_until_up(process: &mut Process, role: &str) -> anyhow::Result<()> {
    let ready = if role == "api" {
        "Bare Metal API listening"
    } else {
        "conductor running"
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !process.logged(ready) {
        if let Some(status) = process.child.try_wait()? {
            bail!(
                "{} exited during start-up ({status}); log: {}",
                process.name,
                process.log.display()
            );
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not start in 120 s; log: {}",
                process.name,
                process.log.display()
            );
        }
        thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `took_ms` from a JSON log line.
fn took_ms(line: &str) -> Option<f64> {
    let value: Value = serde_json::from_str(line).ok()?;
    value["fields"]["took_ms"]
        .as_f64()
        .or_else(|| value["took_ms"].as_f64())
}

#[cfg(test)]
mod tests {
    use super::load::node_body;
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_are_checked() {
        let options = parse(&[]).unwrap();
        assert_eq!((options.nodes, options.cycle_nodes), (100_000, 10_000));
        let quick = parse(&strings(&["--quick", "--ironic"])).unwrap();
        assert_eq!((quick.nodes, quick.cycle_nodes), (3_000, 500));
        assert!(quick.ironic);
        assert!(parse(&strings(&["--nodes", "100", "--cycle-nodes", "100"])).is_err());
        assert!(parse(&strings(&["--nodes", "0"])).is_err());
        assert!(parse(&strings(&["--fast"])).is_err());
    }

    #[test]
    fn nodes_split_into_fake_and_redfish_on_the_simulator() {
        let options = parse(&strings(&["--nodes", "200", "--cycle-nodes", "20"])).unwrap();
        assert_eq!(node_body(19, &options, 9)["driver"], "fake-hardware");
        let first = node_body(20, &options, 9);
        assert_eq!(first["driver"], "redfish");
        assert_eq!(
            first["driver_info"]["redfish_address"],
            "http://127.1.0.1:9"
        );
        // 50 systems behind one BMC address, numbered as the simulator binds them.
        let later = node_body(20 + 50, &options, 9);
        assert_eq!(
            later["driver_info"]["redfish_address"],
            "http://127.1.0.2:9"
        );
        assert_eq!(bmc_address(255), "127.1.1.0");
    }

    #[test]
    fn the_table_has_a_column_for_ironic_only_when_measured() {
        let mut rows = vec![
            row("enroll", 1234.0, "nodes/s", ""),
            row("pass", 42.25, "s", "≤ 60 s"),
        ];
        assert!(!table(&rows).contains("ironic"));
        assert!(table(&rows).contains("42.2 s") && table(&rows).contains("1234 nodes/s"));
        rows[0].ironic = Some("30 nodes/s".to_owned());
        let shown = table(&rows);
        assert!(
            shown.lines().next().unwrap().contains("ironic 39"),
            "{shown}"
        );
        assert!(
            shown.contains("30 nodes/s") && shown.contains("≤ 60 s"),
            "{shown}"
        );
        assert_eq!(took_ms(r#"{"fields":{"took_ms":1500}}"#), Some(1500.0));
    }
}
