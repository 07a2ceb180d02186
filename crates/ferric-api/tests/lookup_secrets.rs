//! The unauthenticated agent lookup, as an attacker on the provisioning network calls it: in
//! every provision state, with and without fast track, at the oldest and newest microversion,
//! its answer carries no secret of any kind (issue 41, item 1: it used to return the tenant's
//! config drive whole).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_model::ProvisionState;
use ferric_model::resources::Ident;
use serde_json::{Value, json};
use uuid::Uuid;

const MAC: &str = "52:54:00:aa:bb:01";

/// Each string that must never leave through the lookup, and where the node keeps it.
const SECRETS: [&str; 7] = [
    "USERDATA-root-password-hunter2",
    "IMAGE-URL-signature-s3cr3t",
    "IMAGE-SERVER-password-pa55",
    "DRIVER-INTERNAL-secret-value",
    "PROPERTIES-private-key",
    "AGENT-TOKEN-0123456789abcdefghijklmnopqrstu",
    "NESTED-token-in-steps",
];

async fn node_with_secrets(api: &common::Api) -> Uuid {
    let uuid = api
        .enroll(json!({
            "driver": "fake-hardware",
            "properties": {"ssh_private_key": SECRETS[4], "cpu_arch": "x86_64"},
            "instance_info": {
                "configdrive": {"user_data": SECRETS[0]},
                "image_url": format!("http://images/disk.img?sig={}", SECRETS[1]),
                "image_source": "http://images/disk.img",
                "image_server_password": SECRETS[2],
            },
        }))
        .await;
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": MAC})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    let uuid = Uuid::parse_str(&uuid).unwrap();
    let mut node = api.store().node_get(&Ident::Uuid(uuid)).await.unwrap();
    let internal = &mut node.driver_internal_info;
    internal.insert("some_secret".into(), SECRETS[3].into());
    internal.insert("agent_secret_token".into(), SECRETS[5].into());
    internal.insert(
        "clean_steps".into(),
        json!([{"step": "x", "args": {"auth_token": SECRETS[6]}}]),
    );
    api.store().node_update(&node, node.version).await.unwrap();
    uuid
}

async fn set_state(api: &common::Api, uuid: Uuid, state: ProvisionState) {
    let mut node = api.store().node_get(&Ident::Uuid(uuid)).await.unwrap();
    node.provision_state = state;
    api.store().node_update(&node, node.version).await.unwrap();
}

fn leaked(body: &Value) -> Vec<&'static str> {
    let text = body.to_string();
    SECRETS
        .iter()
        .copied()
        .filter(|secret| text.contains(secret))
        .collect()
}

async fn walk(fast_track: bool) {
    let config = ConductorConfig {
        fast_track,
        ..ConductorConfig::default()
    };
    let api = common::Api::with_config(TestDb::sqlite().await, config).await;
    let uuid = node_with_secrets(&api).await;
    let mut answered = 0;
    for state in ProvisionState::ALL {
        set_state(&api, uuid, state).await;
        for minor in [22, common::LATEST] {
            for query in [
                format!("addresses={MAC}"),
                format!("node_uuid={uuid}"),
                format!("addresses={MAC}&node_uuid={uuid}"),
            ] {
                let found = api
                    .send_at(minor, Method::GET, &format!("/v1/lookup?{query}"), None)
                    .await;
                assert!(
                    matches!(found.status, StatusCode::OK | StatusCode::NOT_FOUND),
                    "{state} 1.{minor} {query}: {} {}",
                    found.status,
                    found.body
                );
                assert_eq!(
                    leaked(&found.body),
                    Vec::<&str>::new(),
                    "lookup in {state} at 1.{minor} ({query}, fast track {fast_track}) leaked: {}",
                    found.body
                );
                if found.status == StatusCode::OK {
                    answered += 1;
                    let instance_info = &found.body["node"]["instance_info"];
                    assert_eq!(instance_info["configdrive"], "******");
                    assert_eq!(instance_info["image_source"], "http://images/disk.img");
                }
            }
        }
    }
    // The walk proves something only if lookups were answered: every lookup-allowed state.
    assert!(answered >= 9 * 3, "only {answered} lookups were answered");
}

#[tokio::test(flavor = "current_thread")]
async fn lookup_never_answers_a_secret_in_any_state() {
    walk(false).await;
}

#[tokio::test(flavor = "current_thread")]
async fn lookup_never_answers_a_secret_with_fast_track() {
    walk(true).await;
}
