//! The fleet workload of `cargo xtask bench-compare` and `bench-api --fleet` (issue 26): C
//! client threads send a phase's request for every node while one poller reads the
//! collection until every node rests (`compare.rs` explains the figure).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::bench_http;

/// Runs `work(agent, n)` for every `n` below `count` on `threads` threads (each with its own
/// keep-alive connection); returns the results in the order of `n`.
pub(crate) fn parallel<T: Send>(
    count: usize,
    threads: usize,
    work: impl Fn(&ureq::Agent, usize) -> anyhow::Result<T> + Sync,
) -> anyhow::Result<Vec<T>> {
    parallel_until(count, threads, &AtomicBool::new(false), work)
}

/// [`parallel`] that also stops taking new work once `failed` is set from outside.
pub(crate) fn parallel_until<T: Send>(
    count: usize,
    threads: usize,
    failed: &AtomicBool,
    work: impl Fn(&ureq::Agent, usize) -> anyhow::Result<T> + Sync,
) -> anyhow::Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let mut results: Vec<(usize, T)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(count).max(1))
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<Vec<(usize, T)>> {
                    let agent = bench_http::agent();
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

/// How long a request may be refused, and how long a phase may go without one more node
/// coming to rest, before the run gives up (a slow server is slow, not stuck: Ironic's
/// 1,000-node cleaning takes longer than this in all, but never stalls this long).
pub(crate) const NODE_DEADLINE: Duration = Duration::from_secs(600);

/// Requests answered 409 (node locked) and 503 (no free worker) and sent again, since the
/// start: each cost its client a 20 ms pause, so they are shown beside each phase.
static RETRIED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// The retries since the start, as `(409s, 503s)`.
pub(crate) fn retried() -> (u64, u64) {
    (
        RETRIED[0].load(Ordering::Relaxed),
        RETRIED[1].load(Ordering::Relaxed),
    )
}

/// Sends `request` until the server takes it, waiting out 409 (node locked) and 503 (no free
/// worker): a busy server is slow, not wrong. Returns the status and body.
pub(crate) fn send(
    what: &str,
    request: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> anyhow::Result<(u16, Value)> {
    let deadline = Instant::now() + NODE_DEADLINE;
    loop {
        let mut response = request().with_context(|| what.to_owned())?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        if (status == 409 || status == 503) && Instant::now() < deadline {
            RETRIED[usize::from(status == 503)].fetch_add(1, Ordering::Relaxed);
            thread::sleep(Duration::from_millis(20));
            continue;
        }
        if status >= 300 {
            bail!("{what} answered {status}: {body}");
        }
        return Ok((status, body));
    }
}

pub(crate) fn create_node_with_port(
    agent: &ureq::Agent,
    endpoint: &str,
    round: usize,
    n: usize,
) -> anyhow::Result<String> {
    let (_, node) = send("POST /v1/nodes", || {
        agent
            .post(&format!("{endpoint}/v1/nodes"))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({
                "name": format!("fleet-{round}-{n:05}"),
                "driver": "fake-hardware",
                "resource_class": "baremetal",
            }))
    })?;
    let uuid = node["uuid"]
        .as_str()
        .context("the created node has no uuid")?
        .to_owned();
    send("POST /v1/ports", || {
        agent
            .post(&format!("{endpoint}/v1/ports"))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({ "node_uuid": uuid, "address": mac(round, n) }))
    })?;
    Ok(uuid)
}

/// A MAC address unique per fleet round and node, in QEMU's locally administered range.
pub(crate) fn mac(round: usize, n: usize) -> String {
    let [_, a, b, c] = u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes();
    format!("52:54:{:02x}:{a:02x}:{b:02x}:{c:02x}", round % 256)
}

/// How long the poller waits between two looks at the collection.
pub(crate) const POLL_PAUSE: Duration = Duration::from_millis(25);

