//! `/v1/inspection_rules` (1.96) through the real router on a real SQLite file: create, show,
//! list, PATCH and delete with Ironic's validation and status codes, sensitive rules, the
//! version gate; and the rules applied by the real conductor when a ramdisk posts its data
//! to `/v1/continue_inspection` (the `agent` inspect interface).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DriverSettings, Drivers};
use serde_json::{Value, json};

const MAC: &str = "52:54:00:12:34:01";

fn log_rule() -> Value {
    json!({
        "description": "Inspection rule to log node UUID",
        "conditions": [],
        "actions": [{"op": "log", "args": {"msg": "Node with UUID {node.uuid} is being inspected"}}],
        "phase": "main",
        "priority": 0,
        "sensitive": false,
    })
}

#[tokio::test]
async fn inspection_rule_create_show_list_patch_delete() {
    let api = Api::new().await;
    let created = api
        .send_latest(Method::POST, "/v1/inspection_rules", Some(log_rule()))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/inspection_rules/{uuid}")
    );
    assert_eq!(created.body["actions"], log_rule()["actions"]);
    assert_eq!(created.body["phase"], "main");

    let shown = api
        .send_latest(Method::GET, &format!("/v1/inspection_rules/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    assert_eq!(
        shown.body["description"],
        "Inspection rule to log node UUID"
    );

    // A listing shows uuid, priority, phase, description (and links) by default.
    let listed = api
        .send_latest(Method::GET, "/v1/inspection_rules", None)
        .await;
    let mut keys: Vec<&str> = listed.body["inspection_rules"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["description", "links", "phase", "priority", "uuid"]);
    let detail = api
        .send_latest(Method::GET, "/v1/inspection_rules/detail?phase=main", None)
        .await;
    assert_eq!(
        detail.body["inspection_rules"][0]["actions"],
        log_rule()["actions"]
    );

    let patch = json!([
        {"op": "replace", "path": "/priority", "value": 200},
        {"op": "replace", "path": "/conditions", "value": [{"op": "eq", "args": ["{{ inventory.cpu.count }}", 8]}]},
        {"op": "replace", "path": "/actions", "value": [
            {"op": "set-attribute", "args": ["{{ /properties/cpu_model }}", "cpu_xyz"]},
            {"op": "log", "args": ["CPU model updated via rule."]},
        ]},
    ]);
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/inspection_rules/{uuid}"),
            Some(patch.clone()),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["priority"], 200);
    assert_eq!(patched.body["conditions"], patch[1]["value"]);
    assert_eq!(patched.body["actions"], patch[2]["value"]);

    // A PATCH that leaves an invalid rule is refused whole.
    let bad = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/inspection_rules/{uuid}"),
            Some(json!([{"op": "replace", "path": "/actions", "value": []}])),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let uuid_patch = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/inspection_rules/{uuid}"),
            Some(json!([{"op": "replace", "path": "/uuid", "value": uuid}])),
        )
        .await;
    assert_eq!(uuid_patch.status, StatusCode::BAD_REQUEST);

    let deleted = api
        .send_latest(
            Method::DELETE,
            &format!("/v1/inspection_rules/{uuid}"),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api
        .send_latest(
            Method::DELETE,
            &format!("/v1/inspection_rules/{uuid}"),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Inspection rule {uuid} could not be found.")
    );
    let not_uuid = api
        .send_latest(Method::GET, "/v1/inspection_rules/not-a-uuid", None)
        .await;
    assert_eq!(not_uuid.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn invalid_rules_are_400_and_sensitive_rules_hide_their_content() {
    let api = Api::new().await;
    for (field, value) in [
        ("priority", json!(-1)),
        ("priority", json!(10000)),
        ("priority", json!(5000.5)),
        ("phase", json!("later")),
        ("actions", json!([])),
        ("actions", json!([{"op": "explode", "args": {}}])),
        (
            "conditions",
            json!([{"op": "eq", "args": [1], "multiple": "most"}]),
        ),
        ("built_in", json!(true)),
    ] {
        let mut body = log_rule();
        body[field] = value.clone();
        let refused = api
            .send_latest(Method::POST, "/v1/inspection_rules", Some(body))
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{field} = {value}: {}",
            refused.body
        );
    }

    let mut body = log_rule();
    body["sensitive"] = json!(true);
    let created = api
        .send_latest(Method::POST, "/v1/inspection_rules", Some(body))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["sensitive"], true);
    assert!(created.body["conditions"].is_null());
    assert!(created.body["actions"].is_null());
    let uuid = created.body["uuid"].as_str().unwrap();
    let unset = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/inspection_rules/{uuid}"),
            Some(json!([{"op": "replace", "path": "/sensitive", "value": false}])),
        )
        .await;
    assert_eq!(unset.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&unset.body),
        "Inspection rules cannot have the sensitive flag unset."
    );

    // Below 1.96 the resource does not exist: 404 to reads, 405 to writes, as Ironic answers.
    let old = api
        .send_at(95, Method::GET, "/v1/inspection_rules", None)
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let old = api
        .send_at(95, Method::POST, "/v1/inspection_rules", Some(log_rule()))
        .await;
    assert_eq!(old.status, StatusCode::METHOD_NOT_ALLOWED);
}

