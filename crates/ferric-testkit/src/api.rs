//! The API test environment: a router and its conductor on a real database (SQLite in a
//! tempdir, or PostgreSQL), helpers that read answers the way Ironic clients do, and the
//! scenario verbs: [`Api::enroll_node`], [`Api::run_until_state`], [`Api::node_in`].
//!
//! The conductor's reconcilers do not run by themselves: tests step them
//! ([`Api::settle`], `conductor().run_reconciler(…)`).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::Response;
use ferric_api::ApiState;
use ferric_conductor::{Conductor, ConductorConfig};
use ferric_db::Store;
use ferric_db::testing::TestDb;
use ferric_drivers::Drivers;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// A response, read whole.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

pub async fn answer(response: Response) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

/// The message inside Ironic's double-encoded error body, as clients read it.
pub fn faultstring(body: &Value) -> String {
    let inner: Value = serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
    inner["faultstring"].as_str().unwrap().to_owned()
}

/// The headers of a request to `http://ferric.test`.
pub fn host() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("host", "ferric.test".parse().unwrap());
    headers
}

/// `drivers` with the fake boot and deploy interfaces enabled beside the real ones, for
/// tests that drive a real BMC type's BIOS, firmware or power without booting a ramdisk (the
/// built-in settings refuse fake interfaces on BMC types).
pub fn with_fake_boot_and_deploy(drivers: Drivers) -> Drivers {
    use ferric_drivers::InterfaceSettings;
    use ferric_model::resources::InterfaceKind;
    let interfaces = InterfaceSettings::default()
        .with_enabled(InterfaceKind::Boot, &["ipxe", "pxe", "fake"])
        .and_then(|interfaces| interfaces.with_enabled(InterfaceKind::Deploy, &["direct", "fake"]))
        .unwrap();
    drivers.with_interfaces(interfaces).unwrap()
}

/// An API and its conductor over a fresh database that lives as long as this value. The
/// conductor's reconcilers do not run by themselves: tests step them.
pub struct Api {
    pub state: ApiState,
    conductor: Conductor,
    // Dropped after `state`: the database outlives the pools that use it.
    _db: TestDb,
}

impl Api {
    /// On a fresh SQLite file.
    pub async fn new() -> Self {
        Self::on(TestDb::sqlite().await).await
    }

    /// On a fresh PostgreSQL database.
    pub async fn postgres() -> Self {
        Self::on(TestDb::postgres().await).await
    }

    pub async fn on(db: TestDb) -> Self {
        Self::with_config(db, ConductorConfig::default()).await
    }

    pub async fn with_config(db: TestDb, config: ConductorConfig) -> Self {
        Self::with_drivers(db, config, Drivers::default()).await
    }

    pub async fn with_drivers(db: TestDb, config: ConductorConfig, drivers: Drivers) -> Self {
        let store = db.store.clone();
        let config = ConductorConfig {
            hostname: "test-conductor".to_owned(),
            periodic: false,
            ..config
        };
        let conductor = Conductor::new(store.clone(), drivers, config);
        conductor.start().await.unwrap();
        Self {
            state: ApiState::new(store, conductor.clone()),
            conductor,
            _db: db,
        }
    }

    /// An API-only process and a conductor that share nothing but a fresh PostgreSQL
    /// database: every node action goes through the `conductor_requests` table.
    pub async fn split(request_timeout: std::time::Duration) -> Self {
        let db = TestDb::postgres().await;
        let store = db.store.clone();
        let config = ConductorConfig {
            hostname: "remote-conductor".to_owned(),
            periodic: false,
            request_timeout,
            ..ConductorConfig::default()
        };
        let conductor = Conductor::new(store.clone(), Drivers::default(), config.clone());
        conductor.start().await.unwrap();
        let membership = ferric_conductor::Membership::new(store.clone(), config.heartbeat_timeout);
        let handoff = ferric_conductor::Handoff::new(
            store.clone(),
            None,
            membership,
            Drivers::default(),
            ConductorConfig {
                hostname: "api-only".to_owned(),
                ..config
            },
        );
        handoff
            .start(tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
        Self {
            state: ApiState::new(store, handoff),
            conductor,
            _db: db,
        }
    }

    pub fn conductor(&self) -> &Conductor {
        &self.conductor
    }

    /// Waits until the conductor has nothing running.
    pub async fn settle(&self) {
        self.conductor.wait_idle().await;
    }

    pub fn store(&self) -> &Store {
        &self.state.store
    }

    /// A request through the whole router (version negotiation, error bodies), at 1.1.
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.send_with(None, method, path, body).await
    }

    /// The same at API version 1.`minor`.
    pub async fn send_at(
        &self,
        minor: u16,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.send_with(Some(minor), method, path, body).await
    }

    async fn send_with(
        &self,
        minor: Option<u16>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "ferric.test")
            .header("content-type", "application/json");
        if let Some(minor) = minor {
            request = request.header("X-OpenStack-Ironic-API-Version", format!("1.{minor}"));
        }
        let body = body.map_or(Body::empty(), |body| Body::from(body.to_string()));
        let response = ferric_api::router(self.state.clone())
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        answer(response).await
    }
}

/// The newest microversion; the tests that drive whole flows send it.
pub const LATEST: u16 = 110;

