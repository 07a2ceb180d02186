//! In-band inspection through the API and the real conductor (issue 8): the `agent` inspect
//! interface with `/v1/continue_inspection`, and the `inspector` interface with the inspection
//! service on a real socket. The test plays the ramdisk by posting an inventory; network boot
//! is the `ipxe` interface writing into a tempdir.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::Api;
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DriverSettings, Drivers, InspectorSettings};
use ferric_inspector::{Service, ServiceConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const MAC: &str = "52:54:00:12:34:01";
const SCRIPT: &str = "ipxe/52-54-00-12-34-01.ipxe";

fn boot_settings(root: &Path) -> BootSettings {
    BootSettings {
        http_url: Some("http://10.9.0.1:8080".into()),
        http_root: root.to_owned(),
        api_url: Some("http://10.9.0.1:6385".into()),
        ..BootSettings::default()
    }
}

async fn api(root: &Path, inspector: InspectorSettings) -> Api {
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: boot_settings(root),
        inspector,
        ..DriverSettings::default()
    });
    Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await
}

async fn send(api: &Api, method: Method, path: &str, body: Option<Value>) -> common::Answer {
    api.send_latest(method, path, body).await
}

async fn provision(api: &Api, uuid: &str, target: &str) {
    api.provision(uuid, target).await;
}

async fn node_body(api: &Api, uuid: &str) -> Value {
    api.settle().await;
    send(api, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await
        .body
}

async fn state(api: &Api, uuid: &str, expected: &str) -> Value {
    let node = node_body(api, uuid).await;
    assert_eq!(node["provision_state"], expected, "{node:#}");
    node
}

/// A manageable fake-hardware node with network boot, one port, and `memory_mb` already set.
async fn node(api: &Api, inspect_interface: &str) -> String {
    let created = send(
        api,
        Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "fake-hardware",
            "boot_interface": "ipxe",
            "inspect_interface": inspect_interface,
            "properties": {"memory_mb": 999},
        })),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let port = send(
        api,
        Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    )
    .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    provision(api, &uuid, "manage").await;
    state(api, &uuid, "manageable").await;
    uuid
}

fn payload() -> Value {
    let mut payload: Value = serde_json::from_str(include_str!(
        "../../ferric-inspector/tests/fixtures/qemu.json"
    ))
    .unwrap();
    payload["inventory"]["interfaces"][1]["mac_address"] = MAC.into();
    payload["boot_interface"] = MAC.into();
    payload
}

async fn port_count(api: &Api, uuid: &str) -> usize {
    send(api, Method::GET, &format!("/v1/nodes/{uuid}/ports"), None)
        .await
        .body["ports"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn agent_inspection_fills_properties_and_ports() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), InspectorSettings::default()).await;
    let uuid = node(&api, "agent").await;

    provision(&api, &uuid, "inspect").await;
    let waiting = state(&api, &uuid, "inspect wait").await;
    assert_eq!(waiting["power_state"], "power on");
    let script = std::fs::read_to_string(root.path().join(SCRIPT)).unwrap();
    assert!(
        script.contains("ipa-inspection-callback-url=http://10.9.0.1:6385/v1/continue_inspection"),
        "{script}"
    );

    // The ramdisk posts with no version header (1.1, as IPA written for inspector does).
    let mut data = payload();
    data["inventory"]["interfaces"][2]["ipv4_address"] = "10.9.0.77".into();
    let answer = api
        .send(Method::POST, "/v1/continue_inspection", Some(data))
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    assert_eq!(answer.body, json!({"uuid": uuid}));

    let node = state(&api, &uuid, "manageable").await;
    assert_eq!(node["properties"]["cpus"], 2);
    assert_eq!(node["properties"]["cpu_arch"], "x86_64");
    assert_eq!(node["properties"]["local_gb"], 9);
    assert_eq!(node["properties"]["memory_mb"], 999, "set before: kept");
    assert_eq!(node["power_state"], "power off");
    assert!(node["inspection_finished_at"].is_string());
    assert!(node["last_error"].is_null());
    assert!(!root.path().join(SCRIPT).exists(), "network boot removed");
    // add_ports=pxe: the PXE NIC has its port already; the second NIC gets none.
    assert_eq!(port_count(&api, &uuid).await, 1);
    // The inventory is in the store, served by the API.
    let stored = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/inventory"), None)
        .await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.body);
    assert_eq!(stored.body["inventory"]["cpu"]["count"], 2);

    // Data nobody waits for: 404.
    let answer = api
        .send(Method::POST, "/v1/continue_inspection", Some(payload()))
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
}

