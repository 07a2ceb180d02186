//! The audit's ramdisk endpoints (agent token, heartbeat status) and ports and VIFs
//! (`lessee` filter, VIF attach to a named port, `node_ident`, `conductor_groups`, OVN VTEP
//! keys, the portgroup `shard` filter).

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::common::{Api, LATEST, NodeSpec};
use super::{expect, fake_node_in, get, provision, settled_state};

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
    // As Ironic 39, which checks no version for `conductor_groups`: 1.98 filters too.
    for collection in ["ports", "portgroups"] {
        let path = format!("/v1/{collection}?conductor_groups=rack-1");
        for minor in [98, 99] {
            let found = get(&api, minor, &path).await;
            assert_eq!(
                found[collection].as_array().unwrap().len(),
                1,
                "{path} at 1.{minor}"
            );
        }
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
