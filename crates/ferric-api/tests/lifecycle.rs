//! A node's life through the HTTP API and the real conductor on fake-hardware, on SQLite and
//! on PostgreSQL (`sqlite::…` / `postgres::…`): the whole walk from `enroll` to `active` and
//! back, every abort and failure edge of the seeds, deadlines, power failures, recovery after
//! a dead conductor, and concurrent requests. Tests step the conductor (`settle`,
//! `run_reconciler_at`); none sleeps.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use chrono::{TimeDelta, Utc};
use common::{Answer, Api, LATEST, NodeSpec, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_model::ProvisionState;
use ferric_model::resources::Ident;
use serde_json::{Value, json};

/// Every test body as `sqlite::name` and `postgres::name`.
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Api::new().await).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Api::postgres().await).await;
                }
            )+
        }
    };
}

on_both_backends!(
    walks_from_enroll_to_active_and_back_to_available,
    failed_verification_returns_to_enroll_with_last_error,
    abort_in_inspect_wait_ends_in_inspect_failed,
    abort_without_interface_support_is_400_and_changes_nothing,
    abort_in_wait_call_back_ends_in_deploy_failed_powered_off,
    callbacks_have_deadlines,
    fifty_concurrent_deploys_get_exactly_one_202,
    illegal_transitions_and_locked_nodes_are_refused,
    power_boot_device_validate_and_maintenance,
    disable_power_off_refuses_power_off_and_still_reboots,
    power_failures_put_the_node_in_maintenance_and_recovery_takes_it_out,
    work_of_a_dead_conductor_is_failed_with_last_error,
    manual_clean_rescue_service_and_holds,
    agent_lookup_token_and_heartbeat_continue_a_deploy,
);

async fn enroll(api: &Api, driver_info: Value) -> String {
    let uuid = api
        .enroll_node(NodeSpec::fake().driver_info(driver_info))
        .await;
    assert_eq!(api.node(&uuid).await["provision_state"], "enroll");
    uuid
}

async fn provision_at(api: &Api, minor: u16, uuid: &str, body: Value) -> Answer {
    api.send_at(
        minor,
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(body),
    )
    .await
}

/// Requests `target` and expects 202 with the states `Location`.
async fn request(api: &Api, uuid: &str, target: &str) {
    let answer = provision_at(api, LATEST, uuid, json!({ "target": target })).await;
    assert_eq!(
        answer.status,
        StatusCode::ACCEPTED,
        "{target}: {}",
        answer.body
    );
    let location = answer.headers["location"].to_str().unwrap();
    assert!(
        location.ends_with(&format!("/v1/nodes/{uuid}/states")),
        "{location}"
    );
}

/// Lets the conductor finish, then checks where the node rests.
async fn expect_state(api: &Api, uuid: &str, state: &str) -> Value {
    api.settle().await;
    let node = api.node(uuid).await;
    assert_eq!(node["provision_state"], state, "{node:#}");
    node
}

