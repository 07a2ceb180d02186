//! One power-sync pass over many `redfish` nodes against an in-repo BMC simulator whose
//! every answer takes `--delay-ms`; prints the pass's wall time and the CPU time this process
//! spent (getrusage: user + system), then a second pass on warm connections.
//!
//!     cargo xtask bench-power-sync [-- --nodes 10000 --delay-ms 200 …]
//!
//! The simulator runs in a child process (this binary, `serve`), so its CPU is not counted.
//! It listens on one port at `--nodes / --nodes-per-bmc` loopback addresses (127.1.x.y) —
//! one BMC per address, each serving `--nodes-per-bmc` ComputerSystems, as a chassis manager
//! does — because the power sync limits requests per BMC *address*. Ten systems per BMC keeps
//! the two processes under the usual 20,000 open-file limit; `--nodes-per-bmc 1` models one
//! BMC per node where the limit allows.
#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark tool: a failed unwrap is a failed run, and it reports on stdout"
)]

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use ferric_conductor::{Conductor, ConductorConfig};
use ferric_db::Store;
use ferric_drivers::{BmcSettings, Drivers};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, PowerState};
use nix::sys::resource::{UsageWho, getrusage};
use serde_json::json;
use uuid::Uuid;

#[derive(Debug, Clone)]
struct Options {
    nodes: usize,
    delay_ms: u64,
    nodes_per_bmc: usize,
    workers: usize,
    per_bmc: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        nodes: 10_000,
        delay_ms: 200,
        nodes_per_bmc: 10,
        workers: ConductorConfig::default().power_sync_workers,
        per_bmc: ConductorConfig::default().power_sync_max_per_bmc,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value: usize = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?
            .parse()
            .with_context(|| format!("{flag} needs a number"))?;
        match flag.as_str() {
            "--nodes" => options.nodes = value,
            "--delay-ms" => options.delay_ms = value as u64,
            "--nodes-per-bmc" => options.nodes_per_bmc = value.max(1),
            "--workers" => options.workers = value,
            "--per-bmc" => options.per_bmc = value,
            other => bail!(
                "unknown flag {other}; known: --nodes --delay-ms --nodes-per-bmc --workers \
                 --per-bmc"
            ),
        }
    }
    Ok(options)
}

/// The loopback address of BMC number `index`.
fn bmc_address(index: usize) -> Ipv4Addr {
    let host = index as u32 + 1;
    Ipv4Addr::new(127, 1, (host >> 8) as u8, host as u8)
}

fn cpu_seconds() -> f64 {
    let usage = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let seconds =
        |time: nix::sys::time::TimeVal| time.tv_sec() as f64 + time.tv_usec() as f64 / 1_000_000.0;
    seconds(usage.user_time()) + seconds(usage.system_time())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Runtime::new()?;
    if args.first().map(String::as_str) == Some("serve") {
        let bmcs: usize = args.get(1).context("serve BMCS DELAY_MS")?.parse()?;
        let delay: u64 = args.get(2).context("serve BMCS DELAY_MS")?.parse()?;
        return runtime.block_on(serve(bmcs, Duration::from_millis(delay)));
    }
    let options = parse(&args)?;
    runtime.block_on(bench(options))
}

