//! `cargo xtask chaos` (issue 42): fake-hardware nodes cycling through their life on
//! PostgreSQL with three conductors and two API processes while a driver SIGKILLs and
//! restarts them, crashes and restarts PostgreSQL, fails it over to its replica, and one
//! conductor runs with its clock 10 minutes fast. Invariants are checked all the time and at
//! the end, and one table is printed (also `target/chaos/results.json`); any violation fails
//! the run.
//!
//! Theory of operation:
//! 1. PostgreSQL: a private primary and a synchronous streaming replica (`chaos_pg.rs`), on
//!    their own ports and data directories under `/tmp`, never the machine's shared server.
//!    Every Ferric process names both in a multi-host `database_url`
//!    (`target_session_attrs=read-write`) and follows the primary itself.
//! 2. `ferric server --role conductor` ×3, each in a network namespace of its own
//!    (`chaos_net.rs`; `conductor-2` under libfaketime, `+10m`), and `--role api` ×2 on
//!    loopback, each restarted like a service manager would if it exits by itself.
//! 3. An audit trigger in the run's database (not part of Ferric's schema) records, for each
//!    history entry a conductor writes — and every state change a conductor makes writes one
//!    in the same transaction — which conductor held the node's lease, and which grant
//!    (generation), at that moment. "No node worked on by two conductors at once": every
//!    entry's writer is the lease holder, and no write lands under an older grant after one
//!    under a newer grant.
//! 4. The workload (`chaos_load.rs`) keeps every node cycling and follows each accepted
//!    request to its end; a prober asks both APIs every 100 ms.
//! 5. The driver, every `--interval` seconds, in turn: SIGKILLs a conductor (restarted after
//!    2 s); cuts a conductor off the network for `--cut` seconds (an nftables rule in its
//!    namespace drops every packet: its connections hang, it stops heartbeating and renewing
//!    while its work is mid-way, its nodes are taken over, and when the rule is lifted its
//!    late writes must be refused); SIGKILLs an API (restarted after 1 s); crashes PostgreSQL
//!    (`pg_ctl -m immediate`, started again after 2 s); fails over (the primary crashes, the
//!    replica is promoted, every process finds the new primary by itself, and the old primary
//!    is rebuilt as the new replica); and freezes a conductor for 12 s with SIGSTOP (a paused
//!    VM or process: the same take-over, without the network noticing).
//! 6. Then no new requests: every accepted request must end and every node come to rest
//!    (within [`DRAIN`]); each node's history must hold an entry for every accepted request.
//!
//! Invariants: every accepted request ends; no node stays in a transient state past
//! [`chaos_load::TRANSIENT_DEADLINE`]; an accepted abort leaves its node in the failed state
//! of its flow; no history entry of an accepted request is lost; no node is written by two
//! conductors at once (the audit above); the APIs answer throughout except while PostgreSQL is
//! down (its restarts and failovers, whose unavailability is measured); no process panics.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::chaos_load::{self, Load};
use crate::chaos_net::Net;
use crate::chaos_pg::{Cluster, DATABASE, PG_BIN};
use crate::process::{free_port, run};

pub(crate) const USAGE: &str = "\
usage: cargo xtask chaos [--long] [--nodes N] [--seconds S] [--interval S] [--cut S]
                         [--no-failover] [--release] [--seed N]

  (default)       the short run of CI: 24 nodes, 70 s of chaos, one event every 6 s,
                  a conductor cut off the network for 20 s
  --long          1,000 nodes, 600 s of chaos, one event every 15 s, cuts of 45 s
  --nodes N       fake-hardware nodes cycling
  --seconds S     how long the chaos lasts before the drain
  --interval S    seconds between two chaos events (default 6)
  --cut S         how long a conductor is cut off the network (default 20)
  --no-failover   no replica: PostgreSQL is only crashed and restarted
  --release       use the release build of ferric (default: the debug build, as the tests)
  --seed N        which waiting flows are aborted (default: from the clock; printed)

