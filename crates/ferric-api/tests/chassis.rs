//! `/v1/chassis` and `/v1/chassis/{uuid}/nodes` through the real router (all of it is 1.1) on
//! a real SQLite file.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::json;

#[tokio::test]
async fn create_show_list_patch_delete() {
    let api = Api::new().await;
    let created = api
        .send(
            Method::POST,
            "/v1/chassis",
            Some(json!({"description": "rack 4", "extra": {"row": "b"}})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let path = format!("/v1/chassis/{uuid}");
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test{path}")
    );
    // Inside a second list, as Ironic shows it.
    assert_eq!(
        created.body["nodes"][0][0]["href"],
        format!("http://ferric.test/v1/chassis/{uuid}/nodes")
    );

    let listed = api.send(Method::GET, "/v1/chassis", None).await;
    let item = listed.body["chassis"][0].as_object().unwrap();
    let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["description", "links", "uuid"]);
    let detail = api.send(Method::GET, "/v1/chassis/detail", None).await;
    assert_eq!(detail.body["chassis"][0]["extra"], json!({"row": "b"}));

    let patched = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/description", "value": "rack 5"},
                {"op": "remove", "path": "/extra/row"},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["description"], "rack 5");
    assert_eq!(patched.body["extra"], json!({}));
    let read_only = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/created_at", "value": "x"}])),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);

    let deleted = api.send(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api.send(Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Chassis {uuid} could not be found.")
    );
}

#[tokio::test]
async fn create_and_show_check_their_input() {
    let api = Api::new().await;
    let unknown = api
        .send(Method::POST, "/v1/chassis", Some(json!({"name": "c1"})))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    let long = api
        .send(
            Method::POST,
            "/v1/chassis",
            Some(json!({"description": "x".repeat(256)})),
        )
        .await;
    assert_eq!(long.status, StatusCode::BAD_REQUEST);
    let by_name = api.send(Method::GET, "/v1/chassis/rack-4", None).await;
    assert_eq!(by_name.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&by_name.body),
        "Expected a UUID but received rack-4."
    );
    let fields_too_early = api.send(Method::GET, "/v1/chassis?fields=uuid", None).await;
    assert_eq!(fields_too_early.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn nodes_of_a_chassis_and_delete_while_it_has_nodes() {
    let api = Api::new().await;
    let chassis = api.send(Method::POST, "/v1/chassis", Some(json!({}))).await;
    let chassis = chassis.body["uuid"].as_str().unwrap().to_owned();
    let inside = api
        .enroll(json!({"driver": "fake-hardware", "chassis_uuid": chassis}))
        .await;
    api.enroll(json!({"driver": "fake-hardware"})).await;

    let nodes = api
        .send(Method::GET, &format!("/v1/chassis/{chassis}/nodes"), None)
        .await;
    assert_eq!(nodes.status, StatusCode::OK, "{}", nodes.body);
    let nodes = nodes.body["nodes"].as_array().unwrap().clone();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0]["uuid"], inside.as_str());
    let detail = api
        .send(
            Method::GET,
            &format!("/v1/chassis/{chassis}/nodes/detail"),
            None,
        )
        .await;
    assert_eq!(detail.body["nodes"][0]["chassis_uuid"], chassis.as_str());
    let missing = api
        .send(
            Method::GET,
            "/v1/chassis/9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f/nodes",
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Ironic's ChassisNotEmpty is a 400 ("Invalid"), not a 409.
    let refused = api
        .send(Method::DELETE, &format!("/v1/chassis/{chassis}"), None)
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&refused.body),
        format!("Cannot complete the requested action because chassis {chassis} contains nodes.")
    );
}
