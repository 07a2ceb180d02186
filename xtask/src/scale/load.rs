//! The client side of `cargo xtask bench-scale` (`scale.rs`): the nodes it enrolls, the
//! detail-page walks, the deploy cycle, the power requests of the takeover, and Ironic's
//! enroll and detail page beside Ferric's.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::{ENROLL_VERSION, Options, Row, bmc_address, row};
use crate::bench_http::{self, percentile};
use crate::process::free_port;
use crate::server::RunningServer;

/// The body of node number `n`: fake-hardware below `cycle_nodes`, else redfish on the
/// simulator.
pub(crate) fn node_body(n: usize, options: &Options, port: u16) -> Value {
    if n < options.cycle_nodes {
        return json!({
            "name": format!("scale-{n:06}"),
            "driver": "fake-hardware",
            "properties": {"cpus": 64, "memory_mb": 262_144, "local_gb": 1800},
        });
    }
    let bmc = bmc_address((n - options.cycle_nodes) / options.nodes_per_bmc);
    json!({
        "name": format!("scale-{n:06}"),
        "driver": "redfish",
        "driver_info": {
            "redfish_address": format!("http://{bmc}:{port}"),
            "redfish_system_id": format!("/redfish/v1/Systems/{n}"),
            "redfish_username": "admin",
            "redfish_password": "password",
            "redfish_auth_type": "basic",
        },
        "properties": {"cpus": 64, "memory_mb": 262_144, "local_gb": 1800},
        "extra": {"rack": format!("r{:02}", n % 40)},
    })
}

/// Creates nodes `from..to` through the APIs alternately, `options.clients` at once.
pub(crate) fn enroll(
    endpoints: &[String],
    from: usize,
    to: usize,
    options: &Options,
    port: u16,
) -> anyhow::Result<()> {
    parallel(to - from, options.clients, |agent, i| {
        let n = from + i;
        let url = format!("{}/v1/nodes", endpoints[n % endpoints.len()]);
        send(&format!("POST {url}"), || {
            agent
                .post(&url)
                .header("X-OpenStack-Ironic-API-Version", ENROLL_VERSION)
                .send_json(node_body(n, options, port))
        })
        .map(drop)
    })
}

/// Times `GET /v1/nodes/detail?limit=1000` over the whole collection: a warm-up walk through
/// each API (each process has its own render cache, so one warm-up walk through the first
/// would leave the second cold for the first timed walk), then two timed walks, one through
/// each API.
pub(crate) fn detail_pages(
    endpoints: &[String],
    nodes: usize,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let agent = bench_http::agent();
    for endpoint in endpoints {
        bench_http::walk_pages(&agent, &format!("{endpoint}/v1/nodes/detail?limit=1000"))?;
    }
    let mut latencies = Vec::new();
    for walk in 0..2 {
        let url = format!(
            "{}/v1/nodes/detail?limit=1000",
            endpoints[walk % endpoints.len()]
        );
        latencies.extend(bench_http::walk_pages(&agent, &url)?);
    }
    latencies.sort_unstable();
    let (p50, p99) = (percentile(&latencies, 50), percentile(&latencies, 99));
    println!(
        "detail page of 1,000 at {nodes} nodes: p50 {:.1} ms, p99 {:.1} ms ({} pages)",
        p50.as_secs_f64() * 1000.0,
        p99.as_secs_f64() * 1000.0,
        latencies.len()
    );
    let target = if nodes >= 100_000 {
        "≤ 20 ms p50"
    } else {
        ""
    };
    rows.push(row(
        format!("detail page of 1,000 at {nodes} nodes: p50"),
        p50.as_secs_f64() * 1000.0,
        "ms",
        target,
    ));
    rows.push(row(
        format!("detail page of 1,000 at {nodes} nodes: p99"),
        p99.as_secs_f64() * 1000.0,
        "ms",
        "",
    ));
    Ok(())
}

/// Every fake-hardware node, with `fields`, through `endpoint`.
pub(crate) fn fake_nodes(
    agent: &ureq::Agent,
    endpoint: &str,
    fields: &str,
) -> anyhow::Result<Vec<Value>> {
    let mut nodes = Vec::new();
    let mut url = Some(format!(
        "{endpoint}/v1/nodes?driver=fake-hardware&limit=1000&fields={fields}"
    ));
    while let Some(current) = url {
        let (_, body) = bench_http::timed_get(agent, &current)?;
        nodes.extend(body["nodes"].as_array().cloned().unwrap_or_default());
        url = body["next"].as_str().map(str::to_owned);
    }
    Ok(nodes)
}

