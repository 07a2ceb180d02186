//! Vendor passthru through the real router and conductor, on a real SQLite file and on
//! PostgreSQL: the fake vendor interface's methods (listed, called synchronously and
//! asynchronously, by `?method=` and by path), Ironic's refusals (no method, unknown method,
//! wrong HTTP method, missing argument, a body that is not an object), the node's lease (409
//! while another conductor holds it, except for a shared-lock method), `no-vendor` and the
//! driver-level endpoints.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{Answer, Api, faultstring};
use ferric_model::resources::Ident;
use serde_json::{Value, json};
use tower::ServiceExt;

/// A fake-hardware node (its vendor interface is `fake`) with `driver_info`.
async fn fake_node(api: &Api, driver_info: Value) -> String {
    api.enroll(json!({"driver": "fake-hardware", "driver_info": driver_info}))
        .await
}

/// `method path` with a raw body (or none), at version 1.1 as the clients send it.
async fn raw(api: &Api, method: Method, path: &str, body: Option<&str>) -> (Answer, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "ferric.test")
        .header("content-type", "application/json")
        .body(body.map_or(Body::empty(), |body| Body::from(body.to_owned())))
        .unwrap();
    let response = ferric_api::router(api.state.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (
        Answer {
            status,
            headers,
            body,
        },
        bytes,
    )
}

fn refused(answer: &Answer, status: StatusCode, words: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    let message = faultstring(&answer.body);
    assert!(message.contains(words), "{message:?} lacks {words:?}");
}

