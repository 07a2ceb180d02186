//! `docs/openapi.json` is [`ferric_api::openapi::document`], checked in: a test fails when it
//! is stale (`FERRIC_UPDATE_DOCS=1` rewrites it, as `cargo xtask docs` does), and another sends
//! every documented operation through the real router to check that it is routed — so the
//! document can neither lag behind the code nor describe a path that does not exist — and a
//! third that each is refused below the microversion it names. (That nothing is routed
//! without being documented is checked in `src/endpoints/tests.rs`.)
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::PathBuf;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::Value;

const REGENERATE: &str = "FERRIC_UPDATE_DOCS=1 cargo test -p ferric-api --test openapi";

fn doc_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

fn rendered() -> String {
    let mut text = serde_json::to_string_pretty(&ferric_api::openapi::document()).unwrap();
    text.push('\n');
    text
}

#[test]
fn openapi_doc_is_up_to_date() {
    ferric_testkit::doc::assert_up_to_date(&doc_path(), &rendered(), "the API", REGENERATE);
}

/// A concrete path for a templated one: every `{param}` becomes a value no record has.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                match segment {
                    "{trait_name}" => "CUSTOM_NOPE",
                    "{hostname}" | "{driver_name}" | "{vif_id}" | "{setting_name}" => "nope",
                    _ => "00000000-0000-4000-8000-000000000000",
                }
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let api = Api::new().await;
    let document = ferric_api::openapi::document();
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.len() > 40, "only {} paths documented", paths.len());
    for (path, methods) in paths {
        for (method, operation) in methods.as_object().unwrap() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = operation
                .get("requestBody")
                .map(|_| Value::Object(Default::default()));
            let answer = api
                .send_at(110, method.clone(), &concrete(path), body)
                .await;
            // The router's own fallbacks: no route (404 naming just the path) or a route
            // without this method (405).
            assert_ne!(
                answer.status,
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path} is documented but not routed"
            );
            if answer.status == StatusCode::NOT_FOUND {
                let message = faultstring(&answer.body);
                let path_only = concrete(path);
                assert!(
                    message != format!("The resource could not be found: {path_only}"),
                    "{method} {path} is documented but not routed"
                );
            }
            let documented = operation["responses"]
                .as_object()
                .unwrap()
                .contains_key(answer.status.as_str());
            assert!(
                documented,
                "{method} {path} answered {} which the document does not list",
                answer.status
            );
        }
    }
}

/// Each endpoint newer than 1.1 is refused one microversion below the one it names (404; or
/// as Ironic answers: 405 for writes to deploy templates, runbooks, inspection rules and a
/// node's traits, 406 for RAID and reading a node's traits).
#[tokio::test]
async fn every_documented_operation_is_refused_below_its_version() {
    let api = Api::new().await;
    let document = ferric_api::openapi::document();
    let paths = document["paths"].as_object().unwrap();
    let mut checked = 0;
    for (path, methods) in paths {
        for (method, operation) in methods.as_object().unwrap() {
            let Some(since) = operation["x-ironic-since"].as_str() else {
                continue;
            };
            let minor: u16 = since.strip_prefix("1.").unwrap().parse().unwrap();
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = operation
                .get("requestBody")
                .map(|_| Value::Object(Default::default()));
            let answer = api
                .send_at(minor - 1, method.clone(), &concrete(path), body)
                .await;
            assert!(
                matches!(
                    answer.status,
                    StatusCode::NOT_FOUND
                        | StatusCode::METHOD_NOT_ALLOWED
                        | StatusCode::NOT_ACCEPTABLE
                ),
                "{method} {path} at 1.{} answered {} instead of refusing (it is new in {since})",
                minor - 1,
                answer.status
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} versioned operations");
}
