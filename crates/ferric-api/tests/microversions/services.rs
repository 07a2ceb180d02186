//! The audit's provisioning parameters and verbs from 1.69 on, virtual media, runbooks,
//! inspection rules, escaped PATCH keys, the request id, history and firmware detail.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::common::{Api, LATEST, NodeSpec, STATE_TIMEOUT};
use super::{allocatable, allocate, expect, fake_node_in, get, provision};

#[tokio::test]
async fn v1_69_deploy_steps() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "available", "").await;
    let body = json!({"target": "active", "deploy_steps": [
        {"interface": "deploy", "step": "deploy", "args": {}, "priority": 100}]});
    let old = provision(&api, 68, &node, body.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "deploy_steps at 1.68");
    let new = provision(&api, 69, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "deploy_steps at 1.69");
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
}

#[tokio::test]
async fn v1_70_clean_disable_ramdisk() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "manageable", "").await;
    let body = json!({"target": "clean", "disable_ramdisk": true,
                      "clean_steps": [{"interface": "deploy", "step": "erase_devices_metadata"}]});
    let old = provision(&api, 69, &node, body.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "disable_ramdisk at 1.69");
    let new = provision(&api, 70, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "disable_ramdisk at 1.70");
    api.run_until_state(&node, "manageable", STATE_TIMEOUT)
        .await;
}

#[tokio::test]
async fn v1_71_scope_marker_changes_no_answer() {
    let api = Api::new().await;
    api.enroll_node(NodeSpec::fake()).await;
    // A marker only: clients learn that scoped roles are enforced; no request changes.
    let old = get(&api, 70, "/v1/nodes").await;
    let new = get(&api, 71, "/v1/nodes").await;
    assert_eq!(old, new);
    let root = get(&api, 71, "/v1").await;
    assert_eq!(root["id"], "v1");
}

#[tokio::test]
async fn v1_73_deploy_and_undeploy_verbs() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "available", "").await;
    let old = provision(&api, 72, &node, json!({"target": "deploy"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "deploy at 1.72");
    let new = provision(&api, 73, &node, json!({"target": "deploy"})).await;
    expect(&new, StatusCode::ACCEPTED, "deploy at 1.73");
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
    let old = provision(&api, 72, &node, json!({"target": "undeploy"})).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "undeploy at 1.72");
    let new = provision(&api, 73, &node, json!({"target": "undeploy"})).await;
    expect(&new, StatusCode::ACCEPTED, "undeploy at 1.73");
    api.run_until_state(&node, "available", STATE_TIMEOUT).await;
}

#[tokio::test]
async fn v1_76_boot_mode_and_secure_boot() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    for (path, body) in [
        ("boot_mode", json!({"target": "uefi"})),
        ("secure_boot", json!({"target": true})),
    ] {
        let path = format!("/v1/nodes/{node}/states/{path}");
        let old = api
            .send_at(75, Method::PUT, &path, Some(body.clone()))
            .await;
        expect(&old, StatusCode::NOT_FOUND, &format!("{path} at 1.75"));
        let new = api.send_at(76, Method::PUT, &path, Some(body)).await;
        expect(&new, StatusCode::ACCEPTED, &format!("{path} at 1.76"));
        api.settle().await;
    }
    let shown = get(&api, 76, &format!("/v1/nodes/{node}")).await;
    assert_eq!(shown["boot_mode"], "uefi");
    assert_eq!(shown["secure_boot"], true);
}

#[tokio::test]
async fn v1_79_allocation_prefers_the_node_its_name_names() {
    let api = Api::new().await;
    // Ironic's conductor matches the name whatever the request's version: 1.78 does too.
    for (minor, names) in [(78, ["a-78", "b-78"]), (79, ["a-79", "b-79"])] {
        let rc = format!("rc-{minor}");
        allocatable(&api, &rc, Some(names[0])).await;
        let wanted = allocatable(&api, &rc, Some(names[1])).await;
        let allocation =
            allocate(&api, minor, json!({"resource_class": rc, "name": names[1]})).await;
        api.settle().await;
        let shown = get(&api, minor, &format!("/v1/allocations/{allocation}")).await;
        assert_eq!(shown["state"], "active", "1.{minor}: {shown:#}");
        assert_eq!(shown["node_uuid"], wanted.as_str(), "1.{minor}");
    }
}

#[tokio::test]
async fn v1_86_firmware() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/firmware");
    let old = api.send_at(85, Method::GET, &path, None).await;
    expect(&old, StatusCode::NOT_FOUND, "firmware at 1.85");
    assert_eq!(get(&api, 86, &path).await, json!({"firmware": []}));
}