/// IPA's `lldp` field (`[[type, hex value], …]`) for a NIC plugged into `Ethernet1/7` of the
/// switch `leaf-1`, whose chassis ID is its MAC.
fn lldp_tlvs() -> Value {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    json!([
        [1, hex(&[4, 0x52, 0x54, 0x00, 0xfe, 0x1a, 0x01])],
        [2, hex(b"\x05Ethernet1/7")],
        [5, hex(b"leaf-1")],
    ])
}

#[tokio::test]
async fn lldp_fills_the_ports_local_link_connection_but_keeps_the_operators() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), InspectorSettings::default()).await;
    let uuid = node(&api, "agent").await;
    let ports = send(&api, Method::GET, &format!("/v1/nodes/{uuid}/ports"), None).await;
    let port = ports.body["ports"][0]["uuid"].as_str().unwrap().to_owned();
    let patched = send(
        &api,
        Method::PATCH,
        &format!("/v1/ports/{port}"),
        Some(json!([{"op": "add", "path": "/local_link_connection",
            "value": {"switch_id": "52:54:00:00:00:0a", "port_id": "set-by-operator"}}])),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);

    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    let mut data = payload();
    data["inventory"]["interfaces"][1]["lldp"] = lldp_tlvs();
    let answer = api
        .send(Method::POST, "/v1/continue_inspection", Some(data))
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    state(&api, &uuid, "manageable").await;

    let port = send(&api, Method::GET, &format!("/v1/ports/{port}"), None).await;
    assert_eq!(
        port.body["local_link_connection"],
        json!({"switch_id": "52:54:00:00:00:0a", "port_id": "set-by-operator",
            "switch_info": "leaf-1"}),
        "{}",
        port.body
    );
}

#[tokio::test]
async fn agent_inspection_at_1_84_hands_out_a_token_and_fails_on_ramdisk_errors() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), InspectorSettings::default()).await;
    let uuid = node(&api, "agent").await;
    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    // Between 1.2 and 1.83 the endpoint does not exist.
    let answer = api
        .send_at(80, Method::POST, "/v1/continue_inspection", Some(payload()))
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);

    let mut data = payload();
    data["error"] = "lshw failed".into();
    let answer = api
        .send_at(
            84,
            Method::POST,
            &format!("/v1/continue_inspection?node_uuid={uuid}"),
            Some(data),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    assert_eq!(answer.body["node"]["uuid"], uuid.as_str());
    assert_eq!(
        answer.body["config"]["agent_token"].as_str().unwrap().len(),
        43
    );
    let node = state(&api, &uuid, "inspect failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("The inspection ramdisk reported an error: lshw failed"),
        "{node:#}"
    );
    assert_eq!(node["power_state"], "power off");
    assert!(node["properties"].get("cpus").is_none());
}

#[tokio::test]
async fn abort_and_timeout_of_agent_inspection() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), InspectorSettings::default()).await;
    let uuid = node(&api, "agent").await;
    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    provision(&api, &uuid, "abort").await;
    let node = state(&api, &uuid, "inspect failed").await;
    assert_eq!(node["power_state"], "power off");
    assert!(!root.path().join(SCRIPT).exists());

    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    let later = chrono::Utc::now() + chrono::TimeDelta::hours(1);
    let acted = api
        .conductor()
        .run_reconciler_at("callback_timeouts", later)
        .await
        .unwrap();
    assert_eq!(acted, 1);
    let node = state(&api, &uuid, "inspect failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("Timeout reached while inspecting")
    );
    assert_eq!(node["power_state"], "power off");
    assert!(!root.path().join(SCRIPT).exists());
}

/// An API whose drivers reach a running inspection service.
async fn api_with_service(root: &Path) -> (Api, Arc<Service>, CancellationToken) {
    // The service needs the store, the drivers need the service's URL: bind first.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let api = api(
        root,
        InspectorSettings {
            enabled: true,
            service_url: Some(url.clone()),
            callback_url: Some("http://10.9.0.1:5050".into()),
            ..InspectorSettings::default()
        },
    )
    .await;
    let service = Arc::new(Service::new(
        api.store().clone(),
        Drivers::default(),
        ServiceConfig {
            dhcp_hostsdir: Some(root.join("hosts")),
            ..ServiceConfig::default()
        },
    ));
    let shutdown = CancellationToken::new();
    tokio::spawn(ferric_inspector::serve(
        service.clone(),
        listener,
        Duration::from_secs(3600),
        shutdown.clone(),
    ));
    (api, service, shutdown)
}

