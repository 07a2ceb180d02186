//! Microversion negotiation and error bodies, through the real router on a real SQLite file.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use axum::body::Body;
use axum::http::{Request, StatusCode};
mod common;

use ferric_api::version::{MAX_VERSION, MIN_VERSION};
use http_body_util::BodyExt;
use tower::ServiceExt;

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: serde_json::Value,
}

async fn send(request: Request<Body>) -> Answer {
    let api = common::Api::new().await;
    let response = ferric_api::router(api.state.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

fn get(path: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::get(path).header("host", "ferric.test:6385");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::empty()).unwrap()
}

fn faultstring(body: &serde_json::Value) -> String {
    let inner: serde_json::Value = serde_json::from_str(
        body["error_message"]
            .as_str()
            .expect("error_message string"),
    )
    .expect("error_message holds JSON");
    inner["faultstring"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn no_header_means_the_minimum_version() {
    let answer = send(get("/v1", &[])).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        answer.headers["x-openstack-ironic-api-version"],
        MIN_VERSION.to_string()
    );
    assert_eq!(
        answer.headers["x-openstack-ironic-api-minimum-version"],
        "1.1"
    );
    assert_eq!(
        answer.headers["x-openstack-ironic-api-maximum-version"],
        MAX_VERSION.to_string()
    );
    assert!(
        answer.headers["openstack-request-id"]
            .to_str()
            .unwrap()
            .starts_with("req-")
    );
    assert_eq!(
        answer.headers["openstack-request-id"],
        answer.headers["x-openstack-request-id"]
    );
    assert_eq!(
        answer.body["links"][0]["href"],
        "http://ferric.test:6385/v1/"
    );
}

#[tokio::test]
async fn latest_resolves_to_the_maximum_in_either_header() {
    for header in ["x-openstack-ironic-api-version", "openstack-api-version"] {
        let value = if header == "openstack-api-version" {
            "baremetal latest"
        } else {
            "latest"
        };
        let answer = send(get("/v1", &[(header, value)])).await;
        assert_eq!(answer.status, StatusCode::OK, "{header}");
        assert_eq!(
            answer.headers["x-openstack-ironic-api-version"],
            MAX_VERSION.to_string()
        );
    }
}

#[tokio::test]
async fn the_standard_header_wins_over_the_legacy_one() {
    let too_high = format!("1.{}", MAX_VERSION.minor() + 1);
    let answer = send(get(
        "/",
        &[
            ("openstack-api-version", "baremetal 1.1"),
            ("x-openstack-ironic-api-version", &too_high),
        ],
    ))
    .await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn versions_outside_the_range_get_406_with_the_range() {
    let too_high = format!("1.{}", MAX_VERSION.minor() + 1);
    let answer = send(get("/v1", &[("x-openstack-ironic-api-version", &too_high)])).await;
    assert_eq!(answer.status, StatusCode::NOT_ACCEPTABLE);
    let message = faultstring(&answer.body);
    assert!(
        message.contains(&format!("[1.1, {MAX_VERSION}]")),
        "{message}"
    );
    assert_eq!(
        answer.headers["x-openstack-ironic-api-maximum-version"],
        MAX_VERSION.to_string()
    );

    let answer = send(get("/v1", &[("x-openstack-ironic-api-version", "1.0")])).await;
    assert_eq!(answer.status, StatusCode::NOT_ACCEPTABLE);

    let answer = send(get("/v1", &[("x-openstack-ironic-api-version", "2.1")])).await;
    assert_eq!(answer.status, StatusCode::NOT_ACCEPTABLE);
    assert!(faultstring(&answer.body).contains("Mutually exclusive versions"));

    let answer = send(get("/v1", &[("x-openstack-ironic-api-version", "one.two")])).await;
    assert_eq!(answer.status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(
        faultstring(&answer.body),
        "Invalid value for X-OpenStack-Ironic-API-Version header"
    );
}

#[tokio::test]
async fn framework_errors_get_ironic_bodies_too() {
    let answer = send(Request::delete("/v1").body(Body::empty()).unwrap()).await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        answer
            .headers
            .contains_key("x-openstack-ironic-api-version")
    );
    let inner: serde_json::Value =
        serde_json::from_str(answer.body["error_message"].as_str().unwrap()).unwrap();
    assert_eq!(inner["faultcode"], "Client");
    assert!(inner["debuginfo"].is_null());
}

#[tokio::test]
async fn health_reports_the_backend() {
    let answer = send(get("/health", &[])).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body["status"], "ok");
    assert_eq!(answer.body["database"], "sqlite");
    let reconcilers: Vec<&str> = answer.body["reconcilers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|status| status["name"].as_str().unwrap())
        .collect();
    assert!(reconcilers.contains(&"power_sync"), "{reconcilers:?}");
}

#[tokio::test]
async fn every_version_up_to_upstreams_newest_is_served() {
    // 1.111-1.115 are upstream Ironic's newest: dynamic portgroups, runbook traits, history
    // project, firmware identity, history state fields.
    assert_eq!(MAX_VERSION.to_string(), "1.115");
    let root = send(get("/", &[])).await;
    assert_eq!(
        root.body["default_version"]["version"], "1.115",
        "{}",
        root.body
    );
    for minor in 111..=115 {
        let version = format!("1.{minor}");
        let answer = send(get(
            "/v1/nodes",
            &[("OpenStack-API-Version", &format!("baremetal {version}"))],
        ))
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{version}: {}", answer.body);
        assert_eq!(
            answer.headers["X-OpenStack-Ironic-API-Version"],
            version.as_str()
        );
    }
}
