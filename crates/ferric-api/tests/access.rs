//! Access control and request limits through the real router: `http_basic` authentication
//! against an htpasswd file of bcrypt hashes, the public routes, and the body size limit.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{Answer, answer, faultstring};
use ferric_api::auth::BasicAuth;
use ferric_api::{ApiConfig, AuthStrategy, BodyLimits};
use tower::ServiceExt;

struct Server {
    api: common::Api,
    config: ApiConfig,
    _dir: tempfile::TempDir,
}

impl Server {
    /// An API with `http_basic` for `admin` / `s3cret` (a cheap bcrypt cost keeps it fast).
    async fn basic() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("htpasswd");
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        std::fs::write(&file, format!("# users\nadmin:{hash}\n")).unwrap();
        let auth = BasicAuth::from_file(&file).unwrap();
        Self {
            api: common::Api::new().await,
            config: ApiConfig {
                auth: AuthStrategy::HttpBasic(auth),
                ..ApiConfig::default()
            },
            _dir: dir,
        }
    }

    async fn with_limit(limit: usize) -> Self {
        Self {
            api: common::Api::new().await,
            config: ApiConfig {
                body_limits: BodyLimits {
                    general: limit,
                    ..BodyLimits::default()
                },
                ..ApiConfig::default()
            },
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    async fn request(&self, request: Request<Body>) -> Answer {
        let router = ferric_api::router_with(self.api.state.clone(), self.config.clone());
        answer(router.oneshot(request).await.unwrap()).await
    }

    async fn get(&self, path: &str, authorization: Option<&str>) -> Answer {
        let mut request = Request::builder().uri(path).header("host", "ferric.test");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        self.request(request.body(Body::empty()).unwrap()).await
    }
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

#[tokio::test]
async fn http_basic_demands_valid_credentials() {
    let server = Server::basic().await;
    let anonymous = server.get("/v1/nodes", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        anonymous.headers["www-authenticate"],
        "Basic realm=\"Baremetal API\""
    );
    assert_eq!(faultstring(&anonymous.body), "Authorization required");
    assert!(
        anonymous
            .headers
            .contains_key("x-openstack-ironic-api-maximum-version"),
        "version headers are on every answer"
    );

    let wrong = server
        .get("/v1/nodes", Some(&basic("admin", "guess")))
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert_eq!(faultstring(&wrong.body), "Incorrect username or password");
    let stranger = server
        .get("/v1/nodes", Some(&basic("mallory", "s3cret")))
        .await;
    assert_eq!(stranger.status, StatusCode::UNAUTHORIZED);

    for _ in 0..2 {
        // The second time the verified password comes from the cache.
        let allowed = server
            .get("/v1/nodes", Some(&basic("admin", "s3cret")))
            .await;
        assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.body);
    }

    let bearer = server.get("/v1/nodes", Some("Bearer abc")).await;
    assert_eq!(bearer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bearer.body),
        "Unsupported authorization type \"Bearer\""
    );
    let garbage = server.get("/v1/nodes", Some("Basic !!!")).await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&garbage.body),
        "Could not decode authorization token"
    );
    let no_token = server.get("/v1/nodes", Some("Basic")).await;
    assert_eq!(no_token.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn public_routes_need_no_credentials() {
    let server = Server::basic().await;
    for path in ["/", "/v1", "/v1/", "/health"] {
        let answer = server.get(path, None).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
    }
    // Ramdisk endpoints are public too: whatever answers them, it is not the auth layer.
    for path in [
        "/v1/lookup?addresses=52:54:00:00:00:01",
        "/v1/heartbeat/0c3b7a2e-1f6d-4c7e-9a0b-5d4c3b2a1f0e",
        "/v1/continue_inspection",
    ] {
        let answer = server.get(path, None).await;
        assert_ne!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
    }
}

#[test]
fn user_files_must_hold_bcrypt_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    std::fs::write(&file, "admin:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n").unwrap();
    let error = BasicAuth::from_file(&file).unwrap_err();
    assert!(error.to_string().contains("bcrypt"), "{error}");
    assert!(BasicAuth::from_file(&dir.path().join("missing")).is_err());
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_with_413() {
    let server = Server::with_limit(64).await;
    let body = serde_json::json!({"driver": "fake-hardware", "extra": {"pad": "x".repeat(100)}})
        .to_string();
    let declared = Request::builder()
        .method(Method::POST)
        .uri("/v1/nodes")
        .header("host", "ferric.test")
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Body::from(body.clone()))
        .unwrap();
    let refused = server.request(declared).await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        faultstring(&refused.body),
        "Request body is too large. Please contact the service administrator."
    );

    // Without a Content-Length the body is read only up to the limit.
    let streamed = Request::builder()
        .method(Method::POST)
        .uri("/v1/nodes")
        .header("host", "ferric.test")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    assert_eq!(
        server.request(streamed).await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );

    let small = Request::builder()
        .method(Method::POST)
        .uri("/v1/nodes")
        .header("host", "ferric.test")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"driver": "fake-hardware"}"#))
        .unwrap();
    assert_eq!(server.request(small).await.status, StatusCode::CREATED);
}