#[tokio::test]
async fn inspection_through_the_service() {
    let root = tempfile::tempdir().unwrap();
    let (api, service, shutdown) = api_with_service(root.path()).await;
    let uuid = node(&api, "inspector").await;

    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    let script = std::fs::read_to_string(root.path().join(SCRIPT)).unwrap();
    assert!(
        script.contains("ipa-inspection-callback-url=http://10.9.0.1:5050/v1/continue"),
        "{script}"
    );
    let status = service.status(&uuid).await.unwrap();
    assert_eq!(status.state.as_str(), "waiting");
    assert!(!status.manage_boot, "the conductor boots the node itself");
    assert!(
        root.path()
            .join("hosts/inspector-52-54-00-12-34-01")
            .exists()
    );

    // Still waiting: the reconciler leaves the node alone.
    let acted = api
        .conductor()
        .run_reconciler("inspector_status")
        .await
        .unwrap();
    assert_eq!(acted, 0);

    // The ramdisk posts to the service.
    service.continue_(&payload()).await.unwrap();
    let acted = api
        .conductor()
        .run_reconciler("inspector_status")
        .await
        .unwrap();
    assert_eq!(acted, 1);
    let node = state(&api, &uuid, "manageable").await;
    assert_eq!(node["properties"]["cpus"], 2);
    assert_eq!(node["properties"]["memory_mb"], 999);
    assert_eq!(node["power_state"], "power off");
    assert!(!root.path().join(SCRIPT).exists());
    assert!(
        !root
            .path()
            .join("hosts/inspector-52-54-00-12-34-01")
            .exists()
    );

    // A failure over there is the node's last_error here.
    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    let mut data = payload();
    data["error"] = "no memory".into();
    assert!(service.continue_(&data).await.is_err());
    api.conductor()
        .run_reconciler("inspector_status")
        .await
        .unwrap();
    let node = state(&api, &uuid, "inspect failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("The inspection ramdisk reported an error: no memory"),
        "{node:#}"
    );
    assert_eq!(node["power_state"], "power off");

    // Abort (seed 000): the service aborts too.
    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    provision(&api, &uuid, "abort").await;
    let node = state(&api, &uuid, "inspect failed").await;
    assert_eq!(node["power_state"], "power off");
    let status = service.status(&uuid).await.unwrap();
    assert_eq!(status.error.as_deref(), Some("Canceled by operator"));
    shutdown.cancel();
}

#[tokio::test]
async fn inspector_interface_needs_the_setting() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), InspectorSettings::default()).await;
    let uuid = node(&api, "inspector").await;
    provision(&api, &uuid, "inspect").await;
    let node = state(&api, &uuid, "inspect failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("inspector_enabled"),
        "{node:#}"
    );
}

#[tokio::test]
async fn an_unreachable_service_fails_the_inspection_and_undoes_the_boot() {
    let root = tempfile::tempdir().unwrap();
    // A port nobody listens on: bound, then closed.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let api = api(
        root.path(),
        InspectorSettings {
            enabled: true,
            service_url: Some(format!("http://{closed}")),
            ..InspectorSettings::default()
        },
    )
    .await;
    let uuid = node(&api, "inspector").await;
    provision(&api, &uuid, "inspect").await;
    let node = state(&api, &uuid, "inspect failed").await;
    assert!(
        node["last_error"]
            .as_str()
            .unwrap()
            .contains("Could not reach the inspection service"),
        "{node:#}"
    );
    assert!(!root.path().join(SCRIPT).exists(), "network boot removed");
}

