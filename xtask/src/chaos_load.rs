//! The workload and the watchers of `cargo xtask chaos`: client threads that keep every node
//! cycling through its life (deploy, undeploy, clean; aborts of waiting flows) and follow each
//! accepted request to its end, and a prober that asks both API processes every 100 ms
//! whether they answer.
//!
//! A client owns a share of the nodes and, in rounds, lists them (one page) through either
//! API and acts on each: a node resting in `available` is deployed, `active` undeployed,
//! `manageable` provided, `enroll` managed, `deploy failed` undeployed and `clean failed`
//! managed back, so failures the chaos causes are cycled out too. A node seen deploying or
//! cleaning (every fourth node's steps poll for half a second) is sometimes aborted
//! (`DELETE /v1/nodes/{node}/provision`). An accepted request (202) is pending until the node
//! is seen at rest; an accepted abort must leave it in the failed state of its flow. A request whose answer never came (a killed process, a dropped connection)
//! has an unknown outcome and is counted apart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The microversion the workload speaks.
const VERSION: &str = "1.78";

/// How long a node may stay in a transient state before that is a violation: the conductor's
/// own timeouts and takeover must have moved it on by then, failovers included.
pub(crate) const TRANSIENT_DEADLINE: Duration = Duration::from_secs(120);

/// Failed states: a node rests there, its `target_provision_state` still naming where the
/// flow was going (as Ironic keeps it).
fn failed(state: &str) -> bool {
    state.ends_with(" failed") || state == "error"
}

/// Whether a node in `state` rests (no conductor works on it): a stable state with no target,
/// or a failed state.
fn at_rest(node: &Value) -> bool {
    let state = node["provision_state"].as_str().unwrap_or_default();
    failed(state)
        || (matches!(state, "available" | "active" | "manageable" | "enroll")
            && node["target_provision_state"].is_null())
}

/// The next step of a resting node's life.
fn next_target(state: &str) -> Option<&'static str> {
    match state {
        "available" => Some("active"),
        "active" | "deploy failed" | "error" => Some("deleted"),
        "manageable" => Some("provide"),
        "enroll" | "clean failed" => Some("manage"),
        _ => None,
    }
}

/// The state an accepted abort (`DELETE /v1/nodes/{node}/provision`) must leave a node in,
/// by the state of the flow it stops.
fn aborted_to(state: &str) -> Option<&'static str> {
    match state {
        "deploying" | "wait call-back" => Some("deploy failed"),
        "cleaning" | "clean wait" => Some("clean failed"),
        _ => None,
    }
}

/// An HTTP client whose requests give up after `timeout` (a hung process is down).
pub(crate) fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// What the workload counted, shared by the client threads.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) accepted: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) unknown: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) aborts_accepted: AtomicU64,
    pub(crate) aborts_honoured: AtomicU64,
    pub(crate) rests_failed: AtomicU64,
    /// Violations, each with its description.
    pub(crate) violations: Mutex<Vec<String>>,
    /// Per node: requests accepted and of unknown outcome (for the history check).
    pub(crate) per_node: Mutex<BTreeMap<String, (u64, u64)>>,
}

impl Tally {
    pub(crate) fn violation(&self, text: String) {
        eprintln!("chaos: VIOLATION: {text}");
        if let Ok(mut violations) = self.violations.lock() {
            violations.push(text);
        }
    }

    fn count(&self, node: &str, accepted: u64, unknown: u64) {
        if let Ok(mut per_node) = self.per_node.lock() {
            let entry = per_node.entry(node.to_owned()).or_default();
            entry.0 += accepted;
            entry.1 += unknown;
        }
    }
}