Needs Debian's postgresql-15 binaries, libfaketime and nftables (scripts/install-deps.sh), and
root (the private PostgreSQL runs as the postgres user; the conductors' network namespaces).
Logs stay in target/chaos/.
";

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const CONDUCTORS: usize = 3;
const APIS: usize = 2;
/// The conductor whose clock is off, and by how much (libfaketime's syntax).
const SKEWED: usize = 2;
const SKEW: &str = "+10m";
/// How long the end of the run waits for every accepted request to end.
const DRAIN: Duration = Duration::from_secs(150);
/// How long a conductor is frozen: longer than its heartbeat timeout and lease.
const FREEZE: Duration = Duration::from_secs(12);
/// An outage outside PostgreSQL's own restarts longer than this is a violation.
const OUTAGE_TOLERANCE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
struct Options {
    nodes: usize,
    seconds: u64,
    interval: u64,
    cut: u64,
    failover: bool,
    release: bool,
    seed: u64,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| since.as_secs());
    let mut options = Options {
        nodes: 24,
        seconds: 70,
        interval: 6,
        cut: 20,
        failover: true,
        release: false,
        seed,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> anyhow::Result<u64> {
            let value = args
                .next()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))?;
            match value.parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => bail!("{name} {value:?}: expected a positive whole number\n\n{USAGE}"),
            }
        };
        match arg.as_str() {
            "--long" => {
                options.nodes = 1_000;
                options.seconds = 600;
                options.interval = 15;
                options.cut = 45;
            }
            "--nodes" => options.nodes = usize::try_from(number("--nodes")?)?,
            "--seconds" => options.seconds = number("--seconds")?,
            "--interval" => options.interval = number("--interval")?,
            "--cut" => options.cut = number("--cut")?,
            "--no-failover" => options.failover = false,
            "--release" => options.release = true,
            "--seed" => options.seed = number("--seed")?,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    Ok(options)
}

/// One `ferric server` process, restartable under its name and port.
struct Proc {
    name: String,
    role: &'static str,
    skew: Option<&'static str>,
    port: u16,
    /// The network namespace it runs in (conductors), or the host's (APIs).
    netns: Option<String>,
    /// Its `database_url`: both clusters, at the addresses it reaches them on.
    database_url: String,
    child: Option<Child>,
    starts: usize,
}

impl Proc {
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(format!("{}.{}.log", self.name, self.starts))
    }

    fn start(&mut self, binary: &Path, run_dir: &Path) -> anyhow::Result<()> {
        self.starts += 1;
        let file = std::fs::File::create(self.log(run_dir))?;
        // `ip netns exec` enters the namespace and execs the program: same process id.
        let mut command = match &self.netns {
            Some(netns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", netns]).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .arg("server")
            .args(["--role", self.role, "--database-url", &self.database_url])
            .args(["--api-listen", &format!("127.0.0.1:{}", self.port)])
            .env_remove("FERRIC_CONFIG")
            .env("FERRIC_CONDUCTOR_HOSTNAME", &self.name)
            .env("FERRIC_NODE_LEASE_TIMEOUT", "5")
            .env("FERRIC_CONDUCTOR_HEARTBEAT_INTERVAL", "1")
            .env("FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT", "5")
            .env("FERRIC_CONDUCTOR_REQUEST_TIMEOUT", "5")
            .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "1")
            .env("FERRIC_SYNC_POWER_STATE_INTERVAL", "0")
            .env("FERRIC_LOG_LEVEL", "warn,ferric=info,ferric_conductor=info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        if let Some(offset) = self.skew {
            command
                .env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME", offset);
        }
        self.child = Some(
            command
                .spawn()
                .with_context(|| format!("cannot start {}", binary.display()))?,
        );
        Ok(())
    }

    /// Waits until the current run logs that it is ready.
    fn wait_ready(&mut self, run_dir: &Path) -> anyhow::Result<()> {
        let ready = if self.role == "api" {
            "Bare Metal API listening"
        } else {
            "conductor running"
        };
        let log = self.log(run_dir);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if std::fs::read_to_string(&log).is_ok_and(|text| text.contains(ready)) {
                return Ok(());
            }
            if let Some(child) = &mut self.child
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "{} exited at start ({status}); log: {}",
                    self.name,
                    log.display()
                );
            }
            if Instant::now() > deadline {
                bail!("{} not ready in 120 s; log: {}", self.name, log.display());
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL, as the OOM killer or a power cut.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether it exited by itself.
    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))))
    }
}

