//! The per-microversion audit of `docs/api-compat.md` (issue 37): for each microversion the
//! audit had not yet tied to a test, what Ironic 39 added there is sent at that version (the
//! addition works, the field shows, the verb is accepted) and at the version before (hidden,
//! or refused with Ironic's status code), through the real router on a real SQLite file.
//!
//! Fields that only appear from a version are one table ([`fields_appear_at_their_versions`]);
//! verbs, endpoints, parameters and behaviours have a small test each, named `v1_N_…` after
//! the version that added them, so the table in the doc can point at them: `states` (verbs,
//! endpoints and parameters up to 1.60), `network` (the ramdisk's endpoints, ports and VIFs),
//! `services` (provisioning parameters, virtual media, runbooks, inspection rules, history).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;
#[path = "microversions/network.rs"]
mod network;
#[path = "microversions/services.rs"]
mod services;
#[path = "microversions/states.rs"]
mod states;

use axum::http::{Method, StatusCode};
use common::{Answer, Api, NodeSpec};
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
