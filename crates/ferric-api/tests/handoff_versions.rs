//! The hand-off between releases (issue 28): a conductor runs a request exactly as the
//! previous release (hand-off version 1) wrote it, refuses — never drops — one from a newer
//! process that names an action it does not know, and an API process turns an older
//! conductor's "cannot read the request" into a 503 that says to pin. On PostgreSQL, with an
//! API-only process and a conductor (`Api::split`).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::{Value, json};
use uuid::Uuid;

/// Writes `body` as a request to `conductor` for `node`, as another process would, and waits
/// for the reply.
async fn raw_request(api: &Api, conductor: &str, node: &str, body: &str) -> Value {
    let store = api.store();
    let deadline = chrono::Utc::now() + chrono::TimeDelta::seconds(20);
    let node = Uuid::parse_str(node).unwrap();
    let id = store
        .conductor_request_create(conductor, node, body, deadline)
        .await
        .unwrap();
    loop {
        let request = store.conductor_request_get(id).await.unwrap().unwrap();
        if let Some(reply) = request.reply {
            store.conductor_request_delete(id).await.unwrap();
            return serde_json::from_str(&reply).unwrap();
        }
        assert!(chrono::Utc::now() < deadline, "no reply to {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_request_as_the_previous_release_wrote_it_runs() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let body = r#"{"action":"set_power","power":"power off","timeout_ms":null}"#;
    let reply = raw_request(&api, "remote-conductor", &uuid, body).await;
    assert_eq!(reply, json!({"outcome": "done", "value": null}));
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["power_state"], "power off", "{}", node.body);
}

#[tokio::test]
async fn an_unknown_action_from_a_newer_process_is_refused_saying_so() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let before = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    let body = json!({"action": "reseat_blade", "handoff_version": 99});
    let reply = raw_request(&api, "remote-conductor", &uuid, &body.to_string()).await;
    assert_eq!(reply["outcome"], "failed", "{reply}");
    assert_eq!(reply["error"]["kind"], "unsupported", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("version 99") && message.contains("pin_handoff_version"),
        "{message}"
    );
    let after = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(after.body["updated_at"], before.body["updated_at"]);
}

#[tokio::test]
async fn an_older_conductor_that_cannot_read_a_request_answers_503_asking_for_the_pin() {
    let api = Api::split(Duration::from_secs(20)).await;
    // A conductor of the previous release: it registers, and answers what it cannot parse
    // the way hand-off version 1 did.
    api.store()
        .conductor_register("old-release", "old", &["fake-hardware".to_owned()])
        .await
        .unwrap();
    api.state.conductor.membership().refresh().await.unwrap();
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    api.send_latest(
        Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "replace", "path": "/conductor_group", "value": "old"}])),
    )
    .await;
    let store = api.store().clone();
    let old = tokio::spawn(async move {
        loop {
            if let Some(request) = store.conductor_request_claim("old-release").await.unwrap() {
                let reply = json!({"outcome": "failed", "error": {"kind": "internal",
                    "message": "cannot read the request: unknown variant `future_action`"}});
                store
                    .conductor_request_reply(request.id, &reply.to_string())
                    .await
                    .unwrap();
                return request.body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let refused = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "manage"})),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    let message = faultstring(&refused.body);
    assert!(
        message.contains("old-release") && message.contains("pin_handoff_version"),
        "{message}"
    );
    // What this (unpinned) process sent carries its hand-off version.
    let sent: Value = serde_json::from_str(&old.await.unwrap()).unwrap();
    assert_eq!(
        sent["handoff_version"],
        ferric_model::action::HANDOFF_VERSION,
        "{sent}"
    );
    assert_eq!(sent["action"], "provision", "{sent}");
}