async fn set_driver_info(api: &Api, uuid: &str, key: &str, value: Option<&str>) {
    let op = match value {
        Some(value) => {
            json!([{"op": "add", "path": format!("/driver_info/{key}"), "value": value}])
        }
        None => json!([{"op": "remove", "path": format!("/driver_info/{key}")}]),
    };
    let patched = api
        .send_at(
            LATEST,
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(op),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
}

async fn history(api: &Api, uuid: &str) -> Vec<String> {
    api.store()
        .node_history_list(uuid::Uuid::parse_str(uuid).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|entry| entry.event)
        .collect()
}

async fn walks_from_enroll_to_active_and_back_to_available(api: Api) {
    let uuid = enroll(&api, json!({})).await;
    request(&api, &uuid, "manage").await;
    let managed = expect_state(&api, &uuid, "manageable").await;
    // Verifying reads the power state but, as Ironic's does, does not record it: that is
    // the power sync's job (the clients' goldens show `null` here).
    assert_eq!(managed["power_state"], Value::Null, "{managed}");
    request(&api, &uuid, "inspect").await;
    let inspected = expect_state(&api, &uuid, "manageable").await;
    assert!(inspected["inspection_finished_at"].is_string());
    request(&api, &uuid, "provide").await;
    expect_state(&api, &uuid, "available").await;
    request(&api, &uuid, "deploy").await;
    let active = expect_state(&api, &uuid, "active").await;
    assert_eq!(active["target_provision_state"], Value::Null);
    assert_eq!(active["last_error"], Value::Null);
    request(&api, &uuid, "undeploy").await;
    let available = expect_state(&api, &uuid, "available").await;
    assert_eq!(available["clean_step"], json!({}));

    let events = history(&api, &uuid).await;
    for expected in [
        "Event 'manage' (requested through the API): enroll -> verifying",
        "Event 'done': verifying -> manageable",
        "Event 'deploy' (requested through the API): available -> deploying",
        "Event 'done': deploying -> active",
        "Event 'delete' (requested through the API): active -> deleting",
        "Event 'clean': deleting -> cleaning",
        "Event 'done': cleaning -> available",
    ] {
        assert!(
            events.iter().any(|event| event == expected),
            "{expected} in {events:#?}"
        );
    }
    // No lease is left behind once the node rests.
    assert!(
        api.store()
            .node_lease_list_expired()
            .await
            .unwrap()
            .is_empty()
    );
    let states = api
        .send_at(
            LATEST,
            Method::GET,
            &format!("/v1/nodes/{uuid}/states"),
            None,
        )
        .await;
    assert_eq!(states.body["provision_state"], "available");
    // The baremetal CLI lists with a trailing slash; the node names its conductor (1.49).
    let listed = api
        .send_at(
            LATEST,
            Method::GET,
            "/v1/nodes/?fields=uuid,conductor",
            None,
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["nodes"][0]["conductor"], "test-conductor");
}

async fn failed_verification_returns_to_enroll_with_last_error(api: Api) {
    let uuid = enroll(&api, json!({"fake_fail": "validate"})).await;
    request(&api, &uuid, "manage").await;
    let node = expect_state(&api, &uuid, "enroll").await;
    let error = node["last_error"].as_str().unwrap();
    assert!(error.contains("Failed to verify node"), "{error}");
    assert!(error.contains("fake_fail"), "{error}");

    // Fixed credentials: manage works and clears the error.
    set_driver_info(&api, &uuid, "fake_fail", None).await;
    request(&api, &uuid, "manage").await;
    let node = expect_state(&api, &uuid, "manageable").await;
    assert_eq!(node["last_error"], Value::Null);
}

/// A fake node with `driver_info`, managed through the API.
async fn managed(api: &Api, driver_info: Value) -> String {
    api.node_in("manageable", NodeSpec::fake().driver_info(driver_info))
        .await
}

async fn abort_in_inspect_wait_ends_in_inspect_failed(api: Api) {
    let uuid = managed(&api, json!({"fake_wait": "inspect"})).await;
    request(&api, &uuid, "inspect").await;
    expect_state(&api, &uuid, "inspect wait").await;

    // Aborting inspection arrived in 1.41: older clients get 406 and the node keeps waiting.
    let old = provision_at(&api, 40, &uuid, json!({"target": "abort"})).await;
    assert_eq!(old.status, StatusCode::NOT_ACCEPTABLE, "{}", old.body);
    expect_state(&api, &uuid, "inspect wait").await;

    request(&api, &uuid, "abort").await;
    let node = expect_state(&api, &uuid, "inspect failed").await;
    assert_eq!(node["last_error"], "Inspection was aborted by request.");
    assert_eq!(node["target_provision_state"], "manageable");
    // From inspect failed the operator can manage again.
    request(&api, &uuid, "manage").await;
    expect_state(&api, &uuid, "manageable").await;
}

async fn abort_without_interface_support_is_400_and_changes_nothing(api: Api) {
    let uuid = managed(&api, json!({"fake_wait": "inspect"})).await;
    request(&api, &uuid, "inspect").await;
    expect_state(&api, &uuid, "inspect wait").await;
    // An inspect interface without abort (no-inspect stands in for one).
    let patched = api
        .send_at(
            LATEST,
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/inspect_interface", "value": "no-inspect"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let refused = provision_at(&api, LATEST, &uuid, json!({"target": "abort"})).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("does not support inspect"));
    let node = expect_state(&api, &uuid, "inspect wait").await;
    assert_eq!(node["last_error"], Value::Null);
}

/// A fake node with `driver_info`, managed and provided through the API.
async fn available(api: &Api, driver_info: Value) -> String {
    api.node_in("available", NodeSpec::fake().driver_info(driver_info))
        .await
}

async fn abort_in_wait_call_back_ends_in_deploy_failed_powered_off(api: Api) {
    let uuid = available(&api, json!({"fake_wait": "deploy"})).await;
    request(&api, &uuid, "deploy").await;
    let waiting = expect_state(&api, &uuid, "wait call-back").await;
    assert_eq!(waiting["deploy_step"]["step"], "deploy");

    let old = provision_at(&api, 109, &uuid, json!({"target": "abort"})).await;
    assert_eq!(old.status, StatusCode::NOT_ACCEPTABLE, "{}", old.body);

    request(&api, &uuid, "abort").await;
    let node = expect_state(&api, &uuid, "deploy failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("deploy operation was aborted"),
        "{node:#}"
    );
    assert_eq!(node["power_state"], "power off");
    assert_eq!(node["deploy_step"], json!({}));
    // No cleaning was triggered, and the operator can deploy again.
    set_driver_info(&api, &uuid, "fake_wait", None).await;
    request(&api, &uuid, "active").await;
    expect_state(&api, &uuid, "active").await;
}

async fn callbacks_have_deadlines(api: Api) {
    let uuid = available(&api, json!({"fake_wait": "deploy"})).await;
    request(&api, &uuid, "deploy").await;
    expect_state(&api, &uuid, "wait call-back").await;

    // Not late yet: nothing happens.
    let acted = api
        .conductor()
        .run_reconciler_at("callback_timeouts", Utc::now())
        .await
        .unwrap();
    assert_eq!(acted, 0);
    let later = Utc::now() + TimeDelta::hours(1);
    let acted = api
        .conductor()
        .run_reconciler_at("callback_timeouts", later)
        .await
        .unwrap();
    assert_eq!(acted, 1);
    let node = expect_state(&api, &uuid, "deploy failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("Timeout reached")
    );

    // Undeploy from deploy failed; cleaning waits and times out into clean failed + maintenance.
    set_driver_info(&api, &uuid, "fake_wait", Some("clean")).await;
    request(&api, &uuid, "undeploy").await;
    expect_state(&api, &uuid, "clean wait").await;
    api.conductor()
        .run_reconciler_at("callback_timeouts", Utc::now() + TimeDelta::hours(1))
        .await
        .unwrap();
    let node = expect_state(&api, &uuid, "clean failed").await;
    assert_eq!(node["maintenance"], true);
    assert_eq!(node["fault"], "clean failure");

    let status = api.conductor().reconciler_status();
    let timeouts = status
        .iter()
        .find(|status| status.name == "callback_timeouts")
        .unwrap();
    assert_eq!(timeouts.runs, 3);
    assert_eq!(timeouts.last_acted_on, 1);
}

async fn fifty_concurrent_deploys_get_exactly_one_202(api: Api) {
    let uuid = available(&api, json!({})).await;
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let state = api.state.clone();
        let uuid = uuid.clone();
        requests.spawn(async move {
            let request = axum::http::Request::builder()
                .method(Method::PUT)
                .uri(format!("/v1/nodes/{uuid}/states/provision"))
                .header("host", "ferric.test")
                .header("X-OpenStack-Ironic-API-Version", "1.110")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(r#"{"target": "active"}"#))
                .unwrap();
            let response = tower::ServiceExt::oneshot(ferric_api::router(state), request)
                .await
                .unwrap();
            response.status()
        });
    }
    let mut statuses = Vec::new();
    while let Some(status) = requests.join_next().await {
        statuses.push(status.unwrap());
    }
    let accepted = statuses
        .iter()
        .filter(|status| **status == StatusCode::ACCEPTED)
        .count();
    assert_eq!(accepted, 1, "{statuses:?}");
    assert!(
        statuses.iter().all(|status| matches!(
            *status,
            StatusCode::ACCEPTED | StatusCode::CONFLICT | StatusCode::BAD_REQUEST
        )),
        "{statuses:?}"
    );
    expect_state(&api, &uuid, "active").await;
}

async fn illegal_transitions_and_locked_nodes_are_refused(api: Api) {
    let uuid = enroll(&api, json!({})).await;
    let illegal = provision_at(&api, LATEST, &uuid, json!({"target": "active"})).await;
    assert_eq!(illegal.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&illegal.body).starts_with(&format!(
            "The requested action \"active\" can not be performed on node \"{uuid}\" while it is \
             in state \"enroll\"."
        )),
        "{}",
        faultstring(&illegal.body)
    );
    let too_old = provision_at(&api, 3, &uuid, json!({"target": "manage"})).await;
    assert_eq!(too_old.status, StatusCode::NOT_ACCEPTABLE);
    let unknown = provision_at(&api, LATEST, &uuid, json!({"target": "explode"})).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    let bad_field = provision_at(
        &api,
        LATEST,
        &uuid,
        json!({"target": "manage", "clean_steps": []}),
    )
    .await;
    assert_eq!(bad_field.status, StatusCode::BAD_REQUEST);
    let missing = provision_at(&api, LATEST, "no-such-node", json!({"target": "manage"})).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);

    // Another conductor holds the node: 409 with Ironic's NodeLocked text.
    let node_uuid = uuid::Uuid::parse_str(&uuid).unwrap();
    api.store()
        .node_lease_acquire(node_uuid, "other-host", Duration::from_secs(600))
        .await
        .unwrap();
    let locked = provision_at(&api, LATEST, &uuid, json!({"target": "manage"})).await;
    assert_eq!(locked.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&locked.body),
        format!(
            "Node {uuid} is locked by host other-host, please retry after the current \
             operation is completed."
        )
    );
    expect_state(&api, &uuid, "enroll").await;
}

