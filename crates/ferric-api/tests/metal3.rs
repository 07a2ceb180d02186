//! What Metal3's baremetal-operator reads back from a deployment, as Ironic answers it (issue
//! 27; the whole replay is `cargo xtask clients --scenario bmo`, tests/clients/README.md):
//! the config drive hidden in `instance_info`, the image type recorded when the deployment
//! starts, and a fake-hardware node's power left alone by undeploying.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::Api;
use ferric_model::resources::Ident;
use serde_json::{Value, json};

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_as_bmo_reads_it_back() {
    let api = Api::new().await;
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "name": "metal3~host-0"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    for target in ["manage", "provide"] {
        api.provision(&uuid, target).await;
        api.settle().await;
    }
    let powered = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({"target": "power on"})),
        )
        .await;
    assert_eq!(powered.status, StatusCode::ACCEPTED, "{}", powered.body);
    api.settle().await;

    // pkg/provisioner/ironic/ironic.go:596: the image with an sha256 checksum.
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([
                {"op": "add", "path": "/instance_info/image_source",
                 "value": "http://images.example/ubuntu.qcow2"},
                {"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
                {"op": "add", "path": "/instance_info/image_os_hash_value", "value": "ab12"},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["instance_info"].get("image_type"), None);
    // ironic.go:1292 with a JSON config drive.
    let deploy = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "active", "configdrive": {
                "meta_data": {"uuid": "7a1f4c2e", "name": "host-0"},
                "user_data": "#cloud-config\npassword: hunter2\n"}})),
        )
        .await;
    assert_eq!(deploy.status, StatusCode::ACCEPTED, "{}", deploy.body);
    api.settle().await;
    let active = node(&api, &uuid).await;
    assert_eq!(active["provision_state"], "active", "{active:#}");
    let instance_info = &active["instance_info"];
    assert_eq!(instance_info["configdrive"], "******", "{active:#}");
    assert_eq!(instance_info["image_type"], "whole-disk");
    assert_eq!(
        instance_info["image_source"],
        "http://images.example/ubuntu.qcow2"
    );
    // The conductor still has the config drive it was given.
    let stored = api
        .store()
        .node_get(&Ident::Uuid(uuid.parse().unwrap()))
        .await
        .unwrap();
    assert_eq!(
        stored.instance_info["configdrive"]["meta_data"]["name"],
        "host-0"
    );

    // Undeploying with the fake deploy interface leaves the power as it was, as Ironic's
    // fake does (the BMO replay's `deprovision`); the instance is forgotten.
    api.provision(&uuid, "deleted").await;
    api.settle().await;
    let available = node(&api, &uuid).await;
    assert_eq!(available["provision_state"], "available", "{available:#}");
    assert_eq!(available["power_state"], "power on");
    assert_eq!(available["instance_info"], json!({}));
}
