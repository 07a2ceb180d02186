//! `cargo xtask bench-api`: the read benchmark of the Bare Metal API (issue 3). Not a test: it
//! builds the release `ferric`, starts `ferric server` on a fresh SQLite file (or, with
//! `--postgres`, a fresh PostgreSQL database), enrolls 10,000 nodes through the API and reports
//! latency percentiles of the read paths operators and Nova's driver hammer, plus the single-node
//! throughput of 10 client threads.
//!
//! Theory of operation: every client is a plain thread with its own keep-alive connection
//! (`ureq`, synchronous, no runtime of its own), so the client costs little CPU beside the
//! server on a small machine. Latency is wall time from sending a request to having read its
//! whole body. Beside it the task reports the server's CPU time per request (from
//! `/proc/<pid>/stat`), which stays meaningful on a machine that other work keeps busy, where
//! wall time mostly measures the wait for a core. The figures go to stdout;
//! `docs/benchmarks.md` keeps the ones we record.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::bench_http::{
    agent, enroll, psql, report, throughput, timed_get, walk_pages, walk_pages_split,
};
use crate::bench_memory::{self, PeakSampler, Rss};
use crate::process::{free_port, run, target_dir};
use crate::server::RunningServer;

pub(crate) const USAGE: &str = "\
usage: cargo xtask bench-api [--postgres] [--nodes N] [--threads N] [--seconds S] [--walks N]
                             [--fleet N] [--idle S] [--env KEY=VALUE]...

  --postgres      run on PostgreSQL (127.0.0.1:5432, user postgres, trust) in a fresh database
                  `ferric_bench`, made from `test`, instead of a fresh SQLite file
  --nodes N       how many nodes to enroll first (default 10000)
  --threads N     client threads for the throughput run (default 10)
  --seconds S     length of the throughput run (default 10)
  --walks N       full detail walks, the server's RSS printed after each (default 3; the
                  first fills the render cache, the percentiles are of the others)
  --fleet N       at the end, a fleet cycle of N more nodes with a port each (create, manage,
                  provide, deploy, undeploy, delete), then the idle RSS (default 1000; 0: none)
  --idle S        last, the RSS after S seconds without a request: longer than the server's
                  idle sweeps (SQLite connections after 10 s, api_render_cache_idle after 60 s)
                  (default 75; 0: none)
  --env KEY=VALUE an environment variable for the server (FERRIC_* settings, MIMALLOC_*);
                  repeatable, e.g. --env FERRIC_API_RENDER_CACHE_SIZE=0
";

/// The version every request asks for: the newest, so every field is shown.

