//! Serial consoles through a real listening API (issue 24): Ironic's `states/console` calls,
//! the WebSocket stream with its authorization (a reader watches but is closed with 1008 when
//! it types, another project's node is 404, `?token=` for browsers), the retained tail a late
//! viewer gets, the TCP relay `console_info` names, and the close (1000) when the console is
//! disabled. The node uses the `fake` console: a banner, then an echo of what is typed.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::NodeSpec;
use ferric_api::auth::BasicAuth;
use ferric_api::policy::Policy;
use ferric_api::{ApiConfig, AuthStrategy};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

const PASSWORD: &str = "s3cret";

const USERS: &str = r#"
[member-owner]
roles = ["member"]
project = "p-owner"

[reader-owner]
roles = ["reader"]
project = "p-owner"

[member-other]
roles = ["member"]
project = "p-other"
"#;

/// How long any one step may take before the test fails (not a timing assertion: a bound
/// on waiting for something that must happen).
const PATIENCE: Duration = Duration::from_secs(20);

struct Server {
    api: common::Api,
    base: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        let htpasswd = dir.path().join("htpasswd");
        std::fs::write(
            &htpasswd,
            format!("member-owner:{hash}\nreader-owner:{hash}\nmember-other:{hash}\n"),
        )
        .unwrap();
        let users = dir.path().join("users.toml");
        std::fs::write(&users, USERS).unwrap();
        let auth = BasicAuth::from_file(&htpasswd)
            .unwrap()
            .with_roles_file(&users)
            .unwrap();
        let api = common::Api::new().await;
        let config = ApiConfig {
            auth: AuthStrategy::HttpBasic(auth),
            policy: Arc::new(Policy::default()),
            ..ApiConfig::default()
        };
        let router = ferric_api::router_with(api.state.clone(), config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self {
            api,
            base,
            _dir: dir,
        }
    }

    /// A request as `user` over HTTP.
    async fn send(
        &self,
        user: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let client = reqwest::Client::new();
        let mut request = client
            .request(method, format!("http://{}{path}", self.base))
            .basic_auth(user, Some(PASSWORD))
            .header("X-OpenStack-Ironic-API-Version", "1.1");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The console stream as `user` (in the header, or with `?token=` when `in_query`).
    async fn stream(
        &self,
        node: &str,
        user: &str,
        in_query: bool,
    ) -> Result<
        tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
        u16,
    > {
        let token = STANDARD.encode(format!("{user}:{PASSWORD}"));
        let url = if in_query {
            let encoded = token
                .replace('+', "%2B")
                .replace('/', "%2F")
                .replace('=', "%3D");
            format!(
                "ws://{}/v1/nodes/{node}/console/stream?token={encoded}",
                self.base
            )
        } else {
            format!("ws://{}/v1/nodes/{node}/console/stream", self.base)
        };
        let mut request = url.into_client_request().unwrap();
        if !in_query {
            request
                .headers_mut()
                .insert("Authorization", format!("Basic {token}").parse().unwrap());
        }
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, _)) => Ok(socket),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                Err(response.status().as_u16())
            }
            Err(error) => panic!("cannot connect the console stream: {error}"),
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads binary frames until their text contains `needle`; the text read.
async fn read_until(socket: &mut Socket, needle: &str) -> String {
    let mut text = String::new();
    tokio::time::timeout(PATIENCE, async {
        while !text.contains(needle) {
            match socket.next().await {
                Some(Ok(Message::Binary(bytes))) => text.push_str(&String::from_utf8_lossy(&bytes)),
                Some(Ok(_)) => {}
                other => panic!("the stream ended before {needle:?} ({other:?}); got {text:?}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{needle:?} never came; got {text:?}"));
    text
}

/// The close frame's code, skipping output that was still on its way.
async fn close_code(socket: &mut Socket) -> CloseCode {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(Some(frame)))) => return frame.code,
                Some(Ok(_)) => {}
                other => panic!("the stream ended without a close frame: {other:?}"),
            }
        }
    })
    .await
    .expect("a close frame")
}

