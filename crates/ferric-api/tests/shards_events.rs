//! `GET /v1/shards` (1.82) and `POST /v1/events` (1.54) as Ironic answers them: shards
//! largest first with unsharded nodes counted as "None" (on SQLite and PostgreSQL, whose NULL
//! ordering differs), and network events checked field by field against Ironic's schema.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_model::ProvisionState;
use ferric_model::resources::Node;
use serde_json::{Value, json};
use uuid::Uuid;

async fn nodes_in(api: &Api, shard: Option<&str>, count: usize) {
    for _ in 0..count {
        let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Enroll);
        node.shard = shard.map(str::to_owned);
        api.store().node_create(&node).await.unwrap();
    }
}

async fn shards_are_listed_largest_first(api: &Api) {
    let empty = api.send_at(82, Method::GET, "/v1/shards", None).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.body, json!({"shards": []}));

    nodes_in(api, Some("west"), 1).await;
    nodes_in(api, Some("east"), 3).await;
    nodes_in(api, None, 2).await;
    nodes_in(api, Some("north"), 2).await;
    let listed = api
        .send_at(82, Method::GET, "/v1/shards?whatever=1", None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(
        listed.body,
        json!({"shards": [
            {"name": "east", "count": 3},
            {"name": "None", "count": 2},
            {"name": "north", "count": 2},
            {"name": "west", "count": 1},
        ]})
    );

    // Before 1.82 the endpoint does not exist; there is no single-shard resource, and the
    // collection only reads.
    let old = api.send_at(81, Method::GET, "/v1/shards", None).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let one = api.send_at(82, Method::GET, "/v1/shards/east", None).await;
    assert_eq!(one.status, StatusCode::NOT_FOUND);
    let post = api
        .send_at(82, Method::POST, "/v1/shards", Some(json!({})))
        .await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn sqlite_shards() {
    shards_are_listed_largest_first(&Api::new().await).await;
}

#[tokio::test]
async fn postgres_shards() {
    shards_are_listed_largest_first(&Api::postgres().await).await;
}

fn port_event() -> Value {
    json!({
        "event": "network.bind_port",
        "port_id": "11111111-aaaa-bbbb-cccc-555555555555",
        "mac_address": "de:ad:ca:fe:ba:be",
        "status": "ACTIVE",
        "device_id": "22222222-aaaa-bbbb-cccc-555555555555",
        "binding:host_id": "22222222-aaaa-bbbb-cccc-555555555555",
        "binding:vnic_type": "baremetal",
    })
}

fn with(changes: Value) -> Value {
    let mut event = port_event();
    for (key, value) in changes.as_object().unwrap() {
        if value == "<absent>" {
            event.as_object_mut().unwrap().remove(key);
        } else {
            event[key] = value.clone();
        }
    }
    event
}

#[tokio::test]
async fn events_are_checked_like_ironics_schema() {
    let api = Api::new().await;
    let post = |body: Value| {
        let api = &api;
        async move {
            api.send_at(54, Method::POST, "/v1/events", Some(body))
                .await
        }
    };

    // Every event type, several at once, nullable fields null, minimal events.
    let accepted = post(json!({"events": [
        port_event(),
        with(json!({"event": "network.unbind_port", "device_id": null, "binding:host_id": null,
            "binding:vnic_type": null})),
        with(json!({"event": "network.delete_port", "device_id": "<absent>",
            "binding:host_id": "<absent>", "binding:vnic_type": "<absent>"})),
    ]}))
    .await;
    assert_eq!(accepted.status, StatusCode::NO_CONTENT, "{}", accepted.body);

    let refusals = [
        (json!({}), "Mandatory field missing: 'events'"),
        (json!({"events": []}), "'events' is empty"),
        (json!({"events": {}}), "must be a list"),
        (
            json!({"events": [port_event()], "extra": 1}),
            "Unknown field 'extra'",
        ),
        (json!({"events": ["x"]}), "expected an object"),
        (
            json!({"events": [{"INVALID": "fake.event"}]}),
            "'event' is missing",
        ),
        (
            json!({"events": [{"event": "invalid.event"}]}),
            "use one of network.bind_port",
        ),
        (
            json!({"events": [with(json!({"UNKNOWN": "EVENT_PROPERTY"}))]}),
            "unknown field 'UNKNOWN'",
        ),
        (
            json!({"events": [with(json!({"port_id": "<absent>"}))]}),
            "'port_id' is missing",
        ),
        (
            json!({"events": [with(json!({"status": "<absent>"}))]}),
            "'status' is missing",
        ),
        (
            json!({"events": [with(json!({"mac_address": "INVALID_MAC_ADDRESS"}))]}),
            "'mac_address' is \"INVALID_MAC_ADDRESS\"; expected a MAC address",
        ),
        (
            json!({"events": [with(json!({"port_id": "PORT_ID_SHOULD_BE_UUID"}))]}),
            "'port_id' is \"PORT_ID_SHOULD_BE_UUID\"; expected a UUID",
        ),
        (
            json!({"events": [with(json!({"port_id": null}))]}),
            "'port_id' is null; expected a UUID",
        ),
        (
            json!({"events": [with(json!({"device_id": "DEVICE_ID_SHOULD_BE_UUID"}))]}),
            "expected a UUID or null",
        ),
        (
            json!({"events": [with(json!({"status": ["status", "SHOULD", "BE", "TEXT"]}))]}),
            "'status' is [",
        ),
        (
            json!({"events": [with(json!({"binding:vnic_type": ["SHOULD", "BE", "TEXT"]}))]}),
            "expected a string or null",
        ),
        (
            json!({"events": [with(json!({"binding:host_id": ["IS", "NODE_UUID"]}))]}),
            "'binding:host_id' is [",
        ),
        (
            json!({"events": [port_event(), with(json!({"event": "compute.boot"}))]}),
            "Invalid event #1",
        ),
    ];
    for (body, words) in refusals {
        let refused = post(body.clone()).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{body}");
        let message = faultstring(&refused.body);
        assert!(
            message.contains(words),
            "{body}: {message:?} lacks {words:?}"
        );
    }

    let old = api
        .send_at(
            53,
            Method::POST,
            "/v1/events",
            Some(json!({"events": [port_event()]})),
        )
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
}
