//! Node sub-resources that leave provision and power state alone: traits (1.37), VIFs (1.28)
//! and history (1.78), on a real SQLite file.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::{TimeZone, Utc};
use common::{NodeSpec, STATE_TIMEOUT, faultstring};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, NodeHistoryEntry, Port, Portgroup};
use serde_json::json;
use uuid::Uuid;

struct Api(common::Api);

impl std::ops::Deref for Api {
    type Target = common::Api;
    fn deref(&self) -> &common::Api {
        &self.0
    }
}

impl Api {
    async fn new() -> Self {
        Self(common::Api::new().await)
    }

    /// A node named `n1` (names need 1.5, above the router's maximum: made in the store).
    async fn node(&self) -> String {
        let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Enroll);
        node.name = Some("n1".to_owned());
        self.store()
            .node_create(&node)
            .await
            .unwrap()
            .uuid
            .to_string()
    }

    async fn port(&self, node: &str, address: &str, pxe: bool, group: Option<Uuid>) -> Uuid {
        let mut port = Port::new(Uuid::new_v4(), node.parse().unwrap(), address);
        port.pxe_enabled = pxe;
        port.portgroup_uuid = group;
        self.store().port_create(&port).await.unwrap().uuid
    }

    async fn portgroup(&self, node: &str) -> Uuid {
        let group = Portgroup::new(Uuid::new_v4(), node.parse().unwrap());
        self.store().portgroup_create(&group).await.unwrap().uuid
    }

    async fn vif_of_port(&self, port: Uuid) -> Option<String> {
        let port = self.store().port_get(&port.into()).await.unwrap();
        port.internal_info
            .get("tenant_vif_port_id")
            .map(|id| id.as_str().unwrap().to_owned())
    }

    async fn attach(&self, minor: u16, body: serde_json::Value) -> common::Answer {
        self.send_at(minor, Method::POST, "/v1/nodes/n1/vifs", Some(body))
            .await
    }
}

