//! An agent's heartbeat handed over with the node record the API read
//! (`Handoff::heartbeat_read`): checked on that record before any lease is taken, then checked
//! again and recorded under the node's lease, on the node as it is by then.

use std::time::Duration;

use ferric_conductor::agent::{AGENT_TOKEN_KEY, AGENT_URL_KEY};
use ferric_conductor::{Conductor, ConductorConfig, ConductorError, Handoff, Heartbeat};
use ferric_db::testing::TestDb;
use ferric_drivers::Drivers;
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node};
use uuid::Uuid;

fn beat(token: &str) -> Heartbeat {
    Heartbeat {
        callback_url: "http://10.0.0.5:9999".into(),
        agent_token: token.into(),
        agent_version: Some("ferric-agent test".into()),
        ..Heartbeat::default()
    }
}

#[tokio::test]
async fn a_heartbeat_on_the_apis_record_is_checked_on_it_and_again_under_the_lease() {
    let db = TestDb::sqlite().await;
    let store = db.store.clone();
    let config = ConductorConfig {
        hostname: "heartbeat".to_owned(),
        periodic: false,
        // A resting node takes heartbeats with fast track: nothing resumes, the agent is
        // only recorded.
        fast_track: true,
        ..ConductorConfig::default()
    };
    let conductor = Conductor::new(store.clone(), Drivers::default(), config);
    conductor.start().await.expect("start the conductor");
    let handoff = Handoff::from(conductor.clone());
    let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Available);
    node.driver_internal_info
        .insert(AGENT_TOKEN_KEY.to_owned(), "secret".into());
    let read = store.node_create(&node).await.expect("create the node");
    let stored = || async { store.node_get(&Ident::Uuid(read.uuid)).await.unwrap() };

    // A wrong token is refused on the record given, and nothing is written.
    let refused = handoff.heartbeat_read(&read, beat("wrong")).await;
    assert!(
        matches!(refused, Err(ConductorError::Forbidden(_))),
        "{refused:?}"
    );
    assert!(
        !stored()
            .await
            .driver_internal_info
            .contains_key(AGENT_URL_KEY)
    );

    // The right one is recorded under the lease.
    handoff
        .heartbeat_read(&read, beat("secret"))
        .await
        .expect("the heartbeat is taken");
    assert_eq!(
        stored().await.driver_internal_info[AGENT_URL_KEY],
        "http://10.0.0.5:9999"
    );

    // A record read before the token changed passes the first check, not the one under the
    // lease: the node as it is now decides.
    let mut rotated = stored().await;
    rotated
        .driver_internal_info
        .insert(AGENT_TOKEN_KEY.to_owned(), "rotated".into());
    let version = rotated.version;
    store
        .node_update(&rotated, version)
        .await
        .expect("rotate the token");
    let stale = handoff.heartbeat_read(&read, beat("secret")).await;
    assert!(
        matches!(stale, Err(ConductorError::Forbidden(_))),
        "{stale:?}"
    );

    conductor.shutdown(Duration::from_secs(5)).await;
}
