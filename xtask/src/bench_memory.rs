//! The memory side of `cargo xtask bench-api` (issue 26): the server's resident memory read
//! from `/proc/<pid>/status` (split into anonymous and file-backed pages, since the binary's
//! own code is ~16 MB of file-backed RSS that no allocator setting can shrink), a sampler of
//! its peak, and a fleet cycle (create → manage → provide → deploy → undeploy → delete on
//! fake-hardware) whose conductor work the idle figure after it shows.
//!
//! Theory of operation: plain threads with their own keep-alive connection (`ureq`), as in
//! `bench.rs`. Every figure is printed as it is measured; nothing here asserts a size, since
//! resident memory depends on the machine, the allocator and the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::bench;

/// The resident memory of one process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rss {
    /// `VmRSS`, bytes.
    pub(crate) total: u64,
    /// `RssAnon`, bytes: the heap, stacks and caches.
    pub(crate) anon: u64,
    /// `RssFile`, bytes: mostly the binary's own code.
    pub(crate) file: u64,
}

impl Rss {
    pub(crate) fn of(pid: u32) -> anyhow::Result<Self> {
        let path = format!("/proc/{pid}/status");
        let status =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        Ok(Self::parse(&status))
    }

    fn parse(status: &str) -> Self {
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
                .map_or(0, |kib: u64| kib * 1024)
        };
        Self {
            total: field("VmRSS:"),
            anon: field("RssAnon:"),
            file: field("RssFile:"),
        }
    }

    /// Prints `RSS <what>: 63.2 MB (anon 45.1, file 18.0)`.
    pub(crate) fn print(&self, what: &str) {
        println!(
            "  RSS {what}: {:.1} MB (anon {:.1}, file {:.1})",
            mb(self.total),
            mb(self.anon),
            mb(self.file)
        );
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Waits `seconds` with the server left alone, then prints its RSS as `idle <what>`.
pub(crate) fn idle(pid: u32, seconds: u64, what: &str) -> anyhow::Result<Rss> {
    thread::sleep(Duration::from_secs(seconds));
    let rss = Rss::of(pid)?;
    rss.print(&format!("idle {what} ({seconds} s after)"));
    Ok(rss)
}

/// Samples a process's resident memory every 100 ms and keeps the peak.
pub(crate) struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl PeakSampler {
    pub(crate) fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = Rss::of(pid) {
                        peak.fetch_max(rss.total, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// The peak so far, in bytes.
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How long one node may take to rest after a request before the run gives up on it.
const NODE_DEADLINE: Duration = Duration::from_secs(600);

/// One fleet cycle of `size` fake-hardware nodes with a port each, `clients` client threads:
/// every node through create → manage → provide → deploy → undeploy → delete, each client
/// following its node until it rests with its lease released. Prints each phase's time.
pub(crate) fn fleet_cycle(endpoint: &str, size: usize, clients: usize) -> anyhow::Result<()> {
    println!("fleet cycle of {size} nodes ({clients} client threads):");
    let started = Instant::now();
    let uuids = each(size, clients, |agent, n| create(agent, endpoint, n))?;
    println!(
        "  create (node + port): {:.2} s",
        started.elapsed().as_secs_f64()
    );
    for (target, expect) in [
        ("manage", "manageable"),
        ("provide", "available"),
        ("active", "active"),
        ("deleted", "available"),
    ] {
        let phase = Instant::now();
        each(size, clients, |agent, n| {
            provision(agent, endpoint, &uuids[n], target, expect)
        })?;
        println!("  {target}: {:.2} s", phase.elapsed().as_secs_f64());
    }
    let phase = Instant::now();
    each(size, clients, |agent, n| {
        let url = format!("{endpoint}/v1/nodes/{}", uuids[n]);
        send(&format!("DELETE {url}"), || {
            agent
                .delete(&url)
                .header("X-OpenStack-Ironic-API-Version", "latest")
                .call()
        })
        .map(drop)
    })?;
    println!("  delete: {:.2} s", phase.elapsed().as_secs_f64());
    println!("  total: {:.2} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs `work(agent, n)` for every `n` below `count` on `threads` threads; the results in the
/// order of `n`.
fn each<T: Send>(
    count: usize,
    threads: usize,
    work: impl Fn(&ureq::Agent, usize) -> anyhow::Result<T> + Sync,
) -> anyhow::Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let mut results: Vec<(usize, T)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, count.max(1)))
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<Vec<(usize, T)>> {
                    let agent = bench::agent();
                    let mut done = Vec::new();
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= count || failed.load(Ordering::Relaxed) {
                            return Ok(done);
                        }
                        match work(&agent, n) {
                            Ok(result) => done.push((n, result)),
                            Err(error) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(error);
                            }
                        }
                    }
                })
            })
            .collect();
        let mut all = Vec::with_capacity(count);
        for worker in workers {
            all.extend(
                worker
                    .join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
            );
        }
        anyhow::Ok(all)
    })?;
    results.sort_unstable_by_key(|(n, _)| *n);
    Ok(results.into_iter().map(|(_, result)| result).collect())
}

