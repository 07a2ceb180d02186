//! Conductor liveness by lock (issue 42): a conductor is alive while it holds a lock that dies
//! with its process (a file lock beside the SQLite file, a PostgreSQL advisory lock), not
//! while its last heartbeat is recent. So a `ferric server` SIGKILLed and started again takes
//! its name back at once, a second live process under the name is refused at once, and on
//! PostgreSQL a SIGKILLed conductor is shown offline and its nodes move to the others without
//! waiting for a heartbeat or lease timeout.
//!
//! Timeouts here are set to an hour, so that only the lock can explain what the tests see;
//! they never assert a duration (the measured figures are printed and quoted in
//! docs/conductor.md).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashSet;
use std::process::Command;
use std::str::FromStr;
use std::thread;
use std::time::{Duration, Instant};

use common::{Server, eventually};
use ferric_model::ProvisionState;
use serde_json::{Value, json};

const VERSION: &str = "1.110";
const HOUR: &str = "3600";

fn get(url: &str) -> Value {
    reqwest::blocking::Client::new()
        .get(url)
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send()
        .unwrap()
        .json()
        .unwrap()
}

fn conductors(api: &str) -> Vec<(String, bool)> {
    get(&format!("http://{api}/v1/conductors"))["conductors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|conductor| {
            (
                conductor["hostname"].as_str().unwrap().to_owned(),
                conductor["alive"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// An hour of heartbeat timeout: a restart that waited for the killed run's registration to go
/// stale would not start within the harness's deadline.
fn single(name: &str) -> [(&str, &str); 4] {
    [
        ("FERRIC_CONDUCTOR_HOSTNAME", name),
        ("FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT", HOUR),
        ("FERRIC_NODE_LEASE_TIMEOUT", HOUR),
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
    ]
}

#[test]
fn a_sigkilled_server_takes_its_name_back_at_once_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Server::start_with_env(dir.path(), &[], &single("phoenix"));
    assert_eq!(conductors(&first.address), [("phoenix".to_owned(), true)]);
    first.kill();

    let killed = Instant::now();
    let mut again = Server::start_with_env(dir.path(), &[], &single("phoenix"));
    let answer = get(&again.url("/v1/conductors"));
    println!(
        "restart after SIGKILL: the API answered {:.2} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(
        conductors(&again.address),
        [("phoenix".to_owned(), true)],
        "{answer}"
    );
    assert!(
        !again
            .startup_log
            .iter()
            .any(|line| line.contains("waiting to see")),
        "the restart waited for the killed run: {:#?}",
        again.startup_log
    );
    assert!(
        dir.path()
            .join("ferric.db.conductor-phoenix.lock")
            .is_file()
    );
    assert!(again.terminate());
}

#[test]
fn a_second_live_process_under_the_name_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let env = single("twin");
    let mut first = Server::start_with_env(dir.path(), &["--database-url", "twin.db"], &env);
    let second = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["server", "--database-url", "twin.db"])
        .args(["--api-listen", "127.0.0.1:0"])
        .envs(env)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    // Named by its lock: the lock file, with the holder's process id written in it.
    let holder = format!("process {}", first.pid());
    assert!(
        stderr.contains("Conductor twin already registered")
            && stderr.contains(&holder)
            && stderr.contains("twin.db.conductor-twin.lock")
            && stderr.contains("conductor_hostname"),
        "{stderr}"
    );
    // The first one is untouched, and once it stopped cleanly the name is free at once.
    assert_eq!(conductors(&first.address), [("twin".to_owned(), true)]);
    assert!(first.terminate());
    let mut again = Server::start_with_env(dir.path(), &["--database-url", "twin.db"], &env);
    assert!(again.terminate());
}

fn start_pg(dir: &std::path::Path, database: &str, role: &str, hostname: &str) -> Server {
    let env = [
        ("FERRIC_CONDUCTOR_HOSTNAME", hostname),
        ("FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT", HOUR),
        ("FERRIC_NODE_LEASE_TIMEOUT", HOUR),
        ("FERRIC_CHECK_PROVISION_STATE_INTERVAL", HOUR),
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
        ("FERRIC_LOG_LEVEL", "warn,ferric=info"),
    ];
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

fn is_transient(state: &str) -> bool {
    ProvisionState::from_str(state)
        .unwrap()
        .is_stuck_treated_as_failure()
}

#[test]
fn a_sigkilled_conductor_is_offline_and_its_nodes_move_on_at_once() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let dir = tempfile::tempdir().unwrap();
    let mut conductors_running: Vec<Server> = (0..3)
        .map(|n| start_pg(dir.path(), &database.url, "conductor", &format!("c{n}")))
        .collect();
    let api_server = start_pg(dir.path(), &database.url, "api", "api");
    let api = api_server.address.clone();
    let http = reqwest::blocking::Client::new();
    eventually("three conductors alive", || {
        (conductors(&api).iter().filter(|(_, alive)| *alive).count() == 3).then_some(())
    });

    // Nodes that stay in `verifying` for a minute under their owner's lease.
    let mut nodes = Vec::new();
    for n in 0..24 {
        let created: Value = http
            .post(format!("http://{api}/v1/nodes"))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .json(&json!({
                "driver": "fake-hardware",
                "name": format!("live-{n}"),
                "driver_info": {"fake_delay": 60},
            }))
            .send()
            .unwrap()
            .json()
            .unwrap();
        nodes.push(created["uuid"].as_str().unwrap().to_owned());
    }
    for uuid in &nodes {
        let answer = http
            .put(format!("http://{api}/v1/nodes/{uuid}/states/provision"))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .json(&json!({"target": "manage"}))
            .send()
            .unwrap();
        assert_eq!(answer.status(), 202, "{:?}", answer.text());
    }
    let list = || {
        get(&format!(
            "http://{api}/v1/nodes?limit=100&fields=uuid,provision_state,conductor,\
             reservation,last_error"
        ))["nodes"]
            .as_array()
            .unwrap()
            .clone()
    };
    let victim = "c1";
    let victims_nodes: HashSet<String> = list()
        .iter()
        .filter(|node| node["conductor"] == victim)
        .map(|node| node["uuid"].as_str().unwrap().to_owned())
        .collect();
    assert!(!victims_nodes.is_empty());
    assert!(
        list()
            .iter()
            .all(|node| node["provision_state"] == "verifying")
    );

    conductors_running[1].kill();
    let killed = Instant::now();
    let mut offline_after = None;
    let mut moved_after = None;
    let deadline = killed + Duration::from_secs(120);
    while offline_after.is_none() || moved_after.is_none() {
        assert!(
            Instant::now() < deadline,
            "not taken over: conductors {:?}, nodes {:#?}",
            conductors(&api),
            list()
        );
        if offline_after.is_none() && conductors(&api).contains(&(victim.to_owned(), false)) {
            offline_after = Some(killed.elapsed());
        }
        let listed = list();
        let moved = listed
            .iter()
            .filter(|node| victims_nodes.contains(node["uuid"].as_str().unwrap()))
            .all(|node| {
                let owner = node["conductor"].as_str().unwrap_or_default();
                let state = node["provision_state"].as_str().unwrap();
                !owner.is_empty()
                    && owner != victim
                    && !is_transient(state)
                    && node["reservation"] != victim
            });
        if moved_after.is_none() && moved {
            moved_after = Some(killed.elapsed());
        }
        thread::sleep(Duration::from_millis(20));
    }
    let (offline_after, moved_after) = (offline_after.unwrap(), moved_after.unwrap());
    println!(
        "SIGKILL of {victim} among 3 conductors on PostgreSQL: shown offline after {:.2} s, its \
         {} nodes owned by the others and its interrupted work failed after {:.2} s",
        offline_after.as_secs_f64(),
        victims_nodes.len(),
        moved_after.as_secs_f64()
    );
    // The interrupted work was failed with a message naming the dead conductor; the other
    // conductors' nodes were left alone.
    for node in list() {
        let uuid = node["uuid"].as_str().unwrap();
        if victims_nodes.contains(uuid) {
            assert_eq!(node["provision_state"], "enroll", "{node}");
            assert!(
                node["last_error"].as_str().unwrap().contains(victim),
                "{node}"
            );
        } else {
            assert_eq!(node["provision_state"], "verifying", "{node}");
        }
    }
    assert_eq!(
        conductors(&api),
        [
            ("c0".to_owned(), true),
            ("c1".to_owned(), false),
            ("c2".to_owned(), true)
        ]
    );
    drop(conductors_running);
    drop(api_server);
}