/// One chaos event: what, and when it began and was over (the process or server back).
#[derive(Debug, Clone)]
struct Event {
    kind: &'static str,
    what: String,
    start: Instant,
    end: Instant,
}

/// Everything the run started.
struct World {
    binary: PathBuf,
    run_dir: PathBuf,
    pg_dir: PathBuf,
    primary: Cluster,
    replica: Option<Cluster>,
    net: Net,
    procs: Vec<Proc>,
    events: Vec<Event>,
    self_exits: Vec<String>,
}

impl World {
    fn start(options: &Options, binary: PathBuf, run_dir: PathBuf) -> anyhow::Result<Self> {
        let pg_dir = std::env::temp_dir().join(format!("ferric-chaos-{}", std::process::id()));
        std::fs::create_dir_all(&pg_dir)?;
        let owned = pg_dir.to_string_lossy().into_owned();
        run("chown", &["postgres:postgres", &owned], &[])?;
        let net = Net::create(CONDUCTORS)?;
        let primary = Cluster::init(
            &pg_dir,
            "pg-a",
            free_port()?,
            &net.host_addrs(),
            &net.clients(),
        )?;
        primary.start()?;
        primary.psql("postgres", &format!("CREATE DATABASE {DATABASE}"))?;
        let replica = if options.failover {
            let replica = Cluster::replica_of(&pg_dir, "pg-b", free_port()?, &primary)?;
            replica.start()?;
            primary.synchronous_standby(true)?;
            primary.wait_for_sync_standby()?;
            Some(replica)
        } else {
            None
        };
        let ports: Vec<u16> = std::iter::once(primary.port)
            .chain(replica.as_ref().map(|replica| replica.port))
            .collect();
        // Every server of the pair, wherever the primary is now (`ferric-db/src/pg_hosts.rs`).
        let database_url = |host: &str| {
            let hosts: Vec<String> = ports.iter().map(|port| format!("{host}:{port}")).collect();
            format!(
                "postgres://postgres@{}/{DATABASE}?target_session_attrs=read-write",
                hosts.join(",")
            )
        };
        let mut procs = Vec::new();
        for n in 0..CONDUCTORS {
            procs.push(Proc {
                name: format!("conductor-{n}"),
                role: "conductor",
                skew: (n == SKEWED).then_some(SKEW),
                port: free_port()?,
                netns: Some(net.namespace(n).to_owned()),
                database_url: database_url(&net.host_addr(n)),
                child: None,
                starts: 0,
            });
        }
        for n in 0..APIS {
            procs.push(Proc {
                name: format!("api-{n}"),
                role: "api",
                skew: None,
                port: free_port()?,
                netns: None,
                database_url: database_url("127.0.0.1"),
                child: None,
                starts: 0,
            });
        }
        let mut world = Self {
            binary,
            run_dir,
            pg_dir,
            primary,
            replica,
            net,
            procs,
            events: Vec::new(),
            self_exits: Vec::new(),
        };
        // The first conductor migrates the fresh database alone; then the audit goes in.
        world.start_proc(0)?;
        world.procs[0].wait_ready(&world.run_dir)?;
        world.primary.psql(DATABASE, AUDIT)?;
        for n in 1..world.procs.len() {
            world.start_proc(n)?;
        }
        for n in 1..world.procs.len() {
            let run_dir = world.run_dir.clone();
            world.procs[n].wait_ready(&run_dir)?;
        }
        Ok(world)
    }