/// One node as a client follows it.
#[derive(Debug, Default)]
struct Followed {
    /// Accepted and not yet seen ended: the target, and the state an abort must end in.
    pending: Vec<(String, Option<&'static str>)>,
    /// Since when the node has been seen in a transient state.
    transient_since: Option<Instant>,
    overdue: bool,
    /// Whether this flow has already been offered an abort.
    abort_tried: bool,
}

/// The flags the run steers the clients with.
#[derive(Debug, Default)]
pub(crate) struct Steering {
    /// No new requests (aborts neither): every node is left to come to rest.
    pub(crate) draining: AtomicBool,
    pub(crate) stop: AtomicBool,
}

/// Client thread `share` of `shares`: follows the nodes `uuids[n]` with `n % shares == share`
/// until stopped. `seed` varies which waiting flows are aborted.
pub(crate) fn client(
    apis: &[String],
    uuids: &[String],
    share: usize,
    shares: usize,
    seed: u64,
    tally: &Tally,
    steering: &Steering,
) {
    let agent = agent(Duration::from_secs(10));
    let mine: Vec<&String> = uuids.iter().skip(share).step_by(shares).collect();
    let mut followed: BTreeMap<&str, Followed> = mine
        .iter()
        .map(|uuid| (uuid.as_str(), Followed::default()))
        .collect();
    let mut random = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(share as u64)
        | 1;
    let mut round = 0usize;
    while !steering.stop.load(Ordering::Relaxed) {
        round += 1;
        let api = &apis[round % apis.len()];
        let Some(nodes) = list(&agent, api) else {
            thread::sleep(Duration::from_millis(100));
            continue;
        };
        let draining = steering.draining.load(Ordering::Relaxed);
        for node in &nodes {
            let uuid = node["uuid"].as_str().unwrap_or_default();
            let Some(follow) = followed.get_mut(uuid) else {
                continue;
            };
            let state = node["provision_state"].as_str().unwrap_or_default();
            if at_rest(node) {
                for (target, must_end) in follow.pending.drain(..) {
                    tally.completed.fetch_add(1, Ordering::Relaxed);
                    if let Some(expected) = must_end {
                        if state == expected {
                            tally.aborts_honoured.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.violation(format!(
                                "node {uuid}: an accepted abort ({target}) ended in {state:?}, \
                                 not {expected:?}"
                            ));
                        }
                    }
                }
                if failed(state) {
                    tally.rests_failed.fetch_add(1, Ordering::Relaxed);
                }
                follow.transient_since = None;
                follow.overdue = false;
                follow.abort_tried = false;
                if draining {
                    continue;
                }
                if let Some(target) = next_target(state) {
                    send(&agent, api, uuid, target, None, follow, tally);
                }
                continue;
            }
            let since = *follow.transient_since.get_or_insert_with(Instant::now);
            if since.elapsed() > TRANSIENT_DEADLINE && !follow.overdue {
                follow.overdue = true;
                tally.violation(format!(
                    "node {uuid} has been in transient state {state:?} for more than {} s",
                    TRANSIENT_DEADLINE.as_secs()
                ));
            }
            if let Some(expected) = aborted_to(state)
                && !draining
                && !follow.abort_tried
            {
                follow.abort_tried = true;
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                if random.is_multiple_of(3) {
                    abort(&agent, api, uuid, expected, follow, tally);
                }
            }
        }
        if draining && followed.values().all(|follow| follow.pending.is_empty()) {
            // Every request this client had accepted has ended.
            if nodes_all_rest(&nodes, &followed) {
                return;
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
    for (uuid, follow) in followed {
        for (target, _) in follow.pending {
            tally.violation(format!(
                "node {uuid}: the accepted request {target:?} never ended"
            ));
        }
    }
}

/// Whether every followed node of the listing rests.
fn nodes_all_rest(nodes: &[Value], followed: &BTreeMap<&str, Followed>) -> bool {
    nodes
        .iter()
        .filter(|node| followed.contains_key(node["uuid"].as_str().unwrap_or_default()))
        .all(at_rest)
}

/// Every node's state in one page, or `None` if the API did not answer.
fn list(agent: &ureq::Agent, api: &str) -> Option<Vec<Value>> {
    let url = format!(
        "{api}/v1/nodes?fields=uuid,provision_state,target_provision_state&limit=1000&\
         driver=fake-hardware"
    );
    let mut response = agent
        .get(&url)
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .call()
        .ok()?;
    if response.status().as_u16() != 200 {
        return None;
    }
    let body: Value = response.body_mut().read_json().ok()?;
    body["nodes"].as_array().cloned()
}

/// Asks for `target` on the node and records what came of it.
fn send(
    agent: &ureq::Agent,
    api: &str,
    uuid: &str,
    target: &str,
    must_end: Option<&'static str>,
    follow: &mut Followed,
    tally: &Tally,
) {
    let url = format!("{api}/v1/nodes/{uuid}/states/provision");
    let answer = agent
        .put(&url)
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send_json(json!({ "target": target }));
    record(answer, uuid, target, must_end, follow, tally);
}

/// Aborts the node's running flow (`DELETE /v1/nodes/{node}/provision`): once accepted, the
/// node must end in `must_end`.
fn abort(
    agent: &ureq::Agent,
    api: &str,
    uuid: &str,
    must_end: &'static str,
    follow: &mut Followed,
    tally: &Tally,
) {
    let answer = agent
        .delete(&format!("{api}/v1/nodes/{uuid}/provision"))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .call();
    record(answer, uuid, "abort", Some(must_end), follow, tally);
}

/// Counts what came of a request and follows it if it was accepted.
fn record(
    answer: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    uuid: &str,
    target: &str,
    must_end: Option<&'static str>,
    follow: &mut Followed,
    tally: &Tally,
) {
    // Aborts leave no "requested" transition of their own: the history check counts the rest.
    let counted = u64::from(must_end.is_none());
    match answer.map(|response| response.status().as_u16()) {
        Ok(202) => {
            tally.accepted.fetch_add(1, Ordering::Relaxed);
            tally.count(uuid, counted, 0);
            if must_end.is_some() {
                tally.aborts_accepted.fetch_add(1, Ordering::Relaxed);
            }
            follow.pending.push((target.to_owned(), must_end));
        }
        // Refused (locked, a state moved on): nothing happened.
        Ok(status) if status < 500 => {
            tally.refused.fetch_add(1, Ordering::Relaxed);
        }
        // No answer, or a failure after which the request may or may not have been recorded
        // (a 503 when the owner did not answer in time may still be carried out by it).
        Ok(_) | Err(_) => {
            tally.unknown.fetch_add(1, Ordering::Relaxed);
            tally.count(uuid, 0, counted);
        }
    }
}

/// What the prober saw: for each sample, the time and whether each API answered.
#[derive(Debug, Default)]
pub(crate) struct Availability {
    pub(crate) samples: Mutex<Vec<(Instant, Vec<bool>)>>,
    /// When each round of probes began and how long its answers took (a request that waits
    /// for the database to come back is answered late rather than refused).
    pub(crate) delays: Mutex<Vec<(Instant, Duration)>>,
}

impl Availability {
    /// The spans during which no API answered: (start, end) of each.
    pub(crate) fn outages(&self) -> Vec<(Instant, Instant)> {
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        let mut outages = Vec::new();
        let mut down_since: Option<Instant> = None;
        for (at, answered) in samples {
            let any = answered.iter().any(|ok| *ok);
            match (any, down_since) {
                (false, None) => down_since = Some(at),
                (true, Some(since)) => {
                    outages.push((since, at));
                    down_since = None;
                }
                _ => {}
            }
        }
        if let Some(since) = down_since {
            outages.push((since, Instant::now()));
        }
        outages
    }

    /// Samples taken and those in which an API answered, per API.
    pub(crate) fn answered(&self) -> (usize, Vec<usize>) {
        let samples = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        let apis = samples.first().map_or(0, |(_, answered)| answered.len());
        let per_api = (0..apis)
            .map(|api| samples.iter().filter(|(_, ok)| ok[api]).count())
            .collect();
        (samples.len(), per_api)
    }

    /// The longest a round of probes begun between `from` and `to` took to be answered.
    pub(crate) fn slowest(&self, from: Instant, to: Instant) -> Duration {
        self.delays
            .lock()
            .map(|delays| {
                delays
                    .iter()
                    .filter(|(at, _)| *at >= from && *at <= to)
                    .map(|(_, took)| *took)
                    .max()
                    .unwrap_or_default()
            })
            .unwrap_or_default()
    }
}

/// Asks every API for one node every 100 ms until stopped.
pub(crate) fn probe(apis: &[String], seen: &Availability, stop: &AtomicBool) {
    let agent = agent(Duration::from_secs(2));
    while !stop.load(Ordering::Relaxed) {
        let at = Instant::now();
        let answered = apis
            .iter()
            .map(|api| {
                agent
                    .get(&format!("{api}/v1/nodes?limit=1"))
                    .call()
                    .is_ok_and(|response| response.status().as_u16() == 200)
            })
            .collect();
        if let Ok(mut samples) = seen.samples.lock() {
            samples.push((at, answered));
        }
        if let Ok(mut delays) = seen.delays.lock() {
            delays.push((at, at.elapsed()));
        }
        thread::sleep(Duration::from_millis(100).saturating_sub(at.elapsed()));
    }
}

/// The history check: every node's history has one "requested through the API" entry for
/// each request accepted (202) on it, and at most one more for each request whose answer
/// never came. A lost entry or an invented one is a violation. Returns the entries read and,
/// per conductor, how many it wrote.
pub(crate) fn check_history(
    api: &str,
    tally: &Tally,
) -> anyhow::Result<(usize, BTreeMap<String, usize>)> {
    let agent = agent(Duration::from_secs(30));
    let per_node = tally.per_node.lock().map(|p| p.clone()).unwrap_or_default();
    let mut entries = 0;
    let mut writers: BTreeMap<String, usize> = BTreeMap::new();
    for (uuid, (accepted, unknown)) in per_node {
        let url = format!("{api}/v1/nodes/{uuid}/history?detail=true");
        let mut response = agent
            .get(&url)
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .call()?;
        let body: Value = response.body_mut().read_json()?;
        let history = body["history"].as_array().cloned().unwrap_or_default();
        entries += history.len();
        let requested = history
            .iter()
            .filter(|entry| {
                entry["event"]
                    .as_str()
                    .is_some_and(|event| event.contains("(requested through the API)"))
            })
            .count() as u64;
        for entry in &history {
            if let Some(conductor) = entry["conductor"].as_str() {
                *writers.entry(conductor.to_owned()).or_default() += 1;
            }
        }
        if requested < accepted || requested > accepted + unknown {
            tally.violation(format!(
                "node {uuid}: {requested} requested transitions in its history for {accepted} \
                 accepted requests (+{unknown} unanswered)"
            ));
        }
    }
    Ok((entries, writers))
}

/// Enrolls `count` fake-hardware nodes through `api` (available at once, microversion 1.10);
/// every fourth one's deploy and clean steps poll for a while, so its flows wait and can be
/// aborted. Returns their UUIDs.
pub(crate) fn enroll(api: &str, count: usize) -> anyhow::Result<Vec<String>> {
    let results = crate::fleet::parallel(count, 4, |agent, n| {
        let mut driver_info = json!({});
        if n % 4 == 0 {
            driver_info = json!({ "fake_poll": "deploy,clean", "fake_polls": 5 });
        }
        let (_, node) = crate::fleet::send("POST /v1/nodes", || {
            agent
                .post(&format!("{api}/v1/nodes"))
                .header("X-OpenStack-Ironic-API-Version", "1.10")
                .send_json(json!({
                    "name": format!("chaos-{n:05}"),
                    "driver": "fake-hardware",
                    "driver_info": driver_info,
                }))
        })?;
        Ok(node["uuid"].as_str().unwrap_or_default().to_owned())
    })?;
    Ok(results)
}

/// Starts the client threads and the prober; [`Load::finish`] drains and stops them.
pub(crate) struct Load {
    pub(crate) tally: Arc<Tally>,
    pub(crate) steering: Arc<Steering>,
    pub(crate) availability: Arc<Availability>,
    probe_stop: Arc<AtomicBool>,
    clients: Vec<thread::JoinHandle<()>>,
    prober: Option<thread::JoinHandle<()>>,
}

impl Load {
    pub(crate) fn start(apis: &[String], uuids: &[String], clients: usize, seed: u64) -> Self {
        let (tally, steering) = (Arc::new(Tally::default()), Arc::new(Steering::default()));
        let availability = Arc::new(Availability::default());
        let probe_stop = Arc::new(AtomicBool::new(false));
        let prober = {
            let (apis, seen, stop) = (apis.to_vec(), availability.clone(), probe_stop.clone());
            thread::spawn(move || probe(&apis, &seen, &stop))
        };
        let clients = (0..clients)
            .map(|share| {
                let (apis, uuids) = (apis.to_vec(), uuids.to_vec());
                let (tally, steering) = (tally.clone(), steering.clone());
                thread::spawn(move || {
                    client(&apis, &uuids, share, clients, seed, &tally, &steering);
                })
            })
            .collect();
        Self {
            tally,
            steering,
            availability,
            probe_stop,
            clients,
            prober: Some(prober),
        }
    }

    /// Stops new requests, waits up to `deadline` for every accepted one to end and every node
    /// to rest, then stops the clients (those still waiting report what never ended) and the
    /// prober. Returns how long the drain took.
    pub(crate) fn finish(&mut self, deadline: Duration) -> Duration {
        let started = Instant::now();
        self.steering.draining.store(true, Ordering::Relaxed);
        while started.elapsed() < deadline && self.clients.iter().any(|c| !c.is_finished()) {
            thread::sleep(Duration::from_millis(100));
        }
        let drained = started.elapsed();
        self.steering.stop.store(true, Ordering::Relaxed);
        for client in self.clients.drain(..) {
            let _ = client.join();
        }
        self.probe_stop.store(true, Ordering::Relaxed);
        if let Some(prober) = self.prober.take() {
            let _ = prober.join();
        }
        drained
    }
}
