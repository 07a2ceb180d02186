//! Rolling upgrade (issue 28): two `--role api` and two `--role conductor` processes of
//! release N — a real older build, the `ferric` binary of the commit named in
//! `xtask/src/upgrade.rs`, which `cargo xtask rolling-upgrade` builds once and caches — share
//! one fresh PostgreSQL database while a fleet of fake-hardware nodes goes round
//! manage → provide → deploy → undeploy through the APIs. The processes are replaced one by
//! one with this build (N+1), first pinned to release N's hand-off version
//! (`pin_handoff_version`), then once more without the pin. The workload sends its requests
//! as a client behind a load balancer would (and also list each node's vendor methods, a
//! request release N's conductors do not know, once per round): to the APIs in the pool, an API being replaced
//! taken out of the pool (drained) first, and a 409 NodeLocked or a 503 retried as
//! openstacksdk retries them. No request may fail otherwise, every node must keep going round,
//! and at the end no node is left in a transient or failed state.
//!
//! Ignored in plain test runs because it needs release N's binary: `cargo xtask
//! rolling-upgrade` (part of `cargo xtask ci`) builds it and runs this with
//! `FERRIC_RELEASE_N_BIN` set.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ferric_model::ProvisionState;
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
            env.push(("FERRIC_PIN_HANDOFF_VERSION", "1".to_owned()));
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
        // Release N really is the older build: it knows no hand-off versions; this build
        // logs the one it speaks and the one it sends.
        let handoff = server
            .startup_log
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|record| {
                record["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("conductor hand-off"))
            });
        match (release, handoff) {
            (Release::Old, None) => {}
            (Release::NewPinned, Some(record)) => assert_eq!(record["sends"], 1, "{record}"),
            (Release::New, Some(record)) => {
                assert_eq!(record["sends"], record["handoff_version"], "{record}");
            }
            (release, record) => panic!("{release:?} {role} logged {record:?}"),
        }
        server
    }
}

/// The load balancer's view: the APIs requests may go to. Taking the write lock drains one
/// (waits for the requests in flight, which hold the read lock).
type Pool = Arc<RwLock<Vec<String>>>;

#[derive(Default)]
struct Tally {
    requests: AtomicUsize,
    retried: AtomicUsize,
    failures: Mutex<Vec<String>>,
    /// Completed rounds per node.
    rounds: Vec<AtomicUsize>,
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Sends one request to an API in the pool, retrying NodeLocked and 503 as openstacksdk
/// does; any other failure is recorded.
fn send(
    http: &reqwest::blocking::Client,
    pool: &Pool,
    tally: &Tally,
    turn: usize,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> Option<Value> {
    for attempt in 0..60 {
        let apis = pool.read().unwrap();
        let api = apis[(turn + attempt) % apis.len()].clone();
        let mut request = http
            .request(method.clone(), format!("http://{api}{path}"))
            .header("X-OpenStack-Ironic-API-Version", VERSION);
        if let Some(body) = body {
            request = request.json(body);
        }
        tally.requests.fetch_add(1, Ordering::Relaxed);
        let response = match request.send() {
            Ok(response) => response,
            Err(error) => {
                tally
                    .failures
                    .lock()
                    .unwrap()
                    .push(format!("{method} {path} on {api}: {error}"));
                return None;
            }
        };
        let status = response.status();
        let text = response.text().unwrap_or_default();
        drop(apis);
        if status.is_success() {
            return Some(serde_json::from_str(&text).unwrap_or(Value::Null));
        }
        let locked = status == 409 && text.contains("locked");
        if locked || status == 503 {
            tally.retried.fetch_add(1, Ordering::Relaxed);
            thread::sleep(Duration::from_millis(250));
            continue;
        }
        tally
            .failures
            .lock()
            .unwrap()
            .push(format!("{method} {path} on {api}: {status} {text}"));
        return None;
    }
    tally.failures.lock().unwrap().push(format!(
        "{method} {path}: still locked or unavailable after 60 tries"
    ));
    None
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
                // A version 2 action: a pinned process answers it itself, as release N's
                // conductors would not know it.
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
fn wait_rounds(tally: &Tally, from: &[usize], rounds: usize, phase: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(
            tally.failures.lock().unwrap().is_empty(),
            "{phase}: {:#?}",
            tally.failures.lock().unwrap()
        );
        let behind = tally
            .rounds
            .iter()
            .zip(from)
            .filter(|(done, from)| done.load(Ordering::Relaxed) < *from + rounds)
            .count();
        if behind == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{phase}: {behind} nodes did not go round"
        );
        thread::sleep(Duration::from_millis(100));
    }
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
        .retain(|address| *address != api.address);
    assert!(api.terminate(), "{name} did not stop cleanly");
    *api = fleet.start(release, "api", name);
    pool.write().unwrap().push(api.address.clone());
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
        apis.iter().map(|api| api.address.clone()).collect(),
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
        wait_rounds(&tally, &from, ROUNDS_PER_PHASE, name);
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
    let failures = tally.failures.lock().unwrap().clone();
    assert!(failures.is_empty(), "failed requests: {failures:#?}");

    // Nothing left stuck: every node comes to rest in a stable, non-failed state.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (_, uuid) in &nodes {
        loop {
            let node = send(
                &http,
                &pool,
                &tally,
                0,
                reqwest::Method::GET,
                &format!("/v1/nodes/{uuid}"),
                None,
            )
            .unwrap();
            let state = state_of(&node);
            assert!(!state.is_failure(), "node {uuid} failed: {node}");
            if state.is_stable() && node["target_provision_state"].is_null() {
                assert!(
                    node["reservation"].is_null(),
                    "node {uuid} still locked: {node}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "node {uuid} stuck: {node}");
            thread::sleep(Duration::from_millis(100));
        }
    }
    eprintln!(
        "rolling upgrade: {} requests ({} retried: NodeLocked or 503), {} node rounds, {:.1} s",
        tally.requests.load(Ordering::Relaxed),
        tally.retried.load(Ordering::Relaxed),
        rounds(&tally).iter().sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    drop(apis);
    drop(conductors);
}