async fn power_boot_device_validate_and_maintenance(api: Api) {
    let uuid = managed(&api, json!({})).await;
    let path = |tail: &str| format!("/v1/nodes/{uuid}/{tail}");
    let on = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("states/power"),
            Some(json!({"target": "power on"})),
        )
        .await;
    assert_eq!(on.status, StatusCode::ACCEPTED, "{}", on.body);
    api.settle().await;
    assert_eq!(api.node(&uuid).await["power_state"], "power on");
    let soft_old = api
        .send_at(
            20,
            Method::PUT,
            &path("states/power"),
            Some(json!({"target": "soft power off"})),
        )
        .await;
    assert_eq!(soft_old.status, StatusCode::NOT_ACCEPTABLE);
    let bad_timeout = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("states/power"),
            Some(json!({"target": "power off", "timeout": 0})),
        )
        .await;
    assert_eq!(bad_timeout.status, StatusCode::BAD_REQUEST);
    let off = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("states/power"),
            Some(json!({"target": "soft power off", "timeout": 30})),
        )
        .await;
    assert_eq!(off.status, StatusCode::ACCEPTED);
    api.settle().await;
    let states = api
        .send_at(LATEST, Method::GET, &path("states"), None)
        .await;
    assert_eq!(states.body["power_state"], "power off");
    assert_eq!(states.body["target_power_state"], Value::Null);

    let set = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("management/boot_device"),
            Some(json!({"boot_device": "pxe", "persistent": true})),
        )
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);
    let shown = api
        .send_at(LATEST, Method::GET, &path("management/boot_device"), None)
        .await;
    assert_eq!(
        shown.body,
        json!({"boot_device": "pxe", "persistent": true})
    );
    let supported = api
        .send_at(
            LATEST,
            Method::GET,
            &path("management/boot_device/supported"),
            None,
        )
        .await;
    assert!(
        supported.body["supported_boot_devices"]
            .as_array()
            .unwrap()
            .contains(&json!("disk"))
    );
    let bad = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("management/boot_device"),
            Some(json!({"boot_device": "wanboot"})),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let validation = api
        .send_at(LATEST, Method::GET, &path("validate"), None)
        .await;
    assert_eq!(validation.body["power"], json!({"result": true}));
    assert_eq!(validation.body["deploy"], json!({"result": true}));
    assert!(validation.body.get("vendor").is_none());

    let maintenance = api
        .send_at(
            LATEST,
            Method::PUT,
            &path("maintenance"),
            Some(json!({"reason": "fan"})),
        )
        .await;
    assert_eq!(maintenance.status, StatusCode::ACCEPTED);
    let shown = api.node(&uuid).await;
    assert_eq!(
        (
            shown["maintenance"].clone(),
            shown["maintenance_reason"].clone()
        ),
        (json!(true), json!("fan"))
    );
    let cleared = api
        .send_at(LATEST, Method::DELETE, &path("maintenance"), None)
        .await;
    assert_eq!(cleared.status, StatusCode::ACCEPTED);
    assert_eq!(api.node(&uuid).await["maintenance"], false);
}

