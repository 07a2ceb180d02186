//! The Redfish client's own behaviour, against a small in-process BMC stub whose counters
//! show what the driver sent: sessions created once and reused, a lost session replaced, 5xx
//! answers retried, basic authentication where the BMC offers no sessions, and no more
//! requests in flight at one BMC than the limit. (The protocol itself is tested against
//! sushy-tools in `crates/ferric-api/tests/bmc_emulators.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, PowerState};
use serde_json::json;
use uuid::Uuid;

use super::Redfish;
use crate::bmc::BmcSettings;
use crate::bmc_state::BmcState;
use crate::interfaces::{BootMode, PowerInterface};

#[derive(Default)]
struct Stub {
    offers_sessions: bool,
    sessions_created: AtomicUsize,
    /// The token the stub accepts; dropping it makes the next request a 401.
    valid_token: std::sync::Mutex<Option<String>>,
    basic_requests: AtomicUsize,
    /// Answer the next GET of the system with 503 this many times.
    failures_left: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    slow: AtomicBool,
}

fn authorized(stub: &Stub, headers: &HeaderMap) -> bool {
    if let Some(token) = headers.get("x-auth-token") {
        let valid = stub.valid_token.lock().unwrap();
        return valid.as_deref() == token.to_str().ok();
    }
    // "admin:password"
    let basic = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok());
    if basic == Some("Basic YWRtaW46cGFzc3dvcmQ=") {
        stub.basic_requests.fetch_add(1, Ordering::SeqCst);
        return true;
    }
    false
}