    fn start_proc(&mut self, n: usize) -> anyhow::Result<()> {
        let (binary, run_dir) = (&self.binary, &self.run_dir);
        self.procs[n].start(binary, run_dir)
    }

    fn apis(&self) -> Vec<String> {
        self.procs
            .iter()
            .filter(|proc| proc.role == "api")
            .map(Proc::endpoint)
            .collect()
    }

    /// Restarts, like a service manager, every process that exited by itself.
    fn supervise(&mut self) -> anyhow::Result<()> {
        for n in 0..self.procs.len() {
            if self.procs[n].exited() {
                let name = self.procs[n].name.clone();
                eprintln!("chaos: {name} exited by itself; restarting it");
                self.self_exits.push(name);
                self.procs[n].kill();
                self.start_proc(n)?;
            }
        }
        Ok(())
    }

    /// Kills process `n`, waits `down`, starts it again and waits until it is ready.
    fn kill_and_restart(&mut self, n: usize, down: Duration) -> anyhow::Result<Event> {
        let start = Instant::now();
        self.procs[n].kill();
        thread::sleep(down);
        self.start_proc(n)?;
        let run_dir = self.run_dir.clone();
        self.procs[n].wait_ready(&run_dir)?;
        let kind = if self.procs[n].role == "api" {
            "api SIGKILL"
        } else {
            "conductor SIGKILL"
        };
        Ok(Event {
            kind,
            what: self.procs[n].name.clone(),
            start,
            end: Instant::now(),
        })
    }

    /// Cuts conductor `n` off the network for `cut_off` (a firewall rule in its namespace):
    /// its connections hang, to the others it stops heartbeating and renewing, and they take
    /// its nodes over; when the rule is lifted, its workers' late writes must be refused
    /// (fencing) and it must find its way back.
    fn cut_off(&mut self, n: usize, cut_off: Duration) -> anyhow::Result<Event> {
        let start = Instant::now();
        self.net.cut(n)?;
        thread::sleep(cut_off);
        self.net.restore(n)?;
        Ok(Event {
            kind: "conductor cut off the network",
            what: format!("{} for {} s", self.procs[n].name, cut_off.as_secs()),
            start,
            end: Instant::now(),
        })
    }

    /// Freezes conductor `n` (SIGSTOP) for `cut_off`, then lets it go on (SIGCONT): to the
    /// others it is gone — no heartbeat, no lease renewal — and they take its nodes over;
    /// when it comes back, its workers' next writes must be refused (fencing).
    fn freeze(&mut self, n: usize, cut_off: Duration) -> anyhow::Result<Event> {
        let start = Instant::now();
        let pid = self.procs[n]
            .child
            .as_ref()
            .map(Child::id)
            .context("the conductor to freeze is not running")?
            .to_string();
        run("kill", &["-STOP", &pid], &[])?;
        thread::sleep(cut_off);
        run("kill", &["-CONT", &pid], &[])?;
        Ok(Event {
            kind: "conductor frozen (SIGSTOP)",
            what: format!("{} for {} s", self.procs[n].name, cut_off.as_secs()),
            start,
            end: Instant::now(),
        })
    }

    /// PostgreSQL crashes and comes back after 2 s.
    fn restart_postgres(&mut self) -> anyhow::Result<Event> {
        let start = Instant::now();
        self.primary.crash()?;
        thread::sleep(Duration::from_secs(2));
        self.primary.start()?;
        Ok(Event {
            kind: "postgres crash+restart",
            what: self.primary.name.clone(),
            start,
            end: Instant::now(),
        })
    }