/// Metal3 sets `disable_power_off` on hosts that must stay on (register.go:156); Ironic then
/// answers a power off with 409 "Failed to set node power state to …" (tests/clients, the BMO
/// replay's `power-off-refused`), takes reboots, and the node is free for the next request.
async fn disable_power_off_refuses_power_off_and_still_reboots(api: Api) {
    let uuid = managed(&api, json!({})).await;
    let path = |tail: &str| format!("/v1/nodes/{uuid}/{tail}");
    let power = |target: &'static str| {
        let api = &api;
        let path = path("states/power");
        async move {
            let answer = api
                .send_at(LATEST, Method::PUT, &path, Some(json!({"target": target})))
                .await;
            api.settle().await;
            answer
        }
    };
    let set = |value: bool| {
        let api = &api;
        let path = format!("/v1/nodes/{uuid}");
        async move {
            let answer = api
                .send_at(
                    LATEST,
                    Method::PATCH,
                    &path,
                    Some(json!([{"op": "add", "path": "/disable_power_off", "value": value}])),
                )
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        }
    };
    assert_eq!(power("power on").await.status, StatusCode::ACCEPTED);
    set(true).await;
    for target in ["power off", "soft power off"] {
        let refused = power(target).await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
        assert_eq!(
            faultstring(&refused.body),
            format!("Failed to set node power state to {target}.")
        );
    }
    let shown = api.node(&uuid).await;
    assert_eq!(shown["power_state"], "power on", "{shown:#}");
    assert_eq!(shown["target_power_state"], Value::Null);
    assert_eq!(shown["last_error"], Value::Null);
    assert_eq!(power("rebooting").await.status, StatusCode::ACCEPTED);
    assert_eq!(api.node(&uuid).await["power_state"], "power on");
    // Not left locked: the flag can be cleared at once, and then the node powers off.
    set(false).await;
    assert_eq!(power("power off").await.status, StatusCode::ACCEPTED);
    assert_eq!(api.node(&uuid).await["power_state"], "power off");
}