#[tokio::test]
async fn traits_are_listed_replaced_added_and_removed() {
    let api = Api::new().await;
    let node = api.node().await;
    let path = "/v1/nodes/n1/traits";

    let empty = api.send_at(37, Method::GET, path, None).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.body, json!({"traits": []}));

    let replaced = api
        .send_at(
            37,
            Method::PUT,
            path,
            Some(json!({"traits": ["CUSTOM_B", "HW_CPU_X86_VMX", "CUSTOM_B"]})),
        )
        .await;
    assert_eq!(replaced.status, StatusCode::NO_CONTENT, "{}", replaced.body);
    let added = api
        .send_at(37, Method::PUT, &format!("{path}/CUSTOM_A"), None)
        .await;
    assert_eq!(added.status, StatusCode::NO_CONTENT);
    assert_eq!(
        added.headers["location"],
        "http://ferric.test/v1/nodes/n1/traits/CUSTOM_A"
    );
    let listed = api.send_at(37, Method::GET, path, None).await;
    assert_eq!(
        listed.body["traits"],
        json!(["CUSTOM_A", "CUSTOM_B", "HW_CPU_X86_VMX"])
    );

    let removed = api
        .send_at(37, Method::DELETE, &format!("{path}/CUSTOM_B"), None)
        .await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    let absent = api
        .send_at(37, Method::DELETE, &format!("{path}/CUSTOM_B"), None)
        .await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&absent.body),
        format!("Node {node} doesn't have a trait 'CUSTOM_B'")
    );
    let cleared = api.send_at(37, Method::DELETE, path, None).await;
    assert_eq!(cleared.status, StatusCode::NO_CONTENT);
    let node_record = api.store().node_get(&node.as_str().into()).await.unwrap();
    assert!(node_record.traits.is_empty());

    // Traits arrived in 1.37; below it Ironic answers 406 to a GET.
    let too_old = api.send_at(36, Method::GET, path, None).await;
    assert_eq!(too_old.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn traits_are_validated_and_bounded() {
    let api = Api::new().await;
    let node = api.node().await;
    let path = "/v1/nodes/n1/traits";
    let lower = api
        .send_at(37, Method::PUT, &format!("{path}/CUSTOM_lower"), None)
        .await;
    assert_eq!(lower.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&lower.body).contains("CUSTOM_[A-Z0-9_]+"));
    let bad_in_list = api
        .send_at(37, Method::PUT, path, Some(json!({"traits": ["GPU"]})))
        .await;
    assert_eq!(bad_in_list.status, StatusCode::BAD_REQUEST);
    let neither = api.send_at(37, Method::PUT, path, None).await;
    assert_eq!(neither.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&neither.body).starts_with("A single node trait may be added"));
    let body_with_one = api
        .send_at(
            37,
            Method::PUT,
            &format!("{path}/CUSTOM_A"),
            Some(json!({"traits": ["CUSTOM_B"]})),
        )
        .await;
    assert_eq!(body_with_one.status, StatusCode::BAD_REQUEST);

    let fifty_one: Vec<String> = (0..51).map(|n| format!("CUSTOM_T{n}")).collect();
    let too_many = api
        .send_at(37, Method::PUT, path, Some(json!({ "traits": fifty_one })))
        .await;
    assert_eq!(too_many.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&too_many.body).contains("(51 vs. 50)"));

    api.store()
        .node_lease_acquire(
            node.parse().unwrap(),
            "conductor-1",
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let locked = api
        .send_at(37, Method::PUT, &format!("{path}/CUSTOM_A"), None)
        .await;
    assert_eq!(locked.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn vif_attach_prefers_portgroups_then_pxe_ports() {
    let api = Api::new().await;
    let node = api.node().await;
    let plain = api.port(&node, "52:54:00:00:00:01", false, None).await;
    let pxe = api.port(&node, "52:54:00:00:00:02", true, None).await;

    let first = api.attach(28, json!({"id": "vif-1"})).await;
    assert_eq!(first.status, StatusCode::NO_CONTENT, "{}", first.body);
    assert_eq!(api.vif_of_port(pxe).await.as_deref(), Some("vif-1"));
    let again = api.attach(28, json!({"id": "vif-1"})).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&again.body),
        format!(
            "Unable to attach VIF vif-1 because VIF vif-1 is already attached to Ironic Port \
             {pxe}"
        )
    );
    let second = api.attach(28, json!({"id": "vif-2"})).await;
    assert_eq!(second.status, StatusCode::NO_CONTENT);
    assert_eq!(api.vif_of_port(plain).await.as_deref(), Some("vif-2"));
    let full = api.attach(28, json!({"id": "vif-3"})).await;
    assert_eq!(full.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&full.body),
        "Unable to attach VIF vif-3, not enough free physical ports."
    );

    let listed = api
        .send_at(28, Method::GET, "/v1/nodes/n1/vifs", None)
        .await;
    // In port order: `plain` was enrolled first.
    assert_eq!(
        listed.body,
        json!({"vifs": [{"id": "vif-2"}, {"id": "vif-1"}]})
    );

    // A portgroup with a free member port wins over ports.
    let group = api.portgroup(&node).await;
    let member = api
        .port(&node, "52:54:00:00:00:03", true, Some(group))
        .await;
    let bonded = api.attach(28, json!({"id": "vif-4"})).await;
    assert_eq!(bonded.status, StatusCode::NO_CONTENT);
    let group_record = api.store().portgroup_get(&group.into()).await.unwrap();
    assert_eq!(group_record.internal_info["tenant_vif_port_id"], "vif-4");
    assert_eq!(api.vif_of_port(member).await, None);

    let detached = api
        .send_at(28, Method::DELETE, "/v1/nodes/n1/vifs/vif-1", None)
        .await;
    assert_eq!(detached.status, StatusCode::NO_CONTENT);
    assert_eq!(api.vif_of_port(pxe).await, None);
    let not_attached = api
        .send_at(28, Method::DELETE, "/v1/nodes/n1/vifs/vif-1", None)
        .await;
    assert_eq!(not_attached.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&not_attached.body),
        format!("Unable to detach VIF vif-1 from node {node} because it is not attached to it.")
    );
}

#[tokio::test]
async fn vif_attach_to_a_named_port_or_portgroup() {
    let api = Api::new().await;
    let node = api.node().await;
    let pxe = api.port(&node, "52:54:00:00:00:01", true, None).await;
    let plain = api.port(&node, "52:54:00:00:00:02", false, None).await;
    let group = api.portgroup(&node).await;
    api.port(&node, "52:54:00:00:00:03", false, Some(group))
        .await;

    let to_plain = api
        .attach(28, json!({"id": "vif-1", "port_uuid": plain}))
        .await;
    assert_eq!(to_plain.status, StatusCode::NO_CONTENT);
    assert_eq!(api.vif_of_port(plain).await.as_deref(), Some("vif-1"));
    assert_eq!(api.vif_of_port(pxe).await, None);

    let both = api
        .attach(
            67,
            json!({"id": "vif-2", "port_uuid": pxe, "portgroup_uuid": group}),
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&both.body),
        "Cannot specify both port_uuid and portgroup_uuid"
    );
    let to_group = api
        .attach(67, json!({"id": "vif-2", "portgroup_uuid": group}))
        .await;
    assert_eq!(to_group.status, StatusCode::NO_CONTENT);
    let unknown_port = api
        .attach(67, json!({"id": "vif-3", "port_uuid": Uuid::new_v4()}))
        .await;
    assert_eq!(unknown_port.status, StatusCode::BAD_REQUEST);

    let no_id = api.attach(28, json!({"port_uuid": pxe})).await;
    assert_eq!(no_id.status, StatusCode::BAD_REQUEST);
    let bad_id = api.attach(28, json!({"id": "not a name"})).await;
    assert_eq!(bad_id.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bad_id.body),
        "Expected UUID or name for id: not a name"
    );
    let too_old = api.attach(27, json!({"id": "vif-9"})).await;
    assert_eq!(too_old.status, StatusCode::NOT_FOUND);
}

