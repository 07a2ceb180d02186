//! Paths and statuses Ironic's own API tests (ironic-tempest-plugin) rely on, through the
//! real router: version-less resource paths (every `rel: bookmark` link is one), the `.json`
//! suffix of old microversions, a port or portgroup named by something that is neither a
//! UUID nor a name (400), the allocations endpoints below 1.52 (404 for GET, 405 for the
//! rest) and the other answers below an endpoint's version, unknown paths, and the node-last
//! spelling of state paths (`/v1/nodes/states/console/{node}`).
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

#[tokio::test]
async fn older_versions_are_refused_as_ironic_refuses_them() {
    let api = Api::new().await;
    let node = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware"})),
        )
        .await;
    let uuid = node.body["uuid"].as_str().unwrap().to_owned();
    let traits = format!("/v1/nodes/{uuid}/traits");
    let cases = [
        // Traits (1.37): reading is 406, setting 405, removing 404.
        (
            36,
            Method::GET,
            traits.clone(),
            None,
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            36,
            Method::PUT,
            traits.clone(),
            Some(json!({"traits": ["CUSTOM_A"]})),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            36,
            Method::PUT,
            format!("{traits}/CUSTOM_A"),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            36,
            Method::DELETE,
            traits.clone(),
            None,
            StatusCode::NOT_FOUND,
        ),
        // RAID (1.12): 406.
        (
            11,
            Method::PUT,
            format!("/v1/nodes/{uuid}/states/raid"),
            Some(json!({})),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            2,
            Method::GET,
            "/v1/drivers/fake-hardware/raid/logical_disk_properties".to_owned(),
            None,
            StatusCode::NOT_ACCEPTABLE,
        ),
        // A path newer than the request answers 404 to any method, even one it never serves.
        (
            88,
            Method::PUT,
            format!("/v1/nodes/{uuid}/vmedia"),
            Some(json!({})),
            StatusCode::NOT_FOUND,
        ),
        (
            89,
            Method::PUT,
            format!("/v1/nodes/{uuid}/vmedia"),
            Some(json!({})),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        // No such state controller method: 405 to writes, 404 to reads.
        (
            96,
            Method::PUT,
            format!("/v1/nodes/{uuid}/states/target_raid_config"),
            Some(json!({})),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            96,
            Method::GET,
            format!("/v1/nodes/{uuid}/states/target_raid_config"),
            None,
            StatusCode::NOT_FOUND,
        ),
        // A heartbeat without its node: 400 from the ramdisk API on, 404 before.
        (
            22,
            Method::POST,
            "/v1/heartbeat".to_owned(),
            Some(json!({"callback_url": "http://x"})),
            StatusCode::BAD_REQUEST,
        ),
        (
            21,
            Method::POST,
            "/v1/heartbeat".to_owned(),
            Some(json!({"callback_url": "http://x"})),
            StatusCode::NOT_FOUND,
        ),
        // A doubled prefix is no path at all.
        (
            96,
            Method::PUT,
            format!("/v1/v1/nodes/{uuid}/management/inject_nmi"),
            Some(json!({})),
            StatusCode::NOT_FOUND,
        ),
    ];
    for (minor, method, path, body, expected) in cases {
        let answer = api.send_at(minor, method.clone(), &path, body).await;
        assert_eq!(
            answer.status, expected,
            "{method} {path} at 1.{minor}: {}",
            answer.body
        );
    }
}

#[tokio::test]
async fn the_node_may_come_last_in_state_paths() {
    let api = Api::new().await;
    let node = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware"})),
        )
        .await;
    let uuid = node.body["uuid"].as_str().unwrap();
    let console = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/states/console/{uuid}"),
            None,
        )
        .await;
    assert_eq!(console.status, StatusCode::OK, "{}", console.body);
    assert_eq!(console.body["console_enabled"], false);
    let states = api
        .send_latest(Method::GET, &format!("/v1/nodes/states/{uuid}"), None)
        .await;
    assert_eq!(states.status, StatusCode::OK, "{}", states.body);
    assert_eq!(states.body["provision_state"], "enroll");
}