async fn root(State(stub): State<Arc<Stub>>) -> Response {
    let mut body = json!({"Systems": {"@odata.id": "/redfish/v1/Systems"}});
    if stub.offers_sessions {
        body["Links"] = json!({"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}});
    }
    axum::Json(body).into_response()
}

async fn login(State(stub): State<Arc<Stub>>, body: axum::Json<serde_json::Value>) -> Response {
    if body["UserName"] != "admin" || body["Password"] != "password" {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let number = stub.sessions_created.fetch_add(1, Ordering::SeqCst) + 1;
    let token = format!("token-{number}");
    *stub.valid_token.lock().unwrap() = Some(token.clone());
    (
        StatusCode::CREATED,
        [
            ("x-auth-token", token),
            (
                "location",
                format!("/redfish/v1/SessionService/Sessions/{number}"),
            ),
        ],
    )
        .into_response()
}

async fn system(State(stub): State<Arc<Stub>>, headers: HeaderMap) -> Response {
    if !authorized(&stub, &headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let now = stub.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stub.max_in_flight.fetch_max(now, Ordering::SeqCst);
    if stub.slow.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stub.in_flight.fetch_sub(1, Ordering::SeqCst);
    let failing = stub
        .failures_left
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(1)
        })
        .is_ok();
    if failing {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    axum::Json(json!({"PowerState": "On"})).into_response()
}

async fn serve(stub: Arc<Stub>) -> String {
    let router = Router::new()
        .route("/redfish/v1/", get(root))
        .route("/redfish/v1/SessionService/Sessions", post(login))
        .route("/redfish/v1/Systems/1", get(system))
        .with_state(stub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

fn driver(max_requests_per_bmc: usize) -> Redfish {
    Redfish {
        state: Arc::new(BmcState::new(BmcSettings {
            retries: 2,
            retry_backoff: Duration::from_millis(1),
            max_requests_per_bmc,
            ..BmcSettings::default()
        })),
    }
}

fn node(address: &str, auth_type: &str) -> Node {
    let mut node = Node::new(Uuid::new_v4(), "redfish", ProvisionState::Enroll);
    node.driver_info = json!({
        "redfish_address": address, "redfish_system_id": "/redfish/v1/Systems/1",
        "redfish_username": "admin", "redfish_password": "password",
        "redfish_auth_type": auth_type,
    })
    .as_object()
    .unwrap()
    .clone();
    node
}

#[tokio::test]
async fn sessions_are_reused_replaced_when_lost_and_5xx_is_retried() {
    let stub = Arc::new(Stub {
        offers_sessions: true,
        ..Stub::default()
    });
    let address = serve(stub.clone()).await;
    let driver = driver(4);
    let node = node(&address, "auto");
    for _ in 0..3 {
        assert_eq!(driver.get_power_state(&node).await, Ok(PowerState::On));
    }
    assert_eq!(stub.sessions_created.load(Ordering::SeqCst), 1);
    assert_eq!(stub.basic_requests.load(Ordering::SeqCst), 0);

    // The BMC forgets the session (restart, expiry): one new login, the call still works.
    *stub.valid_token.lock().unwrap() = None;
    assert_eq!(driver.get_power_state(&node).await, Ok(PowerState::On));
    assert_eq!(stub.sessions_created.load(Ordering::SeqCst), 2);

    // Two 503s, then an answer: within the two retries.
    stub.failures_left.store(2, Ordering::SeqCst);
    assert_eq!(driver.get_power_state(&node).await, Ok(PowerState::On));
    // Three: one more than the retries allow.
    stub.failures_left.store(3, Ordering::SeqCst);
    let error = driver.get_power_state(&node).await.unwrap_err().to_string();
    assert!(error.contains("HTTP 503 after 3 attempts"), "{error}");
    assert!(error.contains(&address), "{error}");
}

#[tokio::test]
async fn basic_authentication_where_the_bmc_offers_no_sessions() {
    let stub = Arc::new(Stub::default());
    let address = serve(stub.clone()).await;
    let driver = driver(4);
    assert_eq!(
        driver.get_power_state(&node(&address, "auto")).await,
        Ok(PowerState::On)
    );
    assert_eq!(stub.basic_requests.load(Ordering::SeqCst), 1);
    assert_eq!(stub.sessions_created.load(Ordering::SeqCst), 0);
    let error = driver
        .get_power_state(&node(&address, "session"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("offers no sessions"), "{error}");
}

#[tokio::test]
async fn one_bmc_serves_no_more_requests_at_once_than_the_limit() {
    let stub = Arc::new(Stub {
        slow: AtomicBool::new(true),
        ..Stub::default()
    });
    let address = serve(stub.clone()).await;
    let driver = driver(2);
    let node = node(&address, "basic");
    let reads: Vec<_> = (0..8)
        .map(|_| {
            let driver = driver.clone();
            let node = node.clone();
            tokio::spawn(async move { driver.get_power_state(&node).await })
        })
        .collect();
    for read in reads {
        assert_eq!(read.await.unwrap(), Ok(PowerState::On));
    }
    assert_eq!(stub.basic_requests.load(Ordering::SeqCst), 8);
    assert!(stub.max_in_flight.load(Ordering::SeqCst) <= 2);
}

#[test]
fn the_override_carries_the_nodes_boot_mode_where_the_bmc_allows_it() {
    let mut node = node("http://bmc", "basic");
    let system = |allowed: serde_json::Value| {
        serde_json::json!({"Boot": {
            "BootSourceOverrideMode": "Legacy",
            "BootSourceOverrideMode@Redfish.AllowableValues": allowed,
        }})
    };
    // UEFI by default; no property, nothing to send.
    let both = system(serde_json::json!(["UEFI", "Legacy"]));
    assert_eq!(
        super::override_mode(&node, &both).unwrap(),
        Some((BootMode::Uefi, "UEFI"))
    );
    assert_eq!(
        super::override_mode(&node, &serde_json::json!({"Boot": {}})).unwrap(),
        None
    );
    let legacy_only = system(serde_json::json!(["Legacy"]));
    let error = super::override_mode(&node, &legacy_only)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("allows boot mode Legacy only")
            && error.contains("asks for uefi (from the default")
            && error.contains("set boot_mode:bios"),
        "{error}"
    );
    node.instance_info.insert(
        "capabilities".into(),
        serde_json::json!({"boot_mode": "bios"}),
    );
    assert_eq!(
        super::override_mode(&node, &legacy_only).unwrap(),
        Some((BootMode::Bios, "Legacy"))
    );
}

#[test]
fn a_boot_target_the_bmc_does_not_list_is_refused_with_what_to_set() {
    use crate::interfaces::BootDevice;
    let node = node("http://bmc", "basic");
    let system = serde_json::json!({"Boot": {
        "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Hdd"],
    }});
    assert_eq!(
        super::check_target(&node, &system, BootDevice::Pxe, "Pxe"),
        Ok(())
    );
    let http = super::check_target(&node, &system, BootDevice::Uefihttp, "UefiHttp")
        .unwrap_err()
        .to_string();
    assert!(
        http.contains("cannot boot from UefiHttp (it allows None, Pxe, Hdd)")
            && http.contains("set boot_interface pxe or ipxe")
            && http.contains(&node.uuid.to_string()),
        "{http}"
    );
    let cd = super::check_target(&node, &system, BootDevice::Cdrom, "Cd")
        .unwrap_err()
        .to_string();
    assert!(cd.contains("cannot boot virtual media"), "{cd}");
    // A BMC that lists nothing is taken at its word at the boot itself.
    assert_eq!(
        super::check_target(
            &node,
            &serde_json::json!({"Boot": {}}),
            BootDevice::Uefihttp,
            "UefiHttp"
        ),
        Ok(())
    );
}