/// Deploys every fake-hardware node, then undeploys them: each phase sends every request,
/// then polls the collection until all rest.
pub(crate) fn deploy_cycle(
    endpoints: &[String],
    options: &Options,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let agent = bench_http::agent();
    let fields = "uuid,provision_state,target_provision_state,last_error";
    let uuids: Vec<String> = fake_nodes(&agent, &endpoints[0], "uuid")?
        .iter()
        .filter_map(|node| node["uuid"].as_str().map(str::to_owned))
        .collect();
    if uuids.len() != options.cycle_nodes {
        bail!(
            "{} fake-hardware nodes listed, {} enrolled",
            uuids.len(),
            options.cycle_nodes
        );
    }
    let mut total = Duration::ZERO;
    for (name, target, rest) in [
        ("deploy", "active", "active"),
        ("undeploy", "deleted", "available"),
    ] {
        let started = Instant::now();
        parallel(uuids.len(), options.clients, |agent, n| {
            let url = format!(
                "{}/v1/nodes/{}/states/provision",
                endpoints[n % endpoints.len()],
                uuids[n]
            );
            send(&format!("PUT {url} target={target}"), || {
                agent
                    .put(&url)
                    .header("X-OpenStack-Ironic-API-Version", "latest")
                    .send_json(json!({"target": target}))
            })
            .map(drop)
        })?;
        let sent = started.elapsed();
        let deadline = Instant::now() + Duration::from_secs(1800);
        loop {
            let nodes = fake_nodes(&agent, &endpoints[0], fields)?;
            if let Some(failed) = nodes.iter().find(|node| {
                node["provision_state"]
                    .as_str()
                    .is_some_and(|state| state.ends_with("failed") || state == "error")
            }) {
                bail!("{name}: a node failed: {failed}");
            }
            let resting = nodes
                .iter()
                .filter(|node| {
                    node["provision_state"] == rest && node["target_provision_state"].is_null()
                })
                .count();
            if resting == uuids.len() {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{name}: only {resting} of {} nodes rest in {rest} after 30 minutes",
                    uuids.len()
                );
            }
            thread::sleep(Duration::from_millis(500));
        }
        let elapsed = started.elapsed();
        total += elapsed;
        println!(
            "{name} of {} nodes: requests sent in {:.1} s, all {rest} after {:.1} s",
            uuids.len(),
            sent.as_secs_f64(),
            elapsed.as_secs_f64()
        );
        rows.push(row(
            format!("{} nodes: {name} (→ {rest})", uuids.len()),
            elapsed.as_secs_f64(),
            "s",
            "",
        ));
    }
    rows.push(row(
        format!("{}-node deploy cycle (deploy + undeploy)", uuids.len()),
        total.as_secs_f64(),
        "s",
        "≤ 120 s at 10,000",
    ));
    Ok(())
}

pub(crate) fn power(
    agent: &ureq::Agent,
    endpoint: &str,
    uuid: &str,
    target: &str,
) -> anyhow::Result<()> {
    let url = format!("{endpoint}/v1/nodes/{uuid}/states/power");
    send(&format!("PUT {url} target={target}"), || {
        agent
            .put(&url)
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({"target": target}))
    })?;
    wait_for_power(
        agent,
        endpoint,
        uuid,
        target,
        Instant::now() + Duration::from_secs(60),
    )
}

pub(crate) fn wait_for_power(
    agent: &ureq::Agent,
    endpoint: &str,
    uuid: &str,
    state: &str,
    deadline: Instant,
) -> anyhow::Result<()> {
    let url = format!("{endpoint}/v1/nodes/{uuid}?fields=power_state,target_power_state");
    loop {
        let (_, node) = bench_http::timed_get(agent, &url)?;
        if node["power_state"] == state && node["target_power_state"].is_null() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("node {uuid} did not reach {state:?}: {node}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `request` until the server takes it, waiting out 409 (locked) and 503 (no free
/// worker, or an owner that just died): a busy server is slow, not wrong.
fn send(
    what: &str,
    request: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut response = request().with_context(|| what.to_owned())?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        if (status == 409 || status == 503) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
            continue;
        }
        if status >= 300 {
            bail!("{what} answered {status}: {body}");
        }
        return Ok(serde_json::from_str(&body).unwrap_or(Value::Null));
    }
}

/// Runs `work(agent, n)` for every `n` below `count` on `threads` threads, each with its own
/// keep-alive connection; stops at the first error.
fn parallel(
    count: usize,
    threads: usize,
    work: impl Fn(&ureq::Agent, usize) -> anyhow::Result<()> + Sync,
) -> anyhow::Result<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(count).max(1))
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<()> {
                    let agent = bench_http::agent();
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= count || failed.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        if let Err(error) = work(&agent, n) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(error);
                        }
                    }
                })
            })
            .collect();
        for worker in workers {
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        }
        Ok(())
    })
}

/// Ironic 39 standalone (SQLite, one process): enroll and the detail page at
/// `--ironic-nodes`, beside Ferric's figures at the same size when it measured them.
pub(crate) fn ironic(
    root: &Path,
    run_dir: &Path,
    options: &Options,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let dir = run_dir.join("ironic");
    std::fs::create_dir_all(&dir)?;
    let server = RunningServer::ironic(root, &dir, free_port()?)?;
    let nodes = options.ironic_nodes;
    println!("bench-scale: ironic at {} ({nodes} nodes)", server.endpoint);
    let endpoints = vec![server.endpoint.clone()];
    let ironic_options = Options {
        nodes,
        cycle_nodes: nodes,
        ..options.clone()
    };
    let started = Instant::now();
    enroll(&endpoints, 0, nodes, &ironic_options, 0)?;
    let rate = nodes as f64 / started.elapsed().as_secs_f64().max(f64::EPSILON);
    let mut ironic_rows = Vec::new();
    detail_pages(&endpoints, nodes, &mut ironic_rows)?;
    drop(server);
    let mut enroll_row = row(
        format!("Ironic 39 (SQLite, one process): enroll {nodes} nodes"),
        rate,
        "nodes/s",
        "",
    );
    enroll_row.ironic = Some(enroll_row.ferric.clone());
    enroll_row.ferric = "-".to_owned();
    rows.push(enroll_row);
    for mut ironic_row in ironic_rows {
        ironic_row.name = format!("Ironic 39 (SQLite, one process): {}", ironic_row.name);
        ironic_row.ironic = Some(std::mem::replace(&mut ironic_row.ferric, "-".to_owned()));
        ironic_row.target = "";
        rows.push(ironic_row);
    }
    Ok(())
}