    /// The primary crashes; the replica is promoted (the event's end: every Ferric process
    /// finds it by itself); then the old primary is rebuilt as the new one's synchronous
    /// replica on its old port.
    fn failover(&mut self) -> anyhow::Result<Event> {
        let Some(replica) = self.replica.take() else {
            bail!("no replica to fail over to");
        };
        let start = Instant::now();
        self.primary.crash()?;
        replica.promote()?;
        // Nobody to wait for until the new replica streams.
        replica.synchronous_standby(false)?;
        let end = Instant::now();
        let what = format!("{} -> {}", self.primary.name, replica.name);
        let old = std::mem::replace(&mut self.primary, replica);
        let rebuilt = Cluster::replica_of(&self.pg_dir, &old.name, old.port, &self.primary)?;
        rebuilt.start()?;
        self.primary.synchronous_standby(true)?;
        self.primary.wait_for_sync_standby()?;
        self.replica = Some(rebuilt);
        Ok(Event {
            kind: "postgres failover",
            what,
            start,
            end,
        })
    }

    fn stop(&mut self) {
        for proc in &mut self.procs {
            proc.kill();
        }
        self.primary.stop_quietly();
        if let Some(replica) = &self.replica {
            replica.stop_quietly();
        }
        let _ = std::fs::remove_dir_all(&self.pg_dir);
    }

    /// Lines holding `needle` in every log of the run.
    fn log_count(&self, needle: &str) -> usize {
        std::fs::read_dir(&self.run_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "log"))
                    .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
                    .map(|text| text.lines().filter(|line| line.contains(needle)).count())
                    .sum()
            })
            .unwrap_or(0)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The audit of who writes each node (see the module comment): a table and a trigger in the
/// run's own database, which the replica carries over a failover.
const AUDIT: &str = "
CREATE TABLE chaos_writes (
    id         BIGSERIAL PRIMARY KEY,
    node_uuid  UUID NOT NULL,
    conductor  TEXT,
    holder     TEXT,
    generation BIGINT,
    event      TEXT NOT NULL
);
CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    lease record;
BEGIN
    SELECT holder, generation INTO lease FROM node_leases WHERE node_uuid = NEW.node_uuid;
    INSERT INTO chaos_writes (node_uuid, conductor, holder, generation, event)
    VALUES (NEW.node_uuid, NEW.conductor, lease.holder, lease.generation, NEW.event);
    RETURN NEW;
END $$;
CREATE TRIGGER chaos_audit BEFORE INSERT ON node_history
    FOR EACH ROW EXECUTE FUNCTION chaos_audit();
";

pub(crate) fn chaos(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    for needed in [Path::new(PG_BIN).join("initdb"), PathBuf::from(LIBFAKETIME)] {
        if !needed.exists() {
            bail!(
                "{} is missing: run scripts/install-deps.sh (postgresql, faketime)",
                needed.display()
            );
        }
    }
    let mut build = vec!["build", "--locked", "--bin", "ferric", "-p", "ferric"];
    if options.release {
        build.push("--release");
    }
    run("cargo", &build, &[])?;
    let profile = if options.release { "release" } else { "debug" };
    let binary = crate::process::target_dir().join(profile).join("ferric");
    let run_dir = crate::process::target_dir().join("chaos");
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)?;
    }
    std::fs::create_dir_all(&run_dir)?;
    println!(
        "chaos: {} nodes, {CONDUCTORS} conductors (conductor-{SKEWED} at {SKEW}), {APIS} APIs, \
         PostgreSQL {}, {} s of chaos every {} s, seed {}",
        options.nodes,
        if options.failover {
            "primary + synchronous replica"
        } else {
            "alone"
        },
        options.seconds,
        options.interval,
        options.seed
    );
    let started = Instant::now();
    let mut world = World::start(&options, binary, run_dir.clone())?;
    let rows = drive(&mut world, &options);
    world.stop();
    let rows = rows?;
    let violations = rows
        .iter()
        .find(|(name, _)| name == "invariant violations")
        .and_then(|(_, value)| value.as_u64())
        .unwrap_or(1);
    println!();
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in &rows {
        let shown = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        println!("{name:width$}  {shown}");
    }
    let record: serde_json::Map<String, Value> = rows.into_iter().collect();
    std::fs::write(
        run_dir.join("results.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    println!(
        "\nchaos: the whole run took {:.0} s; logs and results.json in {}",
        started.elapsed().as_secs_f64(),
        run_dir.display()
    );
    if violations > 0 {
        bail!("chaos: {violations} invariant violations (above, and in the logs)");
    }
    Ok(())
}