/// Sends `request` until the server takes it, waiting out 409 (node locked) and 503 (no free
/// worker). Returns the body.
fn send(
    what: &str,
    request: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + NODE_DEADLINE;
    loop {
        let mut response = request().with_context(|| what.to_owned())?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        if (status == 409 || status == 503) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
            continue;
        }
        if status >= 300 {
            bail!("{what} answered {status}: {body}");
        }
        return Ok(body);
    }
}

fn create(agent: &ureq::Agent, endpoint: &str, n: usize) -> anyhow::Result<String> {
    let node = send("POST /v1/nodes", || {
        agent
            .post(&format!("{endpoint}/v1/nodes"))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({
                "name": format!("cycle-{n:05}"),
                "driver": "fake-hardware",
                "resource_class": "baremetal",
            }))
    })?;
    let uuid = node["uuid"]
        .as_str()
        .context("the created node has no uuid")?
        .to_owned();
    let [_, a, b, c] = u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes();
    send("POST /v1/ports", || {
        agent
            .post(&format!("{endpoint}/v1/ports"))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({
                "node_uuid": uuid,
                "address": format!("52:54:fe:{a:02x}:{b:02x}:{c:02x}"),
            }))
    })?;
    Ok(uuid)
}

/// Asks for `target` and follows the node until it rests in `expect` with its lease released.
fn provision(
    agent: &ureq::Agent,
    endpoint: &str,
    uuid: &str,
    target: &str,
    expect: &str,
) -> anyhow::Result<()> {
    let url = format!("{endpoint}/v1/nodes/{uuid}/states/provision");
    send(&format!("PUT {url} target={target}"), || {
        agent
            .put(&url)
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({ "target": target }))
    })?;
    let url = format!(
        "{endpoint}/v1/nodes/{uuid}?fields=provision_state,target_provision_state,last_error,reservation"
    );
    let deadline = Instant::now() + NODE_DEADLINE;
    let mut pause = Duration::from_millis(5);
    loop {
        let (_, node) = bench::timed_get(agent, &url)?;
        let state = node["provision_state"].as_str().unwrap_or_default();
        if state == expect && node["target_provision_state"].is_null() {
            if node["reservation"].is_null() {
                return Ok(());
            }
        } else if state.ends_with("failed") || state == "error" {
            bail!(
                "node {uuid} went to {state:?} instead of {expect:?}: {}",
                node["last_error"]
            );
        }
        if Instant::now() > deadline {
            bail!("node {uuid} did not reach {expect:?} in {NODE_DEADLINE:?} (it is {state:?})");
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_from_proc_status() {
        let status = "Name:\tferric\nVmRSS:\t   65432 kB\nRssAnon:\t   40000 kB\n\
                      RssFile:\t   25000 kB\nRssShmem:\t     432 kB\n";
        let rss = Rss::parse(status);
        assert_eq!(rss.total, 65_432 * 1024);
        assert_eq!(rss.anon, 40_000 * 1024);
        assert_eq!(rss.file, 25_000 * 1024);
        assert_eq!(Rss::parse("Name:\tx\n"), Rss::default());
        // Our own process has resident memory.
        assert!(Rss::of(std::process::id()).unwrap().total > 0);
    }
}
