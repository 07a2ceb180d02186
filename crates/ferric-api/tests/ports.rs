//! `/v1/ports` and `/v1/nodes/{node}/ports` through the real router on a real SQLite file;
//! fields newer than the server's current maximum version are exercised by calling the
//! handlers with an explicit version.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use common::{Answer, answer, faultstring, host};
use ferric_api::v1::ports;
use ferric_api::version::ApiVersion;
use ferric_model::Microversion;
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

    async fn node(&self, name_hint: &str) -> String {
        let created = self
            .send(
                Method::POST,
                "/v1/nodes",
                Some(json!({"driver": "fake-hardware", "extra": {"hint": name_hint}})),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED);
        created.body["uuid"].as_str().unwrap().to_owned()
    }

    async fn port(&self, node: &str, address: &str) -> Answer {
        self.send(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": node, "address": address})),
        )
        .await
    }

    async fn create_at(&self, minor: u16, body: Value) -> Answer {
        let response = ports::port_create(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            Bytes::from(body.to_string()),
        )
        .await
        .into_response();
        answer(response).await
    }

    async fn detail_at(&self, minor: u16) -> Answer {
        let response = ports::port_list_detail(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            ferric_api::authz::ProjectScope::default(),
            Query(Vec::new()),
        )
        .await
        .into_response();
        answer(response).await
    }
}

#[tokio::test]
async fn create_normalizes_the_mac_and_shows_the_port() {
    let api = Api::new().await;
    let node = api.node("a").await;
    let created = api.port(&node, "52-54-00-AB-CD-01").await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/ports/{uuid}")
    );
    assert_eq!(created.body["address"], "52:54:00:ab:cd:01");
    assert_eq!(created.body["node_uuid"], node.as_str());
    // pxe_enabled and local_link_connection are 1.19: hidden at 1.1.
    assert!(created.body.get("pxe_enabled").is_none());

    let shown = api
        .send(Method::GET, &format!("/v1/ports/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.body["address"], "52:54:00:ab:cd:01");

    let list = api.send(Method::GET, "/v1/ports", None).await;
    let port = list.body["ports"][0].as_object().unwrap();
    let mut keys: Vec<&str> = port.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["address", "links", "uuid"]);
}

