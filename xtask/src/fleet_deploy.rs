//! `cargo xtask bench-fleet-deploy`: issue 45, "a whole rack deploys in little more than the
//! time of one machine". Real `ferric-agent` processes (not VMs) deploy one image through the
//! real API and conductor of a release `ferric server`, three times in one run: one machine;
//! all N with the image from the conductor only (today's way, and Ironic's); all N with
//! peer-assisted delivery (`instance_info.image_peer_delivery`). The figures are the third
//! phase's time against the first's, and how many copies of the image the conductor sent.
//!
//! Theory of operation. Everything lives in network namespaces named `ffb-*` (removed at the
//! end, and at the start in case a run was killed): `ffb-sw` holds the rack's switch, a
//! bridge; `ffb-c` the conductor (`10.231.0.1/16`); `ffb-a<i>` machine i
//! (`10.231.<1+i/200>.<10+i%200>/16`). Each is a veth pair to the bridge with `tc tbf` on both
//! ends, so each direction of every link runs at `--link-mbit`, the conductor's included: a
//! rack shares the conductor's link, which is what peers relieve. The bench itself reaches the
//! API over a link of its own (`ffb-h` on the host, unshaped), so its polling is neither slowed
//! by the shaping nor counted as the conductor's traffic.
//!
//! A machine is a fixture /sys and /proc (one NIC with its MAC, a serial number), a sparse
//! file as its disk, and `ferric-agent --dry-power` in its namespace. The bench is the
//! fake-hardware BMC: before a phase it powers the nodes on through the API and starts their
//! agents, which look their nodes up and heartbeat, so that fast track deploys through the
//! running agents at once; when a node is `active` it reads its agent's peak RSS (VmHWM) and
//! kills it, as the machine reboots into its OS. The image (pseudo-random: nothing compresses
//! or skips it) is served by ferric's boot file server with `image_download_source = local`:
//! the conductor copies it once into its image cache (a warm-up deploy before the measured
//! phases) and serves agents from there.
//!
//! What the conductor sent is its veth's `tx_bytes`, read in its namespace before and after a
//! phase: the image's bytes plus TCP/IP headers (counted once per GSO packet on a veth, well
//! under 1 %) and the small requests to the agents, so "copies" is a hair above the copies
//! served.

mod machine;
mod nodes;
mod rack;

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::process::{run, target_dir};
use crate::server::MIMALLOC_ENV;
use crate::{bench_http, fleet};
use machine::Machine;
use rack::{API_LISTEN, API_URL, CONDUCTOR};

pub(crate) const USAGE: &str = "\
usage: cargo xtask bench-fleet-deploy [--machines N] [--image-gib G] [--link-mbit M] [--keep]

  N ferric-agent processes, each in a network namespace behind a link shaped by tc, deploy
  one image through a release ferric server whose link is shaped the same: one machine, then
  all N from the conductor only, then all N with peer-assisted delivery (root)

  --machines N     how many machines (default 32; 1..=64)
  --image-gib G    the image's size in GiB, a decimal such as 0.25 (default 2; 1/64..=64);
                   the disk needs about (N + 2) x G GiB free under the target directory
  --link-mbit M    every link's rate, each direction, in Mbit/s (default 1000; 1..=100000)
  --keep           leave the whole run directory (else its image, cache and disks go, the
                   logs and database stay until the next run)
";

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const MAX_MACHINES: usize = 64;

/// Threads sending a phase's requests, as an operator's script would.
const CLIENTS: usize = 4;
const POLL: Duration = Duration::from_millis(100);
/// How long agents may take from their start to their first heartbeat.
const HEARTBEAT_DEADLINE: Duration = Duration::from_secs(120);
/// A machine's disk beyond the image.
const DISK_SLACK: u64 = 64 * MIB;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    machines: usize,
    image_bytes: u64,
    link_mbit: u64,
    keep: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            machines: 32,
            image_bytes: 2 * GIB,
            link_mbit: 1000,
            keep: false,
        }
    }
}