/// The simulator: every system is "On" if its number is even, else "Off", after `delay`;
/// `/count` says how many system reads it has answered.
async fn serve(bmcs: usize, delay: Duration) -> anyhow::Result<()> {
    let answered = Arc::new(AtomicU64::new(0));
    let counter = answered.clone();
    let router = Router::new()
        .route(
            "/redfish/v1/Systems/{id}",
            get(move |Path(id): Path<usize>| async move {
                tokio::time::sleep(delay).await;
                counter.fetch_add(1, Ordering::Relaxed);
                let state = if id % 2 == 0 { "On" } else { "Off" };
                axum::Json(json!({"Id": id.to_string(), "PowerState": state}))
            }),
        )
        .route(
            "/count",
            get(move || async move { answered.load(Ordering::Relaxed).to_string() }),
        );
    let first = tokio::net::TcpListener::bind((bmc_address(0), 0)).await?;
    let port = first.local_addr()?.port();
    let mut listeners = vec![first];
    for index in 1..bmcs {
        listeners.push(
            tokio::net::TcpListener::bind((bmc_address(index), port))
                .await
                .with_context(|| format!("bind {}:{port}", bmc_address(index)))?,
        );
    }
    for listener in listeners {
        let router = router.clone();
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    println!("ready {port}");
    // Until the parent closes our stdin (or dies).
    tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await?;
    Ok(())
}

async fn bench(options: Options) -> anyhow::Result<()> {
    let bmcs = options.nodes.div_ceil(options.nodes_per_bmc);
    let mut simulator = Command::new(std::env::current_exe()?)
        .args(["serve", &bmcs.to_string(), &options.delay_ms.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("start the BMC simulator")?;
    let mut ready = String::new();
    BufReader::new(simulator.stdout.take().context("simulator stdout")?).read_line(&mut ready)?;
    let port: u16 = ready
        .trim()
        .strip_prefix("ready ")
        .with_context(|| format!("the simulator said {ready:?}"))?
        .parse()?;

    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("bench.db").display().to_string()).await?;
    let setup = Instant::now();
    for index in 0..options.nodes {
        let mut node = Node::new(Uuid::new_v4(), "redfish", ProvisionState::Manageable);
        let bmc = bmc_address(index / options.nodes_per_bmc);
        node.driver_info = json!({
            "redfish_address": format!("http://{bmc}:{port}"),
            "redfish_system_id": format!("/redfish/v1/Systems/{index}"),
            "redfish_username": "admin",
            "redfish_password": "password",
            "redfish_auth_type": "basic",
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        // As recorded; the first pass reads it back unchanged.
        node.power_state = Some(if index % 2 == 0 {
            PowerState::On
        } else {
            PowerState::Off
        });
        store.node_create(&node).await?;
    }
    println!(
        "{} nodes on {bmcs} simulated BMCs answering after {} ms (set up in {:.1} s)",
        options.nodes,
        options.delay_ms,
        setup.elapsed().as_secs_f64()
    );

    let config = ConductorConfig {
        hostname: "bench".to_owned(),
        periodic: false,
        power_sync_workers: options.workers,
        power_sync_max_per_bmc: options.per_bmc,
        ..ConductorConfig::default()
    };
    let drivers = Drivers::default().with_bmc_settings(BmcSettings::default());
    let conductor = Conductor::new(store, drivers, config);
    conductor.start().await?;
    println!(
        "power sync: {} reads in flight at most, {} per BMC",
        options.workers, options.per_bmc
    );
    let count_url = format!("http://{}:{port}/count", bmc_address(0));
    let answered = async || -> anyhow::Result<u64> {
        Ok(reqwest::get(&count_url)
            .await?
            .text()
            .await?
            .trim()
            .parse()?)
    };
    for pass in [
        "first pass (cold connections)",
        "second pass (warm connections)",
    ] {
        let before = answered().await?;
        let cpu = cpu_seconds();
        let started = Instant::now();
        let changed = conductor.run_reconciler("power_sync").await?;
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        let reads = answered().await? - before;
        let status = conductor
            .reconciler_status()
            .into_iter()
            .find(|status| status.name == "power_sync");
        println!(
            "{pass}: wall {wall:.2} s, CPU {cpu:.2} s (user+system), {reads} reads answered, \
             {changed} nodes changed{}",
            status
                .and_then(|status| status.last_error)
                .map(|error| format!(", error: {error}"))
                .unwrap_or_default()
        );
    }
    conductor.shutdown(Duration::from_secs(5)).await;
    drop(simulator.stdin.take());
    let _ = simulator.kill();
    let _ = simulator.wait();
    Ok(())
}