async fn power_failures_put_the_node_in_maintenance_and_recovery_takes_it_out(api: Api) {
    let uuid = managed(&api, json!({})).await;
    // The BMC stops answering.
    set_driver_info(&api, &uuid, "fake_fail", Some("power")).await;
    for _ in 0..2 {
        api.conductor().run_reconciler("power_sync").await.unwrap();
        assert_eq!(api.node(&uuid).await["maintenance"], false);
    }
    api.conductor().run_reconciler("power_sync").await.unwrap();
    let node_now = api.node(&uuid).await;
    assert_eq!(node_now["maintenance"], true);
    assert_eq!(node_now["fault"], "power failure");
    assert!(
        node_now["maintenance_reason"]
            .as_str()
            .unwrap()
            .contains("fake_fail")
    );

    // It answers again: the sync takes the node out of maintenance by itself.
    set_driver_info(&api, &uuid, "fake_fail", None).await;
    let acted = api.conductor().run_reconciler("power_sync").await.unwrap();
    assert_eq!(acted, 1);
    let node_now = api.node(&uuid).await;
    assert_eq!(node_now["maintenance"], false);
    assert_eq!(node_now["fault"], Value::Null);

    // Enrolled nodes are never synced (seed 003).
    let enrolled = enroll(&api, json!({"fake_fail": "power"})).await;
    for _ in 0..4 {
        api.conductor().run_reconciler("power_sync").await.unwrap();
    }
    assert_eq!(api.node(&enrolled).await["maintenance"], false);
}