/// What both backends must do: list, call, refuse, and run asynchronous methods.
async fn node_vendor_passthru_works(api: &Api) {
    let uuid = fake_node(api, json!({})).await;
    let base = format!("/v1/nodes/{uuid}/vendor_passthru");

    let methods = api
        .send(Method::GET, &format!("{base}/methods"), None)
        .await;
    assert_eq!(methods.status, StatusCode::OK, "{}", methods.body);
    let names: Vec<&String> = methods.body.as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        [
            "fourth_method_shared_lock",
            "log_passthrough",
            "second_method",
            "third_method_sync"
        ]
    );
    let sync = &methods.body["third_method_sync"];
    assert_eq!(sync["http_methods"], json!(["POST"]));
    assert_eq!(sync["async"], false);
    assert_eq!(sync["attach"], false);
    assert_eq!(sync["require_exclusive_lock"], true);
    assert!(sync["description"].as_str().unwrap().contains("meow"));
    assert_eq!(
        methods.body["fourth_method_shared_lock"]["require_exclusive_lock"],
        false
    );

    // A synchronous method answers 200 with its return value, by query or by path.
    let yes = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    assert_eq!(yes.status, StatusCode::OK, "{}", yes.body);
    assert_eq!(yes.body, json!(true));
    let no = api
        .send(
            Method::POST,
            &format!("{base}/third_method_sync"),
            Some(json!({"bar": "woof"})),
        )
        .await;
    assert_eq!(no.status, StatusCode::OK, "{}", no.body);
    assert_eq!(no.body, json!(false));

    // An asynchronous one answers 202 with no body and runs after.
    let (started, bytes) = raw(
        api,
        Method::POST,
        &format!("{base}?method=second_method"),
        Some(r#"{"bar": "kazoo"}"#),
    )
    .await;
    assert_eq!(started.status, StatusCode::ACCEPTED);
    assert!(bytes.is_empty(), "{}", String::from_utf8_lossy(&bytes));
    // It holds the node's lease while it runs (a second exclusive call would get 409).
    api.settle().await;
    let (logged, _) = raw(
        api,
        Method::POST,
        &format!("{base}?method=log_passthrough"),
        None,
    )
    .await;
    assert_eq!(logged.status, StatusCode::ACCEPTED, "{}", logged.body);
    api.settle().await;
    // The node is free again: another exclusive call succeeds.
    let again = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);

    // Ironic's refusals, all 400 and before anything runs.
    let (none, _) = raw(api, Method::POST, &base, Some("{}")).await;
    refused(&none, StatusCode::BAD_REQUEST, "Method not specified");
    let unknown = api
        .send(
            Method::POST,
            &format!("{base}?method=nope"),
            Some(json!({})),
        )
        .await;
    refused(
        &unknown,
        StatusCode::BAD_REQUEST,
        "No handler for method nope",
    );
    let wrong_http = api
        .send(
            Method::GET,
            &format!("{base}?method=third_method_sync"),
            None,
        )
        .await;
    refused(
        &wrong_http,
        StatusCode::BAD_REQUEST,
        "The method third_method_sync does not support HTTP GET",
    );
    let missing = api
        .send(
            Method::POST,
            &format!("{base}?method=second_method"),
            Some(json!({"baz": 1})),
        )
        .await;
    refused(
        &missing,
        StatusCode::BAD_REQUEST,
        "Parameter 'bar' not passed to method 'second_method'.",
    );
    let empty_bar = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": ""})),
        )
        .await;
    refused(&empty_bar, StatusCode::BAD_REQUEST, "Parameter 'bar'");
    let (list_body, _) = raw(
        api,
        Method::POST,
        &format!("{base}?method=third_method_sync"),
        Some(r#"["bar"]"#),
    )
    .await;
    refused(&list_body, StatusCode::BAD_REQUEST, "JSON object");
    let (not_json, _) = raw(
        api,
        Method::POST,
        &format!("{base}?method=third_method_sync"),
        Some("bar=meow"),
    )
    .await;
    refused(&not_json, StatusCode::BAD_REQUEST, "not valid JSON");
    let extra = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync&bar=meow"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    refused(
        &extra,
        StatusCode::BAD_REQUEST,
        "Unknown query parameter 'bar'",
    );
    let missing_node = api
        .send(
            Method::POST,
            "/v1/nodes/no-such-node/vendor_passthru?method=third_method_sync",
            Some(json!({"bar": "meow"})),
        )
        .await;
    refused(&missing_node, StatusCode::NOT_FOUND, "no-such-node");
    let missing_node_methods = api
        .send(
            Method::GET,
            "/v1/nodes/no-such-node/vendor_passthru/methods",
            None,
        )
        .await;
    assert_eq!(missing_node_methods.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sqlite_node_vendor_passthru() {
    let api = Api::new().await;
    node_vendor_passthru_works(&api).await;
}

#[tokio::test]
async fn postgres_node_vendor_passthru() {
    let api = Api::postgres().await;
    node_vendor_passthru_works(&api).await;
}

#[tokio::test]
async fn a_held_node_refuses_exclusive_methods_but_not_shared_ones() {
    let api = Api::new().await;
    let uuid = fake_node(&api, json!({})).await;
    let node = api.store().node_get(&Ident::parse(&uuid)).await.unwrap();
    api.store()
        .node_lease_acquire(node.uuid, "other-conductor", Duration::from_secs(60))
        .await
        .unwrap();
    let base = format!("/v1/nodes/{uuid}/vendor_passthru");
    let locked = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    refused(
        &locked,
        StatusCode::CONFLICT,
        "locked by host other-conductor",
    );
    let shared = api
        .send(
            Method::POST,
            &format!("{base}?method=fourth_method_shared_lock"),
            Some(json!({"bar": "woof"})),
        )
        .await;
    assert_eq!(shared.status, StatusCode::ACCEPTED, "{}", shared.body);
    // A shared-lock call still checks its arguments first.
    let missing = api
        .send(
            Method::POST,
            &format!("{base}?method=fourth_method_shared_lock"),
            Some(json!({})),
        )
        .await;
    refused(&missing, StatusCode::BAD_REQUEST, "Parameter 'bar'");
    api.settle().await;
}

#[tokio::test]
async fn failures_of_vendor_methods_reach_the_caller_or_the_history() {
    let api = Api::new().await;
    let uuid = fake_node(&api, json!({"fake_fail": "vendor"})).await;
    let base = format!("/v1/nodes/{uuid}/vendor_passthru");
    // Synchronous: the caller gets the driver's words (Ironic's VendorPassthruException, 500).
    let failed = api
        .send(
            Method::POST,
            &format!("{base}?method=third_method_sync"),
            Some(json!({"bar": "meow"})),
        )
        .await;
    refused(
        &failed,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Fake failure of 'vendor'",
    );
    // Asynchronous: accepted, and the failure is recorded in the node's history.
    let accepted = api
        .send(
            Method::POST,
            &format!("{base}?method=second_method"),
            Some(json!({"bar": "kazoo"})),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    let history = api
        .send_at(78, Method::GET, &format!("/v1/nodes/{uuid}/history"), None)
        .await;
    let entries = history.body["history"].as_array().unwrap();
    assert!(
        entries.iter().any(|entry| entry["severity"] == "ERROR"
            && entry["event"]
                .as_str()
                .unwrap()
                .contains("Vendor passthru method second_method failed")),
        "{}",
        history.body
    );
}

#[tokio::test]
async fn no_vendor_nodes_and_the_driver_level_endpoints() {
    let api = Api::new().await;
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "vendor_interface": "no-vendor"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let methods = api
        .send(
            Method::GET,
            &format!("/v1/nodes/{uuid}/vendor_passthru/methods"),
            None,
        )
        .await;
    assert_eq!(methods.status, StatusCode::OK);
    assert_eq!(methods.body, json!({}));
    let call = api
        .send(
            Method::POST,
            &format!("/v1/nodes/{uuid}/vendor_passthru?method=second_method"),
            Some(json!({"bar": "kazoo"})),
        )
        .await;
    refused(
        &call,
        StatusCode::BAD_REQUEST,
        "Driver fake-hardware does not support vendor (disabled or not implemented).",
    );

    // Driver level: fake-hardware's default vendor interface has no driver-level methods,
    // as Ironic's has none.
    let driver_methods = api
        .send(
            Method::GET,
            "/v1/drivers/fake-hardware/vendor_passthru/methods",
            None,
        )
        .await;
    assert_eq!(driver_methods.status, StatusCode::OK);
    assert_eq!(driver_methods.body, json!({}));
    for path in [
        "/v1/drivers/fake-hardware/vendor_passthru?method=lookup",
        "/v1/drivers/fake-hardware/vendor_passthru/lookup",
    ] {
        let call = api.send(Method::POST, path, Some(json!({}))).await;
        refused(
            &call,
            StatusCode::BAD_REQUEST,
            "Driver fake-hardware does not support vendor",
        );
    }
    let (none, _) = raw(
        &api,
        Method::DELETE,
        "/v1/drivers/fake-hardware/vendor_passthru",
        None,
    )
    .await;
    refused(&none, StatusCode::BAD_REQUEST, "Method not specified");
    for path in [
        "/v1/drivers/nope/vendor_passthru/methods",
        "/v1/drivers/nope/vendor_passthru?method=x",
    ] {
        let unknown = api.send(Method::GET, path, None).await;
        refused(
            &unknown,
            StatusCode::NOT_FOUND,
            "Driver nope could not be found.",
        );
    }
}
