//! `/v1/nodes` through the real router on a real SQLite file; behaviour of versions above the
//! server's current maximum is exercised by calling the handlers with an explicit version.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use common::{Answer, answer, faultstring, host};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::IntoResponse;
use ferric_api::v1::nodes;
use ferric_api::version::ApiVersion;
use ferric_model::resources::Ident;
use ferric_model::{Microversion, ProvisionState};
use serde_json::{Value, json};
use tower::ServiceExt;

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

    async fn create_at(&self, minor: u16, body: Value) -> Answer {
        let response = nodes::node_create(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            Bytes::from(body.to_string()),
        )
        .await
        .into_response();
        answer(response).await
    }

    async fn list_at(&self, minor: u16, query: &[(&str, &str)]) -> Answer {
        let response = nodes::node_list(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            ferric_api::authz::ProjectScope::default(),
            Query(pairs(query)),
        )
        .await
        .into_response();
        answer(response).await
    }

    async fn get_at(&self, minor: u16, ident: &str, query: &[(&str, &str)]) -> Answer {
        let response = nodes::node_get(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            Path(ident.to_owned()),
            Query(pairs(query)),
        )
        .await
        .into_response();
        answer(response).await
    }

    async fn patch_at(&self, minor: u16, ident: &str, ops: Value) -> Answer {
        let response = nodes::node_update(
            State(self.state.clone()),
            ApiVersion(Microversion::new(minor)),
            host(),
            Path(ident.to_owned()),
            Query(Vec::new()),
            Bytes::from(ops.to_string()),
        )
        .await
        .into_response();
        answer(response).await
    }

    /// Puts a node in a state, as the conductor would.
    async fn set_state(&self, uuid: &str, state: ProvisionState, target: Option<ProvisionState>) {
        let mut node = self.store().node_get(&Ident::parse(uuid)).await.unwrap();
        let version = node.version;
        node.provision_state = state;
        node.target_provision_state = target;
        self.store().node_update(&node, version).await.unwrap();
    }
}

fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
    query
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

#[tokio::test]
async fn create_at_1_1_starts_available_and_is_shown_by_uuid() {
    let api = Api::new().await;
    let created = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "extra": {"rack": 4}})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/nodes/{uuid}")
    );
    // `available` did not exist at 1.1: old clients saw the new node as "no state" (null).
    assert_eq!(created.body["provision_state"], Value::Null);
    let stored = api.store().node_get(&Ident::parse(&uuid)).await.unwrap();
    assert_eq!(stored.provision_state, ProvisionState::Available);
    assert_eq!(created.body["extra"], json!({"rack": 4}));
    assert_eq!(
        created.body["links"][0]["href"],
        format!("http://ferric.test/v1/nodes/{uuid}")
    );
    // Fields newer than 1.1 are hidden.
    for hidden in [
        "name",
        "resource_class",
        "driver_internal_info",
        "owner",
        "traits",
    ] {
        assert!(created.body.get(hidden).is_none(), "{hidden} shown at 1.1");
    }

    let shown = api
        .send(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(shown.body["driver"], "fake-hardware");
    assert_eq!(shown.body["reservation"], Value::Null);
}

#[tokio::test]
async fn initial_state_is_enroll_from_1_11() {
    let api = Api::new().await;
    let new = api.create_at(11, json!({"driver": "fake-hardware"})).await;
    assert_eq!(new.status, StatusCode::CREATED);
    assert_eq!(new.body["provision_state"], "enroll");
    let old = api.create_at(10, json!({"driver": "fake-hardware"})).await;
    assert_eq!(old.body["provision_state"], "available");
}

