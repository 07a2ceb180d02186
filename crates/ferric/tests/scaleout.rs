//! Scale-out (issue 10): three `--role conductor` processes and two `--role api` processes on
//! one fresh PostgreSQL database run a 300-node fake-hardware workload (create with a port,
//! manage → provide → deploy, through the two APIs alternately) while one conductor is killed
//! with SIGKILL. Every node ends `active` — those the dead conductor was working on are failed
//! with `last_error` by their new owner and retried — the takeover (kill → every node of the
//! dead conductor owned by a live one and nothing of it left stuck) is measured against twice
//! the heartbeat timeout, and the nodes spread evenly over the two survivors.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::Server;
use ferric_model::ProvisionState;
use serde_json::{Value, json};

const NODES: usize = 300;
const CONDUCTORS: usize = 3;
const APIS: usize = 2;
const CLIENTS: usize = 8;
/// Seconds; the takeover must finish within twice this.
const HEARTBEAT_TIMEOUT: u64 = 5;
const VERSION: &str = "1.110";

fn settings(hostname: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FERRIC_CONDUCTOR_HOSTNAME", hostname.to_owned()),
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0".to_owned()),
        ("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "1".to_owned()),
        ("FERRIC_NODE_LEASE_TIMEOUT", "3".to_owned()),
        ("FERRIC_CONDUCTOR_HEARTBEAT_INTERVAL", "1".to_owned()),
        (
            "FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT",
            HEARTBEAT_TIMEOUT.to_string(),
        ),
        ("FERRIC_CONDUCTOR_REQUEST_TIMEOUT", "5".to_owned()),
        ("FERRIC_LOG_LEVEL", "warn,ferric=info".to_owned()),
    ]
}

fn start(dir: &std::path::Path, database: &str, role: &str, hostname: &str) -> Server {
    let env = settings(hostname);
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(key, value)| (*key, value.as_str()))
        .collect();
    let ready = if role == "conductor" {
        "conductor running"
    } else {
        "Bare Metal API listening"
    };
    Server::start_until(
        dir,
        &["--database-url", database, "--role", role],
        &env,
        ready,
    )
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

fn list(http: &reqwest::blocking::Client, api: &str) -> Vec<Value> {
    let response: Value = http
        .get(format!(
            "http://{api}/v1/nodes?limit=1000&fields=uuid,provision_state,maintenance,\
             last_error,conductor,reservation"
        ))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send()
        .unwrap()
        .json()
        .unwrap();
    response["nodes"].as_array().unwrap().clone()
}

/// What the workload does next with a node in `state`: a provision verb, or lifting the
/// maintenance a failed cleaning leaves. `None`: wait (transient) or done (`active`).
fn next_step(node: &Value) -> Option<&'static str> {
    let state = node["provision_state"].as_str().unwrap();
    if node["maintenance"] == true && matches!(state, "manageable" | "available" | "clean failed") {
        return Some("unmaintain");
    }
    match state {
        "enroll" | "clean failed" => Some("manage"),
        "manageable" => Some("provide"),
        "available" | "deploy failed" => Some("active"),
        _ => None,
    }
}

fn is_failure(state: &str) -> bool {
    ProvisionState::from_str(state).unwrap().is_failure()
}

fn is_transient(state: &str) -> bool {
    ProvisionState::from_str(state)
        .unwrap()
        .is_stuck_treated_as_failure()
}

