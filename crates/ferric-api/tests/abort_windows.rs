//! Issue 21: an accepted abort is always carried out. Every window a `DELETE
//! /v1/nodes/{node}/provision` (or the `abort` verb) can land in — inside a synchronous step,
//! in the reserved `wait` step, while a step polls, between two steps, in the last instant
//! before `active` — for deployments, cleaning and rescue, on SQLite and PostgreSQL: every
//! 202 ends in the flow's failed state with `last_error` naming the abort and the machine
//! powered off; 403 (a step that may not be interrupted) and 404 (nothing running) mark
//! nothing. Fake-hardware nodes are slowed per operation (`fake_delay`) and the tests wait for
//! the node to show the step they aim at; no assertion depends on timing.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use common::{Answer, Api, faultstring};
use ferric_model::ProvisionState;
use ferric_model::resources::Ident;
use serde_json::{Value, json};
use uuid::Uuid;

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
    delete_inside_a_synchronous_step_stops_it,
    delete_in_the_reserved_wait_step_stops_it,
    delete_while_a_step_polls_stops_it,
    a_mark_at_a_step_boundary_stops_the_deploy_before_the_next_step,
    a_mark_in_the_last_instant_fails_the_deploy_instead_of_active,
    every_202_ends_in_deploy_failed_and_every_404_in_active,
    delete_during_cleaning_and_in_clean_wait_fails_cleaning_powered_off,
    delete_during_rescuing_and_in_rescue_wait_fails_rescue_powered_off,
);

/// The first deploy step: the machine is on, so the abort's power-off shows.
fn power_on() -> Value {
    json!({"interface": "power", "step": "power_on", "priority": 200, "args": {}})
}

/// A fake-hardware node in `available`.
async fn available(api: &Api, driver_info: Value) -> String {
    let uuid = api
        .enroll(json!({"driver": "fake-hardware", "driver_info": driver_info}))
        .await;
    for (target, state) in [("manage", "manageable"), ("provide", "available")] {
        api.provision(&uuid, target).await;
        api.settle().await;
        assert_eq!(node(api, &uuid).await["provision_state"], state);
    }
    uuid
}

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

/// `PUT …/states/provision` with `body`; expects 202.
async fn request(api: &Api, uuid: &str, body: Value) {
    let answer = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(
        answer.status,
        StatusCode::ACCEPTED,
        "{body}: {}",
        answer.body
    );
}

async fn delete(api: &Api, uuid: &str) -> Answer {
    api.send_latest(Method::DELETE, &format!("/v1/nodes/{uuid}/provision"), None)
        .await
}

/// Waits until the node shows what `shows` looks for (the step a test aims its abort at).
/// The bound only turns a hang into a failure with the node in the message.
async fn wait_until(api: &Api, uuid: &str, what: &str, shows: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let node = node(api, uuid).await;
        if shows(&node) {
            return node;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the node never showed {what}: {node:#}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn step_is(
    field: &'static str,
    interface: &'static str,
    step: &'static str,
) -> impl Fn(&Value) -> bool {
    move |node: &Value| node[field]["interface"] == interface && node[field]["step"] == step
}

/// Lets the conductor finish and checks the node ended in `state`, powered off, with
/// `last_error` containing `error`, nothing left marked.
async fn aborted(api: &Api, uuid: &str, state: &str, error: &str) -> Value {
    api.settle().await;
    let node = node(api, uuid).await;
    assert_eq!(node["provision_state"], state, "{node:#}");
    assert_eq!(node["power_state"], "power off", "{node:#}");
    let last_error = node["last_error"].as_str().unwrap_or_default();
    assert!(last_error.contains(error), "{last_error}");
    let id = Uuid::parse_str(uuid).unwrap();
    assert!(!api.store().node_abort_request_exists(id).await.unwrap());
    node
}

async fn delete_inside_a_synchronous_step_stops_it(api: Api) {
    // Only the deploy step is slow: a minute, unless the abort drops it at its await point.
    let uuid = available(&api, json!({"fake_delay": {"deploy": 60}})).await;
    request(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [power_on()]}),
    )
    .await;
    let running = wait_until(
        &api,
        &uuid,
        "deploy.deploy",
        step_is("deploy_step", "deploy", "deploy"),
    )
    .await;
    assert_eq!(running["provision_state"], "deploying");
    assert_eq!(running["power_state"], "power on");

    let accepted = delete(&api, &uuid).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    let node = aborted(
        &api,
        &uuid,
        "deploy failed",
        "By request, the deployment was aborted during step \"deploy.deploy\"",
    )
    .await;
    assert_eq!(node["deploy_step"], json!({}));
    // Nothing runs any more: a second DELETE finds nothing to abort.
    let again = delete(&api, &uuid).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.body);
    assert!(faultstring(&again.body).contains("No deployment is running"));
}

