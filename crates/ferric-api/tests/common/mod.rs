//! What the API test files share: a router on a real SQLite file in a tempdir, and helpers
//! that read answers the way Ironic clients do.
#![allow(
    dead_code,
    reason = "each test file uses its own subset of these helpers"
)]

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
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

pub(crate) async fn answer(response: Response) -> Answer {
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
pub(crate) fn faultstring(body: &Value) -> String {
    let inner: Value = serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
    inner["faultstring"].as_str().unwrap().to_owned()
}

/// The headers of a request to `http://ferric.test`.
pub(crate) fn host() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("host", "ferric.test".parse().unwrap());
    headers
}

/// `drivers` with the fake boot and deploy interfaces enabled beside the real ones, for
/// tests that drive a real BMC type's BIOS, firmware or power without booting a ramdisk (the
/// built-in settings refuse fake interfaces on BMC types).
pub(crate) fn with_fake_boot_and_deploy(drivers: Drivers) -> Drivers {
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
pub(crate) struct Api {
    pub state: ApiState,
    conductor: Conductor,
    // Dropped after `state`: the database outlives the pools that use it.
    _db: TestDb,
}

impl Api {
    /// On a fresh SQLite file.
    pub(crate) async fn new() -> Self {
        Self::on(TestDb::sqlite().await).await
    }

    /// On a fresh PostgreSQL database.
    pub(crate) async fn postgres() -> Self {
        Self::on(TestDb::postgres().await).await
    }

    pub(crate) async fn on(db: TestDb) -> Self {
        Self::with_config(db, ConductorConfig::default()).await
    }

    pub(crate) async fn with_config(db: TestDb, config: ConductorConfig) -> Self {
        Self::with_drivers(db, config, Drivers::default()).await
    }

    pub(crate) async fn with_drivers(
        db: TestDb,
        config: ConductorConfig,
        drivers: Drivers,
    ) -> Self {
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
    pub(crate) async fn split(request_timeout: std::time::Duration) -> Self {
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

    pub(crate) fn conductor(&self) -> &Conductor {
        &self.conductor
    }

    /// Waits until the conductor has nothing running.
    pub(crate) async fn settle(&self) {
        self.conductor.wait_idle().await;
    }

    pub(crate) fn store(&self) -> &Store {
        &self.state.store
    }

    /// A request through the whole router (version negotiation, error bodies), at 1.1.
    pub(crate) async fn send(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.send_with(None, method, path, body).await
    }

    /// The same at API version 1.`minor`.
    pub(crate) async fn send_at(
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

impl Api {
    /// Enrolls a node through the API (at 1.1) and returns its UUID.
    pub(crate) async fn enroll(&self, body: Value) -> String {
        let created = self.send(Method::POST, "/v1/nodes", Some(body)).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        created.body["uuid"].as_str().unwrap().to_owned()
    }
}

/// The newest microversion; the tests that drive whole flows send it.
pub(crate) const LATEST: u16 = 110;

impl Api {
    /// A request at [`LATEST`].
    pub(crate) async fn send_latest(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        self.send_at(LATEST, method, path, body).await
    }

    /// Requests the provision `target` at [`LATEST`] and expects 202.
    pub(crate) async fn provision(&self, uuid: &str, target: &str) {
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
