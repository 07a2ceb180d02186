//! The conductor-side rules Ironic applies to port changes: how a port connects (portgroup,
//! `pxe_enabled`, `local_link_connection`, `physical_network`) changes only while its node is
//! in enroll, inspecting, inspect wait or manageable, or in maintenance (409); its MAC not
//! while the node is active (409); and all ports of a portgroup share one physical network
//! (409). On SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Answer, Api, NodeSpec, faultstring};
use serde_json::{Value, json};

async fn create(api: &Api, path: &str, body: Value) -> String {
    let created = api.send_latest(Method::POST, path, Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    created.body["uuid"].as_str().unwrap().to_owned()
}

async fn patch(api: &Api, path: &str, ops: Value) -> Answer {
    api.send_latest(Method::PATCH, path, Some(ops)).await
}

async fn connectivity_changes_follow_the_node_state(api: Api) {
    let node = api.node_in("available", NodeSpec::fake()).await;
    let port = create(
        &api,
        "/v1/ports",
        json!({"node_uuid": node, "address": "52:54:00:00:01:01"}),
    )
    .await;
    let path = format!("/v1/ports/{port}");
    let changes = [
        json!([{"op": "replace", "path": "/pxe_enabled", "value": false}]),
        json!([{"op": "add", "path": "/physical_network", "value": "physnet1"}]),
        json!([{"op": "add", "path": "/local_link_connection",
                "value": {"switch_id": "00:11:22:33:44:55", "port_id": "Gi1/0/1"}}]),
    ];
    for change in &changes {
        let refused = patch(&api, &path, change.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::CONFLICT,
            "{change}: {}",
            refused.body
        );
        assert!(
            faultstring(&refused.body).contains("connectivity attributes"),
            "{}",
            refused.body
        );
    }
    // Other fields still change on an available node.
    let extra = patch(
        &api,
        &path,
        json!([{"op": "add", "path": "/extra/rack", "value": "r1"}]),
    )
    .await;
    assert_eq!(extra.status, StatusCode::OK, "{}", extra.body);

    // In maintenance, and in manageable, they may change.
    let maintenance = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{node}/maintenance"),
            Some(json!({"reason": "recabling"})),
        )
        .await;
    assert_eq!(maintenance.status, StatusCode::ACCEPTED);
    let allowed = patch(&api, &path, changes[0].clone()).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.body);
    let cleared = api
        .send_latest(
            Method::DELETE,
            &format!("/v1/nodes/{node}/maintenance"),
            None,
        )
        .await;
    assert_eq!(cleared.status, StatusCode::ACCEPTED);
    api.provision(&node, "manage").await;
    api.run_until_state(&node, "manageable", common::STATE_TIMEOUT)
        .await;
    for change in &changes[1..] {
        let allowed = patch(&api, &path, change.clone()).await;
        assert_eq!(allowed.status, StatusCode::OK, "{change}: {}", allowed.body);
    }

    // An active node's port keeps its MAC (outside maintenance).
    let active = api
        .node_in(
            "active",
            NodeSpec::fake().with("instance_info", json!({"image_source": "http://i/x.img"})),
        )
        .await;
    let active_port = create(
        &api,
        "/v1/ports",
        json!({"node_uuid": active, "address": "52:54:00:00:01:02"}),
    )
    .await;
    let moved = patch(
        &api,
        &format!("/v1/ports/{active_port}"),
        json!([{"op": "replace", "path": "/address", "value": "52:54:00:00:01:03"}]),
    )
    .await;
    assert_eq!(moved.status, StatusCode::CONFLICT, "{}", moved.body);
}

async fn a_portgroup_has_one_physical_network(api: Api) {
    let node = api.enroll_node(NodeSpec::fake()).await;
    let portgroup = create(&api, "/v1/portgroups", json!({"node_uuid": node})).await;
    let member = |address: &str, physnet: Value| {
        json!({"node_uuid": node, "address": address, "portgroup_uuid": portgroup,
               "physical_network": physnet})
    };
    create(
        &api,
        "/v1/ports",
        member("52:54:00:00:02:01", json!("net-a")),
    )
    .await;
    let other = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(member("52:54:00:00:02:02", json!("net-b"))),
        )
        .await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.body);
    assert!(faultstring(&other.body).contains("net-a"), "{}", other.body);
    let none = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(member("52:54:00:00:02:03", Value::Null)),
        )
        .await;
    assert_eq!(none.status, StatusCode::CONFLICT, "{}", none.body);
    let same = create(
        &api,
        "/v1/ports",
        member("52:54:00:00:02:04", json!("net-a")),
    )
    .await;
    // A member may not move to another network, nor a stray port join with another one.
    let moved = patch(
        &api,
        &format!("/v1/ports/{same}"),
        json!([{"op": "replace", "path": "/physical_network", "value": "net-b"}]),
    )
    .await;
    assert_eq!(moved.status, StatusCode::CONFLICT, "{}", moved.body);
    let stray = create(
        &api,
        "/v1/ports",
        json!({"node_uuid": node, "address": "52:54:00:00:02:05", "physical_network": "net-c"}),
    )
    .await;
    let joined = patch(
        &api,
        &format!("/v1/ports/{stray}"),
        json!([{"op": "add", "path": "/portgroup_uuid", "value": portgroup}]),
    )
    .await;
    assert_eq!(joined.status, StatusCode::CONFLICT, "{}", joined.body);
    let fixed = patch(
        &api,
        &format!("/v1/ports/{stray}"),
        json!([{"op": "add", "path": "/portgroup_uuid", "value": portgroup},
               {"op": "replace", "path": "/physical_network", "value": "net-a"}]),
    )
    .await;
    assert_eq!(fixed.status, StatusCode::OK, "{}", fixed.body);
}

#[tokio::test]
async fn sqlite_connectivity_changes_follow_the_node_state() {
    connectivity_changes_follow_the_node_state(Api::new().await).await;
}

#[tokio::test]
async fn postgres_connectivity_changes_follow_the_node_state() {
    connectivity_changes_follow_the_node_state(Api::postgres().await).await;
}

#[tokio::test]
async fn sqlite_a_portgroup_has_one_physical_network() {
    a_portgroup_has_one_physical_network(Api::new().await).await;
}

#[tokio::test]
async fn postgres_a_portgroup_has_one_physical_network() {
    a_portgroup_has_one_physical_network(Api::postgres().await).await;
}