#[derive(Debug, Clone)]
struct Options {
    postgres: bool,
    nodes: usize,
    threads: usize,
    seconds: u64,
    walks: usize,
    fleet: usize,
    idle: u64,
    env: Vec<(String, String)>,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        postgres: false,
        nodes: 10_000,
        threads: 10,
        seconds: 10,
        walks: 3,
        fleet: 1000,
        idle: 75,
        env: Vec::new(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let name = arg.as_str();
        let mut value = || -> anyhow::Result<&String> {
            args.next()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        let whole = |value: &str, positive: bool| -> anyhow::Result<usize> {
            match value.parse::<usize>() {
                Ok(number) if number > 0 || !positive => Ok(number),
                _ => bail!("{name} {value:?}: expected a positive whole number\n\n{USAGE}"),
            }
        };
        match name {
            "--postgres" => options.postgres = true,
            "--nodes" => options.nodes = whole(value()?, true)?,
            "--threads" => options.threads = whole(value()?, true)?,
            "--seconds" => options.seconds = u64::try_from(whole(value()?, true)?)?,
            "--walks" => options.walks = whole(value()?, true)?,
            "--fleet" => options.fleet = whole(value()?, false)?,
            "--idle" => options.idle = u64::try_from(whole(value()?, false)?)?,
            "--env" => {
                let pair = value()?;
                let Some((key, value)) = pair.split_once('=') else {
                    bail!("--env {pair:?}: expected KEY=VALUE\n\n{USAGE}");
                };
                options.env.push((key.to_owned(), value.to_owned()));
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    Ok(options)
}

pub(crate) fn bench_api(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let backend = if options.postgres {
        "postgres"
    } else {
        "sqlite"
    };
    let run_dir = target_dir().join("bench-api").join(backend);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;

    run(
        "cargo",
        &["build", "--release", "--locked", "--bin", "ferric"],
        &[],
    )?;
    let binary = target_dir().join("release").join("ferric");
    let database_url = if options.postgres {
        fresh_postgres_database()?
    } else {
        run_dir.join("ferric.db").display().to_string()
    };
    let env: Vec<(&str, &str)> = options
        .env
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let server =
        RunningServer::ferric_binary_with(&binary, &run_dir, free_port()?, &database_url, &env)?;
    let endpoint = server.endpoint.clone();
    let pid = server.pid().context("the server's process id is unknown")?;
    println!("bench-api: ferric (release) on {backend} at {endpoint}");
    let peak = PeakSampler::start(pid);
    Rss::of(pid)?.print("at start");

    let started = Instant::now();
    let uuids = enroll(&endpoint, options.nodes, options.threads)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "enrolled {} nodes in {seconds:.1} s ({:.0} nodes/s, {} client threads)",
        uuids.len(),
        uuids.len() as f64 / seconds,
        options.threads
    );
    bench_memory::idle(pid, 3, "after enrolling")?;

    let cpu = ServerCpu::new(Some(pid))?;
    let agent = agent();
    // Full detail walks: the first fills the render cache (its pages are reported apart),
    // the others are the steady state the percentiles describe.
    let detail_url = format!("{endpoint}/v1/nodes/detail?limit=1000");
    let mut detail = Vec::new();
    let mut detail_cpu = 0.0;
    for walk in 1..=options.walks {
        let start = cpu.used()?;
        let pages = walk_pages_split(&agent, &detail_url)?;
        let used = cpu.used()? - start;
        if walk == 1 {
            report(
                "GET /v1/nodes/detail, first walk (fills the cache)",
                &mut pages.iter().map(|page| page.last_byte).collect::<Vec<_>>(),
            );
            cpu.report(used, pages.len());
        } else {
            detail_cpu += used;
            detail.extend(pages);
        }
        Rss::of(pid)?.print(&format!("after detail walk {walk}"));
    }
    if !detail.is_empty() {
        report(
            "GET /v1/nodes/detail (pages of 1,000)",
            &mut detail.iter().map(|page| page.last_byte).collect::<Vec<_>>(),
        );
        report(
            "  of which to the first byte",
            &mut detail
                .iter()
                .map(|page| page.first_byte)
                .collect::<Vec<_>>(),
        );
        cpu.report(detail_cpu, detail.len());
    }
    bench_memory::idle(pid, 3, "after the detail walks")?;

    let fields_url = format!("{endpoint}/v1/nodes?fields=uuid,provision_state");
    walk_pages(&agent, &fields_url)?;
    let mut fields = Vec::new();
    let start = cpu.used()?;
    for _ in 0..5 {
        fields.extend(walk_pages(&agent, &fields_url)?);
    }
    report(
        "GET /v1/nodes?fields=uuid,provision_state (pages of 1,000)",
        &mut fields,
    );
    cpu.report_since(start, fields.len())?;
    Rss::of(pid)?.print("after the fields= walks");

    let mut single = Vec::new();
    let start = cpu.used()?;
    for n in 0..2_000 {
        let uuid = &uuids[(n * 7919) % uuids.len()];
        single.push(timed_get(&agent, &format!("{endpoint}/v1/nodes/{uuid}"))?.0);
    }
    report("GET /v1/nodes/{uuid} (one client)", &mut single);
    cpu.report_since(start, single.len())?;

    let start = cpu.used()?;
    let (requests, mut latencies, elapsed) =
        throughput(&endpoint, &uuids, options.threads, options.seconds)?;
    report(
        &format!(
            "GET /v1/nodes/{{uuid}} ({} client threads)",
            options.threads
        ),
        &mut latencies,
    );
    cpu.report_since(start, requests)?;
    println!(
        "  throughput: {:.0} requests/s ({requests} requests in {:.1} s)",
        requests as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    bench_memory::idle(pid, 5, "after the reads")?;

    if options.fleet > 0 {
        let start = cpu.used()?;
        crate::compare::fleet_of(&endpoint, pid, options.fleet, options.threads)?;
        println!("  server CPU: {:.2} s", cpu.used()? - start);
        bench_memory::idle(pid, 5, "after the fleet cycle")?;
        // The walk an operator's dashboard makes next: does the cycle's residue stay?
        walk_pages(&agent, &detail_url)?;
        Rss::of(pid)?.print("after one more detail walk");
        bench_memory::idle(pid, 5, "at the end")?;
    }
    if options.idle > 0 {
        bench_memory::idle(pid, options.idle, "after the last request")?;
    }
    println!(
        "  RSS peak over the run: {:.1} MB",
        peak.peak() as f64 / 1e6
    );
    drop(server);
    Ok(())
}

/// The server's CPU time (user + system), read from `/proc/<pid>/stat`.
struct ServerCpu {
    stat: String,
    ticks_per_second: f64,
}

impl ServerCpu {
    fn new(pid: Option<u32>) -> anyhow::Result<Self> {
        let pid = pid.context("the server's process id is unknown")?;
        let output = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .context("cannot run getconf CLK_TCK")?;
        let ticks_per_second: f64 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .context("getconf CLK_TCK did not print a number")?;
        Ok(Self {
            stat: format!("/proc/{pid}/stat"),
            ticks_per_second,
        })
    }

    /// CPU seconds used so far.
    fn used(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(&self.stat)
            .with_context(|| format!("cannot read {}", self.stat))?;
        // After the command name (which may hold spaces) come the fields from `state` (3)
        // on; utime and stime are fields 14 and 15.
        let after_name = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("unexpected /proc stat format")?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |index: usize| -> anyhow::Result<f64> {
            Ok(fields
                .get(index)
                .context("unexpected /proc stat format")?
                .parse::<f64>()?)
        };
        Ok((ticks(11)? + ticks(12)?) / self.ticks_per_second)
    }

    fn report_since(&self, start: f64, requests: usize) -> anyhow::Result<()> {
        self.report(self.used()? - start, requests);
        Ok(())
    }

    /// Prints `used` CPU seconds per request.
    fn report(&self, used: f64, requests: usize) {
        println!(
            "  server CPU: {:.3} ms per request ({used:.2} s for {requests})",
            used * 1000.0 / requests.max(1) as f64
        );
    }
}

/// Creates `ferric_bench` afresh on the local PostgreSQL and returns its URL.
fn fresh_postgres_database() -> anyhow::Result<String> {
    for statement in [
        "DROP DATABASE IF EXISTS ferric_bench",
        "CREATE DATABASE ferric_bench",
    ] {
        psql("test", statement)?;
    }
    Ok("postgres://postgres@127.0.0.1:5432/ferric_bench".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.nodes, 10_000);
        assert!(!options.postgres);
        let args: Vec<String> = ["--postgres", "--nodes", "50"]
            .iter()
            .map(|arg| (*arg).to_owned())
            .collect();
        let options = parse(&args).unwrap();
        assert!(options.postgres);
        assert_eq!(options.nodes, 50);
        assert!(parse(&["--nodes".to_owned(), "0".to_owned()]).is_err());
        assert_eq!(options.idle, 75);
        let options = parse(&["--idle".to_owned(), "0".to_owned()]).unwrap();
        assert_eq!(options.idle, 0);
        assert!(parse(&["--fast".to_owned()]).is_err());
    }
}