async fn delete_in_the_reserved_wait_step_stops_it(api: Api) {
    let uuid = available(&api, json!({})).await;
    let wait = json!({"interface": "deploy", "step": "wait", "priority": 150,
                      "args": {"seconds": 3600}});
    request(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [power_on(), wait]}),
    )
    .await;
    wait_until(
        &api,
        &uuid,
        "deploy.wait",
        step_is("deploy_step", "deploy", "wait"),
    )
    .await;

    let accepted = delete(&api, &uuid).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    aborted(
        &api,
        &uuid,
        "deploy failed",
        "By request, the deployment was aborted during step \"deploy.wait\"",
    )
    .await;
}

async fn delete_while_a_step_polls_stops_it(api: Api) {
    // The deploy step runs asynchronously and is polled every 0.1 s for ten minutes.
    let uuid = available(&api, json!({"fake_poll": "deploy", "fake_polls": 6000})).await;
    request(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [power_on()]}),
    )
    .await;
    wait_until(&api, &uuid, "a poll of deploy.deploy", |node| {
        node["driver_internal_info"]["fake_polled"].as_u64() >= Some(1)
    })
    .await;

    let accepted = delete(&api, &uuid).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    aborted(
        &api,
        &uuid,
        "deploy failed",
        "By request, the deployment was aborted during step \"deploy.deploy\"",
    )
    .await;
}

/// Marks the node as an accepted DELETE does (the mark a DELETE writes after its checks).
async fn mark(api: &Api, uuid: &str) {
    let id = Uuid::parse_str(uuid).unwrap();
    let current = api.store().node_get(&Ident::Uuid(id)).await.unwrap();
    let marked = api
        .store()
        .node_abort_request_set(id, current.version, &[ProvisionState::Deploying])
        .await
        .unwrap();
    assert!(marked, "the node moved on before the mark");
}

/// A BIOS step may not be interrupted: a DELETE while it runs is 403 and marks nothing.
fn bios_step() -> Value {
    json!({"interface": "bios", "step": "apply_configuration", "priority": 150,
           "args": {"settings": [{"name": "BootMode", "value": "Bios"}]}})
}

async fn a_mark_at_a_step_boundary_stops_the_deploy_before_the_next_step(api: Api) {
    let uuid = available(&api, json!({"fake_delay": {"bios": 3}})).await;
    request(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [power_on(), bios_step()]}),
    )
    .await;
    wait_until(
        &api,
        &uuid,
        "bios.apply_configuration",
        step_is("deploy_step", "bios", "apply_configuration"),
    )
    .await;
    let refused = delete(&api, &uuid).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let id = Uuid::parse_str(&uuid).unwrap();
    assert!(!api.store().node_abort_request_exists(id).await.unwrap());

    // A DELETE checked against the step before and marked as that step ended lands here: the
    // step that runs is not interrupted, and deploy.deploy never starts.
    mark(&api, &uuid).await;
    let node = aborted(
        &api,
        &uuid,
        "deploy failed",
        "By request, the deployment was aborted during step \"bios.apply_configuration\"",
    )
    .await;
    let history = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/history"), None)
        .await;
    assert!(!history.body.to_string().contains("-> active"), "{node:#}");
}

async fn a_mark_in_the_last_instant_fails_the_deploy_instead_of_active(api: Api) {
    // The BIOS step is the last one (deploy.deploy removed): the mark lands while it runs and
    // the conductor's move to `active` must lose to it.
    let uuid = available(&api, json!({"fake_delay": {"bios": 3}})).await;
    let no_deploy = json!({"interface": "deploy", "step": "deploy", "priority": 0, "args": {}});
    request(
        &api,
        &uuid,
        json!({"target": "active", "deploy_steps": [power_on(), bios_step(), no_deploy]}),
    )
    .await;
    wait_until(
        &api,
        &uuid,
        "bios.apply_configuration",
        step_is("deploy_step", "bios", "apply_configuration"),
    )
    .await;
    mark(&api, &uuid).await;
    aborted(
        &api,
        &uuid,
        "deploy failed",
        "By request, the deployment was aborted",
    )
    .await;
}