#[tokio::test]
async fn create_checks_mac_node_and_schema() {
    let api = Api::new().await;
    let node = api.node("a").await;
    let first = api.port(&node, "52:54:00:00:00:01").await;
    assert_eq!(first.status, StatusCode::CREATED);
    let duplicate = api.port(&node, "52:54:00:00:00:01").await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&duplicate.body),
        "A port with MAC address 52:54:00:00:00:01 already exists."
    );

    let bad_mac = api.port(&node, "not-a-mac").await;
    assert_eq!(bad_mac.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&bad_mac.body).contains("MAC address"));

    let no_node = api
        .port("9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f", "52:54:00:00:00:02")
        .await;
    assert_eq!(no_node.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&no_node.body).contains("could not be found"));

    let missing = api
        .send(
            Method::POST,
            "/v1/ports",
            Some(json!({"address": "52:54:00:00:00:03"})),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&missing.body).contains("node_uuid"));

    let unknown = api
        .send(
            Method::POST,
            "/v1/ports",
            Some(json!({"address": "52:54:00:00:00:03", "node_uuid": node, "speed": 10})),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);

    let too_new = api
        .send(
            Method::POST,
            "/v1/ports",
            Some(json!({"address": "52:54:00:00:00:03", "node_uuid": node, "pxe_enabled": false})),
        )
        .await;
    assert_eq!(too_new.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn newer_fields_work_at_their_versions() {
    let api = Api::new().await;
    let node = api.node("a").await;
    let created = api
        .create_at(
            34,
            json!({
                "node_uuid": node,
                "address": "52:54:00:00:00:10",
                "local_link_connection": {"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Eth1/7"},
                "physical_network": "physnet1",
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["pxe_enabled"], true);
    assert_eq!(created.body["physical_network"], "physnet1");
    assert_eq!(created.body["local_link_connection"]["port_id"], "Eth1/7");
    assert!(created.body.get("is_smartnic").is_none());

    let bad_link = api
        .create_at(
            34,
            json!({
                "node_uuid": node,
                "address": "52:54:00:00:00:11",
                "local_link_connection": {"port_id": "Eth1/7"},
            }),
        )
        .await;
    assert_eq!(bad_link.status, StatusCode::BAD_REQUEST);

    let detail = api.detail_at(19).await;
    assert_eq!(detail.body["ports"][0]["pxe_enabled"], true);
    assert!(detail.body["ports"][0].get("physical_network").is_none());
}

#[tokio::test]
async fn filters_and_the_node_sub_collection() {
    let api = Api::new().await;
    let node_a = api.node("a").await;
    let node_b = api.node("b").await;
    api.port(&node_a, "52:54:00:00:00:01").await;
    api.port(&node_a, "52:54:00:00:00:02").await;
    api.port(&node_b, "52:54:00:00:00:03").await;

    let count = |answer: &Answer| answer.body["ports"].as_array().unwrap().len();
    let by_node = api
        .send(Method::GET, &format!("/v1/ports?node={node_a}"), None)
        .await;
    assert_eq!(count(&by_node), 2);
    let by_node_uuid = api
        .send(Method::GET, &format!("/v1/ports?node_uuid={node_b}"), None)
        .await;
    assert_eq!(count(&by_node_uuid), 1);
    // Any accepted spelling of the MAC finds the port.
    let by_address = api
        .send(Method::GET, "/v1/ports?address=52-54-00-00-00-03", None)
        .await;
    assert_eq!(count(&by_address), 1);
    assert_eq!(by_address.body["ports"][0]["address"], "52:54:00:00:00:03");

    let nested = api
        .send(
            Method::GET,
            &format!("/v1/nodes/{node_a}/ports?limit=1"),
            None,
        )
        .await;
    assert_eq!(nested.status, StatusCode::OK);
    assert_eq!(count(&nested), 1);
    assert!(nested.body["next"].as_str().unwrap().starts_with(&format!(
        "http://ferric.test/v1/nodes/{node_a}/ports?limit=1&marker="
    )));
    let nested_detail = api
        .send(
            Method::GET,
            &format!("/v1/nodes/{node_a}/ports/detail?limit=1"),
            None,
        )
        .await;
    assert_eq!(nested_detail.body["ports"][0]["node_uuid"], node_a.as_str());
    assert!(
        nested_detail.body["next"]
            .as_str()
            .unwrap()
            .contains(&format!("/v1/nodes/{node_a}/ports/detail?limit=1&marker="))
    );

    let missing_node = api.send(Method::GET, "/v1/nodes/nosuch/ports", None).await;
    assert_eq!(missing_node.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&missing_node.body),
        "Node nosuch could not be found."
    );
    let bad_address = api.send(Method::GET, "/v1/ports?address=zz", None).await;
    assert_eq!(bad_address.status, StatusCode::BAD_REQUEST);
    let unknown = api.send(Method::GET, "/v1/ports?colour=red", None).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn patch_and_delete_ports() {
    let api = Api::new().await;
    let node_a = api.node("a").await;
    let node_b = api.node("b").await;
    let uuid = api.port(&node_a, "52:54:00:00:00:01").await.body["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    api.port(&node_a, "52:54:00:00:00:02").await;
    let path = format!("/v1/ports/{uuid}");

    let patched = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/address", "value": "52:54:00:00:00:AA"},
                {"op": "replace", "path": "/node_uuid", "value": node_b},
                {"op": "add", "path": "/extra/slot", "value": 2},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["address"], "52:54:00:00:00:aa");
    assert_eq!(patched.body["node_uuid"], node_b.as_str());
    assert_eq!(patched.body["extra"], json!({"slot": 2}));

    let taken = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/address", "value": "52:54:00:00:00:02"}])),
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    let no_node = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/node_uuid",
                         "value": "9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f"}])),
        )
        .await;
    assert_eq!(no_node.status, StatusCode::BAD_REQUEST);
    let read_only = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/created_at", "value": "x"}])),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);

    let deleted = api.send(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api.send(Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Port {uuid} could not be found.")
    );
}
