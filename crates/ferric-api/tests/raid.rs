//! RAID through the HTTP API and the real conductor on fake-hardware: `PUT …/states/raid`
//! (versions, schema, the raid interface's own rules), the `raid.*` steps in manual cleaning
//! and as a deploy step, and `properties.root_device` following the root volume. The agent's
//! software RAID is shown on QEMU machines in the lab suite (`crates/ferric/tests/lab_lifecycle.rs`).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, LATEST, faultstring};
use serde_json::{Value, json};

fn mirror() -> Value {
    json!({"logical_disks": [
        {"size_gb": 100, "raid_level": "1", "is_root_volume": true, "volume_name": "root"},
        {"size_gb": "MAX", "raid_level": "0"},
    ]})
}

async fn node(api: &Api, uuid: &str) -> Value {
    api.send_at(LATEST, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await
        .body
}

async fn provision(api: &Api, uuid: &str, body: Value, state: &str) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(body),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    let node = node(api, uuid).await;
    assert_eq!(node["provision_state"], state, "{node:#}");
    node
}

async fn set_raid(api: &Api, minor: u16, uuid: &str, body: Value) -> common::Answer {
    api.send_at(
        minor,
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/raid"),
        Some(body),
    )
    .await
}

async fn managed(api: &Api, extra: Value) -> String {
    let mut body = json!({"driver": "fake-hardware"});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let created = api
        .send_at(LATEST, Method::POST, "/v1/nodes", Some(body))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    provision(api, &uuid, json!({"target": "manage"}), "manageable").await;
    uuid
}

async fn target_raid_config_is_checked_then_built_and_removed_by_clean_steps(api: Api) {
    let uuid = managed(&api, json!({})).await;

    // RAID arrived in 1.12; below it Ironic answers 406 (its Tempest tests check this).
    let old = set_raid(&api, 11, &uuid, mirror()).await;
    assert_eq!(old.status, StatusCode::NOT_ACCEPTABLE, "{}", old.body);

    let bad = set_raid(
        &api,
        LATEST,
        &uuid,
        json!({"logical_disks": [{"size_gb": 10, "raid_level": "7"}]}),
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(
        faultstring(&bad.body).contains("raid_level \"7\" is not one of"),
        "{}",
        bad.body
    );
    let two_roots = set_raid(
        &api,
        LATEST,
        &uuid,
        json!({"logical_disks": [
            {"size_gb": 10, "raid_level": "1", "is_root_volume": true},
            {"size_gb": 10, "raid_level": "1", "is_root_volume": true}]}),
    )
    .await;
    assert_eq!(two_roots.status, StatusCode::BAD_REQUEST);
    let not_json = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/raid"),
            Some(json!(["logical_disks"])),
        )
        .await;
    assert_eq!(
        not_json.status,
        StatusCode::BAD_REQUEST,
        "{}",
        not_json.body
    );

    let stored = set_raid(&api, LATEST, &uuid, mirror()).await;
    assert_eq!(stored.status, StatusCode::NO_CONTENT, "{}", stored.body);
    let states = api
        .send_at(
            LATEST,
            Method::GET,
            &format!("/v1/nodes/{uuid}/states"),
            None,
        )
        .await;
    assert_eq!(states.body["target_raid_config"], mirror());
    assert_eq!(states.body["raid_config"], json!({}));

    // Building it is a manual clean step; the root volume becomes the root device.
    let built = provision(
        &api,
        &uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "raid", "step": "delete_configuration"},
            {"interface": "raid", "step": "create_configuration"}]}),
        "manageable",
    )
    .await;
    let disks = built["raid_config"]["logical_disks"].as_array().unwrap();
    assert_eq!(disks.len(), 2, "{}", built["raid_config"]);
    assert_eq!(disks[0]["volume_name"], "root");
    assert_eq!(
        built["properties"]["root_device"],
        json!({"name": "/dev/md0"})
    );
    assert_eq!(built["properties"]["local_gb"], 100);

    // Only the non-root volumes: the root one is not rebuilt.
    let partial = provision(
        &api,
        &uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "raid", "step": "create_configuration",
             "args": {"create_root_volume": false}}]}),
        "manageable",
    )
    .await;
    assert_eq!(
        partial["raid_config"]["logical_disks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let deleted = provision(
        &api,
        &uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "raid", "step": "delete_configuration"}]}),
        "manageable",
    )
    .await;
    assert_eq!(deleted["raid_config"], json!({}));
    assert!(
        deleted["properties"].get("root_device").is_none(),
        "{}",
        deleted["properties"]
    );

    // Clearing the target.
    let cleared = set_raid(&api, LATEST, &uuid, json!({})).await;
    assert_eq!(cleared.status, StatusCode::NO_CONTENT);
    assert_eq!(node(&api, &uuid).await["target_raid_config"], json!({}));

    // Without a target, the step fails and says how to set one.
    let failed = provision(
        &api,
        &uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "raid", "step": "create_configuration"}]}),
        "clean failed",
    )
    .await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(
        error.contains("raid.create_configuration") && error.contains("states/raid"),
        "{error}"
    );
}

