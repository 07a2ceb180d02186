//! `/v1/conductors` (1.49) over conductors registered in a real SQLite store, beside the test
//! API's own conductor (`test-conductor`).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};

async fn register(api: &Api, hostname: &str, group: &str) {
    api.store()
        .conductor_register(hostname, group, &["fake-hardware".to_owned()])
        .await
        .unwrap();
}

#[tokio::test]
async fn list_and_show_report_liveness_and_drivers() {
    let api = Api::new().await;
    register(&api, "c2.example", "rack2").await;
    register(&api, "c1.example", "").await;
    api.store()
        .conductor_unregister("c2.example")
        .await
        .unwrap();

    let listed = api
        .send_at(49, Method::GET, "/v1/conductors?sort_key=hostname", None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let items = listed.body["conductors"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[2]["hostname"], "test-conductor");
    assert_eq!(items[0]["hostname"], "c1.example");
    assert_eq!(items[0]["alive"], true);
    assert_eq!(items[1]["alive"], false, "offline conductors are not alive");
    assert_eq!(items[1]["conductor_group"], "rack2");
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["alive", "conductor_group", "hostname", "links"]);

    let detail = api
        .send_at(
            49,
            Method::GET,
            "/v1/conductors?detail=true&sort_key=hostname",
            None,
        )
        .await;
    assert_eq!(
        detail.body["conductors"][0]["drivers"],
        serde_json::json!(["fake-hardware"])
    );

    let shown = api
        .send_at(49, Method::GET, "/v1/conductors/c1.example", None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.body["alive"], true);
    assert_eq!(
        shown.body["links"][0]["href"],
        "http://ferric.test/v1/conductors/c1.example"
    );
    let missing = api
        .send_at(49, Method::GET, "/v1/conductors/ghost", None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&missing.body),
        "Conductor ghost could not be found."
    );
    let too_old = api.send_at(48, Method::GET, "/v1/conductors", None).await;
    assert_eq!(too_old.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn pages_are_marked_by_hostname() {
    let api = Api::new().await;
    for hostname in ["a", "b"] {
        register(&api, hostname, "").await;
    }
    let first = api
        .send_at(
            49,
            Method::GET,
            "/v1/conductors?sort_key=hostname&limit=2",
            None,
        )
        .await;
    assert_eq!(first.body["conductors"].as_array().unwrap().len(), 2);
    assert_eq!(
        first.body["next"],
        "http://ferric.test/v1/conductors?sort_key=hostname&limit=2&marker=b"
    );
    let second = api
        .send_at(
            49,
            Method::GET,
            "/v1/conductors?sort_key=hostname&limit=2&marker=b",
            None,
        )
        .await;
    let rest = second.body["conductors"].as_array().unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["hostname"], "test-conductor");
    assert!(second.body.get("next").is_none());

    let descending = api
        .send_at(
            49,
            Method::GET,
            "/v1/conductors?sort_key=hostname&sort_dir=desc",
            None,
        )
        .await;
    assert_eq!(
        descending.body["conductors"][0]["hostname"],
        "test-conductor"
    );
    let unsortable = api
        .send_at(49, Method::GET, "/v1/conductors?sort_key=alive", None)
        .await;
    assert_eq!(unsortable.status, StatusCode::BAD_REQUEST);
    let bad_marker = api
        .send_at(49, Method::GET, "/v1/conductors?marker=zz", None)
        .await;
    assert_eq!(bad_marker.status, StatusCode::NOT_FOUND);
}
