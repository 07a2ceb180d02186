//! `GET /metrics` over real HTTP: a fake-hardware conductor takes one node through manage →
//! provide → deploy (with an agent's lookup and heartbeat) and fails another's deploy; the
//! scrape then shows those transitions, the failure, the time spent per state, the BMC calls,
//! the agent's requests, the requests per route template, the nodes per state and the worker
//! pool. The registry belongs to this test's own conductor, so no other test's work shows.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::collections::HashMap;

use common::Api;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The API on a real socket; the server task ends with the test's runtime.
async fn serve(api: &Api) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = ferric_api::router(api.state.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

/// A client that speaks the newest microversion, as the tests that drive whole flows do.
struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let (status, body) = self.send_status(method, path, body).await;
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    async fn send_status(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(
                "X-OpenStack-Ironic-API-Version",
                format!("1.{}", common::LATEST),
            );
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    async fn provision(&self, uuid: &str, target: &str) {
        self.send(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({ "target": target })),
        )
        .await;
    }

    async fn state_after_settling(&self, api: &Api, uuid: &str) -> String {
        api.settle().await;
        let node = self
            .send(reqwest::Method::GET, &format!("/v1/nodes/{uuid}"), None)
            .await;
        node["provision_state"].as_str().unwrap().to_owned()
    }
}

