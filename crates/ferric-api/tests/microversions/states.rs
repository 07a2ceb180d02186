//! The audit's verbs, endpoints and parameters from 1.2 to 1.60: provision verbs, RAID,
//! links, power, NMI, volumes, BIOS, `?detail`, filters, deploy templates and allocations.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::common::{Api, LATEST, NodeSpec, STATE_TIMEOUT};
use super::{allocate, expect, fake_node_in, get, provision, settled_state};

#[tokio::test]
async fn v1_2_available_is_named() {
    let api = Api::new().await;
    let node = api.enroll(json!({"driver": "fake-hardware"})).await;
    let old = get(&api, 1, &format!("/v1/nodes/{node}")).await;
    assert_eq!(old["provision_state"], Value::Null);
    let new = get(&api, 2, &format!("/v1/nodes/{node}")).await;
    assert_eq!(new["provision_state"], "available");
}

#[tokio::test]
async fn v1_4_manage_verb() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let old = provision(&api, 3, &node, json!({"target": "manage"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "manage at 1.3");
    let new = provision(&api, 4, &node, json!({"target": "manage"})).await;
    expect(&new, StatusCode::ACCEPTED, "manage at 1.4");
    assert_eq!(settled_state(&api, &node).await, "manageable");
    let old = provision(&api, 3, &node, json!({"target": "provide"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "provide at 1.3");
}

#[tokio::test]
async fn v1_5_node_names() {
    let api = Api::new().await;
    let node = api
        .enroll_node(NodeSpec::fake().with("name", json!("node-a")))
        .await;
    // Known difference (docs/api-compat.md): below 1.5 Ironic answers 404 for a node named
    // by name; Ferric resolves the name at every version.
    let new = get(&api, 5, "/v1/nodes/node-a").await;
    assert_eq!(new["uuid"], node.as_str());
    let by_uuid = get(&api, 4, &format!("/v1/nodes/{node}")).await;
    assert!(by_uuid.get("name").is_none());
}

#[tokio::test]
async fn v1_6_inspect_verb() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "").await;
    let old = provision(&api, 5, &node, json!({"target": "inspect"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "inspect at 1.5");
    let new = provision(&api, 6, &node, json!({"target": "inspect"})).await;
    expect(&new, StatusCode::ACCEPTED, "inspect at 1.6");
    api.run_until_state(&node, "manageable", STATE_TIMEOUT)
        .await;
}

#[tokio::test]
async fn v1_12_raid() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/states/raid");
    let config = json!({"logical_disks": [{"size_gb": 10, "raid_level": "1"}]});
    let old = api
        .send_at(11, Method::PUT, &path, Some(config.clone()))
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "raid at 1.11");
    let new = api.send_at(12, Method::PUT, &path, Some(config)).await;
    expect(&new, StatusCode::NO_CONTENT, "raid at 1.12");
    let shown = get(&api, 12, &format!("/v1/nodes/{node}")).await;
    assert_eq!(
        shown["target_raid_config"]["logical_disks"][0]["size_gb"],
        10
    );

    let properties = "/v1/drivers/fake-hardware/raid/logical_disk_properties";
    let old = api.send_at(11, Method::GET, properties, None).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "disk properties at 1.11");
    let new = get(&api, 12, properties).await;
    assert!(new.get("raid_level").is_some(), "{new:#}");
}