fn event(node: Uuid, n: u32, text: String) -> NodeHistoryEntry {
    NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node,
        created_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, n).unwrap(),
        severity: "ERROR".to_owned(),
        event_type: "deploy".to_owned(),
        event: text,
        conductor: Some("c1".to_owned()),
        user: None,
    }
}

/// Undeploy detaches every VIF, as Ironic's tear-down does: Nova deletes a server without
/// detaching when it finds the node `active`, and a VIF left behind would keep the port from
/// the next server (found by `cargo xtask openstack`).
#[tokio::test]
async fn undeploy_detaches_every_vif() {
    let api = Api::new().await;
    let node = api.node_in("available", NodeSpec::fake()).await;
    let group = api.portgroup(&node).await;
    api.port(&node, "52:54:00:12:34:01", true, Some(group))
        .await;
    let port = api.port(&node, "52:54:00:12:34:02", true, None).await;
    api.provision(&node, "active").await;
    api.run_until_state(&node, "active", STATE_TIMEOUT).await;
    for vif in ["vif-1", "vif-2"] {
        let attached = api
            .send_at(
                67,
                Method::POST,
                &format!("/v1/nodes/{node}/vifs"),
                Some(json!({"id": vif})),
            )
            .await;
        assert_eq!(attached.status, StatusCode::NO_CONTENT, "{}", attached.body);
    }
    let listed = api
        .send_at(67, Method::GET, &format!("/v1/nodes/{node}/vifs"), None)
        .await;
    assert_eq!(
        listed.body["vifs"].as_array().unwrap().len(),
        2,
        "{}",
        listed.body
    );
    api.provision(&node, "deleted").await;
    api.run_until_state(&node, "available", STATE_TIMEOUT).await;
    let listed = api
        .send_at(67, Method::GET, &format!("/v1/nodes/{node}/vifs"), None)
        .await;
    assert_eq!(listed.body, json!({"vifs": []}));
    assert_eq!(api.vif_of_port(port).await, None);
    let group = api.store().portgroup_get(&group.into()).await.unwrap();
    assert!(group.internal_info.get("tenant_vif_port_id").is_none());
}

#[tokio::test]
async fn history_lists_short_and_detailed_events() {
    let api = Api::new().await;
    let node: Uuid = api.node().await.parse().unwrap();
    let long = "x".repeat(300);
    let mut added = Vec::new();
    for (n, text) in [
        (0, "first".to_owned()),
        (1, long.clone()),
        (2, "third".to_owned()),
    ] {
        added.push(
            api.store()
                .node_history_add(&event(node, n, text))
                .await
                .unwrap(),
        );
    }

    let listed = api
        .send_at(78, Method::GET, "/v1/nodes/n1/history", None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let items = listed.body["history"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "event", "links", "severity", "uuid"]);
    let short = items[1]["event"].as_str().unwrap();
    assert_eq!(short.len(), 254);
    assert!(short.ends_with("..."));

    let detail = api
        .send_at(78, Method::GET, "/v1/nodes/n1/history?detail=true", None)
        .await;
    let item = &detail.body["history"][1];
    assert_eq!(item["event"], long.as_str());
    assert_eq!(item["event_type"], "deploy");
    assert_eq!(item["conductor"], "c1");
    assert!(item["user"].is_null());

    let page = api
        .send_at(78, Method::GET, "/v1/nodes/n1/history?limit=2", None)
        .await;
    assert_eq!(
        page.body["next"],
        format!(
            "http://ferric.test/v1/nodes/n1/history?limit=2&marker={}",
            added[1].uuid
        )
    );
    let rest = api
        .send_at(
            78,
            Method::GET,
            &format!("/v1/nodes/n1/history?marker={}", added[1].uuid),
            None,
        )
        .await;
    assert_eq!(rest.body["history"][0]["uuid"], added[2].uuid.to_string());

    let one = api
        .send_at(
            78,
            Method::GET,
            &format!("/v1/nodes/n1/history/{}", added[0].uuid),
            None,
        )
        .await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.body["event"], "first");
    assert_eq!(
        one.body["links"][0]["href"],
        format!(
            "http://ferric.test/v1/nodes/{node}/history/{}",
            added[0].uuid
        )
    );
    let unknown = Uuid::new_v4();
    let missing = api
        .send_at(
            78,
            Method::GET,
            &format!("/v1/nodes/n1/history/{unknown}"),
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&missing.body),
        format!("Node history record {unknown} could not be found.")
    );
    let too_old = api
        .send_at(77, Method::GET, "/v1/nodes/n1/history", None)
        .await;
    assert_eq!(too_old.status, StatusCode::NOT_FOUND);
}
