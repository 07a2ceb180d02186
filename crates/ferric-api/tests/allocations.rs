//! Allocations (1.52) through the real router on a real SQLite file: matching by resource
//! class, traits and candidates, errors when nothing matches, the node's allocation, deleting
//! frees the node, matching in the background (201 `allocating`, then `active`/`error`),
//! allocations left `allocating` by a dead process matched at start, and a node allocated,
//! deployed, undeployed and allocated again; and the small node-data resources: BIOS settings (1.40), inventory (1.81),
//! shards (1.82) and events (1.54).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use chrono::Utc;
use common::{Api, NodeSpec, STATE_TIMEOUT, faultstring};
use ferric_db::testing::TestDb;
use ferric_model::ProvisionState;
use ferric_model::resources::{Allocation, AllocationState};
use ferric_model::resources::{BiosSetting, Ident, Node};
use serde_json::{Value, json};
use uuid::Uuid;

const V: u16 = 110;

/// An available node of `resource_class` with `traits`, made in the store (as the conductor
/// would leave it after `provide`).
async fn available(api: &Api, name: &str, resource_class: &str, traits: &[&str]) -> Node {
    let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Available);
    node.name = Some(name.to_owned());
    node.resource_class = Some(resource_class.to_owned());
    node.traits = traits.iter().map(|t| (*t).to_owned()).collect();
    api.store().node_create(&node).await.unwrap()
}

/// Creates an allocation as a client does: 201 with the allocation `allocating` (Ironic
/// matches in the background), then polls it until it is `active` or `error`; returns the
/// creation's answer with the allocation as it ended.
async fn allocate(api: &Api, body: Value) -> common::Answer {
    let mut created = api
        .send_at(V, Method::POST, "/v1/allocations", Some(body))
        .await;
    if created.status != StatusCode::CREATED {
        return created;
    }
    assert_eq!(created.body["state"], "allocating", "{}", created.body);
    assert_eq!(created.body["node_uuid"], Value::Null);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    api.settle().await;
    let ended = api
        .send_at(V, Method::GET, &format!("/v1/allocations/{uuid}"), None)
        .await;
    assert_ne!(ended.body["state"], "allocating", "{}", ended.body);
    created.body = ended.body;
    created
}

#[tokio::test]
async fn an_allocation_takes_a_matching_node_and_deleting_frees_it() {
    let api = Api::new().await;
    available(&api, "plain", "gold", &[]).await;
    let gpu = available(&api, "gpu", "gold", &["CUSTOM_GPU"]).await;
    available(&api, "silver", "silver", &["CUSTOM_GPU"]).await;

    let created = allocate(
        &api,
        json!({"resource_class": "gold", "traits": ["CUSTOM_GPU"], "name": "job-1"}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["state"], "active");
    assert_eq!(created.body["node_uuid"], gpu.uuid.to_string());
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/allocations/{uuid}")
    );

    let node = api.store().node_get(&Ident::Uuid(gpu.uuid)).await.unwrap();
    assert_eq!(
        node.allocation_uuid.map(|u| u.to_string()),
        Some(uuid.clone())
    );
    // The traits asked for become the instance's (deploy templates are chosen by them).
    assert_eq!(node.instance_info["traits"], json!(["CUSTOM_GPU"]));
    assert_eq!(
        node.instance_uuid.map(|u| u.to_string()),
        Some(uuid.clone())
    );
    let of_node = api
        .send_at(V, Method::GET, "/v1/nodes/gpu/allocation", None)
        .await;
    assert_eq!(of_node.status, StatusCode::OK);
    assert_eq!(of_node.body["name"], "job-1");
    let by_name = api
        .send_at(V, Method::GET, "/v1/allocations/job-1", None)
        .await;
    assert_eq!(by_name.body["uuid"], uuid.as_str());
    let listed = api
        .send_at(V, Method::GET, "/v1/allocations?state=active", None)
        .await;
    assert_eq!(listed.body["allocations"].as_array().unwrap().len(), 1);

    // Nothing else has the trait in this class: the second allocation fails, with a reason.
    let second = allocate(
        &api,
        json!({"resource_class": "gold", "traits": ["CUSTOM_GPU"]}),
    )
    .await;
    assert_eq!(second.status, StatusCode::CREATED);
    assert_eq!(second.body["state"], "error");
    assert!(
        second.body["last_error"]
            .as_str()
            .unwrap()
            .contains("no available nodes match the requested traits CUSTOM_GPU"),
        "{}",
        second.body
    );

    let deleted = api
        .send_at(V, Method::DELETE, &format!("/v1/allocations/{uuid}"), None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let node = api.store().node_get(&Ident::Uuid(gpu.uuid)).await.unwrap();
    assert_eq!((node.allocation_uuid, node.instance_uuid), (None, None));
    let gone = api
        .send_at(V, Method::GET, "/v1/nodes/gpu/allocation", None)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    // A node that does not exist is a bad filter to Ironic (400), not a missing allocation;
    // below 1.52 the endpoint does not exist (404).
    let no_node = api
        .send_at(V, Method::GET, "/nodes/None/allocation", None)
        .await;
    assert_eq!(no_node.status, StatusCode::BAD_REQUEST, "{}", no_node.body);
    let old = api
        .send_at(51, Method::GET, "/nodes/None/allocation", None)
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND, "{}", old.body);
}