#[tokio::test]
async fn v1_13_abort_from_clean_wait() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "clean").await;
    let steps = json!({"target": "clean", "clean_steps": [{"interface": "deploy", "step": "erase_devices_metadata"}]});
    expect(
        &provision(&api, 15, &node, steps).await,
        StatusCode::ACCEPTED,
        "clean",
    );
    assert_eq!(settled_state(&api, &node).await, "clean wait");
    let old = provision(&api, 12, &node, json!({"target": "abort"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "abort at 1.12");
    let new = provision(&api, 13, &node, json!({"target": "abort"})).await;
    expect(&new, StatusCode::ACCEPTED, "abort at 1.13");
    assert_eq!(settled_state(&api, &node).await, "clean failed");
}

#[tokio::test]
async fn v1_14_states_and_properties_links() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let rel_hrefs = |body: &Value, field: &str| -> Vec<String> {
        body[field]
            .as_array()
            .map(|links| {
                links
                    .iter()
                    .map(|link| link["href"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let old = get(&api, 13, &format!("/v1/nodes/{node}")).await;
    assert!(old.get("states").is_none());
    let new = get(&api, 14, &format!("/v1/nodes/{node}")).await;
    assert!(rel_hrefs(&new, "states")[0].ends_with(&format!("/v1/nodes/{node}/states")));

    let old = get(&api, 13, "/v1/drivers/fake-hardware").await;
    assert!(old.get("properties").is_none(), "{old:#}");
    let new = get(&api, 14, "/v1/drivers/fake-hardware").await;
    assert!(
        rel_hrefs(&new, "properties")[0].ends_with("/v1/drivers/fake-hardware/properties"),
        "{new:#}"
    );
}

#[tokio::test]
async fn v1_15_manual_clean() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "").await;
    let steps = json!({"target": "clean", "clean_steps": [{"interface": "deploy", "step": "erase_devices_metadata"}]});
    let old = provision(&api, 14, &node, steps.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "clean at 1.14");
    let new = provision(&api, 15, &node, steps).await;
    expect(&new, StatusCode::ACCEPTED, "clean at 1.15");
    api.run_until_state(&node, "manageable", STATE_TIMEOUT)
        .await;
}

#[tokio::test]
async fn v1_17_adopt_verb() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "").await;
    let old = provision(&api, 16, &node, json!({"target": "adopt"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "adopt at 1.16");
    let new = provision(&api, 17, &node, json!({"target": "adopt"})).await;
    expect(&new, StatusCode::ACCEPTED, "adopt at 1.17");
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
}

#[tokio::test]
async fn v1_27_soft_power_and_timeout() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/states/power");
    let on = api
        .send_at(26, Method::PUT, &path, Some(json!({"target": "power on"})))
        .await;
    expect(&on, StatusCode::ACCEPTED, "power on at 1.26");
    api.settle().await;
    for body in [
        json!({"target": "soft power off"}),
        json!({"target": "soft rebooting"}),
        json!({"target": "power off", "timeout": 10}),
    ] {
        let old = api
            .send_at(26, Method::PUT, &path, Some(body.clone()))
            .await;
        expect(&old, StatusCode::NOT_ACCEPTABLE, &format!("{body} at 1.26"));
    }
    let soft = api
        .send_at(
            27,
            Method::PUT,
            &path,
            Some(json!({"target": "soft power off", "timeout": 10})),
        )
        .await;
    expect(&soft, StatusCode::ACCEPTED, "soft power off at 1.27");
    api.settle().await;
    assert_eq!(api.node(&node).await["power_state"], "power off");
}

#[tokio::test]
async fn v1_29_inject_nmi() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/management/inject_nmi");
    let old = api.send_at(28, Method::PUT, &path, Some(json!({}))).await;
    expect(&old, StatusCode::NOT_FOUND, "inject_nmi at 1.28");
    let new = api.send_at(29, Method::PUT, &path, Some(json!({}))).await;
    expect(&new, StatusCode::NO_CONTENT, "inject_nmi at 1.29");
}

#[tokio::test]
async fn v1_32_volume() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    for path in [
        "/v1/volume".to_owned(),
        "/v1/volume/connectors".to_owned(),
        "/v1/volume/targets".to_owned(),
        format!("/v1/nodes/{node}/volume"),
    ] {
        let old = api.send_at(31, Method::GET, &path, None).await;
        expect(&old, StatusCode::NOT_FOUND, &format!("{path} at 1.31"));
        get(&api, 32, &path).await;
    }
    let old = get(&api, 31, &format!("/v1/nodes/{node}")).await;
    assert!(old.get("volume").is_none());
    let new = get(&api, 32, &format!("/v1/nodes/{node}")).await;
    assert!(new.get("volume").is_some());
    let connector =
        json!({"node_uuid": node, "type": "iqn", "connector_id": "iqn.2026-11.test:n1"});
    let old = api
        .send_at(
            31,
            Method::POST,
            "/v1/volume/connectors",
            Some(connector.clone()),
        )
        .await;
    expect(&old, StatusCode::NOT_FOUND, "connector create at 1.31");
    let new = api
        .send_at(32, Method::POST, "/v1/volume/connectors", Some(connector))
        .await;
    expect(&new, StatusCode::CREATED, "connector create at 1.32");
}

#[tokio::test]
async fn v1_38_rescue_verbs() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "active", "").await;
    let body = json!({"target": "rescue", "rescue_password": "secret"});
    let old = provision(&api, 37, &node, body.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "rescue at 1.37");
    let new = provision(&api, 38, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "rescue at 1.38");
    api.run_until_state(&node, "rescue", STATE_TIMEOUT).await;
    let old = provision(&api, 37, &node, json!({"target": "unrescue"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "unrescue at 1.37");
    let new = provision(&api, 38, &node, json!({"target": "unrescue"})).await;
    expect(&new, StatusCode::ACCEPTED, "unrescue at 1.38");
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
}

#[tokio::test]
async fn v1_40_bios() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/bios");
    let old = api.send_at(39, Method::GET, &path, None).await;
    expect(&old, StatusCode::NOT_FOUND, "bios at 1.39");
    assert_eq!(get(&api, 40, &path).await, json!({"bios": []}));
}

