//! The bearer-token login against a stub registry and token service (plain HTTP, in process):
//! the real registry of `crates/ferric/tests/oci.rs` uses basic auth, as Debian's
//! `docker-registry` does without a token server.

use axum::Router;
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::*;

const SECRET: &str = "cm9ib3Q6czNjcmV0"; // base64 of robot:s3cret
const TOKEN: &str = "token-for-metal3-disk";

fn layer_manifest() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": oci::MEDIA_MANIFEST,
        "annotations": {"disktype": "raw"},
        "layers": [{"mediaType": "application/octet-stream", "size": 5,
                    "digest": format!("sha256:{}", "ab".repeat(32))}],
    }))
    .unwrap()
}

/// The stub's base URL (`127.0.0.1:port`).
async fn stub() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let realm = format!("http://{address}/token");
    let app = Router::new()
        .route(
            "/v2/",
            get(move || {
                let challenge = format!("Bearer realm=\"{realm}\",service=\"stub\"");
                async move {
                    (
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, challenge)],
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/token",
            get(
                |Query(query): Query<std::collections::HashMap<String, String>>,
                 headers: HeaderMap| async move {
                    let basic = headers
                        .get(header::AUTHORIZATION)
                        .and_then(|value| value.to_str().ok());
                    let scoped = query.get("scope").map(String::as_str)
                        == Some("repository:metal3/disk:pull")
                        && query.get("service").map(String::as_str) == Some("stub");
                    if scoped && basic == Some(&format!("Basic {SECRET}")) {
                        axum::Json(json!({"token": TOKEN})).into_response()
                    } else {
                        StatusCode::UNAUTHORIZED.into_response()
                    }
                },
            ),
        )
        .route(
            "/v2/metal3/disk/manifests/v1",
            get(|headers: HeaderMap| async move {
                let bearer = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|value| value.to_str().ok());
                if bearer == Some(&format!("Bearer {TOKEN}")) {
                    Response::builder()
                        .header(header::CONTENT_TYPE, oci::MEDIA_MANIFEST)
                        .body(axum::body::Body::from(layer_manifest()))
                        .unwrap()
                } else {
                    StatusCode::UNAUTHORIZED.into_response()
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

fn plain(registry: &Registry) -> Registry {
    Registry {
        scheme: "http",
        ..registry.clone()
    }
}

#[tokio::test]
async fn a_bearer_challenge_is_answered_with_a_token_for_the_repository() {
    let address = stub().await;
    let registry = plain(&Registry::new(&[]).unwrap());
    let reference = Reference::parse(&format!("oci://{address}/metal3/disk:v1")).unwrap();
    let credential = Credential {
        basic: SECRET.to_owned(),
        from: "instance_info.image_pull_secret".to_owned(),
    };
    let resolved = registry
        .resolve(&reference, Some("x86_64"), true, Some(&credential))
        .await
        .unwrap();
    assert_eq!(
        resolved.authorization.as_deref(),
        Some("Bearer token-for-metal3-disk")
    );
    assert_eq!(resolved.hex, "ab".repeat(32));
    assert_eq!(
        (resolved.size, resolved.disk_format),
        (Some(5), Some("raw"))
    );
    assert_eq!(
        resolved.blob_url,
        format!(
            "http://{address}/v2/metal3/disk/blobs/sha256:{}",
            "ab".repeat(32)
        )
    );
    assert!(
        !format!("{resolved:?}").contains(TOKEN),
        "Debug hides the header"
    );

    let wrong = Credential {
        basic: "d3Jvbmc6d3Jvbmc=".to_owned(),
        from: "driver_info.image_pull_secret".to_owned(),
    };
    let refused = registry
        .resolve(&reference, None, true, Some(&wrong))
        .await
        .unwrap_err();
    assert!(
        refused.contains("refused the credentials of driver_info.image_pull_secret (401"),
        "{refused}"
    );
    let anonymous = registry
        .resolve(&reference, None, true, None)
        .await
        .unwrap_err();
    assert!(anonymous.contains("requires credentials"), "{anonymous}");
}

#[test]
fn challenges_are_parsed() {
    assert_eq!(
        challenge(
            "Bearer realm=\"https://auth.example/token\",service=\"registry.example\",scope=\"x\""
        ),
        (
            "bearer".to_owned(),
            Some("https://auth.example/token".to_owned()),
            Some("registry.example".to_owned())
        )
    );
    assert_eq!(
        challenge("Basic realm=\"ferric\""),
        ("basic".to_owned(), Some("ferric".to_owned()), None)
    );
}