#[tokio::test]
async fn with_fast_track_inspection_leaves_the_agent_running_but_an_abort_powers_off() {
    let root = tempfile::tempdir().unwrap();
    // Fast track for the whole site this time (the conductor's lookup and heartbeat checks,
    // and the drivers).
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: boot_settings(root.path()),
        fast_track: ferric_drivers::FastTrackSettings {
            enabled: true,
            ..ferric_drivers::FastTrackSettings::default()
        },
        ..DriverSettings::default()
    });
    let config = ConductorConfig {
        fast_track: true,
        ..ConductorConfig::default()
    };
    let api = Api::with_drivers(TestDb::sqlite().await, config, drivers).await;
    let uuid = node(&api, "agent").await;

    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;
    let answer = api
        .send_at(
            84,
            Method::POST,
            &format!("/v1/continue_inspection?node_uuid={uuid}"),
            Some(payload()),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    let token = answer.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let node = state(&api, &uuid, "manageable").await;
    assert_eq!(node["power_state"], "power on", "the agent stays up");
    assert!(!root.path().join(SCRIPT).exists(), "network boot removed");
    // The agent, still running, heartbeats while the node rests.
    let beat = send(
        &api,
        Method::POST,
        &format!("/v1/heartbeat/{uuid}"),
        Some(json!({"callback_url": "http://10.9.0.50:9999", "agent_token": token, "agent_version": "test"})),
    )
    .await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    let node = node_body(&api, &uuid).await;
    assert!(node["driver_internal_info"]["agent_last_heartbeat"].is_string());

    // A new inspection reboots the machine and forgets the agent it had (the new ramdisk
    // gets its own token); an abort is not fast-tracked: the machine goes off.
    provision(&api, &uuid, "inspect").await;
    let waiting = state(&api, &uuid, "inspect wait").await;
    assert!(
        waiting["driver_internal_info"].get("agent_url").is_none(),
        "{waiting:#}"
    );
    provision(&api, &uuid, "abort").await;
    let node = state(&api, &uuid, "inspect failed").await;
    assert_eq!(node["power_state"], "power off");
}

/// Issue 21: the inspection service stops while a node waits in `inspect wait` and a new one
/// starts on the same database and address (what a restart of `ferric inspector` is): the
/// node still ends `manageable` with its inventory, and a rule created before the restart
/// applies.
#[tokio::test]
async fn inspection_survives_a_restart_of_the_service() {
    let root = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let api = api(
        root.path(),
        InspectorSettings {
            enabled: true,
            service_url: Some(format!("http://{address}")),
            callback_url: Some("http://10.9.0.1:5050".into()),
            ..InspectorSettings::default()
        },
    )
    .await;
    let config = ServiceConfig {
        dhcp_hostsdir: Some(root.path().join("hosts")),
        ..ServiceConfig::default()
    };
    let start = |listener: tokio::net::TcpListener| {
        let service = Arc::new(Service::new(
            api.store().clone(),
            Drivers::default(),
            config.clone(),
        ));
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(ferric_inspector::serve(
            service.clone(),
            listener,
            Duration::from_secs(3600),
            shutdown.clone(),
        ));
        (service, shutdown, server)
    };

    let (service, shutdown, server) = start(listener);
    let rule = ferric_inspector::rules::Rule::from_body(&json!({
        "conditions": [{"op": "eq", "field": "inventory.cpu.architecture", "value": "x86_64"}],
        "actions": [{"action": "set-attribute", "path": "/extra/inspected_by", "value": "rule"}]
    }))
    .unwrap();
    service.rule_create(rule).await.unwrap();
    let uuid = node(&api, "inspector").await;
    provision(&api, &uuid, "inspect").await;
    state(&api, &uuid, "inspect wait").await;

    // The service goes away; the conductor cannot ask it and leaves the node waiting.
    shutdown.cancel();
    server.await.unwrap().unwrap();
    drop(service);
    let acted = api
        .conductor()
        .run_reconciler("inspector_status")
        .await
        .unwrap();
    assert_eq!(acted, 0);
    state(&api, &uuid, "inspect wait").await;

    // A new service on the same store picks the introspection up.
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let (service, shutdown, _server) = start(listener);
    let status = service.status(&uuid).await.unwrap();
    assert_eq!(status.state.as_str(), "waiting");
    assert_eq!(
        api.conductor()
            .run_reconciler("inspector_status")
            .await
            .unwrap(),
        0,
        "still waiting for the ramdisk"
    );
    service.continue_(&payload()).await.unwrap();
    let acted = api
        .conductor()
        .run_reconciler("inspector_status")
        .await
        .unwrap();
    assert_eq!(acted, 1);
    let node = state(&api, &uuid, "manageable").await;
    assert_eq!(node["properties"]["cpus"], 2);
    assert_eq!(node["extra"]["inspected_by"], "rule", "{node:#}");
    let inventory = api
        .send_at(
            81,
            Method::GET,
            &format!("/v1/nodes/{uuid}/inventory"),
            None,
        )
        .await;
    assert_eq!(inventory.status, StatusCode::OK, "{}", inventory.body);
    assert_eq!(inventory.body["inventory"]["cpu"]["count"], 2);
    shutdown.cancel();
}
