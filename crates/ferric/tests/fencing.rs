//! Fencing end to end (issue 42), on SQLite and on PostgreSQL: a conductor working on a node
//! is cut off (SIGSTOP: frozen, as by a network split or a long pause), its lease lapses,
//! another conductor takes the node over, writes its own state and lets go. When the first
//! one comes back (SIGCONT) and finishes its step, its write is refused because it names a
//! lease grant that no longer stands: it logs that it abandons the node, and the node, its
//! history and its lease are as the new owner left them.
//!
//! The second conductor is the test itself, through the store, with a name and lease of its
//! own. Nothing here depends on timing: the frozen process cannot finish its step, the
//! takeover waits for the lease to lapse by the database's clock, and the end is a log line.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use common::{Server, eventually};
use ferric_db::{Fence, Store, WriteGuard};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, NodeHistoryEntry};
use serde_json::{Value, json};
use uuid::Uuid;

const VERSION: &str = "1.110";
const TAKEN_OVER: &str = "conductor-b took this node over while conductor-a was cut off";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn sqlite_a_cut_off_conductor_cannot_write_over_the_new_owner() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fencing.db");
    let url = format!("sqlite://{}", file.display());
    fenced_off(dir.path(), &file.display().to_string(), &url);
}

#[test]
fn postgres_a_cut_off_conductor_cannot_write_over_the_new_owner() {
    let database = runtime().block_on(ferric_db::testing::PgDatabase::create());
    let dir = tempfile::tempdir().unwrap();
    fenced_off(dir.path(), &database.url, &database.url);
}

fn fenced_off(dir: &std::path::Path, server_url: &str, store_url: &str) {
    let env = [
        ("FERRIC_CONDUCTOR_HOSTNAME", "conductor-a"),
        // The shortest lease: renewed every second while conductor-a runs.
        ("FERRIC_NODE_LEASE_TIMEOUT", "3"),
        ("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "3600"),
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
        ("FERRIC_LOG_LEVEL", "warn,ferric=info,ferric_conductor=info"),
    ];
    let server = Server::start_with_env(dir, &["--database-url", server_url], &env);
    let http = reqwest::blocking::Client::new();
    let created: Value = http
        .post(server.url("/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .json(&json!({
            "driver": "fake-hardware",
            "name": "fenced",
            // Verification takes 10 s: conductor-a is in the middle of it when frozen.
            "driver_info": {"fake_delay": 10},
        }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let uuid: Uuid = created["uuid"].as_str().unwrap().parse().unwrap();
    let answer = http
        .put(server.url(&format!("/v1/nodes/{uuid}/states/provision")))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .json(&json!({"target": "manage"}))
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    server.signal("STOP");

    let runtime = runtime();
    let store = runtime.block_on(Store::open(store_url)).unwrap();
    let node = runtime
        .block_on(store.node_get(&Ident::Uuid(uuid)))
        .unwrap();
    assert_eq!(node.provision_state, ProvisionState::Verifying);
    let a = runtime
        .block_on(store.node_lease_get(uuid))
        .unwrap()
        .unwrap();
    assert_eq!(a.holder, "conductor-a");

    // conductor-a cannot renew: once its lease lapses, conductor-b takes the node over.
    let b = eventually("conductor-a's lease to lapse", || {
        runtime
            .block_on(store.node_lease_acquire(uuid, "conductor-b", Duration::from_secs(60)))
            .ok()
    });
    assert!(b.generation > a.generation);
    let mut theirs = node.clone();
    theirs.provision_state = ProvisionState::Enroll;
    theirs.target_provision_state = None;
    theirs.last_error = Some(TAKEN_OVER.to_owned());
    let entry = NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node: uuid,
        created_at: store.now(),
        severity: "ERROR".to_owned(),
        event_type: "provisioning".to_owned(),
        event: TAKEN_OVER.to_owned(),
        conductor: Some("conductor-b".to_owned()),
        user: None,
    };
    let b_node = runtime
        .block_on(store.node_save(
            &theirs,
            &node,
            Fence::of(&b),
            WriteGuard::Revision,
            Some(&entry),
        ))
        .unwrap()
        .unwrap();
    runtime
        .block_on(store.node_lease_give_back(uuid, Fence::of(&b), false))
        .unwrap();

    // conductor-a comes back, finishes verifying, and is refused.
    server.signal("CONT");
    let abandoned = server.wait_for_log("abandoned the node");
    assert!(abandoned.contains(&uuid.to_string()), "{abandoned}");

    let stored = runtime
        .block_on(store.node_get(&Ident::Uuid(uuid)))
        .unwrap();
    assert_eq!(stored, b_node);
    assert_eq!(stored.provision_state, ProvisionState::Enroll);
    assert_eq!(stored.last_error.as_deref(), Some(TAKEN_OVER));
    assert!(
        runtime
            .block_on(store.node_lease_get(uuid))
            .unwrap()
            .is_none()
    );
    let history = runtime.block_on(store.node_history_list(uuid)).unwrap();
    assert_eq!(history.last().unwrap().event, TAKEN_OVER, "{history:#?}");
    // The API, served by conductor-a's process, shows the new owner's state.
    let shown: Value = http
        .get(server.url(&format!("/v1/nodes/{uuid}")))
        .header("X-OpenStack-Ironic-API-Version", VERSION)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(shown["provision_state"], "enroll");
    assert_eq!(shown["last_error"], TAKEN_OVER);
    assert_eq!(shown["reservation"], Value::Null);
}
