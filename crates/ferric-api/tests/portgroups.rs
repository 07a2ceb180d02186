//! `/v1/portgroups`, `/v1/nodes/{node}/portgroups` and `/v1/portgroups/{pg}/ports` through
//! the real router on a real SQLite file, at the microversions that introduced them.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Answer, faultstring};
use ferric_model::ProvisionState;
use ferric_model::resources::Ident;
use serde_json::{Value, json};

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

    async fn node(&self) -> String {
        self.enroll(json!({"driver": "fake-hardware"})).await
    }

    async fn portgroup(&self, minor: u16, body: Value) -> Answer {
        self.send_at(minor, Method::POST, "/v1/portgroups", Some(body))
            .await
    }

    async fn port(&self, node: &str, address: &str, portgroup: Option<&str>) -> String {
        let mut port = ferric_model::resources::Port::new(
            uuid::Uuid::new_v4(),
            node.parse().unwrap(),
            address,
        );
        port.portgroup_uuid = portgroup.map(|uuid| uuid.parse().unwrap());
        self.store()
            .port_create(&port)
            .await
            .unwrap()
            .uuid
            .to_string()
    }

    async fn set_state(&self, node: &str, state: ProvisionState) {
        let ident = Ident::parse(node);
        let mut record = self.store().node_get(&ident).await.unwrap();
        let version = record.version;
        record.provision_state = state;
        self.store().node_update(&record, version).await.unwrap();
    }
}

#[tokio::test]
async fn create_shows_the_portgroup_and_its_location() {
    let api = Api::new().await;
    let node = api.node().await;
    let created = api
        .portgroup(
            26,
            json!({"node_uuid": node, "name": "bond0", "address": "52-54-00-AA-BB-01"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/portgroups/{uuid}")
    );
    assert_eq!(created.body["address"], "52:54:00:aa:bb:01");
    assert_eq!(created.body["mode"], "active-backup");
    assert_eq!(created.body["standalone_ports_supported"], true);
    assert_eq!(
        created.body["ports"][0]["href"],
        format!("http://ferric.test/v1/portgroups/{uuid}/ports")
    );
    // physical_network (1.102), category (1.103), dynamic_portgroup (1.111) are newer.
    assert!(created.body.get("physical_network").is_none());
    assert!(created.body.get("dynamic_portgroup").is_none());

    // At 1.23 mode and properties are hidden; by name or UUID.
    let shown = api
        .send_at(23, Method::GET, "/v1/portgroups/bond0", None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.body["uuid"], uuid.as_str());
    assert!(shown.body.get("mode").is_none());
    let newer = api
        .send_at(110, Method::GET, &format!("/v1/portgroups/{uuid}"), None)
        .await;
    assert!(newer.body["physical_network"].is_null());
    assert!(newer.body["category"].is_null());
    assert!(newer.body.get("dynamic_portgroup").is_none());

    let listed = api.send_at(23, Method::GET, "/v1/portgroups", None).await;
    let item = listed.body["portgroups"][0].as_object().unwrap();
    let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["address", "links", "name", "uuid"]);
    let detail = api
        .send_at(23, Method::GET, "/v1/portgroups/detail", None)
        .await;
    assert_eq!(detail.body["portgroups"][0]["node_uuid"], node.as_str());
}

#[tokio::test]
async fn create_validates_node_name_address_and_versions() {
    let api = Api::new().await;
    let node = api.node().await;
    let first = api
        .portgroup(
            23,
            json!({"node_uuid": node, "name": "bond0", "address": "52:54:00:aa:bb:01"}),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED);

    let same_name = api
        .portgroup(23, json!({"node_uuid": node, "name": "bond0"}))
        .await;
    assert_eq!(same_name.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&same_name.body),
        "A portgroup with name bond0 already exists."
    );
    let same_mac = api
        .portgroup(
            23,
            json!({"node_uuid": node, "address": "52:54:00:AA:BB:01"}),
        )
        .await;
    assert_eq!(same_mac.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&same_mac.body),
        "A portgroup with MAC address 52:54:00:aa:bb:01 already exists."
    );

    let no_node = api
        .portgroup(
            23,
            json!({"node_uuid": "9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f"}),
        )
        .await;
    assert_eq!(no_node.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&no_node.body),
        "Node 9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f could not be found."
    );
    let missing = api.portgroup(23, json!({"name": "bond1"})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&missing.body).contains("node_uuid"));
    let bad_name = api
        .portgroup(23, json!({"node_uuid": node, "name": "bond 1"}))
        .await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bad_name.body),
        "Cannot create portgroup with invalid name 'bond 1'"
    );
    let bad_mac = api
        .portgroup(23, json!({"node_uuid": node, "address": "nope"}))
        .await;
    assert_eq!(bad_mac.status, StatusCode::BAD_REQUEST);
    let unknown = api
        .portgroup(23, json!({"node_uuid": node, "speed": 10}))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    let too_new = api
        .portgroup(25, json!({"node_uuid": node, "mode": "802.3ad"}))
        .await;
    assert_eq!(too_new.status, StatusCode::NOT_ACCEPTABLE);
    let read_only = api
        .portgroup(23, json!({"node_uuid": node, "internal_info": {}}))
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn endpoints_are_hidden_below_their_versions() {
    let api = Api::new().await;
    let node = api.node().await;
    let old = api.send_at(22, Method::GET, "/v1/portgroups", None).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let nested = api
        .send_at(
            23,
            Method::GET,
            &format!("/v1/nodes/{node}/portgroups"),
            None,
        )
        .await;
    assert_eq!(nested.status, StatusCode::NOT_FOUND);
    // Without a version header a request runs at 1.1.
    let real = api.send(Method::GET, "/v1/portgroups", None).await;
    assert_eq!(real.status, StatusCode::NOT_FOUND);
    assert!(faultstring(&real.body).contains("could not be found"));
}