/// The run proper: enroll, load, chaos, drain, checks. Returns the table's rows.
fn drive(world: &mut World, options: &Options) -> anyhow::Result<Vec<(String, Value)>> {
    let apis = world.apis();
    let uuids = chaos_load::enroll(&apis[0], options.nodes)?;
    let clients = (options.nodes / 25).clamp(2, 8);
    let mut load = Load::start(&apis, &uuids, clients, options.seed);
    let chaos_started = Instant::now();
    let chaos_for = Duration::from_secs(options.seconds);
    let interval = Duration::from_secs(options.interval);
    let mut next_event = Instant::now() + interval;
    let (mut turn, mut conductor, mut api) = (0usize, 0usize, 0usize);
    let max_load = LoadAverage::default();
    while chaos_started.elapsed() < chaos_for {
        world.supervise()?;
        max_load.sample();
        if Instant::now() < next_event {
            thread::sleep(Duration::from_millis(200));
            continue;
        }
        let event = match turn % 6 {
            0 => {
                conductor += 1;
                world.kill_and_restart(conductor % CONDUCTORS, Duration::from_secs(2))?
            }
            1 => {
                conductor += 1;
                world.cut_off(conductor % CONDUCTORS, Duration::from_secs(options.cut))?
            }
            2 => {
                api += 1;
                world.kill_and_restart(CONDUCTORS + api % APIS, Duration::from_secs(1))?
            }
            3 => world.restart_postgres()?,
            4 if world.replica.is_some() => world.failover()?,
            4 => world.restart_postgres()?,
            _ => {
                conductor += 1;
                world.freeze(conductor % CONDUCTORS, FREEZE)?
            }
        };
        turn += 1;
        println!(
            "chaos: {:>5.1} s  {} ({}) over in {:.2} s",
            event.start.duration_since(chaos_started).as_secs_f64(),
            event.kind,
            event.what,
            event.end.duration_since(event.start).as_secs_f64()
        );
        world.events.push(event);
        next_event = Instant::now() + interval;
    }
    world.supervise()?;
    let drained = load.finish(DRAIN);
    println!("chaos: drained in {:.1} s", drained.as_secs_f64());
    checks(world, &load, &apis, drained, &max_load)
}

/// The 1-minute load average's highest sample.
#[derive(Debug, Default)]
struct LoadAverage(std::cell::Cell<f64>);

impl LoadAverage {
    fn sample(&self) {
        if let Some(load) = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse::<f64>().ok())
        {
            self.0.set(self.0.get().max(load));
        }
    }
}