async fn every_202_ends_in_deploy_failed_and_every_404_in_active(api: Api) {
    // DELETEs land all around the end of short deployments: before, during, in the instant
    // the deploy finishes, after. Whatever each answered, the node must agree.
    let mut nodes = Vec::new();
    for _ in 0..8 {
        nodes.push(available(&api, json!({"fake_delay": {"deploy": 0.2}})).await);
    }
    let mut answers = Vec::new();
    for (n, uuid) in nodes.iter().enumerate() {
        request(
            &api,
            uuid,
            json!({"target": "active", "deploy_steps": [power_on()]}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(40) * u32::try_from(n).unwrap()).await;
        answers.push(delete(&api, uuid).await.status);
    }
    api.settle().await;
    for (uuid, status) in nodes.iter().zip(answers) {
        let node = node(&api, uuid).await;
        match status {
            StatusCode::ACCEPTED => {
                assert_eq!(node["provision_state"], "deploy failed", "{node:#}");
                assert_eq!(node["power_state"], "power off", "{node:#}");
                assert!(
                    node["last_error"]
                        .as_str()
                        .unwrap()
                        .contains("By request, the deployment was aborted"),
                    "{node:#}"
                );
            }
            StatusCode::NOT_FOUND => assert_eq!(node["provision_state"], "active", "{node:#}"),
            other => panic!("DELETE answered {other}: {node:#}"),
        }
    }
}

async fn delete_during_cleaning_and_in_clean_wait_fails_cleaning_powered_off(api: Api) {
    // Manual cleaning in its reserved wait step.
    let uuid = api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {}}))
        .await;
    api.provision(&uuid, "manage").await;
    api.settle().await;
    let wait = json!({"interface": "deploy", "step": "wait", "args": {"seconds": 3600}});
    let power_on = json!({"interface": "power", "step": "power_on"});
    request(
        &api,
        &uuid,
        json!({"target": "clean", "clean_steps": [power_on, wait]}),
    )
    .await;
    wait_until(
        &api,
        &uuid,
        "deploy.wait",
        step_is("clean_step", "deploy", "wait"),
    )
    .await;
    let accepted = delete(&api, &uuid).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    let failed = aborted(
        &api,
        &uuid,
        "clean failed",
        "By request, the clean operation was aborted during or after the completion of step \
         \"deploy.wait\"",
    )
    .await;
    assert_eq!(failed["maintenance"], false, "an abort is no clean failure");

    // A node waiting for its agent in `clean wait`: the DELETE is the abort verb.
    let waiting = api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "clean"}}))
        .await;
    api.provision(&waiting, "manage").await;
    api.settle().await;
    let power_on = json!({"interface": "power", "step": "power_on"});
    let erase = json!({"interface": "deploy", "step": "erase_devices"});
    request(
        &api,
        &waiting,
        json!({"target": "clean", "clean_steps": [power_on, erase]}),
    )
    .await;
    api.settle().await;
    let shown = node(&api, &waiting).await;
    assert_eq!(shown["provision_state"], "clean wait", "{shown:#}");
    assert_eq!(shown["power_state"], "power on", "{shown:#}");
    let accepted = delete(&api, &waiting).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    aborted(
        &api,
        &waiting,
        "clean failed",
        "By request, the clean operation was aborted during or after the completion of step \
         \"deploy.erase_devices\"",
    )
    .await;
}

async fn delete_during_rescuing_and_in_rescue_wait_fails_rescue_powered_off(api: Api) {
    for (driver_info, waits) in [
        (json!({"fake_delay": {"rescue": 60}}), false),
        (json!({"fake_wait": "rescue"}), true),
    ] {
        let uuid = available(&api, driver_info).await;
        request(
            &api,
            &uuid,
            json!({"target": "active", "deploy_steps": [power_on()]}),
        )
        .await;
        api.settle().await;
        let active = node(&api, &uuid).await;
        assert_eq!(active["provision_state"], "active", "{active:#}");
        assert_eq!(active["power_state"], "power on", "{active:#}");

        request(
            &api,
            &uuid,
            json!({"target": "rescue", "rescue_password": "s3cret"}),
        )
        .await;
        let state = if waits { "rescue wait" } else { "rescuing" };
        wait_until(&api, &uuid, state, |node| node["provision_state"] == state).await;
        let accepted = delete(&api, &uuid).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
        let node = aborted(
            &api,
            &uuid,
            "rescue failed",
            "Rescue operation was aborted by request.",
        )
        .await;
        assert_eq!(
            node["instance_info"].get("rescue_password"),
            None,
            "{node:#}"
        );
    }
}
