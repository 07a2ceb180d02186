//! Runbooks from API 1.112: any logical name, a `description`, `traits` set through
//! `/v1/runbooks/{runbook}/traits`, and a node runs a runbook when it has one of its traits;
//! older versions keep the name-is-a-trait rules.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::{Value, json};

const TRAITS: u16 = 112;

fn steps() -> Value {
    json!([{"interface": "bios", "step": "apply_configuration", "order": 0,
            "args": {"settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}}])
}

async fn runbook_traits(api: &Api, minor: u16, runbook: &str) -> common::Answer {
    api.send_at(
        minor,
        Method::GET,
        &format!("/v1/runbooks/{runbook}/traits"),
        None,
    )
    .await
}

#[tokio::test]
async fn names_descriptions_and_the_traits_sub_resource() {
    let api = Api::new().await;
    let body = json!({"name": "vt-off.v2", "description": "Turn VT off", "steps": steps()});
    let old = api
        .send_at(111, Method::POST, "/v1/runbooks", Some(body.clone()))
        .await;
    assert_eq!(old.status, StatusCode::NOT_ACCEPTABLE, "{}", old.body);
    let old_name = api
        .send_at(
            111,
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "vt-off", "steps": steps()})),
        )
        .await;
    assert_eq!(
        old_name.status,
        StatusCode::BAD_REQUEST,
        "{}",
        old_name.body
    );

    let created = api
        .send_at(TRAITS, Method::POST, "/v1/runbooks", Some(body))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["description"], "Turn VT off");
    assert_eq!(created.body["traits"], json!([]));
    let bad_name = api
        .send_at(
            TRAITS,
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "vt off", "steps": steps()})),
        )
        .await;
    assert_eq!(bad_name.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&bad_name.body).contains("runbook name"),
        "{}",
        bad_name.body
    );
    let with_traits = api
        .send_at(
            TRAITS,
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "x", "steps": steps(), "traits": ["CUSTOM_X"]})),
        )
        .await;
    assert_eq!(
        with_traits.status,
        StatusCode::BAD_REQUEST,
        "{}",
        with_traits.body
    );

    // Below 1.112 the fields are hidden and the sub-resource does not exist.
    let shown_old = api
        .send_at(111, Method::GET, "/v1/runbooks/vt-off.v2", None)
        .await;
    assert_eq!(shown_old.status, StatusCode::OK);
    assert!(shown_old.body.get("traits").is_none(), "{}", shown_old.body);
    assert!(shown_old.body.get("description").is_none());
    assert_eq!(
        runbook_traits(&api, 111, "vt-off.v2").await.status,
        StatusCode::NOT_FOUND
    );

    let path = "/v1/runbooks/vt-off.v2/traits";
    let replaced = api
        .send_at(
            TRAITS,
            Method::PUT,
            path,
            Some(json!({"traits": ["CUSTOM_B", "CUSTOM_A", "CUSTOM_B"]})),
        )
        .await;
    assert_eq!(replaced.status, StatusCode::NO_CONTENT, "{}", replaced.body);
    assert_eq!(
        runbook_traits(&api, TRAITS, "vt-off.v2").await.body,
        json!({"traits": ["CUSTOM_A", "CUSTOM_B"]})
    );
    let added = api
        .send_at(TRAITS, Method::PUT, &format!("{path}/CUSTOM_C"), None)
        .await;
    assert_eq!(added.status, StatusCode::NO_CONTENT, "{}", added.body);
    assert_eq!(
        added.headers["location"],
        "http://ferric.test/v1/runbooks/vt-off.v2/traits/CUSTOM_C"
    );
    let bad_trait = api
        .send_at(TRAITS, Method::PUT, &format!("{path}/lower_case"), None)
        .await;
    assert_eq!(bad_trait.status, StatusCode::BAD_REQUEST);
    let no_list = api
        .send_at(TRAITS, Method::PUT, path, Some(json!({})))
        .await;
    assert_eq!(no_list.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&no_list.body).contains("runbook traits"),
        "{}",
        no_list.body
    );
    for trait_name in ["CUSTOM_A", "CUSTOM_NOT_THERE"] {
        let removed = api
            .send_at(
                TRAITS,
                Method::DELETE,
                &format!("{path}/{trait_name}"),
                None,
            )
            .await;
        assert_eq!(
            removed.status,
            StatusCode::NO_CONTENT,
            "{trait_name}: {}",
            removed.body
        );
    }
    let shown = api
        .send_at(TRAITS, Method::GET, "/v1/runbooks/vt-off.v2", None)
        .await;
    assert_eq!(shown.body["traits"], json!(["CUSTOM_B", "CUSTOM_C"]));
    let patched = api
        .send_at(
            TRAITS,
            Method::PATCH,
            "/v1/runbooks/vt-off.v2",
            Some(json!([{"op": "replace", "path": "/description", "value": "VT off"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["description"], "VT off");
    assert_eq!(patched.body["traits"], json!(["CUSTOM_B", "CUSTOM_C"]));
    let cleared = api.send_at(TRAITS, Method::DELETE, path, None).await;
    assert_eq!(cleared.status, StatusCode::NO_CONTENT);
    assert_eq!(
        runbook_traits(&api, TRAITS, "vt-off.v2").await.body,
        json!({"traits": []})
    );
}

async fn provision(api: &Api, minor: u16, uuid: &str, runbook: &str) -> common::Answer {
    api.send_at(
        minor,
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(json!({"target": "clean", "runbook": runbook})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_runs_a_runbook_when_it_has_one_of_its_traits() {
    let api = Api::new().await;
    let created = api
        .send_at(
            TRAITS,
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "vt-off", "steps": steps()})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = api.enroll(json!({"driver": "fake-hardware"})).await;
    api.provision(&uuid, "manage").await;
    api.settle().await;

    let no_traits = provision(&api, TRAITS, &uuid, "vt-off").await;
    assert_eq!(no_traits.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&no_traits.body).contains("has no traits configured"),
        "{}",
        no_traits.body
    );
    let set = api
        .send_at(
            TRAITS,
            Method::PUT,
            "/v1/runbooks/vt-off/traits",
            Some(json!({"traits": ["CUSTOM_VT", "CUSTOM_LAB"]})),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);
    let not_matching = provision(&api, TRAITS, &uuid, "vt-off").await;
    assert_eq!(not_matching.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&not_matching.body).contains("does not have any of the runbook's traits"),
        "{}",
        not_matching.body
    );

    let node_trait = api
        .send_at(
            TRAITS,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/traits/CUSTOM_LAB"),
            None,
        )
        .await;
    assert_eq!(
        node_trait.status,
        StatusCode::NO_CONTENT,
        "{}",
        node_trait.body
    );
    // Below 1.112 the old rule holds: a node trait named like the runbook.
    let old_rule = provision(&api, 111, &uuid, "vt-off").await;
    assert_eq!(old_rule.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&old_rule.body).contains("add it to your node traits"),
        "{}",
        old_rule.body
    );

    let accepted = provision(&api, TRAITS, &uuid, "vt-off").await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    let cleaned = api
        .send_at(TRAITS, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(
        cleaned.body["provision_state"], "manageable",
        "{}",
        cleaned.body
    );
    let bios = api
        .send_at(
            TRAITS,
            Method::GET,
            &format!("/v1/nodes/{uuid}/bios/ProcVirtualization"),
            None,
        )
        .await;
    assert_eq!(bios.body["ProcVirtualization"]["value"], "Disabled");
}