async fn work_of_a_dead_conductor_is_failed_with_last_error(api: Api) {
    let uuid = available(&api, json!({})).await;
    let node_uuid = uuid::Uuid::parse_str(&uuid).unwrap();
    // A conductor took the node into deploying and a power action, then died: its lease lapsed.
    let store = api.store();
    let mut record = store.node_get(&Ident::parse(&uuid)).await.unwrap();
    let version = record.version;
    record.provision_state = ProvisionState::Deploying;
    record.target_provision_state = Some(ProvisionState::Active);
    record.target_power_state = Some(ferric_model::resources::PowerState::On);
    store.node_update(&record, version).await.unwrap();
    store
        .node_lease_acquire(node_uuid, "dead-conductor", Duration::ZERO)
        .await
        .unwrap();

    let acted = api.conductor().run_reconciler("recovery").await.unwrap();
    assert_eq!(acted, 1);
    let node = expect_state(&api, &uuid, "deploy failed").await;
    let error = node["last_error"].as_str().unwrap();
    assert!(error.contains("dead-conductor"), "{error}");
    assert!(error.contains("deploying"), "{error}");
    assert_eq!(node["target_power_state"], Value::Null);
    assert!(store.node_lease_get(node_uuid).await.unwrap().is_none());
    // Nothing more to do on a second run.
    assert_eq!(api.conductor().run_reconciler("recovery").await.unwrap(), 0);
}

async fn manual_clean_rescue_service_and_holds(api: Api) {
    let uuid = managed(&api, json!({})).await;
    let clean = provision_at(
        &api,
        LATEST,
        &uuid,
        json!({"target": "clean", "clean_steps": [
            {"interface": "deploy", "step": "erase_devices_metadata"},
            {"interface": "deploy", "step": "hold"}
        ]}),
    )
    .await;
    assert_eq!(clean.status, StatusCode::ACCEPTED, "{}", clean.body);
    let held = expect_state(&api, &uuid, "clean hold").await;
    assert_eq!(held["target_provision_state"], "manageable");
    request(&api, &uuid, "unhold").await;
    expect_state(&api, &uuid, "manageable").await;

    let unknown_step = provision_at(
        &api,
        LATEST,
        &uuid,
        json!({"target": "clean", "clean_steps": [{"interface": "deploy", "step": "nope"}]}),
    )
    .await;
    assert_eq!(unknown_step.status, StatusCode::BAD_REQUEST);
    expect_state(&api, &uuid, "manageable").await;

    request(&api, &uuid, "provide").await;
    expect_state(&api, &uuid, "available").await;
    request(&api, &uuid, "active").await;
    expect_state(&api, &uuid, "active").await;

    let no_password = provision_at(&api, LATEST, &uuid, json!({"target": "rescue"})).await;
    assert_eq!(no_password.status, StatusCode::BAD_REQUEST);
    let rescue = provision_at(
        &api,
        LATEST,
        &uuid,
        json!({"target": "rescue", "rescue_password": "s3cret"}),
    )
    .await;
    assert_eq!(rescue.status, StatusCode::ACCEPTED);
    let rescued = expect_state(&api, &uuid, "rescue").await;
    assert_eq!(rescued["instance_info"]["rescue_password"], "******");
    // As Ironic: the hash for the rescue ramdisk is stored too, and is a secret as well.
    assert_eq!(rescued["instance_info"]["hashed_rescue_password"], "******");
    request(&api, &uuid, "unrescue").await;
    let unrescued = expect_state(&api, &uuid, "active").await;
    assert_eq!(unrescued["instance_info"].get("rescue_password"), None);
    assert_eq!(
        unrescued["instance_info"].get("hashed_rescue_password"),
        None
    );

    let service = provision_at(
        &api,
        LATEST,
        &uuid,
        json!({"target": "service", "service_steps": [{"interface": "power", "step": "reboot"}]}),
    )
    .await;
    assert_eq!(service.status, StatusCode::ACCEPTED, "{}", service.body);
    let serviced = expect_state(&api, &uuid, "active").await;
    assert_eq!(serviced["power_state"], "power on");
}