#[tokio::test]
async fn v1_87_service_verb() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "active", "").await;
    let body = json!({"target": "service", "service_steps": [
        {"interface": "deploy", "step": "hold", "args": {}}]});
    let old = provision(&api, 86, &node, body.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "service at 1.86");
    let new = provision(&api, 87, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "service at 1.87");
    api.settle().await;
    let shown = api.node(&node).await;
    assert_eq!(shown["provision_state"], "service hold", "{shown:#}");
}

#[tokio::test]
async fn v1_108_service_disable_ramdisk() {
    let api = Api::new().await;
    let node = fake_node_in(&api, "active", "").await;
    let body = json!({"target": "service", "disable_ramdisk": true, "service_steps": [
        {"interface": "deploy", "step": "hold", "args": {}}]});
    let old = provision(&api, 107, &node, body.clone()).await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "disable_ramdisk at 1.107");
    let new = provision(&api, 108, &node, body).await;
    expect(&new, StatusCode::ACCEPTED, "disable_ramdisk at 1.108");
}

// ---------------------------------------------------------------------------------------------
// Virtual media, runbooks, inspection rules.

#[tokio::test]
async fn v1_89_and_v1_93_vmedia() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let path = format!("/v1/nodes/{node}/vmedia");
    let media = json!({"device_type": "cdrom", "image_url": "http://images.test/boot.iso"});
    let old = api
        .send_at(88, Method::POST, &path, Some(media.clone()))
        .await;
    expect(&old, StatusCode::NOT_FOUND, "attach at 1.88");
    let old = api.send_at(88, Method::DELETE, &path, None).await;
    expect(&old, StatusCode::NOT_FOUND, "detach at 1.88");
    let new = api.send_at(89, Method::POST, &path, Some(media)).await;
    assert_ne!(
        new.status,
        StatusCode::NOT_FOUND,
        "attach at 1.89: {}",
        new.body
    );
    let old = api.send_at(92, Method::GET, &path, None).await;
    expect(&old, StatusCode::NOT_FOUND, "list at 1.92");
    let new = api.send_at(93, Method::GET, &path, None).await;
    assert_ne!(
        new.status,
        StatusCode::NOT_FOUND,
        "list at 1.93: {}",
        new.body
    );
}

