//! Rolling upgrade (issue 28): two `--role api` and two `--role conductor` processes of
//! release N — a real older build, the `ferric` binary of a commit named in
//! `xtask/src/upgrade.rs`, which `cargo xtask rolling-upgrade` builds once and caches — share
//! one fresh PostgreSQL database while a fleet of fake-hardware nodes goes round
//! manage → provide → deploy → undeploy through the APIs. The processes are replaced one by
//! one with this build (N+1), first pinned to release N's hand-off version
//! (`pin_handoff_version`, read from release N's own start-up log: a release that logs none
//! speaks version 1), then once more without the pin. The workload sends its requests as a
//! client behind a load balancer would (and also, once per round, lists each node's vendor
//! methods, an action of hand-off version 2 that a version 1 conductor does not know, and
//! sends a request of this build's newest version, which only unpinned APIs may run:
//! [`probe_newest`]): to the APIs in the pool, an API being replaced taken out of the pool (drained) first, and a 409
//! NodeLocked or a 503 retried as openstacksdk retries them. No request may fail otherwise,
//! every node must keep going round, and at the end no node is left in a transient or failed
//! state. It counts and prints the requests made, the failed ones and the nodes stuck; the
//! last two must be 0. Nothing here depends on how fast the machine is: every wait is bounded
//! only to turn a hang into a failure that says what it waited for.
//!
//! Ignored in plain test runs because it needs release N's binary: `cargo xtask
//! rolling-upgrade` (part of `cargo xtask ci`) builds it and runs this with
//! `FERRIC_RELEASE_N_BIN` set, once for each older release it covers.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ferric_model::ProvisionState;
use ferric_model::action::HANDOFF_VERSION;
use serde_json::{Value, json};

const NODES: usize = 12;
const CLIENTS: usize = 4;
const VERSION: &str = "1.80";
/// Full rounds (enroll or available → active → available) every node must make in each
/// phase of the upgrade.
const ROUNDS_PER_PHASE: usize = 1;

/// Which build a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Release N: the older binary.
    Old,
    /// This build, pinned to release N's hand-off version.
    NewPinned,
    /// This build, unpinned.
    New,
}

struct Fleet {
    dir: tempfile::TempDir,
    database: String,
    old_binary: PathBuf,
    /// Release N's hand-off version, learnt from its first process's start-up log: what the
    /// pinned processes are pinned to.
    old_handoff: Cell<Option<u32>>,
}

impl Fleet {
    fn start(&self, release: Release, role: &str, hostname: &str) -> Server {
        let mut env = vec![
            ("FERRIC_CONDUCTOR_HOSTNAME", hostname.to_owned()),
            ("FERRIC_ENABLED_HARDWARE_TYPES", "fake-hardware".to_owned()),
            ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0".to_owned()),
            ("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
            ("FERRIC_NODE_LEASE_TIMEOUT", "3".to_owned()),
            ("FERRIC_CONDUCTOR_HEARTBEAT_INTERVAL", "1".to_owned()),
            ("FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT", "4".to_owned()),
            ("FERRIC_CONDUCTOR_REQUEST_TIMEOUT", "5".to_owned()),
            ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
            ("FERRIC_LOG_LEVEL", "warn,ferric=info".to_owned()),
        ];
        if release == Release::NewPinned {
            let pin = self
                .old_handoff
                .get()
                .expect("release N runs before a pinned process starts");
            env.push(("FERRIC_PIN_HANDOFF_VERSION", pin.to_string()));
        }
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(key, value)| (*key, value.as_str()))
            .collect();
        let ready = if role == "conductor" {
            "conductor running"
        } else {
            "Bare Metal API listening"
        };
        let program = match release {
            Release::Old => self.old_binary.clone(),
            Release::NewPinned | Release::New => PathBuf::from(env!("CARGO_BIN_EXE_ferric")),
        };
        let server = Server::start_program_until(
            &program,
            self.dir.path(),
            &["--database-url", &self.database, "--role", role],
            &env,
            ready,
        );
        // Release N really is the older build: it speaks an older hand-off version (version 1
        // logged none); this build logs the one it speaks and the one it sends.
        let handoff = server
            .startup_log
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|record| {
                record["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("conductor hand-off"))
            });
        let logged = |record: &Value, field: &str| -> u32 {
            let value = record[field]
                .as_u64()
                .unwrap_or_else(|| panic!("{field}: {record}"));
            u32::try_from(value).unwrap()
        };
        match (release, handoff) {
            (Release::Old, record) => {
                let speaks = record.as_ref().map_or(1, |record| {
                    assert_eq!(
                        logged(record, "sends"),
                        logged(record, "handoff_version"),
                        "release N must not be pinned: {record}"
                    );
                    logged(record, "handoff_version")
                });
                assert!(
                    speaks < HANDOFF_VERSION,
                    "release N speaks hand-off version {speaks}, this build {HANDOFF_VERSION}: \
                     FERRIC_RELEASE_N_BIN is not an older release"
                );
                let first = *self.old_handoff.get().get_or_insert(speaks);
                assert_eq!(first, speaks, "release N's processes disagree");
                self.old_handoff.set(Some(speaks));
            }
            (Release::NewPinned, Some(record)) => {
                assert_eq!(logged(&record, "handoff_version"), HANDOFF_VERSION);
                assert_eq!(
                    Some(logged(&record, "sends")),
                    self.old_handoff.get(),
                    "{record}"
                );
            }
            (Release::New, Some(record)) => {
                assert_eq!(logged(&record, "handoff_version"), HANDOFF_VERSION);
                assert_eq!(logged(&record, "sends"), HANDOFF_VERSION, "{record}");
            }
            (release, None) => panic!("{release:?} {role} logged no hand-off version"),
        }
        server
    }
}