/// Plays the ramdisk: posts a QEMU machine's inventory for `uuid` (waiting in `inspect
/// wait`), lets the conductor finish, and returns the node.
async fn post_inspection_data(api: &Api, uuid: &str) -> Value {
    let mut payload: Value = serde_json::from_str(include_str!(
        "../../ferric-inspector/tests/fixtures/qemu.json"
    ))
    .unwrap();
    payload["inventory"]["interfaces"][1]["mac_address"] = MAC.into();
    payload["boot_interface"] = MAC.into();
    let answer = api
        .send(Method::POST, "/v1/continue_inspection", Some(payload))
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    api.send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await
        .body
}

#[tokio::test]
async fn rules_run_when_the_ramdisk_posts_its_data() {
    let root = tempfile::tempdir().unwrap();
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.path().to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        ..DriverSettings::default()
    });
    let api = Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await;
    let rules = [
        json!({
            "description": "QEMU machines are test machines",
            "priority": 50,
            "conditions": [
                {"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)qemu"}},
                {"op": "eq", "args": ["{inventory[cpu][count]}", "{item}"], "loop": ["2", "4"], "multiple": "any"},
            ],
            "actions": [
                {"op": "set-attribute", "args": ["{item[path]}", "{item[value]}"],
                 "loop": [{"path": "/extra/vendor", "value": "{inventory[system_vendor][manufacturer]}"},
                          {"path": "/resource_class", "value": "test-vm"}]},
                {"op": "add-trait", "args": ["CUSTOM_QEMU"]},
                {"op": "set-capability", "args": {"name": "boot_mode", "value": "uefi"}},
            ],
        }),
        json!({
            "description": "never matches",
            "conditions": [{"op": "!is-empty", "args": ["{inventory[no_such_key]}"]}, {"op": "is-false", "args": [true]}],
            "actions": [{"op": "fail", "args": ["should not run"]}],
        }),
    ];
    for rule in rules {
        let created = api
            .send_latest(Method::POST, "/v1/inspection_rules", Some(rule))
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    }
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "boot_interface": "ipxe", "inspect_interface": "agent"})),
        )
        .await;
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": MAC})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    api.provision(&uuid, "manage").await;
    api.settle().await;
    api.provision(&uuid, "inspect").await;
    api.settle().await;

    let node = post_inspection_data(&api, &uuid).await;
    assert_eq!(node["provision_state"], "manageable", "{node:#}");
    assert_eq!(node["extra"]["vendor"], "QEMU");
    assert_eq!(node["resource_class"], "test-vm");
    assert_eq!(node["traits"], json!(["CUSTOM_QEMU"]));
    assert_eq!(node["properties"]["capabilities"], "boot_mode:uefi");

    // A rule that fails the inspection: `inspect failed` with the rule's message.
    let fail = api
        .send_latest(
            Method::POST,
            "/v1/inspection_rules",
            Some(json!({"priority": 9999, "actions": [{"op": "fail", "args": {"msg": "no QEMU here"}}]})),
        )
        .await;
    assert_eq!(fail.status, StatusCode::CREATED, "{}", fail.body);
    api.provision(&uuid, "inspect").await;
    api.settle().await;
    let node = post_inspection_data(&api, &uuid).await;
    assert_eq!(node["provision_state"], "inspect failed", "{node:#}");
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("no QEMU here"),
        "{node:#}"
    );
}