fn runbook() -> Value {
    json!({"name": "CUSTOM_VT_OFF", "steps": [{"interface": "bios",
        "step": "apply_configuration", "order": 0,
        "args": {"settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}}]})
}

#[tokio::test]
async fn v1_92_runbooks() {
    let api = Api::new().await;
    let old = api.send_at(91, Method::GET, "/v1/runbooks", None).await;
    expect(&old, StatusCode::NOT_FOUND, "GET at 1.91");
    let old = api
        .send_at(91, Method::POST, "/v1/runbooks", Some(runbook()))
        .await;
    expect(&old, StatusCode::METHOD_NOT_ALLOWED, "POST at 1.91");
    let new = api
        .send_at(92, Method::POST, "/v1/runbooks", Some(runbook()))
        .await;
    expect(&new, StatusCode::CREATED, "POST at 1.92");
    let node = fake_node_in(&api, "manageable", "").await;
    let old = provision(
        &api,
        91,
        &node,
        json!({"target": "clean", "runbook": "CUSTOM_VT_OFF"}),
    )
    .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "runbook on clean at 1.91");
}

#[tokio::test]
async fn v1_112_runbook_traits_endpoint() {
    let api = Api::new().await;
    let created = api
        .send_at(92, Method::POST, "/v1/runbooks", Some(runbook()))
        .await;
    expect(&created, StatusCode::CREATED, "runbook");
    let path = "/v1/runbooks/CUSTOM_VT_OFF/traits";
    let old = api.send_at(111, Method::GET, path, None).await;
    expect(&old, StatusCode::NOT_FOUND, "traits at 1.111");
    let new = get(&api, 112, path).await;
    assert!(new["traits"].is_array(), "{new:#}");
    let shown = get(&api, 111, "/v1/runbooks/CUSTOM_VT_OFF").await;
    assert!(shown.get("description").is_none() && shown.get("traits").is_none());
    let shown = get(&api, 112, "/v1/runbooks/CUSTOM_VT_OFF").await;
    assert!(shown.get("description").is_some() && shown.get("traits").is_some());
}

#[tokio::test]
async fn v1_96_inspection_rules() {
    let api = Api::new().await;
    let rule = json!({"description": "tag dells", "actions": [
        {"op": "set-attribute", "args": {"path": "/extra/vendor", "value": "dell"}}]});
    let old = api
        .send_at(95, Method::GET, "/v1/inspection_rules", None)
        .await;
    expect(&old, StatusCode::NOT_FOUND, "GET at 1.95");
    let old = api
        .send_at(95, Method::POST, "/v1/inspection_rules", Some(rule.clone()))
        .await;
    expect(&old, StatusCode::METHOD_NOT_ALLOWED, "POST at 1.95");
    let new = api
        .send_at(96, Method::POST, "/v1/inspection_rules", Some(rule))
        .await;
    expect(&new, StatusCode::CREATED, "POST at 1.96");
    let listed = get(&api, 96, "/v1/inspection_rules").await;
    assert_eq!(listed["inspection_rules"].as_array().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Requests in general, history and firmware detail.

#[tokio::test]
async fn v1_98_escaped_keys_in_patch_paths() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let allocation = allocate(&api, LATEST, json!({"resource_class": "gold"})).await;
    // JSON pointers are decoded at every version (Ironic applies patches with RFC 6901);
    // 1.98 only decodes the top-level field names that allocation PATCH checks.
    for (minor, key) in [(97, "a/97~"), (98, "a/98~")] {
        let patch = json!([{"op": "add", "path": format!("/extra/{}", key.replace('~', "~0").replace('/', "~1")), "value": minor}]);
        let patched = api
            .send_at(
                minor,
                Method::PATCH,
                &format!("/v1/nodes/{node}"),
                Some(patch.clone()),
            )
            .await;
        expect(&patched, StatusCode::OK, &format!("node at 1.{minor}"));
        assert_eq!(patched.body["extra"][key], minor, "{}", patched.body);
        let patched = api
            .send_at(
                minor,
                Method::PATCH,
                &format!("/v1/allocations/{allocation}"),
                Some(patch),
            )
            .await;
        expect(
            &patched,
            StatusCode::OK,
            &format!("allocation at 1.{minor}"),
        );
        assert_eq!(patched.body["extra"][key], minor, "{}", patched.body);
    }
}

#[tokio::test]
async fn v1_107_request_id_header() {
    let api = Api::new().await;
    // Ironic's request-id middleware answers at every version; 1.107 documents it.
    for minor in [106, 107] {
        let answer = api.send_at(minor, Method::GET, "/v1/nodes", None).await;
        let id = answer
            .headers
            .get("x-openstack-request-id")
            .unwrap_or_else(|| panic!("no request id at 1.{minor}"));
        assert!(id.to_str().unwrap().starts_with("req-"), "{id:?}");
    }
}

/// A node with some history: enrolled, then managed.
async fn node_with_history(api: &Api) -> String {
    let node = fake_node_in(api, "manageable", "").await;
    let history = get(api, LATEST, &format!("/v1/nodes/{node}/history")).await;
    assert!(
        !history["history"].as_array().unwrap().is_empty(),
        "{history:#}"
    );
    node
}

#[tokio::test]
async fn v1_113_history_project() {
    let api = Api::new().await;
    let node = node_with_history(&api).await;
    let path = format!("/v1/nodes/{node}/history?detail=true");
    let old = get(&api, 112, &path).await;
    assert!(old["history"][0].get("project").is_none(), "{old:#}");
    let new = get(&api, 113, &path).await;
    assert!(new["history"][0].get("project").is_some(), "{new:#}");
}

#[tokio::test]
async fn v1_115_history_state_fields() {
    let api = Api::new().await;
    let node = node_with_history(&api).await;
    let path = format!("/v1/nodes/{node}/history?detail=true");
    let old = get(&api, 114, &path).await;
    let new = get(&api, 115, &path).await;
    for field in ["state", "target_provision_state", "duration_seconds"] {
        assert!(old["history"][0].get(field).is_none(), "{field}: {old:#}");
        assert!(new["history"][0].get(field).is_some(), "{field}: {new:#}");
    }
}

#[tokio::test]
async fn v1_114_firmware_identity() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    api.store()
        .node_firmware_set(
            node.parse().unwrap(),
            &[("bmc".to_owned(), "1.0".to_owned())],
            &[],
            None,
        )
        .await
        .unwrap();
    let path = format!("/v1/nodes/{node}/firmware");
    let old = get(&api, 113, &path).await;
    let new = get(&api, 114, &path).await;
    assert_eq!(old["firmware"][0]["component"], "bmc");
    for field in ["vendor", "model", "serial_number"] {
        assert!(old["firmware"][0].get(field).is_none(), "{field}: {old:#}");
        assert!(new["firmware"][0].get(field).is_some(), "{field}: {new:#}");
    }
}