/// Issue 41: a client still sending an oversized body reads the 413 over a real socket instead
/// of a connection reset (the server used to close with the body unread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_upload_reads_its_413_over_a_real_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let api = common::Api::new().await;
    let config = ApiConfig {
        body_limits: BodyLimits {
            general: 1024,
            provision: 1024,
            inspection: 1024,
        },
        ..ApiConfig::default()
    };
    let router = ferric_api::router_with(api.state.clone(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });

    // 8 MiB: more than the kernel buffers of both ends hold, so the client is still writing
    // when the server decides.
    let body = vec![b' '; 8 * 1024 * 1024];
    for chunked in [false, true] {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let head = if chunked {
            "POST /v1/nodes HTTP/1.1\r\nHost: ferric.test\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\n\r\n"
                .to_owned()
        } else {
            format!(
                "POST /v1/nodes HTTP/1.1\r\nHost: ferric.test\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            )
        };
        stream.write_all(head.as_bytes()).await.unwrap();
        let (mut reader, mut writer) = stream.into_split();
        let upload = body.clone();
        let sender = tokio::spawn(async move {
            for piece in upload.chunks(64 * 1024) {
                let sent = if chunked {
                    let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                    framed.extend_from_slice(piece);
                    framed.extend_from_slice(b"\r\n");
                    writer.write_all(&framed).await
                } else {
                    writer.write_all(piece).await
                };
                sent?;
            }
            if chunked {
                writer.write_all(b"0\r\n\r\n").await?;
            }
            Ok::<_, std::io::Error>(writer)
        });
        let mut answer = Vec::new();
        let read = reader.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(
            read.is_ok(),
            "chunked {chunked}: the connection was reset: {read:?}"
        );
        assert!(
            text.starts_with("HTTP/1.1 413"),
            "chunked {chunked}: {}",
            text.lines().next().unwrap_or("")
        );
        assert!(text.contains("Request body is too large"), "{text}");
        let _ = sender.await;
    }
}

/// Ironic's `enable_ramdisk_endpoints`, per listener: off, the agent's endpoints answer 403;
/// the ramdisk listener serves them and version discovery, and nothing else.
#[tokio::test]
async fn each_listener_serves_what_it_is_configured_for() {
    use ferric_api::listener::Endpoints;

    let api = common::Api::new().await;
    let send = |endpoints: Endpoints, method: Method, path: &str| {
        let router = ferric_api::router_with(
            api.state.clone(),
            ApiConfig {
                endpoints,
                ..ApiConfig::default()
            },
        );
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "ferric.test")
            .header("content-type", "application/json")
            .header("X-OpenStack-Ironic-API-Version", "1.110")
            .body(Body::from(if path.contains("heartbeat") {
                "{}"
            } else {
                ""
            }))
            .unwrap();
        async move { answer(router.oneshot(request).await.unwrap()).await }
    };
    let lookup = "/v1/lookup?addresses=52:54:00:00:00:01";
    let heartbeat = "/v1/heartbeat/1be26c0b-03f2-4d2e-ae87-c02d7f33c123";
    // Everything (the default): a lookup of an unknown MAC is the usual 404.
    assert_eq!(send(Endpoints::All, Method::GET, lookup).await.status, 404);
    // Without the ramdisk endpoints: 403 saying where they are, the API as usual.
    let refused = send(Endpoints::WithoutRamdisk, Method::GET, lookup).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("ramdisk_listen"));
    assert_eq!(
        send(Endpoints::WithoutRamdisk, Method::POST, heartbeat)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        send(Endpoints::WithoutRamdisk, Method::GET, "/v1/nodes")
            .await
            .status,
        StatusCode::OK
    );
    // The ramdisk listener: the agent's endpoints and discovery only.
    assert_eq!(
        send(Endpoints::RamdiskOnly, Method::GET, lookup)
            .await
            .status,
        404
    );
    let refused = send(Endpoints::RamdiskOnly, Method::GET, "/v1/nodes").await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert!(
        faultstring(&refused.body).contains("api_listen"),
        "{}",
        refused.body
    );
    for discovery in ["/", "/v1"] {
        assert_eq!(
            send(Endpoints::RamdiskOnly, Method::GET, discovery)
                .await
                .status,
            StatusCode::OK
        );
    }
}