#[tokio::test]
async fn create_validates_its_closed_schema() {
    let api = Api::new().await;
    let unknown = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "colour": "red"})),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&unknown.body).contains("colour"));

    let read_only = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "provision_state": "active"})),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);

    let no_driver = api
        .send(Method::POST, "/v1/nodes", Some(json!({"extra": {}})))
        .await;
    assert_eq!(no_driver.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&no_driver.body).contains("driver"));

    let not_json = api
        .send(Method::POST, "/v1/nodes", Some(json!("a string")))
        .await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);

    let no_chassis = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "fake-hardware",
                "chassis_uuid": "9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f",
            })),
        )
        .await;
    assert_eq!(no_chassis.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&no_chassis.body).contains("Chassis"));
    let no_parent = api
        .create_at(
            83,
            json!({"driver": "fake-hardware", "parent_node": "9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f"}),
        )
        .await;
    assert_eq!(no_parent.status, StatusCode::BAD_REQUEST);

    // `name` is 1.5: too new for a 1.1 request.
    let too_new = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "name": "n1"})),
        )
        .await;
    assert_eq!(too_new.status, StatusCode::NOT_ACCEPTABLE);
    let too_new = api
        .create_at(47, json!({"driver": "fake-hardware", "protected": true}))
        .await;
    assert_eq!(too_new.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn names_and_uuids_are_checked_and_unique() {
    let api = Api::new().await;
    let uuid = "2d2a3d7a-9d1e-4c55-9f0e-6b3ac0b2d7a1";
    let first = api
        .create_at(
            11,
            json!({"driver": "fake-hardware", "name": "node-1", "uuid": uuid}),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert_eq!(first.body["uuid"], uuid);
    assert_eq!(first.body["name"], "node-1");

    let same_name = api
        .create_at(11, json!({"driver": "fake-hardware", "name": "node-1"}))
        .await;
    assert_eq!(same_name.status, StatusCode::CONFLICT);
    assert!(faultstring(&same_name.body).contains("node-1"));
    let same_uuid = api
        .create_at(11, json!({"driver": "fake-hardware", "uuid": uuid}))
        .await;
    assert_eq!(same_uuid.status, StatusCode::CONFLICT);

    for bad in [
        "has space",
        "detail",
        "9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f",
    ] {
        let answer = api
            .create_at(11, json!({"driver": "fake-hardware", "name": bad}))
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }

    let by_name = api.get_at(11, "node-1", &[]).await;
    assert_eq!(by_name.status, StatusCode::OK);
    assert_eq!(by_name.body["uuid"], uuid);
}

#[tokio::test]
async fn unknown_node_is_404_with_ironic_error_body() {
    let api = Api::new().await;
    let answer = api.send(Method::GET, "/v1/nodes/nosuch", None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(faultstring(&answer.body), "Node nosuch could not be found.");
    let inner: Value =
        serde_json::from_str(answer.body["error_message"].as_str().unwrap()).unwrap();
    assert_eq!(inner["faultcode"], "Client");
    let patch = api
        .send(
            Method::PATCH,
            "/v1/nodes/nosuch",
            Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
        )
        .await;
    assert_eq!(patch.status, StatusCode::NOT_FOUND);
    let delete = api.send(Method::DELETE, "/v1/nodes/nosuch", None).await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn list_shows_default_fields_and_detail_shows_all() {
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let list = api.send(Method::GET, "/v1/nodes", None).await;
    assert_eq!(list.status, StatusCode::OK);
    let node = &list.body["nodes"][0];
    let mut keys: Vec<&str> = node
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    // `name` is a default list field but only from 1.5.
    assert_eq!(
        keys,
        [
            "instance_uuid",
            "links",
            "maintenance",
            "power_state",
            "provision_state",
            "uuid"
        ]
    );
    assert_eq!(node["uuid"], uuid.as_str());
    assert!(list.body.get("next").is_none());

    let detail = api.send(Method::GET, "/v1/nodes/detail", None).await;
    assert_eq!(detail.status, StatusCode::OK);
    let node = &detail.body["nodes"][0];
    assert_eq!(node["driver"], "fake-hardware");
    assert!(node["ports"].is_array());
    assert!(node.get("states").is_none(), "states links are 1.14");
}

#[tokio::test]
async fn fields_selects_from_1_8() {
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let too_old = api
        .send(Method::GET, "/v1/nodes?fields=uuid,driver", None)
        .await;
    assert_eq!(too_old.status, StatusCode::NOT_ACCEPTABLE);

    let list = api.list_at(8, &[("fields", "uuid,driver")]).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(
        list.body["nodes"][0],
        json!({
            "uuid": uuid,
            "driver": "fake-hardware",
            "links": [
                {"href": format!("http://ferric.test/v1/nodes/{uuid}"), "rel": "self"},
                {"href": format!("http://ferric.test/nodes/{uuid}"), "rel": "bookmark"},
            ],
        })
    );
    let shown = api.get_at(8, &uuid, &[("fields", "driver")]).await;
    assert_eq!(shown.body.as_object().unwrap().len(), 2, "{}", shown.body);

    let unknown = api.list_at(8, &[("fields", "uuid,colour")]).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    // A real field, but newer than the request.
    let too_new = api.list_at(8, &[("fields", "owner")]).await;
    assert_eq!(too_new.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn paging_follows_next_until_a_short_page() {
    let api = Api::new().await;
    let mut uuids = Vec::new();
    for _ in 0..3 {
        uuids.push(api.enroll(json!({"driver": "fake-hardware"})).await);
    }
    let first = api.send(Method::GET, "/v1/nodes?limit=2", None).await;
    assert_eq!(first.status, StatusCode::OK);
    let shown: Vec<&str> = first.body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(shown, [uuids[0].as_str(), uuids[1].as_str()]);
    let next = first.body["next"].as_str().unwrap();
    assert_eq!(
        next,
        format!("http://ferric.test/v1/nodes?limit=2&marker={}", uuids[1])
    );
    let path = next.trim_start_matches("http://ferric.test");
    let second = api.send(Method::GET, path, None).await;
    assert_eq!(second.body["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(second.body["nodes"][0]["uuid"], uuids[2].as_str());
    assert!(second.body.get("next").is_none());

    let desc = api
        .send(Method::GET, "/v1/nodes?sort_key=uuid&sort_dir=desc", None)
        .await;
    assert_eq!(desc.status, StatusCode::OK);
    let mut sorted = uuids.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(desc.body["nodes"][0]["uuid"], sorted[0].as_str());

    for bad in [
        "limit=0",
        "limit=-1",
        "limit=many",
        "marker=not-a-uuid",
        "sort_key=extra",
        "sort_key=colour",
        "sort_dir=up",
        "colour=red",
    ] {
        let answer = api
            .send(Method::GET, &format!("/v1/nodes?{bad}"), None)
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let stale_marker = api
        .send(
            Method::GET,
            "/v1/nodes?marker=9d4e3a40-0e4b-4c1a-8c38-1a1b2c3d4e5f",
            None,
        )
        .await;
    assert_eq!(stale_marker.status, StatusCode::BAD_REQUEST);
    // A limit above the maximum is clamped, not refused.
    let big = api.send(Method::GET, "/v1/nodes?limit=5000", None).await;
    assert_eq!(big.status, StatusCode::OK);
}

#[tokio::test]
async fn filters_select_nodes_and_are_version_gated() {
    let api = Api::new().await;
    let plain = api.enroll(json!({"driver": "fake-hardware"})).await;
    let other = api.enroll(json!({"driver": "manual-management"})).await;
    let patched = api
        .send(
            Method::PATCH,
            &format!("/v1/nodes/{other}"),
            Some(json!([{"op": "replace", "path": "/maintenance", "value": true}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);

    let in_maintenance = api
        .send(Method::GET, "/v1/nodes?maintenance=true", None)
        .await;
    assert_eq!(in_maintenance.body["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(in_maintenance.body["nodes"][0]["uuid"], other.as_str());

    let by_driver_old = api
        .send(Method::GET, "/v1/nodes?driver=manual-management", None)
        .await;
    assert_eq!(by_driver_old.status, StatusCode::NOT_ACCEPTABLE);
    let by_driver = api.list_at(16, &[("driver", "fake-hardware")]).await;
    assert_eq!(by_driver.body["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(by_driver.body["nodes"][0]["uuid"], plain.as_str());

    let by_state = api.list_at(9, &[("provision_state", "available")]).await;
    assert_eq!(by_state.body["nodes"].as_array().unwrap().len(), 2);
    let bad_state = api.list_at(9, &[("provision_state", "sleeping")]).await;
    assert_eq!(bad_state.status, StatusCode::BAD_REQUEST);
    let by_state_old = api.list_at(8, &[("provision_state", "available")]).await;
    assert_eq!(by_state_old.status, StatusCode::NOT_ACCEPTABLE);
    let bad_fault = api.list_at(42, &[("fault", "boredom")]).await;
    assert_eq!(bad_fault.status, StatusCode::BAD_REQUEST);
    let unassociated = api
        .send(Method::GET, "/v1/nodes?associated=false", None)
        .await;
    assert_eq!(unassociated.body["nodes"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn patch_adds_replaces_and_removes() {
    let api = Api::new().await;
    let uuid = api
        .enroll(json!({"driver": "fake-hardware", "extra": {"keep": 1}}))
        .await;
    let path = format!("/v1/nodes/{uuid}");
    let ops = json!([
        {"op": "add", "path": "/extra/rack", "value": "r4"},
        {"op": "replace", "path": "/driver", "value": "manual-management"},
        {"op": "add", "path": "/properties", "value": {"cpus": 8}},
        {"op": "remove", "path": "/extra/keep"},
    ]);
    // The fake interfaces do not suit manual-management: Ironic refuses the new driver
    // unless asked to reset them (1.45), and the parameter needs a driver change.
    let kept = api.send(Method::PATCH, &path, Some(ops.clone())).await;
    assert_eq!(kept.status, StatusCode::BAD_REQUEST, "{}", kept.body);
    let reset = format!("{path}?reset_interfaces=true");
    let too_old = api
        .send_at(44, Method::PATCH, &reset, Some(ops.clone()))
        .await;
    assert_eq!(
        too_old.status,
        StatusCode::NOT_ACCEPTABLE,
        "{}",
        too_old.body
    );
    let no_driver = api
        .send_latest(
            Method::PATCH,
            &reset,
            Some(json!([{"op": "add", "path": "/extra/x", "value": 1}])),
        )
        .await;
    assert_eq!(
        no_driver.status,
        StatusCode::BAD_REQUEST,
        "{}",
        no_driver.body
    );
    let patched = api.send_at(45, Method::PATCH, &reset, Some(ops)).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["extra"], json!({"rack": "r4"}));
    assert_eq!(patched.body["driver"], "manual-management");
    assert_eq!(patched.body["properties"], json!({"cpus": 8}));

    let removed = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "remove", "path": "/properties"}])),
        )
        .await;
    assert_eq!(removed.body["properties"], json!({}));

    for (ops, status) in [
        (
            json!([{"op": "replace", "path": "/provision_state", "value": "active"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "add", "path": "/colour", "value": "red"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "remove", "path": "/driver"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "replace", "path": "/extra/missing", "value": 1}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "move", "from": "/extra", "path": "/properties"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "replace", "path": "/maintenance", "value": "yes"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "replace", "path": "/uuid", "value": "x"}]),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!([{"op": "add", "path": "/name", "value": "n"}]),
            StatusCode::NOT_ACCEPTABLE,
        ),
    ] {
        let answer = api.send(Method::PATCH, &path, Some(ops.clone())).await;
        assert_eq!(answer.status, status, "{ops}: {}", answer.body);
    }
    // Nothing of the refused patches was written.
    let shown = api.send(Method::GET, &path, None).await;
    assert_eq!(shown.body["driver"], "manual-management");
    assert_eq!(shown.body["extra"], json!({"rack": "r4"}));
}

#[tokio::test]
async fn patch_is_refused_during_a_transition_and_while_locked() {
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let path = format!("/v1/nodes/{uuid}");
    let ops = json!([{"op": "add", "path": "/extra/a", "value": 1}]);

    api.set_state(
        &uuid,
        ProvisionState::Deploying,
        Some(ProvisionState::Active),
    )
    .await;
    let busy = api.send(Method::PATCH, &path, Some(ops.clone())).await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert!(faultstring(&busy.body).contains("state transition is in progress"));

    // A failed deploy may be edited although its target is still set.
    api.set_state(
        &uuid,
        ProvisionState::DeployFailed,
        Some(ProvisionState::Active),
    )
    .await;
    let failed = api.send(Method::PATCH, &path, Some(ops.clone())).await;
    assert_eq!(failed.status, StatusCode::OK);

    api.store()
        .node_lease_acquire(
            uuid.parse().unwrap(),
            "conductor-1",
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let locked = api.send(Method::PATCH, &path, Some(ops)).await;
    assert_eq!(locked.status, StatusCode::CONFLICT);
    assert!(faultstring(&locked.body).contains("conductor-1"));
    let shown = api.send(Method::GET, &path, None).await;
    assert_eq!(shown.body["reservation"], "conductor-1");
}

#[tokio::test]
async fn interfaces_change_only_in_early_states_or_maintenance() {
    let api = Api::new().await;
    let uuid = api
        .create_at(31, json!({"driver": "fake-hardware"}))
        .await
        .body["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    api.set_state(&uuid, ProvisionState::Active, None).await;
    let ops = json!([{"op": "add", "path": "/inspect_interface", "value": "no-inspect"}]);
    let refused = api.patch_at(31, &uuid, ops.clone()).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let in_maintenance = api
        .patch_at(
            31,
            &uuid,
            json!([
                {"op": "replace", "path": "/maintenance", "value": true},
                {"op": "add", "path": "/inspect_interface", "value": "no-inspect"},
            ]),
        )
        .await;
    assert_eq!(
        in_maintenance.status,
        StatusCode::OK,
        "{}",
        in_maintenance.body
    );
    assert_eq!(in_maintenance.body["inspect_interface"], "no-inspect");
}

/// Concurrent PATCHes of one node: each either lands or is refused with 409; none is lost.
#[tokio::test]
async fn concurrent_patches_never_overwrite_each_other() {
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let mut tasks = Vec::new();
    for index in 0..8 {
        let router = ferric_api::router(api.state.clone());
        let path = format!("/v1/nodes/{uuid}");
        tasks.push(tokio::spawn(async move {
            let ops = json!([{"op": "add", "path": format!("/extra/k{index}"), "value": index}]);
            let request = Request::patch(path)
                .header("content-type", "application/json")
                .body(Body::from(ops.to_string()))
                .unwrap();
            let response = router.oneshot(request).await.unwrap();
            (index, answer(response).await)
        }));
    }
    let mut landed = Vec::new();
    for task in tasks {
        let (index, answer) = task.await.unwrap();
        match answer.status {
            StatusCode::OK => landed.push(format!("k{index}")),
            StatusCode::CONFLICT => {}
            other => panic!("unexpected {other}: {}", answer.body),
        }
    }
    assert!(!landed.is_empty());
    let node = api.store().node_get(&Ident::parse(&uuid)).await.unwrap();
    let mut stored: Vec<String> = node.extra.keys().cloned().collect();
    stored.sort_unstable();
    landed.sort_unstable();
    assert_eq!(stored, landed, "every 200 is in the node, nothing else is");
}

#[tokio::test]
async fn stale_writes_are_conflicts() {
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let node = api.store().node_get(&Ident::parse(&uuid)).await.unwrap();
    let stale = node.version;
    // Someone else writes first...
    let patched = api
        .send(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK);
    // ...so a write based on the old read loses instead of overwriting.
    let error = api.store().node_update(&node, stale).await.unwrap_err();
    assert!(error.is_conflict());
}

#[tokio::test]
async fn secrets_in_driver_and_instance_info_are_masked() {
    let api = Api::new().await;
    let created = api
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "manual-management",
                "driver_info": {
                    "redfish_address": "https://10.0.0.5",
                    "redfish_username": "admin",
                    "redfish_password": "hunter2",
                },
                "instance_info": {"image_source": "http://img", "auth_token": "t0k"},
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let uuid = created.body["uuid"].as_str().unwrap();
    for body in [
        created.body.clone(),
        api.send(Method::GET, &format!("/v1/nodes/{uuid}"), None)
            .await
            .body,
    ] {
        assert_eq!(body["driver_info"]["redfish_password"], "******");
        assert_eq!(body["driver_info"]["redfish_username"], "admin");
        assert_eq!(body["instance_info"]["auth_token"], "******");
        assert_eq!(body["instance_info"]["image_source"], "http://img");
    }
    // The secret itself is stored unmasked for the conductor.
    let node = api.store().node_get(&Ident::parse(uuid)).await.unwrap();
    assert_eq!(node.driver_info["redfish_password"], "hunter2");
}

#[tokio::test]
async fn delete_follows_the_state_protection_and_instance_rules() {
    let api = Api::new().await;
    let available = api.enroll(json!({"driver": "fake-hardware"})).await;
    let gone = api
        .send(Method::DELETE, &format!("/v1/nodes/{available}"), None)
        .await;
    assert_eq!(gone.status, StatusCode::NO_CONTENT);
    let again = api
        .send(Method::GET, &format!("/v1/nodes/{available}"), None)
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    let active = api.enroll(json!({"driver": "fake-hardware"})).await;
    api.set_state(&active, ProvisionState::Active, None).await;
    let path = format!("/v1/nodes/{active}");
    let refused = api.send(Method::DELETE, &path, None).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(faultstring(&refused.body).contains("active"));
    let maintenance = api
        .send(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/maintenance", "value": true}])),
        )
        .await;
    assert_eq!(maintenance.status, StatusCode::OK);
    let deleted = api.send(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);

    let associated = api
        .enroll(json!({
            "driver": "fake-hardware",
            "instance_uuid": "0b8f6c7e-5d4a-4f3b-9c2d-1e0f9a8b7c6d",
        }))
        .await;
    let refused = api
        .send(Method::DELETE, &format!("/v1/nodes/{associated}"), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);

    let protected = api
        .create_at(48, json!({"driver": "fake-hardware"}))
        .await
        .body["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let protect = json!([
        {"op": "replace", "path": "/protected", "value": true},
        {"op": "add", "path": "/protected_reason", "value": "prod"},
    ]);
    // Ironic protects only nodes in active or rescue (409 elsewhere).
    let too_early = api.patch_at(48, &protected, protect.clone()).await;
    assert_eq!(too_early.status, StatusCode::CONFLICT, "{}", too_early.body);
    assert!(faultstring(&too_early.body).contains("'active' or 'rescue'"));
    api.set_state(&protected, ProvisionState::Active, None)
        .await;
    let set = api.patch_at(48, &protected, protect).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.body);
    let forbidden = api
        .send(Method::DELETE, &format!("/v1/nodes/{protected}"), None)
        .await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
    // Nor is it rebuilt (Ironic's NodeProtected, 403).
    let rebuild = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{protected}/states/provision"),
            Some(json!({"target": "rebuild"})),
        )
        .await;
    assert_eq!(rebuild.status, StatusCode::FORBIDDEN, "{}", rebuild.body);
    assert!(faultstring(&rebuild.body).contains("protected"));
    // Unsetting protected clears its reason, as Ironic's conductor does.
    let unprotected = api
        .patch_at(
            48,
            &protected,
            json!([{"op": "replace", "path": "/protected", "value": false}]),
        )
        .await;
    assert_eq!(unprotected.status, StatusCode::OK, "{}", unprotected.body);
    assert_eq!(unprotected.body["protected_reason"], Value::Null);
    let reason_alone = api
        .patch_at(
            48,
            &protected,
            json!([{"op": "add", "path": "/protected_reason", "value": "prod"}]),
        )
        .await;
    assert_eq!(reason_alone.status, StatusCode::BAD_REQUEST);

    // Retired: not set on an available node; unsetting it clears its reason.
    let retire = json!([
        {"op": "replace", "path": "/retired", "value": true},
        {"op": "add", "path": "/retired_reason", "value": "old"},
    ]);
    api.set_state(&protected, ProvisionState::Available, None)
        .await;
    let refused = api.patch_at(61, &protected, retire.clone()).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    api.set_state(&protected, ProvisionState::Manageable, None)
        .await;
    let retired = api.patch_at(61, &protected, retire).await;
    assert_eq!(retired.status, StatusCode::OK, "{}", retired.body);
    assert_eq!(retired.body["retired_reason"], "old");
    let unretired = api
        .patch_at(
            61,
            &protected,
            json!([{"op": "replace", "path": "/retired", "value": false}]),
        )
        .await;
    assert_eq!(unretired.status, StatusCode::OK, "{}", unretired.body);
    assert_eq!(unretired.body["retired_reason"], Value::Null);
}

#[tokio::test]
async fn detail_listings_follow_writes_and_leases() {
    // Detail documents are cached by node revision: every write and every lease must show.
    let api = Api::new().await;
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    let first = api
        .send_at(110, Method::GET, "/v1/nodes/detail", None)
        .await;
    assert_eq!(first.body["nodes"][0]["description"], Value::Null);
    assert_eq!(first.body["nodes"][0]["reservation"], Value::Null);

    let patched = api
        .send_at(
            110,
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": "/description", "value": "rack 9"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let second = api
        .send_at(110, Method::GET, "/v1/nodes/detail", None)
        .await;
    assert_eq!(second.body["nodes"][0]["description"], "rack 9");

    api.store()
        .node_lease_acquire(
            uuid.parse().unwrap(),
            "busy-host",
            std::time::Duration::from_secs(600),
        )
        .await
        .unwrap();
    let third = api
        .send_at(110, Method::GET, "/v1/nodes/detail", None)
        .await;
    assert_eq!(third.body["nodes"][0]["reservation"], "busy-host");
    // Older clients get their own document, without newer fields.
    let old = api.send_at(50, Method::GET, "/v1/nodes/detail", None).await;
    assert!(old.body["nodes"][0].get("description").is_none());
    assert!(third.body["nodes"][0].get("description").is_some());
}