/// One phase of the fleet: the clients send `target` for every node (each its share, no
/// waiting between nodes) while one poller reads the collection until every node rests in
/// `expect` with no reservation. Returns when the poll that saw it ended.
pub(crate) fn phase_until_rested(
    endpoint: &str,
    uuids: &[String],
    clients: usize,
    target: &str,
    expect: &str,
) -> anyhow::Result<Instant> {
    let sent = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let poller = scope.spawn(|| {
            let result = poll_until_rested(endpoint, uuids, expect, &sent, &stop);
            // A poller that gave up stops the senders too.
            stop.store(true, Ordering::Relaxed);
            result
        });
        let requests = parallel_until(uuids.len(), clients, &stop, |agent, n| {
            request_provision(agent, endpoint, &uuids[n], target)
        });
        sent.store(true, Ordering::Relaxed);
        if requests.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let rested = poller
            .join()
            .map_err(|_| anyhow::anyhow!("the poller thread panicked"))?;
        requests?;
        rested
    })
}

/// Reads `GET /v1/nodes?fields=…` page by page every [`POLL_PAUSE`] until each of `uuids`
/// is in `expect` with no target and no reservation (and every request has been sent); a
/// node in a failed state ends the run with its `last_error`.
pub(crate) fn poll_until_rested(
    endpoint: &str,
    uuids: &[String],
    expect: &str,
    sent: &AtomicBool,
    stop: &AtomicBool,
) -> anyhow::Result<Instant> {
    let agent = bench_http::agent();
    let wanted: std::collections::HashSet<&str> = uuids.iter().map(String::as_str).collect();
    let first = format!(
        "{endpoint}/v1/nodes?fields=uuid,provision_state,target_provision_state,reservation,\
         last_error&limit=1000"
    );
    let (mut most_resting, mut progress_at) = (0, Instant::now());
    loop {
        // Read before looking at the page: a poll that began before the last request was
        // sent cannot end the phase.
        let all_sent = sent.load(Ordering::Relaxed);
        let mut resting = 0;
        let mut busy = None;
        let mut url = Some(first.clone());
        while let Some(current) = url {
            let (_, body) = bench_http::timed_get(&agent, &current)?;
            for node in body["nodes"].as_array().into_iter().flatten() {
                let uuid = node["uuid"].as_str().unwrap_or_default();
                if !wanted.contains(uuid) {
                    continue;
                }
                let state = node["provision_state"].as_str().unwrap_or_default();
                if state == expect
                    && node["target_provision_state"].is_null()
                    && node["reservation"].is_null()
                {
                    resting += 1;
                } else if state.ends_with("failed") || state == "error" {
                    bail!(
                        "node {uuid} went to {state:?} instead of {expect:?}: {}",
                        node["last_error"]
                    );
                } else if busy.is_none() {
                    busy = Some(format!("{uuid} is {state:?}"));
                }
            }
            url = body["next"].as_str().map(str::to_owned);
        }
        if all_sent && resting == wanted.len() {
            return Ok(Instant::now());
        }
        if stop.load(Ordering::Relaxed) {
            bail!("the requests failed before every node reached {expect:?}");
        }
        if resting > most_resting {
            (most_resting, progress_at) = (resting, Instant::now());
        }
        if progress_at.elapsed() > NODE_DEADLINE {
            let busy = busy.unwrap_or_else(|| "some are missing from the listing".to_owned());
            bail!(
                "{resting} of {} nodes reached {expect:?}, none more in {NODE_DEADLINE:?}; {busy}",
                wanted.len()
            );
        }
        thread::sleep(POLL_PAUSE);
    }
}

/// Asks for `target` on one node; the poller follows it.
pub(crate) fn request_provision(
    agent: &ureq::Agent,
    endpoint: &str,
    uuid: &str,
    target: &str,
) -> anyhow::Result<()> {
    let url = format!("{endpoint}/v1/nodes/{uuid}/states/provision");
    send(&format!("PUT {url} target={target}"), || {
        agent
            .put(&url)
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send_json(json!({ "target": target }))
    })?;
    Ok(())
}

pub(crate) fn delete_node(agent: &ureq::Agent, endpoint: &str, uuid: &str) -> anyhow::Result<()> {
    let url = format!("{endpoint}/v1/nodes/{uuid}");
    send(&format!("DELETE {url}"), || {
        agent
            .delete(&url)
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .call()
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_unique_per_round_and_node() {
        assert_eq!(mac(1, 0x01_0203), "52:54:01:01:02:03");
        assert_ne!(mac(0, 7), mac(1, 7));
    }
}