#[tokio::test]
async fn nested_listings_filters_and_paging() {
    let api = Api::new().await;
    let node_a = api.node().await;
    let node_b = api.node().await;
    let mut uuids = Vec::new();
    for (node, mac) in [
        (&node_a, "52:54:00:00:00:01"),
        (&node_a, "52:54:00:00:00:02"),
        (&node_b, "52:54:00:00:00:03"),
    ] {
        let created = api
            .portgroup(24, json!({"node_uuid": node, "address": mac}))
            .await;
        uuids.push(created.body["uuid"].as_str().unwrap().to_owned());
    }
    let of_a = api
        .send_at(
            24,
            Method::GET,
            &format!("/v1/nodes/{node_a}/portgroups"),
            None,
        )
        .await;
    assert_eq!(of_a.status, StatusCode::OK);
    assert_eq!(of_a.body["portgroups"].as_array().unwrap().len(), 2);
    let of_a_detail = api
        .send_at(
            24,
            Method::GET,
            &format!("/v1/nodes/{node_a}/portgroups/detail"),
            None,
        )
        .await;
    assert_eq!(
        of_a_detail.body["portgroups"][0]["node_uuid"],
        node_a.as_str()
    );
    let missing_node = api
        .send_at(24, Method::GET, "/v1/nodes/nope/portgroups", None)
        .await;
    assert_eq!(missing_node.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&missing_node.body),
        "Node nope could not be found."
    );

    let by_node = api
        .send_at(
            24,
            Method::GET,
            &format!("/v1/portgroups?node={node_b}"),
            None,
        )
        .await;
    assert_eq!(by_node.body["portgroups"][0]["uuid"], uuids[2].as_str());
    let by_mac = api
        .send_at(
            24,
            Method::GET,
            "/v1/portgroups?address=52:54:00:00:00:02",
            None,
        )
        .await;
    assert_eq!(by_mac.body["portgroups"][0]["uuid"], uuids[1].as_str());
    let both = api
        .send_at(
            24,
            Method::GET,
            &format!("/v1/portgroups?node={node_a}&address=52:54:00:00:00:02"),
            None,
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);

    let page = api
        .send_at(24, Method::GET, "/v1/portgroups?limit=2", None)
        .await;
    assert_eq!(page.body["portgroups"].as_array().unwrap().len(), 2);
    assert_eq!(
        page.body["next"],
        format!(
            "http://ferric.test/v1/portgroups?limit=2&marker={}",
            uuids[1]
        )
    );
    let unsortable = api
        .send_at(24, Method::GET, "/v1/portgroups?sort_key=extra", None)
        .await;
    assert_eq!(unsortable.status, StatusCode::BAD_REQUEST);

    // The portgroup's ports, and the ports filter by portgroup.
    let member = api
        .port(&node_a, "52:54:00:00:01:01", Some(&uuids[0]))
        .await;
    api.port(&node_a, "52:54:00:00:01:02", None).await;
    let members = api
        .send_at(
            24,
            Method::GET,
            &format!("/v1/portgroups/{}/ports", uuids[0]),
            None,
        )
        .await;
    assert_eq!(members.status, StatusCode::OK, "{}", members.body);
    let members = members.body["ports"].as_array().unwrap().clone();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0]["uuid"], member.as_str());
    let too_old = api
        .send_at(
            23,
            Method::GET,
            &format!("/v1/portgroups/{}/ports", uuids[0]),
            None,
        )
        .await;
    assert_eq!(too_old.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_port_joins_only_a_portgroup_of_its_own_node() {
    let api = Api::new().await;
    let node_a = api.node().await;
    let node_b = api.node().await;
    let group_b = api.portgroup(24, json!({"node_uuid": node_b})).await;
    let group_b = group_b.body["uuid"].as_str().unwrap().to_owned();
    let port = api.port(&node_a, "52:54:00:00:04:01", None).await;

    // portgroup_uuid is a 1.24 port field.
    let joined = api
        .send_at(
            24,
            Method::PATCH,
            &format!("/v1/ports/{port}"),
            Some(json!([{"op": "add", "path": "/portgroup_uuid", "value": group_b}])),
        )
        .await;
    assert_eq!(joined.status, StatusCode::BAD_REQUEST, "{}", joined.body);
    assert_eq!(
        faultstring(&joined.body),
        "Port can not be added to a portgroup belonging to a different node."
    );
}

#[tokio::test]
async fn patch_follows_ironics_rules() {
    let api = Api::new().await;
    let node = api.node().await;
    let other = api.node().await;
    let created = api
        .portgroup(26, json!({"node_uuid": node, "name": "bond0"}))
        .await;
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let path = format!("/v1/portgroups/{uuid}");

    let patched = api
        .send_at(
            26,
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "add", "path": "/extra/rack", "value": 4},
                {"op": "replace", "path": "/mode", "value": "802.3ad"},
                {"op": "add", "path": "/properties/miimon", "value": "100"},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["extra"], json!({"rack": 4}));
    assert_eq!(patched.body["mode"], "802.3ad");
    assert_eq!(patched.body["properties"]["miimon"], "100");

    let remove_mode = api
        .send_at(
            26,
            Method::PATCH,
            &path,
            Some(json!([{"op": "remove", "path": "/mode"}])),
        )
        .await;
    assert_eq!(remove_mode.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&remove_mode.body),
        "'mode' is a mandatory attribute and can not be removed"
    );
    let bad_name = api
        .send_at(
            26,
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/name", "value": "a b"}])),
        )
        .await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bad_name.body),
        format!("Portgroup {uuid}: Cannot change name to invalid name 'a b'")
    );
    let too_new = api
        .send_at(
            25,
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/mode", "value": "balance-rr"}])),
        )
        .await;
    assert_eq!(too_new.status, StatusCode::NOT_ACCEPTABLE);

    // Moving to another node: only to a node in an early state (or maintenance)…
    let move_op = json!([{"op": "replace", "path": "/node_uuid", "value": other}]);
    api.set_state(&other, ProvisionState::Active).await;
    let busy = api
        .send_at(26, Method::PATCH, &path, Some(move_op.clone()))
        .await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert!(faultstring(&busy.body).contains("Current state is 'active'"));
    api.set_state(&other, ProvisionState::Manageable).await;
    // …and only while no ports belong to it.
    api.port(&node, "52:54:00:00:02:01", Some(&uuid)).await;
    let not_empty = api
        .send_at(26, Method::PATCH, &path, Some(move_op.clone()))
        .await;
    assert_eq!(not_empty.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&not_empty.body).contains("there are ports associated"));

    // A conductor holding the node blocks every write.
    api.store()
        .node_lease_acquire(
            node.parse().unwrap(),
            "conductor-1",
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let locked = api
        .send_at(
            26,
            Method::PATCH,
            &path,
            Some(json!([{"op": "add", "path": "/extra/x", "value": 1}])),
        )
        .await;
    assert_eq!(locked.status, StatusCode::CONFLICT);
    assert!(faultstring(&locked.body).contains("locked by host conductor-1"));
}

#[tokio::test]
async fn delete_refuses_a_portgroup_with_ports() {
    let api = Api::new().await;
    let node = api.node().await;
    let created = api.portgroup(23, json!({"node_uuid": node})).await;
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let path = format!("/v1/portgroups/{uuid}");
    let port = api.port(&node, "52:54:00:00:03:01", Some(&uuid)).await;

    let refused = api.send_at(23, Method::DELETE, &path, None).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&refused.body),
        format!("Cannot complete the requested action because portgroup {uuid} contains ports.")
    );

    api.store()
        .port_delete(port.parse().unwrap())
        .await
        .unwrap();
    let deleted = api.send_at(23, Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api.send_at(23, Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Portgroup {uuid} could not be found.")
    );
}
