//! The `autodetect` deploy interface through the API (issue 39): a node on it deploys with the
//! interface its instance needs, shows that interface while it is deployed (as Ironic does),
//! and gets `autodetect` back once cleaning ends; validate reports on the interface it would
//! switch to.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, NodeSpec, STATE_TIMEOUT};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{Drivers, InterfaceSettings};
use serde_json::{Value, json};

/// Every interface enabled; `autodetect` picks `ramdisk` for a ramdisk instance, else `fake`
/// (the fake-hardware stand-in for `direct`, which would need an agent).
async fn api() -> Api {
    let interfaces = InterfaceSettings::everything()
        .with_autodetect(&["ramdisk", "fake"])
        .unwrap();
    Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        Drivers::default().with_interfaces(interfaces).unwrap(),
    )
    .await
}

async fn patch(api: &Api, uuid: &str, ops: Value) -> Value {
    let answer = api
        .send_latest(Method::PATCH, &format!("/v1/nodes/{uuid}"), Some(ops))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

/// An `autodetect` fake-hardware node deployed with a disk image: the API, its UUID and the
/// node as it rests in `active`.
async fn deployed_disk_image() -> (Api, String, Value) {
    let api = api().await;
    let uuid = api
        .node_in(
            "available",
            NodeSpec::fake().with("deploy_interface", json!("autodetect")),
        )
        .await;
    patch(
        &api,
        &uuid,
        json!([{"op": "add", "path": "/instance_info/image_source",
                "value": "http://images.example/disk.qcow2"}]),
    )
    .await;
    api.provision(&uuid, "active").await;
    let active = api.run_until_state(&uuid, "active", STATE_TIMEOUT).await;
    (api, uuid, active)
}

#[tokio::test]
async fn a_disk_image_deploys_with_the_last_choice_and_cleaning_restores_autodetect() {
    let (api, uuid, active) = deployed_disk_image().await;
    assert_eq!(active["deploy_interface"], "fake", "{active}");
    assert_eq!(
        active["driver_internal_info"]["original_deploy_interface"],
        "autodetect"
    );
    let history = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/history"), None)
        .await;
    assert!(
        history
            .body
            .to_string()
            .contains("Deploy interface autodetect switched to fake"),
        "{}",
        history.body
    );

    api.provision(&uuid, "deleted").await;
    let available = api.run_until_state(&uuid, "available", STATE_TIMEOUT).await;
    assert_eq!(available["deploy_interface"], "autodetect", "{available}");
    assert!(
        available["driver_internal_info"]
            .get("original_deploy_interface")
            .is_none(),
        "{available}"
    );
}

#[tokio::test]
async fn validate_speaks_for_the_interface_autodetect_would_pick() {
    let api = api().await;
    let uuid = api
        .node_in(
            "available",
            NodeSpec::fake().with("deploy_interface", json!("autodetect")),
        )
        .await;
    // A live ISO marked for a ramdisk deploy: `ramdisk`, which cannot boot it with the fake
    // boot interface, so validate names ramdisk's reason.
    patch(
        &api,
        &uuid,
        json!([{"op": "add", "path": "/instance_info",
                "value": {"boot_iso": "http://images.example/live.iso",
                          "ironic_ramdisk_deploy": true}}]),
    )
    .await;
    let validated = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/validate"), None)
        .await;
    assert_eq!(validated.status, StatusCode::OK, "{}", validated.body);
    assert_eq!(
        validated.body["deploy"]["result"], false,
        "{}",
        validated.body
    );
    let reason = validated.body["deploy"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("ramdisk"), "{reason}");
    // The node is still on autodetect: validating switches nothing.
    assert_eq!(api.node(&uuid).await["deploy_interface"], "autodetect");

    // Without the sentinel the ISO is an image to write: the fallback validates.
    patch(
        &api,
        &uuid,
        json!([{"op": "remove", "path": "/instance_info/ironic_ramdisk_deploy"},
               {"op": "add", "path": "/instance_info/image_source",
                "value": "http://images.example/live.iso"}]),
    )
    .await;
    let validated = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/validate"), None)
        .await;
    assert_eq!(
        validated.body["deploy"]["result"], true,
        "{}",
        validated.body
    );
}

#[tokio::test]
async fn an_operator_choosing_an_interface_drops_the_stashed_autodetect() {
    let (api, uuid, active) = deployed_disk_image().await;
    assert_eq!(active["deploy_interface"], "fake");
    // Interfaces of an active node change only in maintenance.
    patch(
        &api,
        &uuid,
        json!([{"op": "replace", "path": "/maintenance", "value": true}]),
    )
    .await;
    let chosen = patch(
        &api,
        &uuid,
        json!([{"op": "replace", "path": "/deploy_interface", "value": "direct"}]),
    )
    .await;
    assert_eq!(chosen["deploy_interface"], "direct");
    assert!(
        chosen["driver_internal_info"]
            .get("original_deploy_interface")
            .is_none(),
        "{chosen}"
    );
}