#[tokio::test]
async fn candidates_names_and_versions_are_checked() {
    let api = Api::new().await;
    let first = available(&api, "a", "gold", &[]).await;
    let second = available(&api, "b", "gold", &[]).await;

    let picked = allocate(
        &api,
        json!({"resource_class": "gold", "candidate_nodes": ["b"]}),
    )
    .await;
    assert_eq!(picked.body["node_uuid"], second.uuid.to_string());
    assert_eq!(
        picked.body["candidate_nodes"],
        json!([second.uuid.to_string()])
    );
    assert_ne!(picked.body["node_uuid"], first.uuid.to_string());

    let unknown = allocate(
        &api,
        json!({"resource_class": "gold", "candidate_nodes": ["nope"]}),
    )
    .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert!(faultstring(&unknown.body).contains("nope"));

    let no_class = api
        .send_at(V, Method::POST, "/v1/allocations", Some(json!({})))
        .await;
    assert_eq!(no_class.status, StatusCode::BAD_REQUEST);
    let bad_trait = allocate(
        &api,
        json!({"resource_class": "gold", "traits": ["lowercase"]}),
    )
    .await;
    assert_eq!(bad_trait.status, StatusCode::BAD_REQUEST);
    let closed = allocate(&api, json!({"resource_class": "gold", "state": "active"})).await;
    assert_eq!(closed.status, StatusCode::BAD_REQUEST);

    // Below 1.52 the endpoint does not exist; PATCH needs 1.57.
    let old = api.send_at(51, Method::GET, "/v1/allocations", None).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let uuid = picked.body["uuid"].as_str().unwrap();
    let patch = json!([{"op": "add", "path": "/name", "value": "renamed"}]);
    let too_old = api
        .send_at(
            56,
            Method::PATCH,
            &format!("/v1/allocations/{uuid}"),
            Some(patch.clone()),
        )
        .await;
    assert_eq!(too_old.status, StatusCode::METHOD_NOT_ALLOWED);
    let renamed = api
        .send_at(
            V,
            Method::PATCH,
            &format!("/v1/allocations/{uuid}"),
            Some(patch),
        )
        .await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    assert_eq!(renamed.body["name"], "renamed");
    let read_only = api
        .send_at(
            V,
            Method::PATCH,
            &format!("/v1/allocations/{uuid}"),
            Some(json!([{"op": "replace", "path": "/resource_class", "value": "x"}])),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn an_active_node_keeps_its_allocation_until_maintenance() {
    let api = Api::new().await;
    let node = available(&api, "a", "gold", &[]).await;
    let created = allocate(&api, json!({"resource_class": "gold"})).await;
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let mut deployed = api.store().node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    let version = deployed.version;
    deployed.provision_state = ProvisionState::Active;
    api.store().node_update(&deployed, version).await.unwrap();

    let refused = api
        .send_at(V, Method::DELETE, "/v1/nodes/a/allocation", None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    let mut deployed = api.store().node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    let version = deployed.version;
    deployed.maintenance = true;
    api.store().node_update(&deployed, version).await.unwrap();
    let freed = api
        .send_at(V, Method::DELETE, "/v1/nodes/a/allocation", None)
        .await;
    assert_eq!(freed.status, StatusCode::NO_CONTENT, "{}", freed.body);
    let missing = api
        .send_at(V, Method::GET, &format!("/v1/allocations/{uuid}"), None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn bios_inventory_shards_and_events() {
    let api = Api::new().await;
    let mut node = available(&api, "n1", "gold", &[]).await;
    let empty = api.send_at(V, Method::GET, "/v1/nodes/n1/bios", None).await;
    assert_eq!(empty.body, json!({"bios": []}));
    let setting = BiosSetting {
        name: "BootMode".to_owned(),
        value: Some("Uefi".to_owned()),
        registry: match json!({"attribute_type": "Enumeration", "read_only": false}) {
            Value::Object(object) => object,
            _ => unreachable!(),
        },
        created_at: Utc::now(),
        updated_at: None,
    };
    api.store()
        .node_bios_set(node.uuid, &[setting], None)
        .await
        .unwrap();
    let listed = api.send_at(V, Method::GET, "/v1/nodes/n1/bios", None).await;
    assert_eq!(listed.body["bios"][0]["name"], "BootMode");
    assert!(listed.body["bios"][0].get("attribute_type").is_none());
    let detail = api
        .send_at(V, Method::GET, "/v1/nodes/n1/bios?detail=true", None)
        .await;
    assert_eq!(detail.body["bios"][0]["attribute_type"], "Enumeration");
    let one = api
        .send_at(V, Method::GET, "/v1/nodes/n1/bios/BootMode", None)
        .await;
    assert_eq!(one.body["BootMode"]["value"], "Uefi");
    let old = api
        .send_at(39, Method::GET, "/v1/nodes/n1/bios", None)
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);

    let none = api
        .send_at(V, Method::GET, "/v1/nodes/n1/inventory", None)
        .await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    // Ironic's words (it names its internal row id where Ferric names the UUID).
    assert_eq!(
        faultstring(&none.body),
        format!(
            "Node inventory record for node {} could not be found.",
            node.uuid
        )
    );
    let inventory = match json!({"cpu": {"count": 4}}) {
        Value::Object(object) => object,
        _ => unreachable!(),
    };
    api.store()
        .node_inventory_set(node.uuid, &inventory, &Default::default(), None)
        .await
        .unwrap();
    let stored = api
        .send_at(V, Method::GET, "/v1/nodes/n1/inventory", None)
        .await;
    assert_eq!(
        stored.body,
        json!({"inventory": {"cpu": {"count": 4}}, "plugin_data": {}})
    );

    let version = node.version;
    node.shard = Some("east".to_owned());
    node = api.store().node_update(&node, version).await.unwrap();
    assert_eq!(node.shard.as_deref(), Some("east"));
    let shards = api.send_at(V, Method::GET, "/v1/shards", None).await;
    assert_eq!(
        shards.body,
        json!({"shards": [{"name": "east", "count": 1}]})
    );

    let event = json!({"events": [{
        "event": "network.bind_port",
        "port_id": "11111111-aaaa-bbbb-cccc-555555555555",
        "mac_address": "de:ad:ca:fe:ba:be",
        "status": "ACTIVE",
    }]});
    let accepted = api
        .send_at(V, Method::POST, "/v1/events", Some(event))
        .await;
    assert_eq!(accepted.status, StatusCode::NO_CONTENT);
    let bad = api
        .send_at(
            V,
            Method::POST,
            "/v1/events",
            Some(json!({"events": [{"event": "compute.boot"}]})),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

/// An allocation a killed process left `allocating` is matched when a conductor starts.
#[tokio::test]
async fn an_allocation_left_allocating_is_matched_at_start() {
    let db = TestDb::sqlite().await;
    let store = db.store.clone();
    let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Available);
    node.resource_class = Some("gold".to_owned());
    let node = store.node_create(&node).await.unwrap();
    let mut left = Allocation::new(Uuid::new_v4());
    left.resource_class = Some("gold".to_owned());
    let left = store.allocation_create(&left).await.unwrap();
    let mut unmatchable = Allocation::new(Uuid::new_v4());
    unmatchable.resource_class = Some("none-such".to_owned());
    let unmatchable = store.allocation_create(&unmatchable).await.unwrap();
    assert_eq!(left.state, AllocationState::Allocating);

    // A new process on that database: its conductor's start takes them up.
    let api = Api::on(db).await;
    api.settle().await;
    let matched = api
        .store()
        .allocation_get(&Ident::Uuid(left.uuid))
        .await
        .unwrap();
    assert_eq!(matched.state, AllocationState::Active);
    assert_eq!(matched.node_uuid, Some(node.uuid));
    let failed = api
        .store()
        .allocation_get(&Ident::Uuid(unmatchable.uuid))
        .await
        .unwrap();
    assert_eq!(failed.state, AllocationState::Error);
    assert!(failed.last_error.unwrap().contains("none-such"));
}

/// metalsmith's and Ansible's walk: allocate, deploy, undeploy (the allocation goes with the
/// instance, as Ironic's tear-down destroys it), then allocate and deploy the node again.
async fn allocate_deploy_undeploy_twice(api: Api) {
    let node = api
        .node_in(
            "available",
            NodeSpec::fake().with("resource_class", json!("gold")),
        )
        .await;
    for round in 0..2 {
        let allocation = allocate(&api, json!({"resource_class": "gold"})).await;
        assert_eq!(
            allocation.body["state"], "active",
            "round {round}: {}",
            allocation.body
        );
        assert_eq!(allocation.body["node_uuid"], node.as_str());
        let uuid = allocation.body["uuid"].as_str().unwrap().to_owned();
        api.provision(&node, "active").await;
        let deployed = api.run_until_state(&node, "active", STATE_TIMEOUT).await;
        assert_eq!(deployed["allocation_uuid"], uuid.as_str());
        api.provision(&node, "deleted").await;
        let cleaned = api.run_until_state(&node, "available", STATE_TIMEOUT).await;
        assert_eq!(cleaned["allocation_uuid"], Value::Null, "round {round}");
        assert_eq!(cleaned["instance_uuid"], Value::Null, "round {round}");
        let gone = api
            .send_at(V, Method::GET, &format!("/v1/allocations/{uuid}"), None)
            .await;
        assert_eq!(gone.status, StatusCode::NOT_FOUND, "round {round}");
    }
}

#[tokio::test]
async fn sqlite_a_node_is_allocated_deployed_undeployed_and_allocated_again() {
    allocate_deploy_undeploy_twice(Api::new().await).await;
}

#[tokio::test]
async fn postgres_a_node_is_allocated_deployed_undeployed_and_allocated_again() {
    allocate_deploy_undeploy_twice(Api::postgres().await).await;
}
