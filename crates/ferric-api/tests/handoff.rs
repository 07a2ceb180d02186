//! The API ↔ conductor hand-off across processes (issue 10): an API with no conductor of its
//! own hands every node action to the owning conductor through PostgreSQL
//! (`conductor_requests` + LISTEN/NOTIFY), and the answers — successes, refusals with their
//! status and words, silence — come back as if the conductor were in process.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::json;

#[tokio::test]
async fn an_api_only_process_hands_node_work_to_the_owning_conductor() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["conductor"], "remote-conductor", "{}", node.body);

    // A provision verb: answered once the first transition is recorded on the conductor.
    api.provision(&uuid, "manage").await;
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], "manageable", "{}", node.body);
    let history = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/history?detail=true"),
            None,
        )
        .await;
    assert!(
        history.body["history"]
            .as_array()
            .unwrap()
            .iter()
            .all(|entry| entry["conductor"] == "remote-conductor"),
        "{}",
        history.body
    );

    // Reads and synchronous changes travel with their results.
    let validated = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/validate"), None)
        .await;
    assert_eq!(validated.status, StatusCode::OK);
    assert_eq!(
        validated.body["power"]["result"], true,
        "{}",
        validated.body
    );
    let set = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/management/boot_device"),
            Some(json!({"boot_device": "disk", "persistent": true})),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);
    let device = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/management/boot_device"),
            None,
        )
        .await;
    assert_eq!(
        device.body,
        json!({"boot_device": "disk", "persistent": true})
    );
    let supported = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/management/boot_device/supported"),
            None,
        )
        .await;
    assert!(
        supported.body["supported_boot_devices"]
            .as_array()
            .unwrap()
            .contains(&json!("pxe")),
        "{}",
        supported.body
    );
    let power = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({"target": "power off"})),
        )
        .await;
    assert_eq!(power.status, StatusCode::ACCEPTED, "{}", power.body);
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["power_state"], "power off", "{}", node.body);

    // A refusal keeps its status and its message: nothing is deploying, so nothing to abort.
    let abort = api
        .send_latest(Method::DELETE, &format!("/v1/nodes/{uuid}/provision"), None)
        .await;
    assert_eq!(abort.status, StatusCode::NOT_FOUND, "{}", abort.body);
    assert!(
        faultstring(&abort.body).contains("No deployment is running"),
        "{}",
        abort.body
    );
    // Every answered request was read and removed.
    assert_eq!(pending_requests(&api).await, 0);
}

#[tokio::test]
async fn a_node_no_alive_conductor_serves_answers_503() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let moved = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/conductor_group", "value": "rack9"}])),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["conductor"], json!(null), "{}", node.body);
    let refused = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "manage"})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    let message = faultstring(&refused.body);
    assert!(
        message.contains("No alive conductor") && message.contains("rack9"),
        "{message}"
    );
}

#[tokio::test]
async fn a_silent_owner_gets_503_and_its_request_is_withdrawn() {
    let api = Api::split(Duration::from_secs(1)).await;
    // A conductor that registered (and so is in the ring) but never answers.
    api.store()
        .conductor_register("silent", "quiet", &["fake-hardware".to_owned()])
        .await
        .unwrap();
    api.state.conductor.membership().refresh().await.unwrap();
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    api.send_latest(
        Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "replace", "path": "/conductor_group", "value": "quiet"}])),
    )
    .await;
    let before = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
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
        message.contains("Conductor silent") && message.contains("nothing was done"),
        "{message}"
    );
    // Withdrawn: a conductor that wakes up later cannot run it.
    assert_eq!(pending_requests(&api).await, 0);
    assert!(
        api.store()
            .conductor_request_claim("silent")
            .await
            .unwrap()
            .is_none()
    );
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], before.body["provision_state"]);
}

async fn pending_requests(api: &Api) -> i64 {
    api.store().conductor_request_count().await.unwrap()
}

#[tokio::test]
async fn an_agent_may_call_back_through_an_api_process_without_a_conductor() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "deploy"}}))
        .await;
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": "52:54:00:12:34:56"})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    for target in ["manage", "provide", "active"] {
        api.provision(&uuid, target).await;
        api.settle().await;
    }
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(
        node.body["provision_state"], "wait call-back",
        "{}",
        node.body
    );
    // The lookup's token is minted by the owning conductor and comes back through the table.
    let found = api
        .send_latest(Method::GET, "/v1/lookup?addresses=52:54:00:12:34:56", None)
        .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let token = found.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 43, "{}", found.body);

    // A wrong token is refused by the conductor, with its words.
    let forged = api
        .send_latest(
            Method::POST,
            &format!("/v1/heartbeat/{uuid}"),
            Some(json!({"callback_url": "http://127.0.0.1:9999", "agent_version": "10.0.0", "agent_token": "forged"})),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "{}", forged.body);
    assert!(
        faultstring(&forged.body).contains("agent token"),
        "{}",
        forged.body
    );

    // The heartbeat resumes the waiting node on the conductor.
    let beat = api
        .send_latest(
            Method::POST,
            &format!("/v1/heartbeat/{uuid}"),
            Some(json!({"callback_url": "http://127.0.0.1:9999", "agent_version": "10.0.0", "agent_token": token})),
        )
        .await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], "active", "{}", node.body);
}

#[tokio::test]
async fn vendor_passthru_travels_to_the_owning_conductor() {
    let api = Api::split(Duration::from_secs(20)).await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let base = format!("/v1/nodes/{uuid}/vendor_passthru");
    // The listing needs no conductor: the API process knows the drivers.
    let methods = api
        .send_latest(Method::GET, &format!("{base}/methods"), None)
        .await;
    assert_eq!(methods.body["third_method_sync"]["async"], false);

    // A synchronous method's return value comes back over the wire.
    let sync = api
        .send_latest(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    assert_eq!(sync.status, StatusCode::OK, "{}", sync.body);
    assert_eq!(sync.body, json!(true));
    // An asynchronous one is accepted once the conductor has started it.
    let started = api
        .send_latest(
            Method::POST,
            &format!("{base}/second_method"),
            Some(json!({"bar": "kazoo"})),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    api.settle().await;
    // Refusals keep their status and words.
    let missing = api
        .send_latest(
            Method::POST,
            &format!("{base}?method=second_method"),
            Some(json!({})),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{}", missing.body);
    assert_eq!(
        faultstring(&missing.body),
        "Parameter 'bar' not passed to method 'second_method'."
    );
    let wrong = api
        .send_latest(Method::PUT, &format!("{base}?method=second_method"), None)
        .await;
    assert_eq!(wrong.status, StatusCode::BAD_REQUEST, "{}", wrong.body);
    assert!(
        faultstring(&wrong.body).starts_with("The method second_method does not support HTTP PUT"),
        "{}",
        wrong.body
    );
    assert_eq!(pending_requests(&api).await, 0);
}