/// The samples of an exposition: series (name and labels, as written) → value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            (series.to_owned(), value.parse().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_shows_the_lifecycle_it_followed() {
    let api = Api::new().await;
    let client = Client {
        base: serve(&api).await,
        http: reqwest::Client::new(),
    };
    use reqwest::Method;

    // One node deployed through an agent's lookup and heartbeat…
    let node = client
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "deploy"}})),
        )
        .await;
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    client
        .send(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": "52:54:00:12:34:56"})),
        )
        .await;
    client.provision(&uuid, "manage").await;
    assert_eq!(client.state_after_settling(&api, &uuid).await, "manageable");
    client.provision(&uuid, "provide").await;
    assert_eq!(client.state_after_settling(&api, &uuid).await, "available");
    client.provision(&uuid, "active").await;
    assert_eq!(
        client.state_after_settling(&api, &uuid).await,
        "wait call-back"
    );
    let (unknown, _) = client
        .send_status(Method::GET, "/v1/lookup?addresses=52:54:00:00:00:01", None)
        .await;
    assert_eq!(unknown, StatusCode::NOT_FOUND);
    let found = client
        .send(Method::GET, "/v1/lookup?addresses=52:54:00:12:34:56", None)
        .await;
    let token = found["config"]["agent_token"].as_str().unwrap().to_owned();
    client
        .send(
            Method::POST,
            &format!("/v1/heartbeat/{uuid}"),
            Some(json!({
                "callback_url": "http://10.0.0.5:9999",
                "agent_token": token,
                "agent_version": "test",
            })),
        )
        .await;
    assert_eq!(client.state_after_settling(&api, &uuid).await, "active");
    client
        .send(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({"target": "power off"})),
        )
        .await;
    api.settle().await;

    // … and one whose deploy fails.
    let failing = client
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "driver_info": {"fake_fail": "deploy"}})),
        )
        .await;
    let failing = failing["uuid"].as_str().unwrap().to_owned();
    for (target, state) in [("manage", "manageable"), ("provide", "available")] {
        client.provision(&failing, target).await;
        assert_eq!(client.state_after_settling(&api, &failing).await, state);
    }
    client.provision(&failing, "active").await;
    assert_eq!(
        client.state_after_settling(&api, &failing).await,
        "deploy failed"
    );
    // … and one whose BMC does not answer, so verifying sends it back to enroll.
    let unreachable = client
        .send(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "driver_info": {"fake_fail": "power"}})),
        )
        .await;
    let unreachable = unreachable["uuid"].as_str().unwrap().to_owned();
    client.provision(&unreachable, "manage").await;
    assert_eq!(
        client.state_after_settling(&api, &unreachable).await,
        "enroll"
    );

    // The scrape, without credentials or a version header, as Prometheus sends it.
    let response = client
        .http
        .get(format!("{}/metrics", client.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        ferric_metrics::CONTENT_TYPE
    );
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let samples = samples(&text);
    let value = |series: &str| -> f64 {
        *samples
            .get(series)
            .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
    };

    let transition = |from: &str, event: &str, to: &str| {
        value(&format!(
            r#"ferric_node_transitions_total{{from="{from}",event="{event}",to="{to}"}}"#
        ))
    };
    assert_eq!(transition("enroll", "manage", "verifying"), 3.0);
    assert_eq!(transition("verifying", "fail", "enroll"), 1.0);
    assert_eq!(transition("verifying", "done", "manageable"), 2.0);
    assert_eq!(transition("manageable", "provide", "cleaning"), 2.0);
    assert_eq!(transition("available", "deploy", "deploying"), 2.0);
    assert_eq!(transition("deploying", "wait", "wait call-back"), 1.0);
    assert_eq!(transition("deploying", "done", "active"), 1.0);
    assert_eq!(transition("deploying", "fail", "deploy failed"), 1.0);
    assert_eq!(
        value(r#"ferric_node_failures_total{state="deploy failed"}"#),
        1.0
    );
    // Time per state is observed as each node leaves one.
    assert_eq!(
        value(r#"ferric_node_state_duration_seconds_count{state="available"}"#),
        2.0
    );
    assert_eq!(
        value(r#"ferric_node_state_duration_seconds_count{state="wait call-back"}"#),
        1.0
    );

    // Levels, read from the database at scrape time.
    let nodes_in = |state: &str| {
        value(&format!(
            r#"ferric_nodes_by_provision_state{{provision_state="{state}"}}"#
        ))
    };
    assert_eq!(nodes_in("active"), 1.0);
    assert_eq!(nodes_in("deploy failed"), 1.0);
    assert_eq!(nodes_in("enroll"), 1.0);
    assert_eq!(nodes_in("available"), 0.0);
    let by_power: f64 = ["power on", "power off", "error", "none"]
        .iter()
        .map(|state| {
            value(&format!(
                r#"ferric_nodes_by_power_state{{power_state="{state}"}}"#
            ))
        })
        .sum();
    assert_eq!(by_power, 3.0);
    let workers = api.conductor().config().workers as f64;
    assert_eq!(value(r#"ferric_conductor_workers{state="free"}"#), workers);
    assert_eq!(value(r#"ferric_conductor_workers{state="in_use"}"#), 0.0);

    // The fake BMC was asked for the power state while verifying (once in vain), and powered
    // the deployed node off.
    let bmc = |metric: &str, operation: &str| {
        value(&format!(
            r#"ferric_bmc_request_{metric}{{driver="fake",operation="{operation}"}}"#
        ))
    };
    assert_eq!(bmc("duration_seconds_count", "get_power_state"), 3.0);
    assert_eq!(bmc("errors_total", "get_power_state"), 1.0);
    assert!(bmc("duration_seconds_count", "set_power") >= 1.0);

    // The agent's requests, by how they were answered.
    assert_eq!(
        value(r#"ferric_agent_lookups_total{result="accepted"}"#),
        1.0
    );
    assert_eq!(
        value(r#"ferric_agent_lookups_total{result="not_found"}"#),
        1.0
    );
    assert_eq!(
        value(r#"ferric_agent_heartbeats_total{result="accepted"}"#),
        1.0
    );

    // Requests per route template and status; never a raw path with a node in it.
    assert_eq!(
        value(
            r#"ferric_api_request_duration_seconds_count{method="PUT",route="/v1/nodes/{node_ident}/states/provision",status="202"}"#
        ),
        7.0
    );
    assert_eq!(
        value(
            r#"ferric_api_request_duration_seconds_count{method="POST",route="/v1/nodes",status="201"}"#
        ),
        3.0
    );
    assert_eq!(
        value(
            r#"ferric_api_request_duration_seconds_bucket{le="+Inf",method="GET",route="/v1/nodes/{node_ident}",status="200"}"#
        ),
        8.0
    );
    assert!(!text.contains(&uuid), "a node's UUID leaked into a label");
}

#[tokio::test]
async fn requests_no_route_matches_share_one_series() {
    let api = Api::new().await;
    let client = Client {
        base: serve(&api).await,
        http: reqwest::Client::new(),
    };
    for path in ["/v1/no-such-thing", "/v1/nodes/x/nope", "/v2"] {
        let (status, _) = client.send_status(reqwest::Method::GET, path, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
    let text = client
        .http
        .get(format!("{}/metrics", client.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        samples(&text)[r#"ferric_api_request_duration_seconds_count{method="GET",route="unmatched",status="404"}"#],
        3.0,
        "{text}"
    );
    assert!(!text.contains("no-such-thing"), "{text}");
}