/// The options, or `None` when `--help` was asked for (and printed).
fn parse(args: &[String]) -> anyhow::Result<Option<Options>> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> anyhow::Result<String> {
            args.next()
                .cloned()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--machines" => {
                let text = value("--machines")?;
                options.machines = match text.parse::<usize>() {
                    Ok(count) if (1..=MAX_MACHINES).contains(&count) => count,
                    _ => bail!("--machines {text:?}: expected 1..={MAX_MACHINES}\n\n{USAGE}"),
                };
            }
            "--image-gib" => {
                let text = value("--image-gib")?;
                options.image_bytes = image_bytes(&text).with_context(|| {
                    format!("--image-gib {text:?}: expected GiB from 0.015625 to 64\n\n{USAGE}")
                })?;
            }
            "--link-mbit" => {
                let text = value("--link-mbit")?;
                options.link_mbit = match text.parse::<u64>() {
                    Ok(rate) if (1..=100_000).contains(&rate) => rate,
                    _ => bail!("--link-mbit {text:?}: expected 1..=100000\n\n{USAGE}"),
                };
            }
            "--keep" => options.keep = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    Ok(Some(options))
}

/// `text` GiB in bytes, rounded to whole MiB; from 1/64 GiB (16 MiB) to 64 GiB.
fn image_bytes(text: &str) -> Option<u64> {
    let gib: f64 = text.trim().parse().ok()?;
    if !(1.0 / 64.0..=64.0).contains(&gib) {
        return None;
    }
    // 16..=65536 after the check: the cast is exact.
    let mib = (gib * 1024.0).round() as u64;
    Some(mib * MIB)
}

pub(crate) fn bench_fleet_deploy(args: &[String]) -> anyhow::Result<()> {
    let Some(options) = parse(args)? else {
        return Ok(());
    };
    require_root()?;
    // Before the build, which would raise it.
    let host = HostLoad::read();
    let (ferric, agent) = build()?;
    // A killed run's processes may still write into the run directory: gone first.
    rack::remove();
    let run_dir = target_dir().join("bench-fleet-deploy");
    prepare_run_dir(&run_dir, &options)?;
    let mut bench = Bench::new(options, run_dir, agent);
    bench.set_up(&ferric)?;
    let phases = bench.measure()?;
    print!(
        "{}",
        report(&bench.options, &host, &phases, knows_peer_delivery(&ferric))
    );
    println!(
        "run dir: {}; logs: ferric.log, agent-<i>.log there{}",
        bench.run_dir.display(),
        if bench.options.keep {
            ""
        } else {
            " (the image, cache and disks are removed now)"
        }
    );
    Ok(())
}

/// Namespaces, veths and `tc` need root; say so before building anything.
fn require_root() -> anyhow::Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").context("read /proc/self/status")?;
    if effective_uid(&status) != Some(0) {
        bail!(
            "bench-fleet-deploy needs root (network namespaces, veths, tc): run it as root, \
             e.g. `sudo -E cargo xtask bench-fleet-deploy`"
        );
    }
    Ok(())
}

/// The effective user id from `/proc/<pid>/status` (its `Uid:` line: real, effective, …).
fn effective_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The machine the figures were taken on, as the run began.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostLoad {
    cores: usize,
    /// The 1, 5 and 15-minute load averages, as `/proc/loadavg` writes them.
    load: String,
}

