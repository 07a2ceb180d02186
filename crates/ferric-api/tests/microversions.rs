//! The per-microversion audit of `docs/api-compat.md` (issue 37): for each microversion the
//! audit had not yet tied to a test, what Ironic 39 added there is sent at that version (the
//! addition works, the field shows, the verb is accepted) and at the version before (hidden,
//! or refused with Ironic's status code), through the real router on a real SQLite file.
//!
//! Fields that only appear from a version are one table ([`fields_appear_at_their_versions`]);
//! verbs, endpoints, parameters and behaviours have a small test each, named `v1_N_…` after
//! the version that added them, so the table in the doc can point at them.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Answer, Api, LATEST, NodeSpec, STATE_TIMEOUT};
use serde_json::{Value, json};

/// `GET path` at 1.`minor`, expecting 200.
async fn get(api: &Api, minor: u16, path: &str) -> Value {
    let answer = api.send_at(minor, Method::GET, path, None).await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "GET {path} at 1.{minor}: {}",
        answer.body
    );
    answer.body
}

/// `PUT /v1/nodes/{node}/states/provision` with `body` at 1.`minor`.
async fn provision(api: &Api, minor: u16, node: &str, body: Value) -> Answer {
    api.send_at(
        minor,
        Method::PUT,
        &format!("/v1/nodes/{node}/states/provision"),
        Some(body),
    )
    .await
}

/// Asserts `answer` has `status`, naming `what` and the body otherwise.
fn expect(answer: &Answer, status: StatusCode, what: &str) {
    assert_eq!(answer.status, status, "{what}: {}", answer.body);
}

/// A `fake-hardware` node whose `driver_info` makes the fake interfaces wait for a callback in
/// the operations `waits` names (`fake_wait`), brought to `state` by the operator's calls.
async fn fake_node_in(api: &Api, state: &str, waits: &str) -> String {
    let mut spec = NodeSpec::fake();
    if !waits.is_empty() {
        spec = spec.driver_info(json!({"fake_wait": waits}));
    }
    api.node_in(state, spec).await
}

/// Lets the conductor work and returns the node's provision state.
async fn settled_state(api: &Api, node: &str) -> String {
    api.settle().await;
    api.node(node).await["provision_state"]
        .as_str()
        .unwrap()
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Fields shown from a version.

#[derive(Clone, Copy, Debug)]
enum Kind {
    Node,
    Port,
    Portgroup,
    Allocation,
}

/// (version, resource, field): the field is absent at 1.(version-1) and present at 1.version.
const FIELDS: &[(u16, Kind, &str)] = &[
    (3, Kind::Node, "driver_internal_info"),
    (5, Kind::Node, "name"),
    (6, Kind::Node, "inspection_started_at"),
    (6, Kind::Node, "inspection_finished_at"),
    (7, Kind::Node, "clean_step"),
    (12, Kind::Node, "raid_config"),
    (12, Kind::Node, "target_raid_config"),
    (14, Kind::Node, "states"),
    (18, Kind::Port, "internal_info"),
    (19, Kind::Port, "local_link_connection"),
    (19, Kind::Port, "pxe_enabled"),
    (33, Kind::Node, "storage_interface"),
    (38, Kind::Node, "rescue_interface"),
    (40, Kind::Node, "bios_interface"),
    (46, Kind::Node, "conductor_group"),
    (60, Kind::Allocation, "owner"),
    (65, Kind::Node, "lessee"),
    (66, Kind::Node, "network_data"),
    (86, Kind::Node, "firmware_interface"),
    (87, Kind::Node, "service_step"),
    (97, Kind::Port, "description"),
    (100, Kind::Port, "vendor"),
    (101, Kind::Port, "category"),
    (102, Kind::Portgroup, "physical_network"),
    (103, Kind::Portgroup, "category"),
    (104, Kind::Node, "instance_name"),
    (109, Kind::Node, "health"),
];

#[tokio::test]
async fn fields_appear_at_their_versions() {
    let api = Api::new().await;
    let node = api
        .enroll_node(NodeSpec::fake().with("resource_class", json!("gold")))
        .await;
    let created = |answer: Answer, what: &str| {
        expect(&answer, StatusCode::CREATED, what);
        answer.body["uuid"].as_str().unwrap().to_owned()
    };
    let port = created(
        api.send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": node, "address": "52:54:00:00:00:01"})),
        )
        .await,
        "port",
    );
    let portgroup = created(
        api.send_latest(
            Method::POST,
            "/v1/portgroups",
            Some(json!({"node_uuid": node, "address": "52:54:00:00:00:02"})),
        )
        .await,
        "portgroup",
    );
    let allocation = created(
        api.send_latest(
            Method::POST,
            "/v1/allocations",
            Some(json!({"resource_class": "gold", "owner": "project-a"})),
        )
        .await,
        "allocation",
    );
    for &(minor, kind, field) in FIELDS {
        let path = match kind {
            Kind::Node => format!("/v1/nodes/{node}"),
            Kind::Port => format!("/v1/ports/{port}"),
            Kind::Portgroup => format!("/v1/portgroups/{portgroup}"),
            Kind::Allocation => format!("/v1/allocations/{allocation}"),
        };
        let before = get(&api, minor - 1, &path).await;
        assert!(
            before.get(field).is_none(),
            "{kind:?} shows {field} at 1.{}: {before:#}",
            minor - 1
        );
        let at = get(&api, minor, &path).await;
        assert!(
            at.get(field).is_some(),
            "{kind:?} hides {field} at 1.{minor}: {at:#}"
        );
    }
}