#[tokio::test]
async fn sqlite_target_raid_config_is_checked_then_built_and_removed_by_clean_steps() {
    target_raid_config_is_checked_then_built_and_removed_by_clean_steps(Api::new().await).await;
}

#[tokio::test]
async fn postgres_target_raid_config_is_checked_then_built_and_removed_by_clean_steps() {
    target_raid_config_is_checked_then_built_and_removed_by_clean_steps(Api::postgres().await)
        .await;
}

#[tokio::test]
async fn raid_needs_an_interface_that_builds_it() {
    let api = Api::new().await;
    let uuid = managed(&api, json!({"raid_interface": "no-raid"})).await;
    let refused = set_raid(&api, LATEST, &uuid, mirror()).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        faultstring(&refused.body).contains("raid_interface no-raid"),
        "{}",
        refused.body
    );
    // The steps are not offered either.
    let step = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "clean_steps": [
                {"interface": "raid", "step": "create_configuration"}]})),
        )
        .await;
    assert_eq!(step.status, StatusCode::BAD_REQUEST, "{}", step.body);

    // Software RAID (the agent) takes only "controller": "software".
    let agent = api
        .send_at(
            LATEST,
            Method::POST,
            "/v1/nodes",
            Some(
                json!({"driver": "manual-management", "raid_interface": "agent",
                "deploy_interface": "direct", "boot_interface": "ipxe"}),
            ),
        )
        .await;
    assert_eq!(agent.status, StatusCode::CREATED, "{}", agent.body);
    let agent = agent.body["uuid"].as_str().unwrap();
    let hardware = set_raid(&api, LATEST, agent, mirror()).await;
    assert_eq!(hardware.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&hardware.body).contains("\"controller\": \"software\""),
        "{}",
        hardware.body
    );
    let software = set_raid(
        &api,
        LATEST,
        agent,
        json!({"logical_disks": [{"size_gb": "MAX", "raid_level": "1",
            "controller": "software", "is_root_volume": true}]}),
    )
    .await;
    assert_eq!(software.status, StatusCode::NO_CONTENT, "{}", software.body);
}

#[tokio::test]
async fn a_deploy_step_applies_a_raid_configuration() {
    let api = Api::new().await;
    let uuid = managed(&api, json!({})).await;
    provision(&api, &uuid, json!({"target": "provide"}), "available").await;
    let active = provision(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [
            {"interface": "raid", "step": "apply_configuration", "priority": 90,
             "args": {"raid_config": mirror()}}]}),
        "active",
    )
    .await;
    assert_eq!(active["target_raid_config"], mirror());
    assert_eq!(active["raid_config"]["logical_disks"][0]["raid_level"], "1");
    assert_eq!(
        active["properties"]["root_device"],
        json!({"name": "/dev/md0"})
    );
}

#[tokio::test]
async fn drivers_describe_a_logical_disk() {
    let api = Api::new().await;
    let properties = api
        .send_at(
            LATEST,
            Method::GET,
            "/v1/drivers/fake-hardware/raid/logical_disk_properties",
            None,
        )
        .await;
    assert_eq!(properties.status, StatusCode::OK, "{}", properties.body);
    for key in ["raid_level", "size_gb", "is_root_volume", "controller"] {
        assert!(
            properties.body[key].is_string(),
            "{key}: {}",
            properties.body
        );
    }
    let unknown = api
        .send_at(
            LATEST,
            Method::GET,
            "/v1/drivers/no-such/raid/logical_disk_properties",
            None,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}