impl HostLoad {
    fn read() -> Self {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        Self {
            cores: thread::available_parallelism().map_or(1, usize::from),
            load: load
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// The release `ferric` and `ferric-agent`, in the usual target directory so that the
/// developer's and CI's builds are shared.
fn build() -> anyhow::Result<(PathBuf, PathBuf)> {
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "-p",
            "ferric",
            "--bin",
            "ferric",
            "-p",
            "ferric-agent",
            "--bin",
            "ferric-agent",
        ],
        &[],
    )?;
    let release = target_dir().join("release");
    Ok((release.join("ferric"), release.join("ferric-agent")))
}

/// Whether this `ferric` knows peer delivery: its binary holds the setting's name (in the
/// settings table and as the `instance_info` key). Its flags name only a few settings and it
/// logs none, and it ignores unknown `FERRIC_*` variables, so the bench sets it either way;
/// without it the peer-assisted phase runs as the conductor-only one, which the report says.
fn knows_peer_delivery(ferric: &Path) -> bool {
    const NAME: &[u8] = b"image_peer_delivery";
    std::fs::read(ferric).is_ok_and(|binary| binary.windows(NAME.len()).any(|bytes| bytes == NAME))
}

/// An empty run directory on a disk with room for the image, its cached copy and every
/// machine's disk.
fn prepare_run_dir(run_dir: &Path, options: &Options) -> anyhow::Result<()> {
    if run_dir.exists() {
        std::fs::remove_dir_all(run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(run_dir.join("boot").join("images"))
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let machines = u64::try_from(options.machines)?;
    let needed = 2 * options.image_bytes + machines * (options.image_bytes + DISK_SLACK) + GIB;
    let free = free_bytes(run_dir)?;
    if free < needed {
        bail!(
            "{} has {:.1} GiB free; {} machines of a {:.2} GiB image need {:.1} GiB: fewer \
             --machines, a smaller --image-gib, or CARGO_TARGET_DIR on a larger disk",
            run_dir.display(),
            gib(free),
            options.machines,
            gib(options.image_bytes),
            gib(needed)
        );
    }
    Ok(())
}

/// Bytes free for unprivileged use where `dir` is (`df`: std has no statvfs).
fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    let path = dir.to_string_lossy();
    let text = rack::output("df", &["--output=avail", "-B1", &path])?;
    text.lines()
        .nth(1)
        .and_then(|line| line.trim().parse().ok())
        .with_context(|| format!("cannot read df's answer for {path}: {text:?}"))
}

/// The server's settings (docs/configuration.md).
fn server_settings(run_dir: &Path, image_bytes: u64) -> Vec<(&'static str, String)> {
    let path = |name: &str| run_dir.join(name).display().to_string();
    vec![
        ("FERRIC_DATABASE_URL", path("ferric.db")),
        ("FERRIC_API_LISTEN", API_LISTEN.to_owned()),
        ("FERRIC_API_URL", API_URL.to_owned()),
        ("FERRIC_AUTH_STRATEGY", "noauth".to_owned()),
        ("FERRIC_BOOT_HTTP_LISTEN", rack::BOOT_LISTEN.to_owned()),
        ("FERRIC_BOOT_HTTP_URL", rack::BOOT_URL.to_owned()),
        ("FERRIC_BOOT_HTTP_ROOT", path("boot")),
        // The image and a GiB to spare, in MiB.
        (
            "FERRIC_IMAGE_CACHE_SIZE",
            ((image_bytes + GIB) / MIB).to_string(),
        ),
        ("FERRIC_IMAGE_DOWNLOAD_SOURCE", "local".to_owned()),
        // Agents already running are used at once: no reboot into the ramdisk.
        ("FERRIC_FAST_TRACK", "true".to_owned()),
        // Undeploy goes straight back to available.
        ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
        // Each phase says what it wants in instance_info.image_peer_delivery.
        ("FERRIC_IMAGE_PEER_DELIVERY", "true".to_owned()),
        // A failed deploy's ramdisk logs, in the run rather than /var/log/ferric.
        ("FERRIC_DEPLOY_LOGS_LOCAL_PATH", path("deploy-logs")),
    ]
}

/// One measured phase.
#[derive(Debug, Clone, PartialEq)]
struct Phase {
    name: &'static str,
    machines: usize,
    /// From the first provision request to the poll that saw the last node active.
    wall: Duration,
    /// Bytes out of the conductor's link meanwhile.
    conductor_sent: u64,
    /// Each agent's VmHWM, in KiB.
    peak_rss_kib: Vec<u64>,
    /// Each agent's CPU time (user and system), in seconds.
    agent_cpu: Vec<f64>,
}

/// A run under way; dropping it stops the agents and the server and removes the rack.
struct Bench {
    options: Options,
    run_dir: PathBuf,
    agent_binary: PathBuf,
    /// The image's SHA-256, which every deploy gives the agents to check.
    checksum: String,
    machines: Vec<Machine>,
    uuids: Vec<String>,
    /// Each machine's running agent, by index.
    agents: Vec<Option<Child>>,
    server: Option<Child>,
    /// The kernel's clock ticks per second (`getconf CLK_TCK`), for CPU times.
    clock_ticks: f64,
}

impl Bench {
    fn new(options: Options, run_dir: PathBuf, agent_binary: PathBuf) -> Self {
        Self {
            options,
            run_dir,
            agent_binary,
            checksum: String::new(),
            machines: Vec::new(),
            uuids: Vec::new(),
            agents: Vec::new(),
            server: None,
            clock_ticks: clock_ticks(),
        }
    }

    fn disk_bytes(&self) -> u64 {
        self.options.image_bytes + DISK_SLACK
    }

    /// The rack, the image, the machines, the server, and the nodes enrolled and available.
    fn set_up(&mut self, ferric: &Path) -> anyhow::Result<()> {
        let Options {
            machines,
            image_bytes,
            link_mbit,
            ..
        } = self.options;
        eprintln!("xtask: the rack: {machines} machines, links of {link_mbit} Mbit/s");
        rack::create(machines, link_mbit)?;
        let image = self.run_dir.join("boot/images/fleet.img");
        eprintln!("xtask: writing a {} GiB image", gib_text(image_bytes));
        machine::write_image(&image, image_bytes)?;
        self.checksum = machine::sha256(&image)?;
        for index in 0..machines {
            let machine = Machine::create(&self.run_dir, index, self.disk_bytes())?;
            self.machines.push(machine);
            self.agents.push(None);
        }
        self.start_server(ferric)?;
        self.enroll()
    }

    /// `ferric server` (release) in the conductor's namespace, logging to `ferric.log`.
    fn start_server(&mut self, ferric: &Path) -> anyhow::Result<()> {
        let log_path = self.run_dir.join("ferric.log");
        let log =
            File::create(&log_path).with_context(|| format!("create {}", log_path.display()))?;
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", CONDUCTOR])
            .arg(ferric)
            .arg("server");
        machine::without_ferric_env(&mut command)
            .envs(MIMALLOC_ENV.iter().copied())
            .envs(server_settings(&self.run_dir, self.options.image_bytes))
            .current_dir(&self.run_dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", ferric.display()))?;
        self.server = Some(child);
        self.wait_for_api(&log_path)
    }

    fn wait_for_api(&mut self, log: &Path) -> anyhow::Result<()> {
        let address: SocketAddr = API_LISTEN.parse()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Some(server) = self.server.as_mut()
                && let Some(status) = server.try_wait()?
            {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                bail!("ferric exited during start-up ({status}):\n{log}");
            }
            if Instant::now() > deadline {
                bail!("ferric did not listen on {address} within 60 s");
            }
            thread::sleep(POLL);
        }
    }

    /// A node per machine with its port, moved to available.
    fn enroll(&mut self) -> anyhow::Result<()> {
        let machines = &self.machines;
        self.uuids = fleet::parallel(machines.len(), CLIENTS, |agent, index| {
            nodes::enroll(agent, &machines[index], machines.len())
        })?;
        fleet::phase_until_rested(API_URL, &self.uuids, CLIENTS, "manage", "manageable")?;
        fleet::phase_until_rested(API_URL, &self.uuids, CLIENTS, "provide", "available")?;
        Ok(())
    }

    /// A warm-up deploy (the conductor's cache fetches the image), then the three phases.
    fn measure(&mut self) -> anyhow::Result<Vec<Phase>> {
        let machines = self.options.machines;
        eprintln!("xtask: warm-up: node 0 deploys once, so that the conductor caches the image");
        self.deploy_phase("warm-up", 1, false)?;
        Ok(vec![
            self.deploy_phase("one machine", 1, false)?,
            self.deploy_phase("conductor only", machines, false)?,
            self.deploy_phase("peer-assisted", machines, true)?,
        ])
    }

    /// Deploys the first `count` nodes with peer delivery `peer`, measured, and undeploys
    /// them again.
    fn deploy_phase(
        &mut self,
        name: &'static str,
        count: usize,
        peer: bool,
    ) -> anyhow::Result<Phase> {
        let uuids = self.uuids[..count].to_vec();
        let checksum = &self.checksum;
        fleet::parallel(count, CLIENTS, |agent, index| {
            nodes::set_instance_info(agent, &uuids[index], checksum, peer)
        })?;
        self.boot_agents(&uuids)?;
        let before = rack::conductor_tx_bytes()?;
        let (wall, stopped) = self.deploy(&uuids)?;
        let (peak_rss_kib, agent_cpu) = stopped.into_iter().unzip();
        let conductor_sent = rack::conductor_tx_bytes()?.saturating_sub(before);
        eprintln!(
            "xtask: {name}: {count} machine(s) active in {:.2} s",
            wall.as_secs_f64()
        );
        fleet::phase_until_rested(API_URL, &uuids, CLIENTS, "deleted", "available")?;
        for machine in &self.machines[..count] {
            machine.wipe_disk(self.disk_bytes())?;
        }
        Ok(Phase {
            name,
            machines: count,
            wall,
            conductor_sent,
            peak_rss_kib,
            agent_cpu,
        })
    }

    /// Powers the nodes on (the bench is their BMC), starts their agents, and waits until
    /// each has heartbeated since, so that fast track finds every agent alive.
    fn boot_agents(&mut self, uuids: &[String]) -> anyhow::Result<()> {
        let agent = bench_http::agent();
        let listed = nodes::list(&agent)?;
        let before: Vec<Value> = uuids
            .iter()
            .map(|uuid| nodes::last_heartbeat(listed.get(uuid)))
            .collect();
        fleet::parallel(uuids.len(), CLIENTS, |agent, index| {
            nodes::power_on(agent, &uuids[index])
        })?;
        for index in 0..uuids.len() {
            let child = self.machines[index].start_agent(&self.agent_binary, &self.run_dir)?;
            self.agents[index] = Some(child);
        }
        let deadline = Instant::now() + HEARTBEAT_DEADLINE;
        loop {
            let listed = nodes::list(&agent)?;
            let waiting: Vec<usize> = (0..uuids.len())
                .filter(|&index| {
                    !nodes::has_heartbeated(listed.get(&uuids[index]), &before[index], index)
                })
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            self.check_agents(uuids.len())?;
            if Instant::now() > deadline {
                bail!(
                    "the agents of machines {waiting:?} did not heartbeat within {} s (see \
                     agent-<i>.log in {})",
                    HEARTBEAT_DEADLINE.as_secs(),
                    self.run_dir.display()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Sends every deploy request from [`CLIENTS`] threads while this one watches the nodes
    /// reach `active`; returns the time from the first request to the last node active, and
    /// each agent's peak RSS and CPU time.
    fn deploy(&mut self, uuids: &[String]) -> anyhow::Result<(Duration, Vec<(u64, f64)>)> {
        let failed = AtomicBool::new(false);
        let started = Instant::now();
        let (done, peaks) = thread::scope(|scope| {
            let sender = scope.spawn(|| {
                fleet::parallel_until(uuids.len(), CLIENTS, &failed, |agent, index| {
                    fleet::request_provision(agent, API_URL, &uuids[index], "active")
                })
            });
            let watched = self.watch_until_active(uuids, &failed);
            if watched.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            sender
                .join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
            watched
        })?;
        Ok((done.duration_since(started), peaks))
    }

    /// Polls until every node is active, stopping each one's agent as it gets there; a node
    /// in `deploy failed` ends the run with its `last_error`.
    fn watch_until_active(
        &mut self,
        uuids: &[String],
        failed: &AtomicBool,
    ) -> anyhow::Result<(Instant, Vec<(u64, f64)>)> {
        let agent = bench_http::agent();
        let mut peaks: Vec<Option<(u64, f64)>> = vec![None; uuids.len()];
        let mut progress_at = Instant::now();
        loop {
            let listed = nodes::list(&agent)?;
            let seen = Instant::now();
            for (index, uuid) in uuids.iter().enumerate() {
                let node = listed.get(uuid).unwrap_or(&Value::Null);
                match node["provision_state"].as_str() {
                    Some("active") if peaks[index].is_none() => {
                        peaks[index] = Some(self.stop_agent(index)?);
                        progress_at = seen;
                    }
                    Some(state @ ("deploy failed" | "error")) => bail!(
                        "node {uuid} (machine {index}) went to {state:?}: {} (see ferric.log \
                         and agent-{index}.log in {})",
                        node["last_error"],
                        self.run_dir.display()
                    ),
                    _ => {}
                }
            }
            if peaks.iter().all(Option::is_some) {
                return Ok((seen, peaks.into_iter().flatten().collect()));
            }
            if failed.load(Ordering::Relaxed) {
                bail!("the deploy requests failed");
            }
            self.check_agents(uuids.len())?;
            if progress_at.elapsed() > fleet::NODE_DEADLINE {
                bail!(
                    "no node went active for {} s",
                    fleet::NODE_DEADLINE.as_secs()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// The machine rebooted into its OS: its agent's peak RSS (KiB) and CPU time (s), then
    /// the agent killed.
    fn stop_agent(&mut self, index: usize) -> anyhow::Result<(u64, f64)> {
        let mut child = self.agents[index]
            .take()
            .with_context(|| format!("machine {index} has no agent running"))?;
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
        let _ = child.kill();
        let _ = child.wait();
        let rss = status
            .ok()
            .as_deref()
            .and_then(machine::peak_rss_kib)
            .with_context(|| format!("cannot read the peak RSS of machine {index}'s agent"))?;
        let cpu = stat
            .ok()
            .as_deref()
            .and_then(machine::cpu_ticks)
            .map(|ticks| ticks as f64 / self.clock_ticks)
            .with_context(|| format!("cannot read the CPU time of machine {index}'s agent"))?;
        Ok((rss, cpu))
    }

    /// Fails if an agent of the first `count` machines exited on its own.
    fn check_agents(&mut self, count: usize) -> anyhow::Result<()> {
        for (index, agent) in self.agents[..count].iter_mut().enumerate() {
            if let Some(child) = agent
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "the agent of machine {index} exited ({status}); see {}",
                    self.machines[index].log(&self.run_dir).display()
                );
            }
        }
        Ok(())
    }

    /// SIGTERM, so that ferric closes its database; SIGKILL after 10 s.
    fn stop_server(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        let _ = rack::output("kill", &["-TERM", &server.id().to_string()]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.try_wait() {
                return;
            }
            thread::sleep(POLL);
        }
        let _ = server.kill();
        let _ = server.wait();
    }

    /// The image, its cached copy and the disks: gigabytes nobody reads after the run.
    fn remove_bulk(&self) {
        for dir in ["boot", "machines"] {
            let _ = std::fs::remove_dir_all(self.run_dir.join(dir));
        }
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        for mut agent in self.agents.iter_mut().filter_map(Option::take) {
            let _ = agent.kill();
            let _ = agent.wait();
        }
        self.stop_server();
        rack::remove();
        if !self.options.keep {
            self.remove_bulk();
        }
    }
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

/// An image size as `--image-gib` takes it: `2`, `0.25`, `0.0625`.
fn gib_text(bytes: u64) -> String {
    let text = format!("{:.4}", gib(bytes));
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The median by nearest rank: the lower middle of an even count.
fn median(values: &[u64]) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or(0)
}

/// The conductor's bytes as copies of the image.
fn copies(sent: u64, image_bytes: u64) -> f64 {
    sent as f64 / image_bytes as f64
}

/// `getconf CLK_TCK` (100 on Linux when it cannot be asked).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|ticks| *ticks > 0.0)
        .unwrap_or(100.0)
}

/// The whole report: the run's shape and machine, the table, the summary line.
fn report(options: &Options, host: &HostLoad, phases: &[Phase], peer_setting: bool) -> String {
    let mut out = format!(
        "bench-fleet-deploy: {} machines, a {} GiB image, every link {} Mbit/s each way \
         (tc tbf)\nthis machine: {} cores, load average {} at the start\n",
        options.machines,
        gib_text(options.image_bytes),
        options.link_mbit,
        host.cores,
        host.load
    );
    if !peer_setting {
        out.push_str(
            "note: this ferric has no image_peer_delivery setting yet: the peer-assisted \
             phase ran as the conductor-only one\n",
        );
    }
    out.push_str(&table(phases, options.image_bytes));
    let one = phases.iter().find(|phase| phase.name == "one machine");
    let peer = phases.iter().find(|phase| phase.name == "peer-assisted");
    if let Some(peer) = peer {
        // N machines share this host's cores: the agents' CPU time over the cores is a floor
        // under the phase's time that N real machines would not have.
        let cpu: f64 = peer.agent_cpu.iter().sum();
        out.push_str(&format!(
            "this host's CPU floor for the peer-assisted phase: {:.1} s of agents' CPU over {} \
             cores = {:.1} s\n",
            cpu,
            host.cores,
            cpu / host.cores.max(1) as f64
        ));
    }
    if let (Some(one), Some(peer)) = (one, peer) {
        out.push_str(&summary(one, peer, options.image_bytes));
        out.push('\n');
    }
    out
}

fn table(phases: &[Phase], image_bytes: u64) -> String {
    let mut out = format!(
        "{:<16}{:>9}{:>9}{:>15}{:>8}{:>20}{:>23}{:>17}\n",
        "phase",
        "machines",
        "wall s",
        "conductor GiB",
        "copies",
        "agent RSS max MiB",
        "agent RSS median MiB",
        "agents' CPU s"
    );
    for phase in phases {
        let max = phase.peak_rss_kib.iter().copied().max().unwrap_or(0);
        out.push_str(&format!(
            "{:<16}{:>9}{:>9.2}{:>15.2}{:>8.2}{:>20.1}{:>23.1}{:>17.1}\n",
            phase.name,
            phase.machines,
            phase.wall.as_secs_f64(),
            gib(phase.conductor_sent),
            copies(phase.conductor_sent, image_bytes),
            mib(max),
            mib(median(&phase.peak_rss_kib)),
            phase.agent_cpu.iter().sum::<f64>(),
        ));
    }
    out
}

/// The line issue 45 is judged by.
fn summary(one: &Phase, peer: &Phase, image_bytes: u64) -> String {
    format!(
        "peer-assisted: {:.2} x one machine; conductor sent {:.2} copies",
        peer.wall.as_secs_f64() / one.wall.as_secs_f64(),
        copies(peer.conductor_sent, image_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_are_checked() {
        assert_eq!(
            parse(&[]).expect("defaults"),
            Some(Options {
                machines: 32,
                image_bytes: 2 * GIB,
                link_mbit: 1000,
                keep: false,
            })
        );
        let chosen = parse(&args(&[
            "--machines",
            "4",
            "--image-gib",
            "0.25",
            "--link-mbit",
            "100",
            "--keep",
        ]))
        .expect("all options");
        assert_eq!(
            chosen,
            Some(Options {
                machines: 4,
                image_bytes: 256 * MIB,
                link_mbit: 100,
                keep: true,
            })
        );
        assert_eq!(parse(&args(&["--help"])).expect("help"), None);
        assert_eq!(
            parse(&args(&["--image-gib", "64"])).expect("the largest image"),
            Some(Options {
                image_bytes: 64 * GIB,
                ..Options::default()
            })
        );
        for wrong in [
            &["--machines", "0"][..],
            &["--machines", "65"],
            &["--machines"],
            &["--image-gib", "0.01"],
            &["--image-gib", "65"],
            &["--image-gib", "NaN"],
            &["--image-gib", "two"],
            &["--link-mbit", "0"],
            &["--link-mbit", "fast"],
            &["--nodes", "2"],
        ] {
            assert!(parse(&args(wrong)).is_err(), "{wrong:?} was accepted");
        }
    }

    #[test]
    fn image_sizes_are_whole_mib() {
        assert_eq!(image_bytes("2"), Some(2 * GIB));
        assert_eq!(image_bytes("0.1"), Some(102 * MIB));
        assert_eq!(image_bytes("0.015625"), Some(16 * MIB));
        assert_eq!(image_bytes("-1"), None);
        assert_eq!(gib_text(2 * GIB), "2");
        assert_eq!(gib_text(256 * MIB), "0.25");
        assert_eq!(gib_text(16 * MIB), "0.0156");
    }

    #[test]
    fn the_effective_uid_is_read() {
        assert_eq!(effective_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n"), Some(0));
        assert_eq!(effective_uid("Uid:\t0\t1000\t1000\t1000\n"), Some(1000));
        assert_eq!(effective_uid("Name:\tx\n"), None);
    }

    fn phase(name: &'static str, machines: usize, wall_ms: u64, sent: u64, rss: &[u64]) -> Phase {
        Phase {
            name,
            machines,
            wall: Duration::from_millis(wall_ms),
            conductor_sent: sent,
            peak_rss_kib: rss.to_vec(),
            agent_cpu: vec![1.5; rss.len()],
        }
    }

    #[test]
    fn the_report_has_a_table_and_the_summary_line() {
        let image = GIB;
        let phases = [
            phase("one machine", 1, 10_000, GIB + GIB / 25, &[20_480]),
            phase(
                "conductor only",
                4,
                40_500,
                4 * GIB + 4 * GIB / 25,
                &[20_480, 30_720, 10_240, 40_960],
            ),
            phase(
                "peer-assisted",
                4,
                12_340,
                2 * GIB,
                &[25_600, 25_600, 51_200, 10_240],
            ),
        ];
        assert_eq!(median(&[20_480, 30_720, 10_240, 40_960]), 20_480);
        assert_eq!(median(&[3, 1, 2]), 2);
        assert_eq!(median(&[]), 0);
        assert_eq!(
            table(&phases, image),
            "\
phase            machines   wall s  conductor GiB  copies   agent RSS max MiB   agent RSS median MiB    agents' CPU s
one machine             1    10.00           1.04    1.04                20.0                   20.0              1.5
conductor only          4    40.50           4.16    4.16                40.0                   20.0              6.0
peer-assisted           4    12.34           2.00    2.00                50.0                   25.0              6.0
"
        );
        assert_eq!(
            summary(&phases[0], &phases[2], image),
            "peer-assisted: 1.23 x one machine; conductor sent 2.00 copies"
        );
        let options = Options {
            machines: 4,
            image_bytes: image,
            link_mbit: 1000,
            keep: false,
        };
        let host = HostLoad {
            cores: 2,
            load: "0.50 0.40 0.30".to_owned(),
        };
        let report = report(&options, &host, &phases, true);
        assert!(report.starts_with(
            "bench-fleet-deploy: 4 machines, a 1 GiB image, every link 1000 Mbit/s each way \
             (tc tbf)\nthis machine: 2 cores, load average 0.50 0.40 0.30 at the start\nphase "
        ));
        assert!(report.ends_with("conductor sent 2.00 copies\n"));
        assert!(report.contains(
            "this host's CPU floor for the peer-assisted phase: 6.0 s of agents' CPU over 2 \
             cores = 3.0 s\n"
        ));
        assert!(!report.contains("note:"));
    }
}