impl Api {
    /// A request at [`LATEST`].
    pub async fn send_latest(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.send_at(LATEST, method, path, body).await
    }

    /// Requests the provision `target` at [`LATEST`] and expects 202.
    pub async fn provision(&self, uuid: &str, target: &str) {
        let answer = self
            .send_latest(
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(serde_json::json!({"target": target})),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::ACCEPTED,
            "{target}: {}",
            answer.body
        );
    }
}

/// What [`Api::enroll_node`] sends: a node's body and the microversion of the request.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    body: Value,
    minor: u16,
}

impl NodeSpec {
    /// A `fake-hardware` node, enrolled at [`LATEST`] (so it starts in `enroll`).
    pub fn fake() -> Self {
        Self::driver("fake-hardware")
    }

    /// A node of `driver`, enrolled at [`LATEST`].
    pub fn driver(driver: &str) -> Self {
        Self::body(serde_json::json!({"driver": driver}))
    }

    /// The whole request body, enrolled at [`LATEST`].
    pub fn body(body: Value) -> Self {
        Self {
            body,
            minor: LATEST,
        }
    }

    /// One more field of the body (replacing it when present).
    pub fn with(mut self, field: &str, value: Value) -> Self {
        if let Some(body) = self.body.as_object_mut() {
            body.insert(field.to_owned(), value);
        }
        self
    }

    /// The node's `driver_info`.
    pub fn driver_info(self, driver_info: Value) -> Self {
        self.with("driver_info", driver_info)
    }

    /// Enrolled at API version 1.`minor` (below 1.11 a node starts in `available`).
    pub fn at(mut self, minor: u16) -> Self {
        self.minor = minor;
        self
    }
}

impl Api {
    /// Enrolls a node through the API as `spec` says, expects 201 and returns its UUID.
    pub async fn enroll_node(&self, spec: NodeSpec) -> String {
        let created = self
            .send_at(spec.minor, Method::POST, "/v1/nodes", Some(spec.body))
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        created.body["uuid"].as_str().unwrap().to_owned()
    }

    /// Enrolls a node from its body at 1.1 (where it starts in `available`), as the older
    /// tests do; [`Api::enroll_node`] with options otherwise.
    pub async fn enroll(&self, body: Value) -> String {
        self.enroll_node(NodeSpec::body(body).at(1)).await
    }

    /// The node as `GET /v1/nodes/{node}` shows it at [`LATEST`]; panics unless 200.
    pub async fn node(&self, node: &str) -> Value {
        let shown = self
            .send_latest(Method::GET, &format!("/v1/nodes/{node}"), None)
            .await;
        assert_eq!(shown.status, StatusCode::OK, "GET {node}: {}", shown.body);
        shown.body
    }

    /// Lets the conductor work until the node rests in `state` (no task holds it) and returns
    /// it. Panics with the node's `last_error` and history when it rests or fails elsewhere,
    /// or is still on its way after `timeout`.
    pub async fn run_until_state(&self, node: &str, state: &str, timeout: Duration) -> Value {
        let started = Instant::now();
        loop {
            self.settle().await;
            let shown = self.node(node).await;
            let now = shown["provision_state"].as_str().unwrap_or("?").to_owned();
            if now == state && shown["reservation"].is_null() {
                return shown;
            }
            let resting = shown["target_provision_state"].is_null();
            let failed = now.ends_with("failed") || now == "error";
            if now != state && (failed || (resting && !now.ends_with("wait"))) {
                self.explain(node, &shown, &format!("rests in {now}, not {state}"))
                    .await;
            }
            if started.elapsed() > timeout {
                self.explain(node, &shown, &format!("still in {now} after {timeout:?}"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Panics with what the node says about itself: `last_error` and its history.
    async fn explain(&self, node: &str, shown: &Value, what: &str) -> ! {
        let history = self
            .send_latest(Method::GET, &format!("/v1/nodes/{node}/history"), None)
            .await;
        let events: Vec<String> = history.body["history"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| entry["event"].as_str().unwrap_or("").to_owned())
            .collect();
        panic!(
            "node {node} {what}: last_error {}; history {events:#?}",
            shown["last_error"]
        );
    }

    /// A fresh node that has reached `state` by the real API calls an operator makes, each
    /// layer on the one before: `enroll` → `manageable` (manage) → `available` (provide) →
    /// `active` (deploy). `spec` is a `fake-hardware` node or one whose interfaces get there
    /// without hardware; the node's `instance_info` must allow a deploy for `active`.
    pub async fn node_in(&self, state: &str, spec: NodeSpec) -> String {
        const LAYERS: [(&str, &str); 3] = [
            ("manage", "manageable"),
            ("provide", "available"),
            ("active", "active"),
        ];
        let Some(depth) = ["enroll", "manageable", "available", "active"]
            .iter()
            .position(|layer| *layer == state)
        else {
            panic!("node_in: no layered state {state:?} (enroll, manageable, available, active)");
        };
        let node = self.enroll_node(spec.at(LATEST)).await;
        for (target, reached) in &LAYERS[..depth] {
            self.provision(&node, target).await;
            self.run_until_state(&node, reached, STATE_TIMEOUT).await;
        }
        node
    }
}

/// How long [`Api::node_in`] lets each layer take: fake interfaces take milliseconds, so only
/// a hang trips it.
pub const STATE_TIMEOUT: Duration = Duration::from_secs(30);