#[tokio::test]
async fn v1_41_abort_from_inspect_wait() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "inspect").await;
    expect(
        &provision(&api, LATEST, &node, json!({"target": "inspect"})).await,
        StatusCode::ACCEPTED,
        "inspect",
    );
    assert_eq!(settled_state(&api, &node).await, "inspect wait");
    let old = provision(&api, 40, &node, json!({"target": "abort"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "abort at 1.40");
    let new = provision(&api, 41, &node, json!({"target": "abort"})).await;
    expect(&new, StatusCode::ACCEPTED, "abort at 1.41");
    assert_eq!(settled_state(&api, &node).await, "inspect failed");
}

#[tokio::test]
async fn v1_43_detail_on_every_listing() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": node, "address": "52:54:00:00:00:01"})),
        )
        .await;
    expect(&port, StatusCode::CREATED, "port");
    for path in [
        "/v1/ports?detail=true",
        "/v1/chassis?detail=true",
        "/v1/portgroups?detail=true",
    ] {
        let old = api.send_at(42, Method::GET, path, None).await;
        // Portgroups exist from 1.23, so 1.42 reaches their listing's parameter check too.
        expect(&old, StatusCode::BAD_REQUEST, &format!("{path} at 1.42"));
        get(&api, 43, path).await;
    }
    let detailed = get(&api, 43, "/v1/ports?detail=true").await;
    assert!(detailed["ports"][0].get("extra").is_some());
    let short = get(&api, 43, "/v1/ports?detail=false").await;
    assert!(short["ports"][0].get("extra").is_none());
}

#[tokio::test]
async fn v1_46_conductor_group_filter() {
    let api = Api::new().await;
    api.enroll_node(NodeSpec::fake().with("conductor_group", json!("rack-1")))
        .await;
    api.enroll_node(NodeSpec::fake()).await;
    let old = api
        .send_at(45, Method::GET, "/v1/nodes?conductor_group=rack-1", None)
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "filter at 1.45");
    let new = get(&api, 46, "/v1/nodes?conductor_group=rack-1").await;
    assert_eq!(new["nodes"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn v1_55_deploy_templates() {
    let api = Api::new().await;
    let template = json!({"name": "CUSTOM_HYPERTHREADING_ON", "steps": [{
        "interface": "bios", "step": "apply_configuration", "priority": 150,
        "args": {"settings": [{"name": "LogicalProc", "value": "Enabled"}]}}]});
    let old = api
        .send_at(54, Method::GET, "/v1/deploy_templates", None)
        .await;
    expect(&old, StatusCode::NOT_FOUND, "GET at 1.54");
    let old = api
        .send_at(
            54,
            Method::POST,
            "/v1/deploy_templates",
            Some(template.clone()),
        )
        .await;
    expect(&old, StatusCode::METHOD_NOT_ALLOWED, "POST at 1.54");
    let new = api
        .send_at(55, Method::POST, "/v1/deploy_templates", Some(template))
        .await;
    expect(&new, StatusCode::CREATED, "POST at 1.55");
    let listed = get(&api, 55, "/v1/deploy_templates").await;
    assert_eq!(listed["deploy_templates"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn v1_57_allocation_update() {
    let api = Api::new().await;
    let allocation = allocate(&api, 52, json!({"resource_class": "gold"})).await;
    let path = format!("/v1/allocations/{allocation}");
    let patch = json!([{"op": "add", "path": "/name", "value": "renamed"}]);
    let old = api
        .send_at(56, Method::PATCH, &path, Some(patch.clone()))
        .await;
    expect(&old, StatusCode::METHOD_NOT_ALLOWED, "PATCH at 1.56");
    let new = api.send_at(57, Method::PATCH, &path, Some(patch)).await;
    expect(&new, StatusCode::OK, "PATCH at 1.57");
    assert_eq!(new.body["name"], "renamed");
}

#[tokio::test]
async fn v1_58_allocation_backfill() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "active", "").await;
    let old = api
        .send_at(
            57,
            Method::POST,
            "/v1/allocations",
            Some(json!({"node": node})),
        )
        .await;
    expect(&old, StatusCode::BAD_REQUEST, "backfill at 1.57");
    let allocation = allocate(&api, 58, json!({"node": node})).await;
    let shown = get(&api, 58, &format!("/v1/allocations/{allocation}")).await;
    assert_eq!(shown["state"], "active");
    assert_eq!(shown["node_uuid"], node.as_str());
}

#[tokio::test]
async fn v1_59_configdrive_vendor_data() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "available", "").await;
    let body = json!({"target": "active", "configdrive": {
        "meta_data": {"hostname": "n1"}, "vendor_data": {"site": "lab"}}});
    let old = provision(&api, 58, &node, body.clone()).await;
    expect(&old, StatusCode::BAD_REQUEST, "vendor_data at 1.58");
    let new = provision(&api, 59, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "vendor_data at 1.59");
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
}

#[tokio::test]
async fn v1_60_allocation_owner_filter() {
    let api = Api::new().await;
    allocate(
        &api,
        LATEST,
        json!({"resource_class": "gold", "owner": "project-a"}),
    )
    .await;
    allocate(&api, LATEST, json!({"resource_class": "gold"})).await;
    let old = api
        .send_at(59, Method::GET, "/v1/allocations?owner=project-a", None)
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "owner filter at 1.59");
    let new = get(&api, 60, "/v1/allocations?owner=project-a").await;
    assert_eq!(new["allocations"].as_array().unwrap().len(), 1);
    assert_eq!(new["allocations"][0]["owner"], "project-a");
}
