//! Leases on the database's clock (issue 42): two conductors on PostgreSQL, one whose clock is
//! 10 minutes fast and one 10 minutes slow (libfaketime, Debian's `faketime` package, preloaded
//! into their processes), work side by side without either taking the other for dead or
//! taking a lease the other holds. By their hosts' clocks the slow one's heartbeats are 20
//! minutes old to the fast one and its leases long expired; by the database's clock, which
//! every time written and compared comes from (`ferric_db`'s `clock.rs`), all is well. Then
//! the fast one is killed and its leases are not kept: its nodes move to the slow one.
//!
//! Skipped, loudly, where libfaketime is not installed (`scripts/install-deps.sh` installs it).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::{Server, eventually};
use serde_json::{Value, json};

const VERSION: &str = "1.110";
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn get(url: &str) -> Value {
    reqwest::blocking::Client::new()
        .get(url)
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send()
        .unwrap()
        .json()
        .unwrap()
}

/// A process whose clock is off by `offset` (libfaketime's syntax: `+10m`, `-10m`, `+0`).
fn start(dir: &Path, database: &str, role: &str, hostname: &str, offset: &str) -> Server {
    let env = [
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME", offset),
        ("FERRIC_CONDUCTOR_HOSTNAME", hostname),
        ("FERRIC_NODE_LEASE_TIMEOUT", "5"),
        ("FERRIC_CONDUCTOR_HEARTBEAT_INTERVAL", "1"),
        ("FERRIC_CONDUCTOR_HEARTBEAT_TIMEOUT", "10"),
        ("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "1"),
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

fn nodes(api: &str) -> Vec<Value> {
    get(&format!(
        "http://{api}/v1/nodes?limit=100&fields=uuid,provision_state,conductor,reservation,\
         last_error"
    ))["nodes"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn conductors_with_skewed_clocks_never_take_a_live_lease_nor_keep_a_dead_one() {
    if !Path::new(LIBFAKETIME).exists() {
        eprintln!("SKIPPED: {LIBFAKETIME} is missing (apt-get install faketime)");
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let dir = tempfile::tempdir().unwrap();
    let mut fast = start(dir.path(), &database.url, "conductor", "fast", "+10m");
    let _slow = start(dir.path(), &database.url, "conductor", "slow", "-10m");
    let api_server = start(dir.path(), &database.url, "api", "api", "+0");
    let api = api_server.address.clone();

    // Both alive to everyone, and their heartbeats written in the database's time (this
    // test's clock, within a few seconds), not their hosts'.
    let listed = eventually("both conductors alive", || {
        let listed = get(&format!(
            "http://{api}/v1/conductors?fields=hostname,alive,updated_at"
        ));
        let conductors = listed["conductors"].as_array().unwrap().clone();
        (conductors.len() == 2 && conductors.iter().all(|c| c["alive"] == true))
            .then_some(conductors)
    });
    for conductor in &listed {
        let beat: DateTime<Utc> = conductor["updated_at"].as_str().unwrap().parse().unwrap();
        let off = (Utc::now() - beat).num_seconds().abs();
        assert!(off < 120, "heartbeat written {off} s off: {conductor}");
    }

    // Nodes that stay in `verifying` for a minute under their owner's lease (5 s, renewed).
    let http = reqwest::blocking::Client::new();
    for n in 0..16 {
        let created: Value = http
            .post(format!("http://{api}/v1/nodes"))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .json(&json!({
                "driver": "fake-hardware",
                "name": format!("skew-{n}"),
                "driver_info": {"fake_delay": 60},
            }))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let uuid = created["uuid"].as_str().unwrap();
        let answer = http
            .put(format!("http://{api}/v1/nodes/{uuid}/states/provision"))
            .header("X-OpenStack-Ironic-API-Version", VERSION)
            .json(&json!({"target": "manage"}))
            .send()
            .unwrap();
        assert_eq!(answer.status(), 202, "{:?}", answer.text());
    }
    let holders: HashMap<String, String> = nodes(&api)
        .iter()
        .map(|node| {
            assert_eq!(node["provision_state"], "verifying", "{node}");
            assert_eq!(node["reservation"], node["conductor"], "{node}");
            (
                node["uuid"].as_str().unwrap().to_owned(),
                node["reservation"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let by_fast = holders.values().filter(|holder| *holder == "fast").count();
    assert!(by_fast > 0 && by_fast < holders.len(), "{holders:?}");

    // Several recovery passes in each conductor (every second) and many lease renewals: no
    // node changes hands or fails. (Not a timing assertion: a slower machine only makes
    // fewer passes.)
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(8) {
        for node in nodes(&api) {
            let uuid = node["uuid"].as_str().unwrap();
            assert_eq!(node["provision_state"], "verifying", "{node}");
            assert_eq!(
                node["reservation"].as_str(),
                Some(holders[uuid].as_str()),
                "{node}"
            );
        }
        thread::sleep(Duration::from_millis(200));
    }

    // The fast one dies: its leases (by its clock 10 minutes longer) are not kept.
    fast.kill();
    let moved = eventually("the fast conductor's nodes taken over", || {
        let listed = nodes(&api);
        listed
            .iter()
            .filter(|node| holders[node["uuid"].as_str().unwrap()] == "fast")
            .all(|node| node["provision_state"] == "enroll" && node["conductor"] == "slow")
            .then_some(listed)
    });
    for node in moved {
        if holders[node["uuid"].as_str().unwrap()] == "slow" {
            assert_eq!(node["provision_state"], "verifying", "{node}");
            assert_eq!(node["reservation"], "slow", "{node}");
        } else {
            assert!(
                node["last_error"].as_str().unwrap().contains("fast"),
                "{node}"
            );
        }
    }
}