/// (version, field, value): creating a node with the field is 406 at 1.(version-1), 201 at
/// 1.version (Ironic's `reject_fields_in_newer_versions`).
const NODE_CREATE_FIELDS: &[(u16, &str, &str)] = &[
    (5, "name", r#""node-5""#),
    (33, "storage_interface", r#""noop""#),
    (38, "rescue_interface", r#""no-rescue""#),
    (40, "bios_interface", r#""no-bios""#),
    (46, "conductor_group", r#""rack-1""#),
    (65, "lessee", r#""project-b""#),
    (
        66,
        "network_data",
        r#"{"links": [], "networks": [], "services": []}"#,
    ),
    (86, "firmware_interface", r#""no-firmware""#),
    (104, "instance_name", r#""vm-1""#),
];

#[tokio::test]
async fn node_fields_are_refused_on_create_below_their_versions() {
    let api = Api::new().await;
    for &(minor, field, value) in NODE_CREATE_FIELDS {
        let value: Value = serde_json::from_str(value).unwrap();
        let body = json!({"driver": "fake-hardware", field: value});
        let old = api
            .send_at(minor - 1, Method::POST, "/v1/nodes", Some(body.clone()))
            .await;
        expect(
            &old,
            StatusCode::NOT_ACCEPTABLE,
            &format!("{field} at 1.{}", minor - 1),
        );
        let new = api
            .send_at(minor, Method::POST, "/v1/nodes", Some(body))
            .await;
        expect(&new, StatusCode::CREATED, &format!("{field} at 1.{minor}"));
        assert_eq!(new.body[field], value, "{field}");
    }
}

/// (version, field, value): creating a port with the field is 406 at 1.(version-1) and 201 at
/// 1.version (Ironic's `_check_allowed_port_fields`).
const PORT_CREATE_FIELDS: &[(u16, &str, &str)] = &[
    (19, "pxe_enabled", "false"),
    (
        19,
        "local_link_connection",
        r#"{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Eth1/1"}"#,
    ),
    (
        64,
        "local_link_connection",
        r#"{"network_type": "unmanaged"}"#,
    ),
    (97, "description", r#""uplink""#),
    (100, "vendor", r#""acme""#),
    (101, "category", r#""storage""#),
];

#[tokio::test]
async fn port_fields_are_refused_on_create_below_their_versions() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    for (index, &(minor, field, value)) in PORT_CREATE_FIELDS.iter().enumerate() {
        let value: Value = serde_json::from_str(value).unwrap();
        let body = |last: usize| json!({"node_uuid": node, "address": format!("52:54:00:00:01:{last:02x}"), field: value});
        let old = api
            .send_at(minor - 1, Method::POST, "/v1/ports", Some(body(2 * index)))
            .await;
        expect(
            &old,
            StatusCode::NOT_ACCEPTABLE,
            &format!("{field} {value} at 1.{}", minor - 1),
        );
        let new = api
            .send_at(minor, Method::POST, "/v1/ports", Some(body(2 * index + 1)))
            .await;
        expect(&new, StatusCode::CREATED, &format!("{field} at 1.{minor}"));
        assert_eq!(new.body[field], value, "{field}");
    }
}

// ---------------------------------------------------------------------------------------------
// States and verbs.

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

/// An `available` node of resource class `rc`, optionally named.
async fn allocatable(api: &Api, rc: &str, name: Option<&str>) -> String {
    let mut spec = NodeSpec::fake().with("resource_class", json!(rc));
    if let Some(name) = name {
        spec = spec.with("name", json!(name));
    }
    api.node_in("available", spec).await
}

/// Creates an allocation at 1.`minor`, expects 201 and returns its UUID.
async fn allocate(api: &Api, minor: u16, body: Value) -> String {
    let created = api
        .send_at(minor, Method::POST, "/v1/allocations", Some(body))
        .await;
    expect(
        &created,
        StatusCode::CREATED,
        &format!("allocation at 1.{minor}"),
    );
    created.body["uuid"].as_str().unwrap().to_owned()
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

// ---------------------------------------------------------------------------------------------
// The ramdisk's endpoints.

/// A node in `wait call-back` with one port, `52:54:00:12:34:56`.
async fn waiting_for_the_agent(api: &Api) -> String {
    let node = fake_node_in(api, "available", "deploy").await;
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": node, "address": "52:54:00:12:34:56"})),
        )
        .await;
    expect(&port, StatusCode::CREATED, "port");
    expect(
        &provision(api, LATEST, &node, json!({"target": "active"})).await,
        StatusCode::ACCEPTED,
        "deploy",
    );
    assert_eq!(settled_state(api, &node).await, "wait call-back");
    node
}

const LOOKUP: &str = "/v1/lookup?addresses=52:54:00:12:34:56";

#[tokio::test]
async fn v1_62_agent_token() {
    let api = Api::new().await;
    waiting_for_the_agent(&api).await;
    let old = get(&api, 61, LOOKUP).await;
    assert!(
        old["config"]["agent_token"].is_null(),
        "a token at 1.61: {old:#}"
    );
    let new = get(&api, 62, LOOKUP).await;
    assert_eq!(new["config"]["agent_token"].as_str().unwrap().len(), 43);
    assert_eq!(new["config"]["agent_token_required"], true);
}

#[tokio::test]
async fn v1_72_heartbeat_agent_status() {
    let api = Api::new().await;
    let node = waiting_for_the_agent(&api).await;
    let token = get(&api, 72, LOOKUP).await["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let beat = json!({"callback_url": "http://10.0.0.5:9999", "agent_token": token,
                      "agent_version": "9.0.0", "agent_status": "start",
                      "agent_status_message": "starting"});
    let path = format!("/v1/heartbeat/{node}");
    let old = api
        .send_at(71, Method::POST, &path, Some(beat.clone()))
        .await;
    expect(&old, StatusCode::BAD_REQUEST, "agent_status at 1.71");
    let new = api.send_at(72, Method::POST, &path, Some(beat)).await;
    expect(&new, StatusCode::ACCEPTED, "agent_status at 1.72");
}

// ---------------------------------------------------------------------------------------------
// Ports and VIFs.

#[tokio::test]
async fn v1_65_lessee_filter() {
    let api = Api::new().await;
    api.enroll_node(NodeSpec::fake().with("lessee", json!("project-b")))
        .await;
    api.enroll_node(NodeSpec::fake()).await;
    let old = api
        .send_at(64, Method::GET, "/v1/nodes?lessee=project-b", None)
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "lessee filter at 1.64");
    let new = get(&api, 65, "/v1/nodes?lessee=project-b").await;
    assert_eq!(new["nodes"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn v1_67_vif_attach_to_a_named_port() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let mut ports = Vec::new();
    for address in ["52:54:00:00:00:01", "52:54:00:00:00:02"] {
        let port = api
            .send_latest(
                Method::POST,
                "/v1/ports",
                Some(json!({"node_uuid": node, "address": address})),
            )
            .await;
        expect(&port, StatusCode::CREATED, "port");
        ports.push(port.body["uuid"].as_str().unwrap().to_owned());
    }
    let group = api
        .send_latest(
            Method::POST,
            "/v1/portgroups",
            Some(json!({"node_uuid": node, "address": "52:54:00:00:00:09"})),
        )
        .await;
    expect(&group, StatusCode::CREATED, "portgroup");
    let group = group.body["uuid"].as_str().unwrap().to_owned();
    let path = format!("/v1/nodes/{node}/vifs");
    let both = json!({"id": "vif-1", "port_uuid": ports[1], "portgroup_uuid": group});
    let new = api
        .send_at(67, Method::POST, &path, Some(both.clone()))
        .await;
    expect(&new, StatusCode::BAD_REQUEST, "both at 1.67");
    // Before 1.67 the pair is not checked: the named port wins, as Ironic's conductor does.
    let old = api.send_at(66, Method::POST, &path, Some(both)).await;
    expect(&old, StatusCode::NO_CONTENT, "both at 1.66");
    let port = get(&api, LATEST, &format!("/v1/ports/{}", ports[1])).await;
    assert_eq!(port["internal_info"]["tenant_vif_port_id"], "vif-1");
    let named = api
        .send_at(
            67,
            Method::POST,
            &path,
            Some(json!({"id": "vif-2", "port_uuid": ports[0]})),
        )
        .await;
    expect(&named, StatusCode::NO_CONTENT, "port_uuid at 1.67");
    let port = get(&api, LATEST, &format!("/v1/ports/{}", ports[0])).await;
    assert_eq!(port["internal_info"]["tenant_vif_port_id"], "vif-2");
}

#[tokio::test]
async fn v1_94_port_created_with_node_ident() {
    let api = Api::new().await;
    let node = api
        .enroll_node(NodeSpec::fake().with("name", json!("node-a")))
        .await;
    let old = api
        .send_at(
            93,
            Method::POST,
            "/v1/ports",
            Some(json!({"node_ident": "node-a", "address": "52:54:00:00:00:01"})),
        )
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "node_ident at 1.93");
    let new = api
        .send_at(
            94,
            Method::POST,
            "/v1/ports",
            Some(json!({"node_ident": "node-a", "address": "52:54:00:00:00:01"})),
        )
        .await;
    expect(&new, StatusCode::CREATED, "node_ident at 1.94");
    assert_eq!(new.body["node_uuid"], node.as_str());
    let by_uuid = api
        .send_at(
            94,
            Method::POST,
            "/v1/ports",
            Some(json!({"node_ident": node, "address": "52:54:00:00:00:02"})),
        )
        .await;
    expect(&by_uuid, StatusCode::CREATED, "node_ident as a UUID");
    let both = api
        .send_at(
            94,
            Method::POST,
            "/v1/ports",
            Some(
                json!({"node_ident": "node-a", "node_uuid": node, "address": "52:54:00:00:00:03"}),
            ),
        )
        .await;
    expect(&both, StatusCode::BAD_REQUEST, "node_ident and node_uuid");
    let unknown = api
        .send_at(
            94,
            Method::POST,
            "/v1/ports",
            Some(json!({"node_ident": "node-x", "address": "52:54:00:00:00:04"})),
        )
        .await;
    expect(&unknown, StatusCode::BAD_REQUEST, "an unknown node_ident");
}

#[tokio::test]
async fn v1_99_port_and_portgroup_conductor_groups_filter() {
    let api = Api::new().await;
    let racked = api
        .enroll_node(NodeSpec::fake().with("conductor_group", json!("rack-1")))
        .await;
    let other = api.enroll_node(NodeSpec::fake()).await;
    for (node, last) in [(&racked, 1), (&other, 2)] {
        let port = api
            .send_latest(
                Method::POST,
                "/v1/ports",
                Some(json!({"node_uuid": node, "address": format!("52:54:00:00:00:0{last}")})),
            )
            .await;
        expect(&port, StatusCode::CREATED, "port");
        let group = api
            .send_latest(
                Method::POST,
                "/v1/portgroups",
                Some(json!({"node_uuid": node, "address": format!("52:54:00:00:01:0{last}")})),
            )
            .await;
        expect(&group, StatusCode::CREATED, "portgroup");
    }
    // Known difference (docs/api-compat.md): Ironic 39 does not check the version of
    // `conductor_groups` (1.98 filters too); Ferric refuses it below 1.99 as the version list
    // reads, and `list_filters` holds it to that.
    for collection in ["ports", "portgroups"] {
        let path = format!("/v1/{collection}?conductor_groups=rack-1");
        let old = api.send_at(98, Method::GET, &path, None).await;
        expect(&old, StatusCode::NOT_ACCEPTABLE, &format!("{path} at 1.98"));
        let new = get(&api, 99, &path).await;
        assert_eq!(new[collection].as_array().unwrap().len(), 1, "{path}");
    }
}

#[tokio::test]
async fn v1_105_ovn_vtep_keys_are_refused_again() {
    let api = Api::new().await;
    let node = api.enroll_node(NodeSpec::fake()).await;
    let vtep = json!({"port_id": "Eth1/1", "vtep-logical-switch": "ls-1",
                      "vtep-physical-switch": "ps-1"});
    let body = |last: u8| {
        json!({"node_uuid": node, "address": format!("52:54:00:00:00:0{last}"),
               "local_link_connection": vtep})
    };
    let old = api
        .send_at(89, Method::POST, "/v1/ports", Some(body(1)))
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "vtep at 1.89");
    let within = api
        .send_at(104, Method::POST, "/v1/ports", Some(body(2)))
        .await;
    expect(&within, StatusCode::CREATED, "vtep at 1.104");
    let port = within.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(within.body["local_link_connection"], vtep);
    let removed = api
        .send_at(105, Method::POST, "/v1/ports", Some(body(3)))
        .await;
    expect(&removed, StatusCode::NOT_ACCEPTABLE, "vtep at 1.105");
    // Outside 1.90-1.104 a stored VTEP connection is shown empty.
    let shown = get(&api, 105, &format!("/v1/ports/{port}")).await;
    assert_eq!(shown["local_link_connection"], json!({}));
    let shown = get(&api, 104, &format!("/v1/ports/{port}")).await;
    assert_eq!(shown["local_link_connection"], vtep);
}

#[tokio::test]
async fn v1_106_portgroup_shard_filter() {
    let api = Api::new().await;
    let sharded = api
        .enroll_node(NodeSpec::fake().with("shard", json!("shard-1")))
        .await;
    let other = api.enroll_node(NodeSpec::fake()).await;
    for (node, last) in [(&sharded, 1), (&other, 2)] {
        let group = api
            .send_latest(
                Method::POST,
                "/v1/portgroups",
                Some(json!({"node_uuid": node, "address": format!("52:54:00:00:01:0{last}")})),
            )
            .await;
        expect(&group, StatusCode::CREATED, "portgroup");
    }
    let old = api
        .send_at(105, Method::GET, "/v1/portgroups?shard=shard-1", None)
        .await;
    expect(&old, StatusCode::NOT_ACCEPTABLE, "shard filter at 1.105");
    let new = get(&api, 106, "/v1/portgroups?shard=shard-1").await;
    assert_eq!(new["portgroups"].as_array().unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Provisioning parameters.

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