/// The load balancer's view: the APIs requests may go to, with the build each runs. Taking
/// the write lock drains one (waits for the requests in flight, which hold the read lock).
type Pool = Arc<RwLock<Vec<(String, Release)>>>;

#[derive(Default)]
struct Tally {
    requests: AtomicUsize,
    retried: AtomicUsize,
    failures: Mutex<Vec<String>>,
    /// Completed rounds per node.
    rounds: Vec<AtomicUsize>,
    /// Requests of the newest hand-off version answered by an older API (no such endpoint),
    /// refused by a pinned API, and run.
    newest_unknown: AtomicUsize,
    newest_refused: AtomicUsize,
    newest_ran: AtomicUsize,
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// What an API of the pool answered, NodeLocked and 503 retried.
struct Answer {
    api: String,
    release: Release,
    status: reqwest::StatusCode,
    text: String,
}

/// Sends one request to an API in the pool, retrying NodeLocked and 503 as openstacksdk
/// does; `Err` says why no answer came.
fn exchange(
    http: &reqwest::blocking::Client,
    pool: &Pool,
    tally: &Tally,
    turn: usize,
    method: &reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> Result<Answer, String> {
    let mut last = String::new();
    for attempt in 0..60 {
        let apis = pool.read().unwrap();
        let (api, release) = apis[(turn + attempt) % apis.len()].clone();
        let mut request = http
            .request(method.clone(), format!("http://{api}{path}"))
            .header("X-OpenStack-Ironic-API-Version", VERSION);
        if let Some(body) = body {
            request = request.json(body);
        }
        tally.requests.fetch_add(1, Ordering::Relaxed);
        let response = request
            .send()
            .map_err(|error| format!("{method} {path} on {api} ({release:?}): {error}"))?;
        let status = response.status();
        let text = response.text().unwrap_or_default();
        drop(apis);
        let locked = status == 409 && text.contains("locked");
        if locked || status == 503 {
            tally.retried.fetch_add(1, Ordering::Relaxed);
            last = format!("{status} {text} from {api} ({release:?})");
            thread::sleep(Duration::from_millis(250));
            continue;
        }
        return Ok(Answer {
            api,
            release,
            status,
            text,
        });
    }
    Err(format!(
        "{method} {path}: still locked or unavailable after 60 tries, last: {last}"
    ))
}

/// [`exchange`], a success expected: its JSON body, or the failure recorded.
fn send(
    http: &reqwest::blocking::Client,
    pool: &Pool,
    tally: &Tally,
    turn: usize,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> Option<Value> {
    let failure = match exchange(http, pool, tally, turn, &method, path, body) {
        Ok(answer) if answer.status.is_success() => {
            return Some(serde_json::from_str(&answer.text).unwrap_or(Value::Null));
        }
        Ok(answer) => format!(
            "{method} {path} on {} ({:?}): {} {}",
            answer.api, answer.release, answer.status, answer.text
        ),
        Err(failure) => failure,
    };
    tally.failures.lock().unwrap().push(failure);
    None
}

/// A request of this build's newest hand-off version, which no older conductor knows:
/// `PUT …/management/indicators/led@system` (`set_indicator`, version 4; fake hardware's
/// settable LED, turned off). An older API has no such endpoint (404 or 405); a pinned API
/// refuses it (409 naming pin_handoff_version) before sending it anywhere; an unpinned one
/// runs it (204).
/// Any other answer — above all a 503 or 500 from a conductor that could not read it — is a
/// failure, recorded. Whether it went as expected.
fn probe_newest(
    http: &reqwest::blocking::Client,
    pool: &Pool,
    tally: &Tally,
    turn: usize,
    uuid: &str,
) -> bool {
    let path = format!("/v1/nodes/{uuid}/management/indicators/led@system");
    let body = json!({"state": "off"});
    let answer = match exchange(
        http,
        pool,
        tally,
        turn,
        &reqwest::Method::PUT,
        &path,
        Some(&body),
    ) {
        Ok(answer) => answer,
        Err(failure) => {
            tally.failures.lock().unwrap().push(failure);
            return false;
        }
    };
    let counter = match (answer.release, answer.status.as_u16()) {
        (Release::Old, 404 | 405) => &tally.newest_unknown,
        (Release::NewPinned, 409) if answer.text.contains("pin_handoff_version") => {
            &tally.newest_refused
        }
        (Release::New, 204) => &tally.newest_ran,
        _ => {
            tally.failures.lock().unwrap().push(format!(
                "PUT {path} (hand-off version {HANDOFF_VERSION}) on {} ({:?}): {} {}",
                answer.api, answer.release, answer.status, answer.text
            ));
            return false;
        }
    };
    counter.fetch_add(1, Ordering::Relaxed);
    true
}

fn state_of(node: &Value) -> ProvisionState {
    ProvisionState::from_str(node["provision_state"].as_str().unwrap()).unwrap()
}

/// One client's loop over its nodes until `stop`: the next verb for each node that rests.
fn drive(pool: &Pool, tally: &Tally, nodes: &[(usize, String)], stop: &AtomicBool) {
    let http = client();
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        for (index, uuid) in nodes {
            turn += 1;
            let path = format!("/v1/nodes/{uuid}");
            let Some(node) = send(&http, pool, tally, turn, reqwest::Method::GET, &path, None)
            else {
                return;
            };
            let state = state_of(&node);
            let verb = match state {
                ProvisionState::Enroll => "manage",
                ProvisionState::Manageable => "provide",
                ProvisionState::Available => "active",
                ProvisionState::Active => "deleted",
                _ if state.is_failure() => {
                    tally.failures.lock().unwrap().push(format!(
                        "node {uuid} failed: {} ({})",
                        node["provision_state"], node["last_error"]
                    ));
                    return;
                }
                _ => continue,
            };
            if state == ProvisionState::Available && !probe_newest(&http, pool, tally, turn, uuid) {
                return;
            }
            let body = json!({"target": verb});
            let path = format!("/v1/nodes/{uuid}/states/provision");
            if send(
                &http,
                pool,
                tally,
                turn,
                reqwest::Method::PUT,
                &path,
                Some(&body),
            )
            .is_none()
            {
                return;
            }
            if verb == "deleted" {
                tally.rounds[*index].fetch_add(1, Ordering::Relaxed);
                // A hand-off version 2 action: a process pinned to version 1 answers it
                // itself, as a version 1 conductor would not know it.
                let path = format!("/v1/nodes/{uuid}/vendor_passthru/methods");
                if send(&http, pool, tally, turn, reqwest::Method::GET, &path, None).is_none() {
                    return;
                }
            }
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until every node made `rounds` more rounds than `from`, or a failure.
fn wait_rounds(tally: &Tally, from: &[usize], rounds: usize, phase: &str, started: Instant) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let failures = tally.failures.lock().unwrap().clone();
        if !failures.is_empty() {
            report(tally, 0, started);
            panic!("{phase}: failed requests: {failures:#?}");
        }
        let behind = tally
            .rounds
            .iter()
            .zip(from)
            .filter(|(done, from)| done.load(Ordering::Relaxed) < *from + rounds)
            .count();
        if behind == 0 {
            return;
        }
        if Instant::now() >= deadline {
            report(tally, behind, started);
            panic!("{phase}: {behind} nodes did not make a round in 120 s");
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The counts a run ends with (also printed when it fails): requests made, retried, failed,
/// node rounds, nodes stuck.
fn report(tally: &Tally, stuck: usize, started: Instant) {
    eprintln!(
        "rolling upgrade: {} requests, {} retried (NodeLocked or 503), {} failed, {} node \
         rounds, {stuck} nodes stuck, {:.1} s; hand-off version {HANDOFF_VERSION} requests: {} \
         unknown to release N's APIs, {} refused by pinned APIs, {} run",
        tally.requests.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
        tally.failures.lock().unwrap().len(),
        rounds(tally).iter().sum::<usize>(),
        started.elapsed().as_secs_f64(),
        tally.newest_unknown.load(Ordering::Relaxed),
        tally.newest_refused.load(Ordering::Relaxed),
        tally.newest_ran.load(Ordering::Relaxed),
    );
}

fn rounds(tally: &Tally) -> Vec<usize> {
    tally
        .rounds
        .iter()
        .map(|done| done.load(Ordering::Relaxed))
        .collect()
}

/// Takes `api` out of the pool (waiting for its requests in flight), stops it, starts its
/// replacement and puts that in the pool.
fn replace_api(fleet: &Fleet, pool: &Pool, api: &mut Server, release: Release, name: &str) {
    pool.write()
        .unwrap()
        .retain(|(address, _)| *address != api.address);
    assert!(api.terminate(), "{name} did not stop cleanly");
    *api = fleet.start(release, "api", name);
    pool.write().unwrap().push((api.address.clone(), release));
}

fn replace_conductor(fleet: &Fleet, conductor: &mut Server, release: Release, name: &str) {
    assert!(conductor.terminate(), "{name} did not stop cleanly");
    *conductor = fleet.start(release, "conductor", name);
}

#[test]
#[ignore = "needs release N's binary: run `cargo xtask rolling-upgrade`"]
fn processes_are_replaced_one_by_one_under_a_running_workload() {
    let old_binary = PathBuf::from(std::env::var_os("FERRIC_RELEASE_N_BIN").expect(
        "FERRIC_RELEASE_N_BIN names release N's ferric binary; `cargo xtask rolling-upgrade` \
         builds it and sets it",
    ));
    assert!(
        Path::new(&old_binary).is_file(),
        "{} does not exist",
        old_binary.display()
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let fleet = Fleet {
        dir: tempfile::tempdir().unwrap(),
        database: database.url.clone(),
        old_binary,
        old_handoff: Cell::new(None),
    };
    let started = Instant::now();

    // Release N everywhere: the schema is N's (the conductor upgrades the empty database).
    let mut conductors = [
        fleet.start(Release::Old, "conductor", "conductor-0"),
        fleet.start(Release::Old, "conductor", "conductor-1"),
    ];
    let mut apis = [
        fleet.start(Release::Old, "api", "api-0"),
        fleet.start(Release::Old, "api", "api-1"),
    ];
    let pool: Pool = Arc::new(RwLock::new(
        apis.iter()
            .map(|api| (api.address.clone(), Release::Old))
            .collect(),
    ));
    let tally = Arc::new(Tally {
        rounds: (0..NODES).map(|_| AtomicUsize::new(0)).collect(),
        ..Tally::default()
    });

    // The fleet, through the two APIs.
    let http = client();
    let nodes: Vec<(usize, String)> = (0..NODES)
        .map(|n| {
            let created = send(
                &http,
                &pool,
                &tally,
                n,
                reqwest::Method::POST,
                "/v1/nodes",
                Some(&json!({
                    "driver": "fake-hardware",
                    "name": format!("rolling-{n}"),
                    "driver_info": {"fake_delay": 0.2},
                })),
            )
            .unwrap();
            (n, created["uuid"].as_str().unwrap().to_owned())
        })
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mine: Vec<(usize, String)> = nodes
                .iter()
                .filter(|(n, _)| n % CLIENTS == client)
                .cloned()
                .collect();
            let (pool, tally, stop) = (pool.clone(), tally.clone(), stop.clone());
            thread::spawn(move || drive(&pool, &tally, &mine, &stop))
        })
        .collect();

    let phase = |name: &str, step: &mut dyn FnMut()| {
        let from = rounds(&tally);
        let at = Instant::now();
        step();
        wait_rounds(&tally, &from, ROUNDS_PER_PHASE, name, started);
        eprintln!("{name}: {:.1} s", at.elapsed().as_secs_f64());
    };
    phase("release N only", &mut || {});
    phase("api-1 on N+1 (pinned)", &mut || {
        replace_api(&fleet, &pool, &mut apis[1], Release::NewPinned, "api-1");
    });
    phase("api-0 on N+1 (pinned)", &mut || {
        replace_api(&fleet, &pool, &mut apis[0], Release::NewPinned, "api-0");
    });
    phase("conductor-0 on N+1 (pinned)", &mut || {
        replace_conductor(
            &fleet,
            &mut conductors[0],
            Release::NewPinned,
            "conductor-0",
        );
    });
    phase("conductor-1 on N+1 (pinned)", &mut || {
        replace_conductor(
            &fleet,
            &mut conductors[1],
            Release::NewPinned,
            "conductor-1",
        );
    });
    phase("pin removed, conductors", &mut || {
        replace_conductor(&fleet, &mut conductors[0], Release::New, "conductor-0");
        replace_conductor(&fleet, &mut conductors[1], Release::New, "conductor-1");
    });
    phase("pin removed, APIs", &mut || {
        replace_api(&fleet, &pool, &mut apis[0], Release::New, "api-0");
        replace_api(&fleet, &pool, &mut apis[1], Release::New, "api-1");
    });

    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }

    // Nothing left stuck: every node comes to rest in a stable, non-failed state, with no
    // target and no lock, within a bounded wait (the last rounds' transitions finish first).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut stuck = Vec::new();
    for (_, uuid) in &nodes {
        loop {
            let path = format!("/v1/nodes/{uuid}");
            let Some(node) = send(&http, &pool, &tally, 0, reqwest::Method::GET, &path, None)
            else {
                stuck.push(format!("node {uuid}: cannot read it"));
                break;
            };
            let state = state_of(&node);
            if state.is_failure() {
                stuck.push(format!("node {uuid} failed: {node}"));
                break;
            }
            if state.is_stable()
                && node["target_provision_state"].is_null()
                && node["reservation"].is_null()
            {
                break;
            }
            if Instant::now() >= deadline {
                stuck.push(format!("node {uuid} did not come to rest in 60 s: {node}"));
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
    // Upgraded and unpinned, every API runs the newest version's requests on every node.
    for (_, uuid) in &nodes {
        for turn in 0..apis.len() {
            probe_newest(&http, &pool, &tally, turn, uuid);
        }
    }
    report(&tally, stuck.len(), started);
    let failures = tally.failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "failed requests: {failures:#?}");
    assert!(stuck.is_empty(), "nodes stuck: {stuck:#?}");
    // Every node passed `available` while only release N's APIs served, and again while only
    // pinned ones did: each kind of answer was seen.
    for (count, what) in [
        (&tally.newest_unknown, "answered by release N's APIs"),
        (&tally.newest_refused, "refused by pinned APIs"),
        (&tally.newest_ran, "run by unpinned APIs"),
    ] {
        assert!(
            count.load(Ordering::Relaxed) > 0,
            "no hand-off version {HANDOFF_VERSION} request was {what}"
        );
    }
    drop(apis);
    drop(conductors);
}
