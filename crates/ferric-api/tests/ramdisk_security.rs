//! The ramdisk-facing endpoints under hostile callers: heartbeats without the agent token or
//! with a wrong one are refused (401/403) and logged with the node and the peer address but
//! never the token, and lookups from one address are rate-limited (429 with `Retry-After`).
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use common::{Answer, LATEST, answer, faultstring};
use ferric_api::ApiConfig;
use ferric_api::limits::LookupRateLimit;
use serde_json::{Value, json};
use tower::ServiceExt;

const MAC: &str = "52:54:00:12:34:77";

/// Log lines written while a test runs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A request from `peer` through a router made with `config`.
async fn send_from(
    api: &common::Api,
    config: &ApiConfig,
    peer: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "ferric.test")
        .header("content-type", "application/json")
        .header("X-OpenStack-Ironic-API-Version", format!("1.{LATEST}"))
        .body(body.map_or(Body::empty(), |body| Body::from(body.to_string())))
        .unwrap();
    let peer: SocketAddr = peer.parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(peer));
    let router = ferric_api::router_with(api.state.clone(), config.clone());
    answer(router.oneshot(request).await.unwrap()).await
}

/// A node in `wait call-back` with a port, so its agent can look it up.
async fn waiting_node(api: &common::Api) -> String {
    let uuid = api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "deploy"}}))
        .await;
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": MAC})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    api.provision(&uuid, "active").await;
    api.settle().await;
    uuid
}

#[tokio::test(flavor = "current_thread")]
async fn wrong_or_missing_agent_tokens_are_refused_and_logged() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let api = common::Api::new().await;
    let config = ApiConfig::default();
    let uuid = waiting_node(&api).await;
    let agent = "10.20.30.40:51234";
    let found = send_from(
        &api,
        &config,
        agent,
        Method::GET,
        &format!("/v1/lookup?addresses={MAC}"),
        None,
    )
    .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let token = found.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(token.len(), 43);

    let heartbeat = format!("/v1/heartbeat/{uuid}");
    let beat = |token: Option<&str>| {
        let mut body = json!({"callback_url": "http://10.20.30.40:9999", "agent_version": "t"});
        if let Some(token) = token {
            body["agent_token"] = token.into();
        }
        body
    };
    let intruder = "10.66.66.66:40000";
    let wrong_token = "x".repeat(43);
    let wrong = send_from(
        &api,
        &config,
        intruder,
        Method::POST,
        &heartbeat,
        Some(beat(Some(&wrong_token))),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{}", wrong.body);
    assert_eq!(
        faultstring(&wrong.body),
        "Invalid or missing agent token received."
    );

    let missing = send_from(
        &api,
        &config,
        intruder,
        Method::POST,
        &heartbeat,
        Some(beat(None)),
    )
    .await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED, "{}", missing.body);
    assert_eq!(
        faultstring(&missing.body),
        "Invalid or missing agent token received."
    );

    let log = captured.text();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("heartbeat refused"))
        .collect();
    assert_eq!(refusals.len(), 2, "{log}");
    for line in &refusals {
        assert!(line.contains(&uuid), "the node is named: {line}");
        assert!(
            line.contains("10.66.66.66:40000"),
            "the peer is named: {line}"
        );
    }
    assert!(
        !log.contains(&token),
        "the issued token never reaches the log"
    );
    assert!(!log.contains(&wrong_token), "nor the wrong one");

    // Every field is checked before the node is touched.
    let unversioned = json!({"callback_url": "http://10.20.30.40:9999", "agent_token": token});
    let refused = send_from(
        &api,
        &config,
        agent,
        Method::POST,
        &heartbeat,
        Some(unversioned),
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("agent_version"));
    let mut long = beat(Some(&token));
    long["callback_url"] = format!("http://10.20.30.40:9999/{}", "x".repeat(3000)).into();
    let refused = send_from(&api, &config, agent, Method::POST, &heartbeat, Some(long)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("longer than 2048"));

    // The node still waits, and its own agent goes on.
    let accepted = send_from(
        &api,
        &config,
        agent,
        Method::POST,
        &heartbeat,
        Some(beat(Some(&token))),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], "active", "{}", node.body);
    assert!(!captured.text().contains(&token));
}

#[tokio::test]
async fn lookups_are_rate_limited_per_peer() {
    let api = common::Api::new().await;
    let config = ApiConfig {
        // Two lookups, then (practically) never another: no timing in the test.
        lookup_rate: Arc::new(LookupRateLimit::new(2, 1e-6)),
        ..ApiConfig::default()
    };
    let path = "/v1/lookup?addresses=52:54:00:00:00:99";
    for _ in 0..2 {
        let unknown = send_from(&api, &config, "10.0.0.9:1000", Method::GET, path, None).await;
        assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.body);
    }
    let limited = send_from(&api, &config, "10.0.0.9:1001", Method::GET, path, None).await;
    assert_eq!(
        limited.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        limited.body
    );
    assert!(
        limited.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(faultstring(&limited.body).contains("10.0.0.9"));
    // Another address has its own allowance.
    let other = send_from(&api, &config, "10.0.0.10:1000", Method::GET, path, None).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND);
    // Other endpoints are not limited.
    let root = send_from(&api, &config, "10.0.0.9:1002", Method::GET, "/v1", None).await;
    assert_eq!(root.status, StatusCode::OK);
}
