//! Paths and statuses Ironic's own API tests (ironic-tempest-plugin) rely on, through the
//! real router: version-less resource paths (every `rel: bookmark` link is one), the `.json`
//! suffix of old microversions, a port or portgroup named by something that is neither a
//! UUID nor a name (400), and the allocations endpoints below 1.52 (404 for GET, 405 for the
//! rest).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::{Value, json};

/// The `rel` link of a resource document, as a path on the test server.
fn link(body: &Value, rel: &str) -> String {
    let href = body["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|link| link["rel"] == rel)
        .unwrap()["href"]
        .as_str()
        .unwrap()
        .to_owned();
    href.strip_prefix("http://ferric.test").unwrap().to_owned()
}

#[tokio::test]
async fn version_less_paths_and_bookmarks_are_served() {
    let api = Api::new().await;
    let node = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "name": "n1"})),
        )
        .await;
    assert_eq!(node.status, StatusCode::CREATED);
    let uuid = node.body["uuid"].as_str().unwrap().to_owned();
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": "52:54:00:00:03:01"})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED);

    let bookmark = link(&node.body, "bookmark");
    assert_eq!(bookmark, format!("/nodes/{uuid}"));
    let shown = api.send_latest(Method::GET, &bookmark, None).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    assert_eq!(shown.body["uuid"], uuid.as_str());
    let port_bookmark = link(&port.body, "bookmark");
    let shown = api.send_latest(Method::GET, &port_bookmark, None).await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);

    for path in [
        "/ports/detail?address=52:54:00:00:03:01".to_owned(),
        "/drivers".to_owned(),
        "/drivers/fake-hardware".to_owned(),
        "/nodes/n1/ports".to_owned(),
        format!("/nodes/{uuid}/states"),
    ] {
        let answer = api.send_latest(Method::GET, &path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
    }
    let listed = api
        .send_latest(Method::GET, "/ports/detail?address=52:54:00:00:03:01", None)
        .await;
    assert_eq!(listed.body["ports"].as_array().unwrap().len(), 1);
    // Writes too, under the same rules.
    let patched = api
        .send_latest(
            Method::PATCH,
            "/nodes/n1",
            Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    // What is not a v1 resource stays unknown.
    let unknown = api.send_latest(Method::GET, "/no-such-thing", None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_json_suffix_is_stripped_below_1_91() {
    let api = Api::new().await;
    let node = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware"})),
        )
        .await;
    let uuid = node.body["uuid"].as_str().unwrap().to_owned();
    let old = api
        .send_at(90, Method::GET, &format!("/v1/nodes/{uuid}.json"), None)
        .await;
    assert_eq!(old.status, StatusCode::OK, "{}", old.body);
    assert_eq!(old.body["uuid"], uuid.as_str());
    let detail = api
        .send_at(1, Method::GET, "/v1/nodes/detail.json", None)
        .await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.body);
    // From 1.91 `.json` is part of the name.
    let new = api
        .send_at(91, Method::GET, &format!("/v1/nodes/{uuid}.json"), None)
        .await;
    assert_eq!(new.status, StatusCode::NOT_FOUND, "{}", new.body);
}

#[tokio::test]
async fn ports_and_portgroups_named_by_neither_uuid_nor_name_are_bad_requests() {
    let api = Api::new().await;
    for path in [
        "/v1/ports/52:54:00:00:03:02",
        "/v1/ports/malformed:uuid",
        "/v1/portgroups/malformed:uuid",
    ] {
        let answer = api.send_latest(Method::GET, path, None).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{path}: {}",
            answer.body
        );
        assert!(faultstring(&answer.body).contains("Expected UUID or name"));
        let patch = api
            .send_latest(
                Method::PATCH,
                path,
                Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
            )
            .await;
        assert_eq!(
            patch.status,
            StatusCode::BAD_REQUEST,
            "{path}: {}",
            patch.body
        );
        let delete = api.send_latest(Method::DELETE, path, None).await;
        assert_eq!(
            delete.status,
            StatusCode::BAD_REQUEST,
            "{path}: {}",
            delete.body
        );
    }
    // A well-formed name that names nothing is not found.
    let missing = api
        .send_latest(Method::GET, "/v1/ports/not-a-port", None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn allocations_below_their_version_answer_as_ironic() {
    let api = Api::new().await;
    let uuid = "7f1a3c52-0d2b-4e6f-9a8b-1c2d3e4f5a6b";
    let get = api.send_at(51, Method::GET, "/v1/allocations", None).await;
    assert_eq!(get.status, StatusCode::NOT_FOUND);
    let post = api
        .send_at(
            51,
            Method::POST,
            "/v1/allocations",
            Some(json!({"resource_class": "x"})),
        )
        .await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED, "{}", post.body);
    let delete = api
        .send_at(51, Method::DELETE, &format!("/v1/allocations/{uuid}"), None)
        .await;
    assert_eq!(delete.status, StatusCode::METHOD_NOT_ALLOWED);
    let at_version = api
        .send_at(52, Method::DELETE, &format!("/v1/allocations/{uuid}"), None)
        .await;
    assert_eq!(at_version.status, StatusCode::NOT_FOUND);
}