async fn enroll(server: &Server, console: &str) -> String {
    server
        .api
        .enroll_node(NodeSpec::fake().with("console_interface", json!(console)))
        .await
}

async fn console_node(server: &Server) -> String {
    let uuid = enroll(server, "fake").await;
    let patched = server
        .api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": "/owner", "value": "p-owner"}])),
        )
        .await;
    assert_eq!(patched.status, 200, "{:?}", patched.body);
    uuid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabling_relaying_and_disabling_a_console() {
    let server = Server::start().await;
    let node = console_node(&server).await;
    let path = format!("/v1/nodes/{node}/states/console");

    let (status, body) = server.send("member-owner", Method::GET, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"console_enabled": false, "console_info": null})
    );
    // Not enabled yet: the stream says how to enable it.
    assert_eq!(
        server.stream(&node, "member-owner", false).await.err(),
        Some(409)
    );

    for bad in [
        json!({"enabled": "maybe"}),
        json!({"enabled": 1}),
        json!({}),
    ] {
        let (status, _) = server
            .send("member-owner", Method::PUT, &path, Some(bad))
            .await;
        assert_eq!(status, 400);
    }
    // Readers watch; enabling is for members.
    let enable = json!({"enabled": true});
    let (status, _) = server
        .send("reader-owner", Method::PUT, &path, Some(enable.clone()))
        .await;
    assert_eq!(status, 403);
    let (status, _) = server
        .send("member-owner", Method::PUT, &path, Some(enable.clone()))
        .await;
    assert_eq!(status, 202);
    let (status, body) = server.send("member-owner", Method::GET, &path, None).await;
    assert_eq!(status, 200);
    assert_eq!(body["console_enabled"], true);
    assert_eq!(body["console_info"]["type"], "socat");
    let url = body["console_info"]["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("tcp://127.0.0.1:"), "{url}");
    let (_, shown) = server
        .send(
            "member-owner",
            Method::GET,
            &format!("/v1/nodes/{node}"),
            None,
        )
        .await;
    assert_eq!(shown["console_enabled"], true);

    // The TCP relay, as Ironic's socat console: the banner, then an echo of what is typed.
    let mut relay = tokio::net::TcpStream::connect(url.trim_start_matches("tcp://"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    relay.write_all(b"typed over tcp\r\n").await.unwrap();
    tokio::time::timeout(PATIENCE, async {
        while !String::from_utf8_lossy(&seen).contains("typed over tcp") {
            let length = relay.read(&mut buffer).await.unwrap();
            assert!(length > 0, "the relay closed");
            seen.extend_from_slice(&buffer[..length]);
        }
    })
    .await
    .expect("the relay echoes");
    assert!(String::from_utf8_lossy(&seen).contains("Ferric fake console"));

    // A member attaching later gets the retained output first, then types.
    let mut member = server.stream(&node, "member-owner", false).await.unwrap();
    let tail = read_until(&mut member, "typed over tcp").await;
    assert!(tail.contains("Ferric fake console"), "{tail}");
    member
        .send(Message::Text("typed over ws".into()))
        .await
        .unwrap();
    read_until(&mut member, "typed over ws").await;

    // A reader (here through ?token=, as a browser) watches, and is closed when it types.
    let mut reader = server.stream(&node, "reader-owner", true).await.unwrap();
    read_until(&mut reader, "typed over ws").await;
    reader
        .send(Message::Binary(b"x".to_vec().into()))
        .await
        .unwrap();
    assert_eq!(close_code(&mut reader).await, CloseCode::Policy);

    // Another project's member does not learn the node exists.
    assert_eq!(
        server.stream(&node, "member-other", false).await.err(),
        Some(404)
    );

    // Disabling closes the viewers normally and forgets the relay.
    let (status, _) = server
        .send(
            "member-owner",
            Method::PUT,
            &path,
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(close_code(&mut member).await, CloseCode::Normal);
    let (_, body) = server.send("member-owner", Method::GET, &path, None).await;
    assert_eq!(
        body,
        json!({"console_enabled": false, "console_info": null})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_console_refuses_to_enable() {
    let server = Server::start().await;
    let uuid = enroll(&server, "no-console").await;
    server
        .api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": "/owner", "value": "p-owner"}])),
        )
        .await;
    let (status, body) = server
        .send(
            "member-owner",
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/console"),
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body.to_string().contains("does not support console"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_console_comes_back_after_a_conductor_restart() {
    let server = Server::start().await;
    let node = console_node(&server).await;
    let (status, _) = server
        .send(
            "member-owner",
            Method::PUT,
            &format!("/v1/nodes/{node}/states/console"),
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(status, 202);
    let uuid: uuid::Uuid = node.parse().unwrap();
    server
        .api
        .conductor()
        .shutdown(Duration::from_secs(5))
        .await;
    assert!(server.api.conductor().console(uuid).is_none());

    // The same conductor, started again (Ironic's `_start_consoles`).
    let again = ferric_conductor::Conductor::new(
        server.api.store().clone(),
        ferric_drivers::Drivers::default(),
        ferric_conductor::ConductorConfig {
            hostname: "test-conductor".to_owned(),
            periodic: false,
            ..ferric_conductor::ConductorConfig::default()
        },
    );
    again.start().await.unwrap();
    let hub = again.console(uuid).expect("the console is relayed again");
    let mut relay = tokio::net::TcpStream::connect(hub.address()).await.unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    tokio::time::timeout(PATIENCE, async {
        while !String::from_utf8_lossy(&seen).contains("Ferric fake console") {
            let length = relay.read(&mut buffer).await.unwrap();
            assert!(length > 0, "the relay closed");
            seen.extend_from_slice(&buffer[..length]);
        }
    })
    .await
    .expect("the restored console shows its banner");
    again.shutdown(Duration::from_secs(5)).await;
}

/// Undeploy ends the tenant's console (issue 41, item 5): once the node is `available` again
/// the console is disabled and its relay accepts no connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeploy_ends_the_console_and_its_relay() {
    let server = Server::start().await;
    let node = console_node(&server).await;
    for (target, reached) in [
        ("manage", "manageable"),
        ("provide", "available"),
        ("active", "active"),
    ] {
        server.api.provision(&node, target).await;
        server.api.run_until_state(&node, reached, PATIENCE).await;
    }
    let path = format!("/v1/nodes/{node}/states/console");
    let (status, _) = server
        .send(
            "member-owner",
            Method::PUT,
            &path,
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(status, 202);
    let (_, body) = server.send("member-owner", Method::GET, &path, None).await;
    let url = body["console_info"]["url"].as_str().unwrap().to_owned();
    let address = url.trim_start_matches("tcp://").to_owned();
    let mut viewer = server.stream(&node, "member-owner", false).await.unwrap();
    read_until(&mut viewer, "Ferric fake console").await;

    server.api.provision(&node, "deleted").await;
    server
        .api
        .run_until_state(&node, "available", PATIENCE)
        .await;
    let (_, body) = server.send("member-owner", Method::GET, &path, None).await;
    assert_eq!(
        body,
        json!({"console_enabled": false, "console_info": null})
    );
    assert_eq!(close_code(&mut viewer).await, CloseCode::Normal);
    let uuid: uuid::Uuid = node.parse().unwrap();
    assert!(server.api.conductor().console(uuid).is_none());
    // The relay's listener is gone: a connection is refused, or closed before a byte.
    tokio::time::timeout(PATIENCE, async {
        loop {
            match tokio::net::TcpStream::connect(&address).await {
                Err(_) => break,
                Ok(mut stream) => {
                    let mut buffer = [0u8; 64];
                    if matches!(stream.read(&mut buffer).await, Ok(0) | Err(_)) {
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the relay stops accepting connections");
    assert_eq!(
        server.stream(&node, "member-owner", false).await.err(),
        Some(409)
    );
}