#[test]
fn scale_out_survives_a_conductor_killed_mid_workload() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let dir = tempfile::tempdir().unwrap();

    let mut conductors: Vec<Server> = (0..CONDUCTORS)
        .map(|n| {
            start(
                dir.path(),
                &database.url,
                "conductor",
                &format!("conductor-{n}"),
            )
        })
        .collect();
    let api_servers: Vec<Server> = (0..APIS)
        .map(|n| start(dir.path(), &database.url, "api", &format!("api-{n}")))
        .collect();
    let apis: Arc<Vec<String>> =
        Arc::new(api_servers.iter().map(|api| api.address.clone()).collect());
    let http = client();

    // Both API processes see all three conductors before the workload starts.
    let deadline = Instant::now() + Duration::from_secs(60);
    for api in apis.iter() {
        loop {
            let listed: Value = http
                .get(format!("http://{api}/v1/conductors"))
                .header("X-OpenStack-Ironic-API-Version", VERSION)
                .send()
                .unwrap()
                .json()
                .unwrap();
            if listed["conductors"].as_array().unwrap().len() == CONDUCTORS {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "conductors did not register: {listed}"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    // Nodes and their ports, through the two APIs alternately.
    let started = Instant::now();
    let nodes: Vec<String> = thread::scope(|scope| {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|worker| {
                let apis = apis.clone();
                scope.spawn(move || {
                    let http = client();
                    let mut made = Vec::new();
                    for n in (worker..NODES).step_by(CLIENTS) {
                        let api = &apis[n % APIS];
                        let created: Value = http
                            .post(format!("http://{api}/v1/nodes"))
                            .header("X-OpenStack-Ironic-API-Version", VERSION)
                            .json(&json!({
                                "driver": "fake-hardware",
                                "name": format!("scale-{n}"),
                                "driver_info": {"fake_delay": 0.3},
                            }))
                            .send()
                            .unwrap()
                            .json()
                            .unwrap();
                        let uuid = created["uuid"].as_str().unwrap().to_owned();
                        let port = http
                            .post(format!("http://{api}/v1/ports"))
                            .header("X-OpenStack-Ironic-API-Version", VERSION)
                            .json(&json!({
                                "node_uuid": uuid,
                                "address": format!("52:54:00:00:{:02x}:{:02x}", n / 256, n % 256),
                            }))
                            .send()
                            .unwrap();
                        assert_eq!(port.status(), 201, "{:?}", port.text());
                        made.push(uuid);
                    }
                    made
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    assert_eq!(nodes.len(), NODES);
    let index: HashMap<String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(n, uuid)| (uuid.clone(), n))
        .collect();
    let index = Arc::new(index);

    // The clients: each request of a node goes to API n % 2.
    let (sender, queue) = mpsc::channel::<(String, &'static str)>();
    let queue = Arc::new(Mutex::new(queue));
    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let accepted = Arc::new(AtomicUsize::new(0));
    let unavailable = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (queue, in_flight, accepted, unavailable, apis, index) = (
                queue.clone(),
                in_flight.clone(),
                accepted.clone(),
                unavailable.clone(),
                apis.clone(),
                index.clone(),
            );
            thread::spawn(move || {
                let http = client();
                loop {
                    let next = queue.lock().unwrap().recv();
                    let Ok((uuid, step)) = next else { return };
                    let api = &apis[index[&uuid] % APIS];
                    let answer = if step == "unmaintain" {
                        http.delete(format!("http://{api}/v1/nodes/{uuid}/maintenance"))
                            .header("X-OpenStack-Ironic-API-Version", VERSION)
                            .send()
                            .unwrap()
                    } else {
                        http.put(format!("http://{api}/v1/nodes/{uuid}/states/provision"))
                            .header("X-OpenStack-Ironic-API-Version", VERSION)
                            .json(&json!({ "target": step }))
                            .send()
                            .unwrap()
                    };
                    let status = answer.status().as_u16();
                    match status {
                        202 | 204 => {
                            accepted.fetch_add(1, Ordering::SeqCst);
                        }
                        // The owner died and the ring has not dropped it yet (503), or the
                        // node moved meanwhile (400/409): the next look decides again.
                        503 => {
                            unavailable.fetch_add(1, Ordering::SeqCst);
                        }
                        400 | 409 => {}
                        other => panic!("unexpected answer {other}: {:?}", answer.text()),
                    }
                    in_flight.lock().unwrap().remove(&uuid);
                }
            })
        })
        .collect();

    // The driver: looks at every node and queues what each needs next, until all are
    // active. Failed nodes must say why.
    let victim = 1;
    let victim_name = format!("conductor-{victim}");
    let mut killed_at: Option<Instant> = None;
    let mut victims_nodes: HashSet<String> = HashSet::new();
    let mut takeover: Option<Duration> = None;
    let mut failed_and_retried: HashMap<String, String> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut pass = 0usize;
    let final_nodes = loop {
        let listed = list(&http, &apis[pass % APIS]);
        pass += 1;
        assert_eq!(listed.len(), NODES);
        let active = listed
            .iter()
            .filter(|node| node["provision_state"] == "active")
            .count();

        // Mid-workload: every node managed and provided, a third asked to deploy.
        if killed_at.is_none() && accepted.load(Ordering::SeqCst) >= NODES * 2 + NODES / 3 {
            victims_nodes = listed
                .iter()
                .filter(|node| node["conductor"] == victim_name.as_str())
                .map(|node| node["uuid"].as_str().unwrap().to_owned())
                .collect();
            let busy = listed
                .iter()
                .filter(|node| {
                    node["reservation"] == victim_name.as_str()
                        && is_transient(node["provision_state"].as_str().unwrap())
                })
                .count();
            conductors[victim].kill();
            killed_at = Some(Instant::now());
            println!(
                "SIGKILL {victim_name} after {:.1} s: it owned {} nodes, {busy} of them in a \
                 transient state under its lease; {active} nodes active so far",
                started.elapsed().as_secs_f64(),
                victims_nodes.len()
            );
        }
        if let (Some(killed), None) = (killed_at, takeover) {
            let taken_over = listed
                .iter()
                .filter(|node| victims_nodes.contains(node["uuid"].as_str().unwrap()))
                .all(|node| {
                    let owner = node["conductor"].as_str().unwrap_or("");
                    let state = node["provision_state"].as_str().unwrap();
                    let holder = node["reservation"].as_str();
                    let owned = !owner.is_empty() && owner != victim_name;
                    let progressing =
                        !is_transient(state) || holder.is_some_and(|holder| holder != victim_name);
                    owned && progressing
                });
            if taken_over {
                takeover = Some(killed.elapsed());
            }
        }

        for node in &listed {
            let uuid = node["uuid"].as_str().unwrap();
            let state = node["provision_state"].as_str().unwrap();
            if is_failure(state) {
                assert!(
                    node["last_error"]
                        .as_str()
                        .is_some_and(|error| !error.is_empty()),
                    "node {uuid} failed without last_error: {node}"
                );
                failed_and_retried.insert(uuid.to_owned(), node["last_error"].to_string());
            }
            if let Some(step) = next_step(node)
                && in_flight.lock().unwrap().insert(uuid.to_owned())
            {
                sender.send((uuid.to_owned(), step)).unwrap();
            }
        }
        if active == NODES && takeover.is_some() {
            break listed;
        }
        assert!(
            Instant::now() < deadline,
            "the workload did not finish: {:?}",
            listed
                .iter()
                .filter(|node| node["provision_state"] != "active")
                .map(|node| (&node["uuid"], &node["provision_state"], &node["conductor"]))
                .take(20)
                .collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(200));
    };
    drop(sender);
    for client in clients {
        client.join().unwrap();
    }

    let takeover = takeover.unwrap();
    println!(
        "workload done in {:.1} s: {NODES} nodes active, {} requests accepted, {} answered 503 \
         while the dead conductor was still in the ring, {} nodes failed and were retried",
        started.elapsed().as_secs_f64(),
        accepted.load(Ordering::SeqCst),
        unavailable.load(Ordering::SeqCst),
        failed_and_retried.len()
    );
    println!(
        "takeover of {victim_name}'s {} nodes: {:.2} s (limit {} s = 2 x heartbeat timeout)",
        victims_nodes.len(),
        takeover.as_secs_f64(),
        2 * HEARTBEAT_TIMEOUT
    );
    assert!(
        takeover <= Duration::from_secs(2 * HEARTBEAT_TIMEOUT),
        "takeover took {takeover:?}"
    );

    let mut spread: BTreeMap<String, usize> = BTreeMap::new();
    for node in &final_nodes {
        let owner = node["conductor"].as_str().unwrap_or("(none)").to_owned();
        *spread.entry(owner).or_default() += 1;
    }
    let live = CONDUCTORS - 1;
    let even = NODES / live;
    println!("node spread over the live conductors: {spread:?} (even: {even} each)");
    assert_eq!(spread.len(), live, "{spread:?}");
    assert!(!spread.contains_key(&victim_name), "{spread:?}");
    for (conductor, count) in &spread {
        assert!(
            count * 10 >= even * 8 && count * 10 <= even * 12,
            "{conductor} owns {count} nodes; even is {even} ± 20 %"
        );
    }
    // Only the kill failed nodes: each failure names the dead conductor.
    for (uuid, error) in &failed_and_retried {
        assert!(
            error.contains(&victim_name),
            "node {uuid} failed for another reason: {error}"
        );
    }

    // The survivors stop cleanly, leaving the ring: the APIs then see no conductor alive.
    for (n, conductor) in conductors.iter_mut().enumerate() {
        if n != victim {
            assert!(conductor.terminate(), "conductor-{n} did not stop cleanly");
        }
    }
    let after: Value = http
        .get(format!(
            "http://{}/v1/nodes/{}?fields=conductor",
            apis[0], nodes[0]
        ))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = after;
    while !after["conductor"].is_null() {
        assert!(
            Instant::now() < deadline,
            "stopped conductors still own nodes: {after}"
        );
        thread::sleep(Duration::from_millis(200));
        after = http
            .get(format!(
                "http://{}/v1/nodes/{}?fields=conductor",
                apis[0], nodes[0]
            ))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .send()
            .unwrap()
            .json()
            .unwrap();
    }
    drop(api_servers);
}
