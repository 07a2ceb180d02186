//! The client side of the API benchmarks (`bench-api`, `bench-compare`, `bench-scale`, the
//! fleet workload): a keep-alive `ureq` agent per thread, timed GETs (whole body read), listing
//! pages walked by their `next` links, enrolment from several threads, the single-node
//! throughput loop, nearest-rank percentiles, and `psql` for the benchmark databases. A leaf:
//! the benchmarks use it and it uses none of them.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The microversion the benchmarks send.
pub(crate) const VERSION: &str = "latest";

/// Runs `statement` on `database` of the local PostgreSQL (user postgres, trust).
pub(crate) fn psql(database: &str, statement: &str) -> anyhow::Result<()> {
    let status = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            database,
            "-q",
            "-c",
        ])
        .arg(statement)
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .status()
        .context("cannot run psql (run scripts/install-deps.sh first)")?;
    if !status.success() {
        bail!("psql -c {statement:?} failed ({status})");
    }
    Ok(())
}

pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Enrolls `count` nodes through `POST /v1/nodes` from `threads` threads; returns their UUIDs.
pub(crate) fn enroll(endpoint: &str, count: usize, threads: usize) -> anyhow::Result<Vec<String>> {
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let next = Arc::clone(&next);
            let url = format!("{endpoint}/v1/nodes");
            thread::spawn(move || -> anyhow::Result<Vec<String>> {
                let agent = agent();
                let mut uuids = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= count {
                        return Ok(uuids);
                    }
                    let mut response = agent
                        .post(&url)
                        .header("X-OpenStack-Ironic-API-Version", VERSION)
                        .send_json(node_body(n))
                        .context("POST /v1/nodes")?;
                    let status = response.status();
                    let body: Value = response.body_mut().read_json()?;
                    if status != 201 {
                        bail!("POST /v1/nodes answered {status}: {body}");
                    }
                    let uuid = body["uuid"]
                        .as_str()
                        .context("the created node has no uuid")?;
                    uuids.push(uuid.to_owned());
                }
            })
        })
        .collect();
    let mut uuids = Vec::with_capacity(count);
    for worker in workers {
        let part = worker
            .join()
            .map_err(|_| anyhow::anyhow!("an enrolling thread panicked"))??;
        uuids.extend(part);
    }
    Ok(uuids)
}

/// A node as an operator enrolls one: a BMC with a password, hardware properties, extras.
fn node_body(n: usize) -> Value {
    json!({
        "name": format!("bench-{n:05}"),
        "driver": "fake-hardware",
        "resource_class": "baremetal",
        "driver_info": {
            "ipmi_address": format!("10.{}.{}.{}", n / 65536, (n / 256) % 256, n % 256),
            "ipmi_username": "admin",
            "ipmi_password": "s3cret",
        },
        "properties": {
            "cpus": 64,
            "cpu_arch": "x86_64",
            "memory_mb": 262_144,
            "local_gb": 1800,
            "capabilities": "boot_mode:uefi",
        },
        "extra": { "rack": format!("r{:02}", n % 40), "slot": n % 42 },
    })
}

/// GETs `url`; returns the latency and the parsed body. Anything but 200 is an error.
pub(crate) fn timed_get(agent: &ureq::Agent, url: &str) -> anyhow::Result<(Duration, Value)> {
    let (timing, body) = timed_get_split(agent, url)?;
    Ok((timing.last_byte, body))
}

/// When a response's first and last bytes came, counted from sending its request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// The status line and headers read: the server has done its work (a listing's body is
    /// built whole before it is sent).
    pub(crate) first_byte: Duration,
    /// The whole body read: the page's latency.
    pub(crate) last_byte: Duration,
}

/// [`timed_get`] with the time to the first byte too. The body is parsed after the clock
/// stops: the client's JSON parsing is not the server's latency.
pub(crate) fn timed_get_split(agent: &ureq::Agent, url: &str) -> anyhow::Result<(Timing, Value)> {
    let started = Instant::now();
    let mut response = agent
        .get(url)
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .call()
        .with_context(|| format!("GET {url}"))?;
    let first_byte = started.elapsed();
    let body = response
        .body_mut()
        .with_config()
        .limit(256 * 1024 * 1024)
        .read_to_vec()?;
    let last_byte = started.elapsed();
    let status = response.status();
    if status != 200 {
        bail!(
            "GET {url} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let body = serde_json::from_slice(&body).with_context(|| format!("GET {url}: not JSON"))?;
    Ok((
        Timing {
            first_byte,
            last_byte,
        },
        body,
    ))
}

/// Follows a listing's `next` links to the end; returns the latency of each page.
pub(crate) fn walk_pages(agent: &ureq::Agent, first: &str) -> anyhow::Result<Vec<Duration>> {
    Ok(walk_pages_split(agent, first)?
        .into_iter()
        .map(|timing| timing.last_byte)
        .collect())
}

/// [`walk_pages`] with each page's time to the first byte too.
pub(crate) fn walk_pages_split(agent: &ureq::Agent, first: &str) -> anyhow::Result<Vec<Timing>> {
    let mut timings = Vec::new();
    let mut url = Some(first.to_owned());
    while let Some(current) = url {
        let (timing, body) = timed_get_split(agent, &current)?;
        timings.push(timing);
        url = body["next"].as_str().map(str::to_owned);
    }
    Ok(timings)
}

/// `threads` clients GET random nodes for `seconds`; returns the request count, every
/// latency and the wall time.
pub(crate) fn throughput(
    endpoint: &str,
    uuids: &[String],
    threads: usize,
    seconds: u64,
) -> anyhow::Result<(usize, Vec<Duration>, Duration)> {
    let uuids: Arc<Vec<String>> = Arc::new(uuids.to_vec());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..threads)
        .map(|thread_no| {
            let uuids = Arc::clone(&uuids);
            let endpoint = endpoint.to_owned();
            thread::spawn(move || -> anyhow::Result<Vec<Duration>> {
                let agent = agent();
                let mut latencies = Vec::new();
                let mut n = thread_no * 104_729;
                while Instant::now() < deadline {
                    n = n.wrapping_add(7919);
                    let uuid = &uuids[n % uuids.len()];
                    let url = format!("{endpoint}/v1/nodes/{uuid}");
                    let started = Instant::now();
                    let mut response = agent
                        .get(&url)
                        .header("X-OpenStack-Ironic-API-Version", VERSION)
                        .call()
                        .with_context(|| format!("GET {url}"))?;
                    let body = response.body_mut().read_to_vec()?;
                    latencies.push(started.elapsed());
                    if response.status() != 200 {
                        bail!(
                            "GET {url} answered {}: {}",
                            response.status(),
                            String::from_utf8_lossy(&body)
                        );
                    }
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(
            worker
                .join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
        );
    }
    Ok((latencies.len(), latencies, started.elapsed()))
}

/// Prints p50 and p99 (nearest rank) of `latencies`.
pub(crate) fn report(name: &str, latencies: &mut [Duration]) {
    latencies.sort_unstable();
    println!(
        "{name}: {} samples, p50 {}, p99 {}",
        latencies.len(),
        millis(percentile(latencies, 50)),
        millis(percentile(latencies, 99)),
    );
}

pub(crate) fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * percent).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 50), Duration::from_millis(50));
        assert_eq!(percentile(&sorted, 99), Duration::from_millis(99));
        assert_eq!(percentile(&sorted[..1], 99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }
}