#[tokio::test]
async fn a_full_worker_pool_answers_503() {
    let db = TestDb::sqlite().await;
    let api = Api::with_config(
        db,
        ConductorConfig {
            workers: 1,
            ..ConductorConfig::default()
        },
    )
    .await;
    // The only worker is busy with a slow power action on one node…
    let slow = enroll(&api, json!({"fake_delay": 60})).await;
    let other = enroll(&api, json!({})).await;
    let on = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{slow}/states/power"),
            Some(json!({"target": "power on"})),
        )
        .await;
    assert_eq!(on.status, StatusCode::ACCEPTED);
    // …so a request for another node is refused, not queued.
    let refused = provision_at(&api, LATEST, &other, json!({"target": "manage"})).await;
    assert_eq!(
        refused.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        refused.body
    );
    assert!(faultstring(&refused.body).contains("free conductor workers"));
    let node = api.node(&other).await;
    assert_eq!(node["provision_state"], "enroll");
}

async fn agent_lookup_token_and_heartbeat_continue_a_deploy(api: Api) {
    let uuid = available(&api, json!({"fake_wait": "deploy"})).await;
    let port = api
        .send_at(
            LATEST,
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": "52:54:00:12:34:56"})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    let lookup_path = "/v1/lookup?addresses=52:54:00:12:34:56,not-a-mac";

    // Not expecting an agent yet: the same 404 as an unknown MAC.
    let early = api.send_at(68, Method::GET, lookup_path, None).await;
    assert_eq!(early.status, StatusCode::NOT_FOUND, "{}", early.body);
    let unknown = api
        .send_at(
            68,
            Method::GET,
            "/v1/lookup?addresses=52:54:00:00:00:01",
            None,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(faultstring(&early.body), faultstring(&unknown.body));
    let empty = api.send_at(68, Method::GET, "/v1/lookup", None).await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{}", empty.body);
    let old = api.send_at(21, Method::GET, lookup_path, None).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);

    request(&api, &uuid, "active").await;
    expect_state(&api, &uuid, "wait call-back").await;

    let found = api.send_at(68, Method::GET, lookup_path, None).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    assert_eq!(found.body["node"]["uuid"], uuid.as_str());
    assert_eq!(found.body["config"]["agent_token_required"], true);
    assert_eq!(found.body["config"]["heartbeat_timeout"], 300);
    let token = found.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 43);
    assert!(
        found.body["node"]["driver_internal_info"]
            .get("agent_secret_token")
            .is_none()
    );
    // The token is shown once.
    let again = api.send_at(68, Method::GET, lookup_path, None).await;
    assert_eq!(again.body["config"]["agent_token"], "******");
    let by_uuid = api
        .send_at(
            68,
            Method::GET,
            &format!("/v1/lookup?node_uuid={uuid}"),
            None,
        )
        .await;
    assert_eq!(by_uuid.status, StatusCode::OK);

    let heartbeat = format!("/v1/heartbeat/{uuid}");
    let beat = |token: &str| {
        json!({
            "callback_url": "http://10.0.0.5:9999",
            "agent_token": token,
            "agent_version": "ferric-agent test",
        })
    };
    let wrong = api
        .send_at(68, Method::POST, &heartbeat, Some(beat("not-the-token")))
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{}", wrong.body);
    assert_eq!(
        faultstring(&wrong.body),
        "Invalid or missing agent token received."
    );
    let missing_url = api
        .send_at(
            68,
            Method::POST,
            &heartbeat,
            Some(json!({"agent_token": token})),
        )
        .await;
    assert_eq!(missing_url.status, StatusCode::BAD_REQUEST);
    let too_old = api
        .send_at(35, Method::POST, &heartbeat, Some(beat(&token)))
        .await;
    assert_eq!(too_old.status, StatusCode::BAD_REQUEST, "{}", too_old.body);
    expect_state(&api, &uuid, "wait call-back").await;

    // The heartbeat is the callback: the deploy goes on to active.
    let accepted = api
        .send_at(68, Method::POST, &heartbeat, Some(beat(&token)))
        .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    let node = expect_state(&api, &uuid, "active").await;
    assert_eq!(
        node["driver_internal_info"]["agent_url"],
        "http://10.0.0.5:9999"
    );
    assert_eq!(
        node["driver_internal_info"]["agent_version"],
        "ferric-agent test"
    );
    // In a resting state the agent is refused.
    let late = api
        .send_at(68, Method::POST, &heartbeat, Some(beat(&token)))
        .await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.body);
    let gone = api.send_at(68, Method::GET, lookup_path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}