/// The end-of-run checks and the table.
fn checks(
    world: &World,
    load: &Load,
    apis: &[String],
    drained: Duration,
    max_load: &LoadAverage,
) -> anyhow::Result<Vec<(String, Value)>> {
    use std::sync::atomic::Ordering::Relaxed;
    let tally = &load.tally;
    let (entries, writers) = chaos_load::check_history(&apis[0], tally)?;
    // The audit: entries written by a conductor that did not hold the node's lease, and writes
    // under an older grant after one under a newer grant of the same node.
    let count_rows =
        |sql: &str| -> anyhow::Result<u64> { Ok(world.primary.psql(DATABASE, sql)?.parse()?) };
    let foreign = count_rows(
        "SELECT count(*) FROM chaos_writes WHERE conductor IS NOT NULL \
         AND holder IS DISTINCT FROM conductor",
    )?;
    let backwards = count_rows(
        "SELECT count(*) FROM (SELECT generation, lag(generation) OVER \
         (PARTITION BY node_uuid ORDER BY id) AS before FROM chaos_writes \
         WHERE conductor IS NOT NULL) writes WHERE generation < before",
    )?;
    let handovers = count_rows(
        "SELECT count(*) FROM (SELECT conductor, lag(conductor) OVER \
         (PARTITION BY node_uuid ORDER BY id) AS before FROM chaos_writes \
         WHERE conductor IS NOT NULL) writes WHERE conductor <> before",
    )?;
    // The offending entries themselves, so a violation can be followed in the logs.
    let show = |sql: &str| world.primary.psql(DATABASE, sql).unwrap_or_default();
    if foreign > 0 {
        tally.violation(format!(
            "{foreign} history entries written by a conductor that did not hold the node's \
             lease:\n{}",
            show(
                "SELECT id, node_uuid, conductor, coalesce(holder, '(no lease)'), generation, \
                 event FROM chaos_writes WHERE conductor IS NOT NULL \
                 AND holder IS DISTINCT FROM conductor ORDER BY id LIMIT 10"
            )
        ));
    }
    if backwards > 0 {
        tally.violation(format!(
            "{backwards} writes under an older lease grant after one under a newer grant:\n{}",
            show(
                "SELECT id, node_uuid, conductor, generation, before, event FROM \
                 (SELECT *, lag(generation) OVER (PARTITION BY node_uuid ORDER BY id) AS before \
                 FROM chaos_writes WHERE conductor IS NOT NULL) writes \
                 WHERE generation < before ORDER BY id LIMIT 10"
            )
        ));
    }
    // Availability: outages while PostgreSQL was down are its restarts' and failovers' cost;
    // any other longer than the tolerance is a violation.
    let db_events: Vec<&Event> = world
        .events
        .iter()
        .filter(|event| event.kind.starts_with("postgres"))
        .collect();
    // Seconds without an answering API, per database event.
    let mut unavailable = vec![0.0f64; db_events.len()];
    let mut other_outage = Duration::ZERO;
    for (from, to) in load.availability.outages() {
        // An outage belongs to the latest database event it overlaps (or began within 10 s
        // after).
        let during = db_events
            .iter()
            .rposition(|event| from <= event.end + Duration::from_secs(10) && to >= event.start);
        match during {
            Some(event) => unavailable[event] += (to - from).as_secs_f64(),
            None => {
                other_outage = other_outage.max(to - from);
                if to - from > OUTAGE_TOLERANCE {
                    tally.violation(format!(
                        "no API answered for {:.1} s outside a PostgreSQL restart or failover",
                        (to - from).as_secs_f64()
                    ));
                }
            }
        }
    }
    let panics = world.log_count("panicked at");
    if panics > 0 {
        tally.violation(format!("{panics} panics in the processes' logs"));
    }
    let count = |kind: &str| world.events.iter().filter(|e| e.kind == kind).count();
    let of_kind = |kind: &str| {
        db_events
            .iter()
            .zip(&unavailable)
            .filter(|(event, _)| event.kind == kind)
            .map(|(_, seconds)| *seconds)
            .collect::<Vec<f64>>()
    };
    let worst = |kind: &str| of_kind(kind).into_iter().fold(0.0, f64::max);
    // Requests made while the database is away wait for it (the pool retries) and are
    // answered late: the slowest answer to a probe sent during such an event, or up to 10 s
    // after it.
    let delayed = |kind: &str| {
        db_events
            .iter()
            .filter(|event| event.kind == kind)
            .map(|event| {
                load.availability
                    .slowest(event.start, event.end + Duration::from_secs(10))
                    .as_secs_f64()
            })
            .fold(0.0, f64::max)
    };
    let total = |kind: &str| of_kind(kind).into_iter().sum::<f64>();
    let (samples, per_api) = load.availability.answered();
    let violations = tally.violations.lock().map(|v| v.len()).unwrap_or(1);
    let uptime = Command::new("uptime")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    let writers: Vec<String> = writers
        .iter()
        .map(|(name, entries)| format!("{name} {entries}"))
        .collect();
    Ok(vec![
        (
            "nodes".into(),
            json!(tally.per_node.lock().map_or(0, |p| p.len())),
        ),
        (
            "requests accepted (202)".into(),
            json!(tally.accepted.load(Relaxed)),
        ),
        (
            "requests completed".into(),
            json!(tally.completed.load(Relaxed)),
        ),
        (
            "requests refused (4xx)".into(),
            json!(tally.refused.load(Relaxed)),
        ),
        (
            "requests unanswered or 5xx".into(),
            json!(tally.unknown.load(Relaxed)),
        ),
        (
            "aborts accepted / honoured".into(),
            json!(format!(
                "{} / {}",
                tally.aborts_accepted.load(Relaxed),
                tally.aborts_honoured.load(Relaxed)
            )),
        ),
        (
            "flows ended failed (cycled on)".into(),
            json!(tally.rests_failed.load(Relaxed)),
        ),
        (
            "conductor SIGKILLs".into(),
            json!(count("conductor SIGKILL")),
        ),
        (
            "conductors cut off the network".into(),
            json!(count("conductor cut off the network")),
        ),
        (
            "conductors frozen 12 s (SIGSTOP)".into(),
            json!(count("conductor frozen (SIGSTOP)")),
        ),
        ("API SIGKILLs".into(), json!(count("api SIGKILL"))),
        (
            "processes that exited by themselves".into(),
            json!(world.self_exits.len()),
        ),
        (
            "PostgreSQL crash+restarts".into(),
            json!(count("postgres crash+restart")),
        ),
        (
            "PostgreSQL failovers".into(),
            json!(count("postgres failover")),
        ),
        (
            "API unavailable per PG restart, worst (s)".into(),
            json!(round(worst("postgres crash+restart"))),
        ),
        (
            "API answer delayed per PG restart, worst (s)".into(),
            json!(round(delayed("postgres crash+restart"))),
        ),
        (
            "API unavailable in PG restarts, total (s)".into(),
            json!(round(total("postgres crash+restart"))),
        ),
        (
            "API unavailable per failover, worst (s)".into(),
            json!(round(worst("postgres failover"))),
        ),
        (
            "API answer delayed per failover, worst (s)".into(),
            json!(round(delayed("postgres failover"))),
        ),
        (
            "API unavailable in failovers, total (s)".into(),
            json!(round(total("postgres failover"))),
        ),
        (
            "longest outage otherwise (s)".into(),
            json!(round(other_outage.as_secs_f64())),
        ),
        (
            "probes answered per API".into(),
            json!(format!("{per_api:?} of {samples}")),
        ),
        (
            "writes refused by fencing (logged)".into(),
            json!(world.log_count("write refused, abandoning the node")),
        ),
        (
            "leases found taken over at renewal (logged)".into(),
            json!(world.log_count("lost the lease on a node while working on it")),
        ),
        (
            "nodes abandoned to another conductor (logged)".into(),
            json!(world.log_count("abandoned the node")),
        ),
        (
            "lease handovers between conductors".into(),
            json!(handovers),
        ),
        ("history entries checked".into(), json!(entries)),
        (
            "history entries per conductor".into(),
            json!(writers.join(", ")),
        ),
        ("drain (s)".into(), json!(round(drained.as_secs_f64()))),
        (
            "load average (1 min), highest".into(),
            json!(max_load.0.get()),
        ),
        ("uptime at the end".into(), json!(uptime)),
        ("invariant violations".into(), json!(violations)),
    ])
}

fn round(seconds: f64) -> f64 {
    (seconds * 100.0).round() / 100.0
}
