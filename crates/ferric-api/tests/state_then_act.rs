//! A client that sees a node's new state can act on it at once: the conductor gives the
//! node's lease back in the same write as the state its work ended in, so polling until the
//! state shows and then sending the next request never meets `409 NodeLocked` (Tempest's API
//! tests do exactly this, without retries). Many rounds, on SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use common::{Api, LATEST, NodeSpec};
use serde_json::{Value, json};

const ROUNDS: usize = 25;

/// Polls the node (no settling, no sleeping beyond a yield) until `field` shows `value` and
/// `target_field` is null, as a client polling the API sees it.
async fn poll_until(api: &Api, node: &str, field: &str, value: &str, target_field: &str) {
    let started = Instant::now();
    loop {
        let shown = api
            .send_latest(Method::GET, &format!("/v1/nodes/{node}"), None)
            .await;
        if shown.body[field] == value && shown.body[target_field].is_null() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "node never showed {field} {value}: {}",
            shown.body
        );
        tokio::task::yield_now().await;
    }
}

/// Sends `body` to the node's `path` once, with no retry, and expects `expected`.
async fn act(api: &Api, node: &str, path: &str, body: Value, expected: StatusCode) {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{node}/{path}"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(answer.status, expected, "{path} {body}: {}", answer.body);
}

async fn act_as_soon_as_the_state_shows(api: Api) {
    let node = api.node_in("manageable", NodeSpec::fake()).await;
    for round in 0..ROUNDS {
        let provision = "states/provision";
        act(
            &api,
            &node,
            provision,
            json!({"target": "provide"}),
            StatusCode::ACCEPTED,
        )
        .await;
        poll_until(
            &api,
            &node,
            "provision_state",
            "available",
            "target_provision_state",
        )
        .await;
        // An API-side write that refuses a leased node: the lease is gone too.
        let patched = api
            .send_latest(
                Method::PATCH,
                &format!("/v1/nodes/{node}"),
                Some(json!([{"op": "add", "path": "/extra/round", "value": round}])),
            )
            .await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
        act(
            &api,
            &node,
            provision,
            json!({"target": "manage"}),
            StatusCode::ACCEPTED,
        )
        .await;
        poll_until(
            &api,
            &node,
            "provision_state",
            "manageable",
            "target_provision_state",
        )
        .await;

        let power = "states/power";
        act(
            &api,
            &node,
            power,
            json!({"target": "power on"}),
            StatusCode::ACCEPTED,
        )
        .await;
        poll_until(&api, &node, "power_state", "power on", "target_power_state").await;
        act(
            &api,
            &node,
            power,
            json!({"target": "power off"}),
            StatusCode::ACCEPTED,
        )
        .await;
        poll_until(
            &api,
            &node,
            "power_state",
            "power off",
            "target_power_state",
        )
        .await;
    }
    api.settle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_client_acts_as_soon_as_the_state_shows() {
    act_as_soon_as_the_state_shows(Api::new().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_client_acts_as_soon_as_the_state_shows() {
    act_as_soon_as_the_state_shows(Api::postgres().await).await;
}
